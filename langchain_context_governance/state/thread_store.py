"""Where a governor keeps a thread's record and what its requests offloaded.

The record of a thread (state/record.py) is kept in the governor's `store` (a LangGraph
`BaseStore`) under the thread's id, where the caller does not carry it in the graph
state; what leaves a request with `offload` on is kept in the running graph's store, else
the governor's, else the process's embedded store (offload/store.py). Writing what was
offloaded never fails a call: a store that fails is logged.

Example:
    >>> from langgraph.store.memory import InMemoryStore
    >>> kept = ThreadStore(InMemoryStore())
    >>> kept.keep_record("t", {"version": 1})
    >>> kept.record("t"), kept.record("another thread"), ThreadStore(None).record("t")
    ({'version': 1}, None, None)
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from langchain_context_governance.offload import Offload, OffloadStore, embedded_store, store_in_run
from langchain_context_governance.state.record import RECORD_KEY

logger = logging.getLogger(__name__)

_RECORD_NAMESPACE = (RECORD_KEY,)


class ThreadStore:
    """A governor's `store` (None: records travel with the caller's state only)."""

    def __init__(self, store: Any) -> None:
        self._store = store

    def record(self, thread_id: str | None) -> Mapping[str, Any] | None:
        """The record kept for `thread_id` (None without a store, a thread or a record)."""
        if self._store is None or thread_id is None:
            return None
        item = self._store.get(_RECORD_NAMESPACE, thread_id)
        return None if item is None else item.value

    async def arecord(self, thread_id: str | None) -> Mapping[str, Any] | None:
        if self._store is None or thread_id is None:
            return None
        item = await self._store.aget(_RECORD_NAMESPACE, thread_id)
        return None if item is None else item.value

    def keep_record(self, thread_id: str | None, record: dict[str, Any] | None) -> None:
        if self._store is not None and thread_id is not None and record is not None:
            self._store.put(_RECORD_NAMESPACE, thread_id, record)

    async def akeep_record(self, thread_id: str | None, record: dict[str, Any] | None) -> None:
        if self._store is not None and thread_id is not None and record is not None:
            await self._store.aput(_RECORD_NAMESPACE, thread_id, record)

    def keep_offloaded(self, thread_id: str, offload: Offload) -> None:
        """Write what a call took out of its request that the thread's store does not hold
        yet; a store that fails is logged, never raised."""
        try:
            self._offload_store().keep(thread_id, offload.items)
        except Exception:
            logger.exception("context governance: the offloaded content could not be kept")

    async def akeep_offloaded(self, thread_id: str, offload: Offload) -> None:
        try:
            await self._offload_store().akeep(thread_id, offload.items)
        except Exception:
            logger.exception("context governance: the offloaded content could not be kept")

    def _offload_store(self) -> OffloadStore:
        """The running graph's store, else this one, else the process's embedded store."""
        return OffloadStore(store_in_run() or self._store or embedded_store())
