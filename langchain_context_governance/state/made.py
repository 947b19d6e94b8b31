"""Messages made from a conversation's messages, kept only while those messages live.

A conversation's state keeps no copy of message content (the repair stream holds the
message objects read only while the newest of them lives). Where making a
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
from collections.abc import Hashable, Sequence
from typing import Generic, TypeVar

from langchain_core.messages import BaseMessage

__all__ = ["MadeMessages"]

Made = TypeVar("Made")


class MadeMessages(Generic[Made]):
    """Made messages (or what a caller keeps with one) by key, each with the messages (by
    index) it was made from; at most `limit` entries (all dropped when it is reached)."""

    def __init__(self, *, limit: int | None = None) -> None:
        self._limit = limit
        self._entries: dict[Hashable, tuple[tuple[weakref.ref[BaseMessage], ...], Made]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def get(
        self, key: Hashable, indices: Sequence[int], messages: Sequence[BaseMessage]
    ) -> Made | None:
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
        key: Hashable,
        indices: Sequence[int],
        messages: Sequence[BaseMessage],
        made: Made,
    ) -> None:
        """Keep `made`, made from `messages[i] for i in indices`, while those live."""
        entries = self._entries

        def forget(gone: weakref.ref[BaseMessage]) -> None:
            # One of the messages it was made from is freed: nobody can be served it.
            entry = entries.get(key)
            if entry is not None and any(ref is gone for ref in entry[0]):
                del entries[key]

        if self._limit is not None and len(entries) >= self._limit:
            entries.clear()
        refs = tuple(weakref.ref(messages[index], forget) for index in indices)
        entries[key] = (refs, made)
