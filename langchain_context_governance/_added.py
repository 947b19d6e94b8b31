"""What governance adds to a request, found again by a mark, never by searching its text.

Governance adds whole messages (a user turn where a request needs one, a placeholder result
for a call that was never answered, the note at a cut) and never writes inside a message
it did not make. Each message it makes carries a mark in `response_metadata`, which no
LangChain chat-model client sends to a provider, so a history stored back as governed
(LangGraph's `replace` mode) can be read again: what governance added is recognised by
the mark, and a user's own words are never taken for it, whatever they say.

Example:
    >>> from langchain_core.messages import HumanMessage
    >>> added_kind(synthetic_user_turn())
    'user-turn'
    >>> added_kind(HumanMessage("(conversation continued)")) is None
    True
"""

from __future__ import annotations

from typing import Any, Literal, TypeVar, get_args

from langchain_core.messages import BaseMessage, HumanMessage

# The key of the mark in a message's `response_metadata`.
ADDED_KEY = "context_governance"

AddedKind = Literal["user-turn", "assistant-turn", "tool-result", "cut-note"]
ADDED_KINDS: frozenset[str] = frozenset(get_args(AddedKind))

SYNTHETIC_USER_CONTENT = "(conversation continued)"

MessageT = TypeVar("MessageT", bound=BaseMessage)


def mark_added(message: MessageT, kind: AddedKind) -> MessageT:
    """`message` (a message governance made) with the mark that says so."""
    metadata: dict[str, Any] = {**message.response_metadata, ADDED_KEY: {"added": kind}}
    return message.model_copy(update={"response_metadata": metadata})


def added_kind(message: BaseMessage) -> str | None:
    """What governance added this message as, or None for a message it did not make."""
    mark = message.response_metadata.get(ADDED_KEY)
    if isinstance(mark, dict):
        kind = mark.get("added")
        if isinstance(kind, str) and kind in ADDED_KINDS:
            return kind
    return None


def synthetic_user_turn(*, message_id: str | None = None) -> HumanMessage:
    """The user turn governance puts where a request needs one and the history has none."""
    return mark_added(HumanMessage(SYNTHETIC_USER_CONTENT, id=message_id), "user-turn")
