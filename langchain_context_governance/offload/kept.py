"""What one governance call keeps: the items that left its request, each once.

The passes that take content out of a request (compaction, the last resort, the cut) put
what they take into the call's `Offload` and show its handle where the content was; the
governor writes the items to the thread's store after the call (store.py), those the
store does not hold yet. A pass given no `Offload` shows today's text: offload is off.

Example:
    >>> from langchain_core.messages import ToolMessage
    >>> from langchain_context_governance.offload.items import result_item
    >>> offload = Offload()
    >>> item = result_item(ToolMessage("x" * 900, tool_call_id="c1"), "bash", {"command": "ls"})
    >>> offload.keep(item) == item.handle, len(offload.items)
    (True, 1)
    >>> handle_line(item)[:21]
    'read_context(handle="'
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import BaseMessage

from langchain_context_governance.offload.items import READ_CONTEXT, OffloadItem, is_handle

__all__ = [
    "OFFLOADED_KEY",
    "READ_CONTEXT",
    "Offload",
    "handle_line",
    "is_read_call",
    "marked_offloaded",
    "offloaded_handle",
    "read_call",
]

# Where a compacted copy says which item it stands for (in `response_metadata`, which no
# chat-model client sends): a copy is recognised by it, never by its text.
OFFLOADED_KEY = "context_governance_offload"


class Offload:
    """The items one governance call took out of its request, by handle, each once."""

    def __init__(self) -> None:
        self._items: dict[str, OffloadItem] = {}

    def keep(self, item: OffloadItem) -> str:
        """Keep `item` (once, however often it is met); return its handle."""
        self._items.setdefault(item.handle, item)
        return item.handle

    @property
    def items(self) -> list[OffloadItem]:
        """The items kept, in the order they were first met."""
        return list(self._items.values())


def read_call(handle: str) -> str:
    """The call that reads the item of `handle` back, as the request shows it."""
    return f'{READ_CONTEXT}(handle="{handle}")'


def is_read_call(text: str) -> bool:
    """Whether `text` is exactly a `read_call` (and nothing else could be passed as one).

    Example:
        >>> is_read_call('read_context(handle="k7f3q2m5xa")'), is_read_call("read it")
        (True, False)
    """
    prefix, suffix = f'{READ_CONTEXT}(handle="', '")'
    return (
        text.startswith(prefix)
        and text.endswith(suffix)
        and is_handle(text[len(prefix) : -len(suffix)])
    )


def handle_line(item: OffloadItem, *, brief: bool = False) -> str:
    """One line naming `item`: the call that reads it, what it holds and (not where
    `brief`) its size."""
    if brief:
        return f"{read_call(item.handle)}: {item.about}"
    return f"{read_call(item.handle)}: {item.about}, {item.characters:,} characters"


def marked_offloaded(message: BaseMessage, content: Any, handle: str) -> BaseMessage:
    """A copy of `message` with `content`, marked as standing for the item of `handle`."""
    metadata = {**message.response_metadata, OFFLOADED_KEY: handle}
    return message.model_copy(update={"content": content, "response_metadata": metadata})


def offloaded_handle(message: BaseMessage) -> str | None:
    """The handle a compacted copy stands for, or None for any other message."""
    handle = message.response_metadata.get(OFFLOADED_KEY)
    return handle if isinstance(handle, str) else None
