"""Where the items that leave a request are kept: a LangGraph `BaseStore`, by thread.

Which store: the store of the graph the call runs in (`create_agent(store=...)`,
`graph.compile(store=...)`: every worker of a deployment reads what any worker wrote),
else the governor's `store=`, else `embedded_store()`, this process's bounded store.

Each thread has its own namespace, `(NAMESPACE, <thread id>)`, so a handle of one thread
reads nothing in another. An item is kept under its handle, written once: a write first
reads the thread's index (one item listing the handles kept, oldest first, with their
sizes, and the handles removed), leaves out what it lists, and writes the rest with the
index in one batch. Past `MAX_BYTES_PER_THREAD` the oldest items are removed; the index
remembers the last `GONE_KEPT` of them, so reading one answers that it is gone rather than
that it never was.

The index is read and written whole: two workers writing one thread at the same moment
(LangGraph runs a thread's steps one at a time) may each miss the other's entries, whose
items are then kept but not counted against the limit.

Example:
    >>> from langchain_core.messages import HumanMessage
    >>> from langchain_context_governance.offload.items import message_item
    >>> kept = OffloadStore(BoundedMemoryStore())
    >>> item = message_item(HumanMessage("the invoice number is INV-0042"))
    >>> kept.keep("thread-1", [item]), kept.keep("thread-1", [item])
    (1, 0)
    >>> kept.read("thread-1", item.handle).text
    'the invoice number is INV-0042'
    >>> kept.read("thread-2", item.handle).status
    'unknown'
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Literal, TypeVar

from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import ensure_config
from langgraph.store.base import BaseStore, GetOp, Item, Op, PutOp, Result

from langchain_context_governance.offload.items import OffloadItem, is_handle

__all__ = [
    "EMBEDDED_MAX_BYTES",
    "GONE_KEPT",
    "MAX_BYTES_PER_THREAD",
    "NAMESPACE",
    "BoundedMemoryStore",
    "OffloadStore",
    "StoredContent",
    "embedded_store",
    "namespace_of",
    "store_in_run",
]

NAMESPACE = "context_governance_offload"
# What one thread may keep: far more than a long agent run clears and cuts (the largest of
# 27 real runs drops about 1 MB), while a runaway thread stays bounded.
MAX_BYTES_PER_THREAD = 16 * 1024 * 1024
# Handles removed that a read still says are gone (about 12 bytes each in the index).
GONE_KEPT = 4_096
# What this process's embedded store keeps of all its threads; the least recently used
# thread goes first past it.
EMBEDDED_MAX_BYTES = 256 * 1024 * 1024
_INDEX_KEY = "index"
# LangGraph gives a node its runtime (and through it the graph's store) here; this is
# where `langgraph.config.get_store()` reads it.
_CONFIG_KEY_RUNTIME = "__pregel_runtime"

Status = Literal["found", "gone", "unknown"]
T = TypeVar("T")
# A conversation with a store, as a generator: it yields the ops of one batch and is sent
# their results, so one piece of logic serves `batch` and `abatch`.
Steps = Generator[list[Op], list[Result], T]


def namespace_of(thread_id: str) -> tuple[str, str]:
    """The namespace of a thread's items (store labels may hold no "." and no NUL).

    Example:
        >>> namespace_of("user.42")
        ('context_governance_offload', 'user%2E42')
    """
    label = thread_id.replace("%", "%25").replace(".", "%2E").replace("\x00", "%00")
    return NAMESPACE, label or "%"


@dataclass(frozen=True)
class StoredContent:
    """What a handle reads in a thread: the text and what it holds ("found"), or why not."""

    status: Status
    text: str = ""
    about: str = ""


@dataclass
class _Index:
    """The handles a thread keeps (oldest first, with their sizes) and those removed."""

    kept: OrderedDict[str, int] = field(default_factory=OrderedDict)
    gone: OrderedDict[str, None] = field(default_factory=OrderedDict)
    # The sizes of `kept`, summed.
    total: int = 0

    @classmethod
    def of(cls, item: Item | None) -> _Index:
        """The index stored in `item`; an empty one where it cannot be read."""
        index = cls()
        value = None if item is None else item.value
        if not isinstance(value, Mapping):
            return index
        kept, gone = value.get("kept"), value.get("gone")
        for entry in kept if isinstance(kept, list) else ():
            if isinstance(entry, list) and len(entry) == 2 and isinstance(entry[1], int):
                index.kept[str(entry[0])] = max(entry[1], 0)
        for handle in gone if isinstance(gone, list) else ():
            index.gone[str(handle)] = None
        index.total = sum(index.kept.values())
        return index

    def value(self) -> dict[str, Any]:
        return {"kept": [[h, size] for h, size in self.kept.items()], "gone": list(self.gone)}

    def knows(self, handle: str) -> bool:
        return handle in self.kept or handle in self.gone

    def add(self, handle: str, size: int, limit: int) -> list[str]:
        """List `handle` as kept; return the handles removed to stay within `limit`."""
        self.kept[handle] = size
        self.total += size
        removed: list[str] = []
        while self.total > limit and self.kept:
            oldest, oldest_size = self.kept.popitem(last=False)
            self.total -= oldest_size
            removed.append(oldest)
            self.gone[oldest] = None
        while len(self.gone) > GONE_KEPT:
            self.gone.popitem(last=False)
        return removed


class OffloadStore:
    """The offloaded items of each thread in `store`, at most `max_bytes_per_thread`
    (`MAX_BYTES_PER_THREAD` where None)."""

    def __init__(self, store: BaseStore, *, max_bytes_per_thread: int | None = None):
        if max_bytes_per_thread is None:
            max_bytes_per_thread = MAX_BYTES_PER_THREAD
        if max_bytes_per_thread < 1:
            raise ValueError(f"max_bytes_per_thread must be >= 1, got {max_bytes_per_thread}")
        self.store = store
        self.max_bytes_per_thread = max_bytes_per_thread

    def keep(self, thread_id: str, items: Sequence[OffloadItem]) -> int:
        """Write the `items` the thread does not keep yet; return how many were written."""
        return _run(self.store, self._keep(thread_id, items), 0)

    async def akeep(self, thread_id: str, items: Sequence[OffloadItem]) -> int:
        """`keep` for async callers."""
        return await _arun(self.store, self._keep(thread_id, items), 0)

    def read(self, thread_id: str, handle: str) -> StoredContent:
        """What `handle` reads in the thread (a cut: its messages as a transcript)."""
        return _run(self.store, self._read(thread_id, handle), StoredContent("unknown"))

    async def aread(self, thread_id: str, handle: str) -> StoredContent:
        """`read` for async callers."""
        return await _arun(self.store, self._read(thread_id, handle), StoredContent("unknown"))

    def kept_bytes(self, thread_id: str) -> int:
        """Bytes the thread keeps, as counted against its limit (what its index lists)."""
        return _Index.of(self.store.get(namespace_of(thread_id), _INDEX_KEY)).total

    async def akept_bytes(self, thread_id: str) -> int:
        """`kept_bytes` for async callers."""
        return _Index.of(await self.store.aget(namespace_of(thread_id), _INDEX_KEY)).total

    def _keep(self, thread_id: str, items: Sequence[OffloadItem]) -> Steps[int]:
        if not items:
            return 0
        namespace = namespace_of(thread_id)
        [found] = yield [GetOp(namespace, _INDEX_KEY)]
        index = _Index.of(found if isinstance(found, Item) else None)
        new = [item for item in items if not index.knows(item.handle)]
        if not new:
            return 0
        removed: set[str] = set()
        for item in new:
            removed.update(index.add(item.handle, item.size, self.max_bytes_per_thread))
        written = [item for item in new if item.handle not in removed]
        ops: list[Op] = [PutOp(namespace, item.handle, item.value) for item in written]
        ops += [PutOp(namespace, handle, None) for handle in sorted(removed)]
        ops.append(PutOp(namespace, _INDEX_KEY, index.value()))
        yield ops
        return len(written)

    def _read(self, thread_id: str, handle: str) -> Steps[StoredContent]:
        if not is_handle(handle):
            return StoredContent("unknown")
        namespace = namespace_of(thread_id)
        [found] = yield [GetOp(namespace, handle)]
        value = found.value if isinstance(found, Item) else None
        if not isinstance(value, Mapping) or value.get("kind") not in ("message", "cut"):
            [index] = yield [GetOp(namespace, _INDEX_KEY)]
            gone = _Index.of(index if isinstance(index, Item) else None).gone
            return StoredContent("gone" if handle in gone else "unknown")
        about = str(value.get("about", ""))
        if value["kind"] == "message":
            return StoredContent("found", str(value.get("text", "")), about)
        parts = [str(part) for part in value.get("parts", ()) if is_handle(part)]
        unique = list(dict.fromkeys(parts))
        results = yield [GetOp(namespace, part) for part in unique]
        by_handle = {
            part: result.value
            for part, result in zip(unique, results, strict=True)
            if isinstance(result, Item) and isinstance(result.value, Mapping)
        }
        return StoredContent("found", _transcript(parts, by_handle), about)


def _transcript(parts: Sequence[str], values: Mapping[str, Mapping[str, Any]]) -> str:
    """The messages of a cut, oldest first, each under a line naming it."""
    count = len(parts)
    sections: list[str] = []
    for number, part in enumerate(parts, start=1):
        value = values.get(part)
        if value is None:
            sections.append(f"[{number}/{count}] (no longer kept: removed past the limit)")
        else:
            sections.append(f"[{number}/{count}] {value.get('about', '')}\n{value.get('text', '')}")
    return "\n\n".join(sections)


def _run(store: BaseStore, steps: Steps[T], default: T) -> T:
    try:
        ops = next(steps)
        while True:
            ops = steps.send(store.batch(ops))
    except StopIteration as done:
        return default if done.value is None else done.value


async def _arun(store: BaseStore, steps: Steps[T], default: T) -> T:
    try:
        ops = next(steps)
        while True:
            ops = steps.send(await store.abatch(ops))
    except StopIteration as done:
        return default if done.value is None else done.value


class BoundedMemoryStore(BaseStore):
    """A `BaseStore` in this process's memory that keeps at most `max_bytes` of values
    (counted as JSON), dropping the least recently used namespace first past them.

    It serves what offload asks of a store (`GetOp`, `PutOp`); other operations raise
    NotImplementedError. Use a store of LangGraph's (`InMemoryStore`, `PostgresStore`)
    for anything else.

    Example:
        >>> store = BoundedMemoryStore(max_bytes=100)
        >>> store.put(("a",), "k", {"text": "x" * 60})
        >>> store.put(("b",), "k", {"text": "y" * 60})
        >>> store.get(("a",), "k") is None, store.get(("b",), "k").value["text"][:3]
        (True, 'yyy')
    """

    def __init__(self, *, max_bytes: int = EMBEDDED_MAX_BYTES) -> None:
        if max_bytes < 1:
            raise ValueError(f"max_bytes must be >= 1, got {max_bytes}")
        self.max_bytes = max_bytes
        self._namespaces: OrderedDict[tuple[str, ...], dict[str, tuple[Item, int]]] = OrderedDict()
        self._sizes: dict[tuple[str, ...], int] = {}
        self._total = 0
        self._lock = threading.Lock()

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        with self._lock:
            return [self._apply(op) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return self.batch(ops)

    def _apply(self, op: Op) -> Result:
        if isinstance(op, GetOp):
            items = self._namespaces.get(op.namespace)
            if items is None:
                return None
            self._namespaces.move_to_end(op.namespace)
            found = items.get(op.key)
            return None if found is None else found[0]
        if isinstance(op, PutOp):
            self._put(op)
            return None
        raise NotImplementedError(
            f"BoundedMemoryStore serves GetOp and PutOp only, got {type(op).__name__}"
        )

    def _put(self, op: PutOp) -> None:
        items = self._namespaces.setdefault(op.namespace, {})
        self._namespaces.move_to_end(op.namespace)
        previous = items.pop(op.key, None)
        if previous is not None:
            self._resize(op.namespace, -previous[1])
        if op.value is not None:
            now = datetime.now(timezone.utc)
            created = now if previous is None else previous[0].created_at
            item = Item(
                value=dict(op.value),
                key=op.key,
                namespace=op.namespace,
                created_at=created,
                updated_at=now,
            )
            size = len(json.dumps(op.value, ensure_ascii=False, default=str).encode())
            items[op.key] = (item, size)
            self._resize(op.namespace, size)
        if not items:
            del self._namespaces[op.namespace]
            self._sizes.pop(op.namespace, None)
        while self._total > self.max_bytes and len(self._namespaces) > 1:
            oldest, _ = self._namespaces.popitem(last=False)
            self._total -= self._sizes.pop(oldest, 0)

    def _resize(self, namespace: tuple[str, ...], change: int) -> None:
        self._sizes[namespace] = self._sizes.get(namespace, 0) + change
        self._total += change


_embedded: BoundedMemoryStore | None = None
_embedded_lock = threading.Lock()


def embedded_store() -> BoundedMemoryStore:
    """This process's store for offloaded items where neither the graph nor the governor
    has one: every governor of the process and its `read_context` tool share it."""
    global _embedded
    with _embedded_lock:
        if _embedded is None:
            _embedded = BoundedMemoryStore()
        return _embedded


def store_in_run(config: RunnableConfig | None = None) -> BaseStore | None:
    """The store of the LangGraph graph running `config` (the current run's where None),
    where the graph has one.

    Example:
        >>> store_in_run({"configurable": {"thread_id": "t"}}) is None
        True
    """
    configurable = ensure_config(config).get("configurable") or {}
    store = getattr(configurable.get(_CONFIG_KEY_RUNTIME), "store", None)
    return store if isinstance(store, BaseStore) else None
