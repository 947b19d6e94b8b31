"""Messages made from a conversation's messages, kept only while those messages live.

A conversation's state keeps no message and no copy of message content. Where making a
message again on every call would cost (two user turns merged, a call id rewritten, a
task cut to its share of the budget), the made message is kept here, tied to the very
message objects it was made from: it is served only to a call that passes those objects,
and dropped as soon as one of them is freed, so an idle conversation keeps nothing of
it and another conversation with equal text is never served it.

Example:
    >>> from langchain_core.messages import HumanMessage
    >>> history = [HumanMessage("a"), HumanMessage("b")]
    >>> made = MadeMessages()
    >>> made.put(0, (0, 1), history, HumanMessage("a\\n\\nb"))
    >>> made.get(0, (0, 1), history).content
    'a\\n\\nb'
    >>> made.get(0, (0, 1), [HumanMessage("a"), HumanMessage("b")]) is None  # other objects
    True
    >>> del history
    >>> len(made)
    0
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence

from langchain_core.messages import BaseMessage

__all__ = ["MadeMessages"]


class MadeMessages:
    """Made messages by key, each with the messages (by index) it was made from."""

    def __init__(self) -> None:
        self._entries: dict[int, tuple[tuple[weakref.ref[BaseMessage], ...], BaseMessage]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def get(
        self, key: int, indices: Sequence[int], messages: Sequence[BaseMessage]
    ) -> BaseMessage | None:
        """The message made under `key` from `messages[i] for i in indices`, if kept."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        refs, made = entry
        if len(refs) == len(indices) and all(
            ref() is messages[index] for ref, index in zip(refs, indices, strict=True)
        ):
            return made
        return None

    def put(
        self,
        key: int,
        indices: Sequence[int],
        messages: Sequence[BaseMessage],
        made: BaseMessage,
    ) -> None:
        """Keep `made`, made from `messages[i] for i in indices`, while those live."""
        entries = self._entries

        def forget(gone: weakref.ref[BaseMessage]) -> None:
            # One of the messages it was made from is freed: nobody can be served it.
            entry = entries.get(key)
            if entry is not None and any(ref is gone for ref in entry[0]):
                del entries[key]

        refs = tuple(weakref.ref(messages[index], forget) for index in indices)
        entries[key] = (refs, made)
