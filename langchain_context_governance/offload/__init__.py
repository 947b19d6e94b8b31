"""Offload: what governance takes out of a request is kept, and read back with a handle.

`items` (what is kept, its handle), `kept` (what one call keeps), `store` (where: the
thread's namespace of a LangGraph `BaseStore`), `tool` (`read_context`). See
docs/offload.md.
"""

from langchain_context_governance.offload.items import OffloadItem
from langchain_context_governance.offload.kept import READ_CONTEXT, Offload
from langchain_context_governance.offload.store import (
    MAX_BYTES_PER_THREAD,
    BoundedMemoryStore,
    OffloadStore,
    StoredContent,
    embedded_store,
    store_in_run,
)
from langchain_context_governance.offload.tool import read_context_tool

__all__ = [
    "MAX_BYTES_PER_THREAD",
    "READ_CONTEXT",
    "BoundedMemoryStore",
    "Offload",
    "OffloadItem",
    "OffloadStore",
    "StoredContent",
    "embedded_store",
    "read_context_tool",
    "store_in_run",
]
