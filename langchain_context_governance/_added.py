"""What governance adds to a request, found again by a mark, never by searching its text.

Governance adds whole messages (a user turn where a request needs one, a placeholder result
for a call that was never answered, the note at a cut and the data it quotes, a result a
rule cannot send as a result) and never writes inside a message it did not make. Each
message it makes carries a mark in `response_metadata`, which no LangChain chat-model
client sends to a provider, so a history stored back as governed (LangGraph's `replace`
mode) can be read again: what governance added is recognised by the mark, and a user's
own words are never taken for it, whatever they say.

Where role alternation needs two user turns in one message (the pinned task, the note at
a cut, the latest user message), each turn becomes its own run of content blocks, intact,
and the message's mark lists the runs ("parts") and what each one is: the user's own
words, or what governance added. Blocks themselves carry no extra keys: clients such as
langchain-openai send text blocks to the API as they are.

Example:
    >>> from langchain_core.messages import HumanMessage
    >>> added_kind(synthetic_user_turn())
    'user-turn'
    >>> added_kind(HumanMessage("(conversation continued)")) is None
    True
    >>> joined = join_user_parts(
    ...     [user_parts(HumanMessage("fix a.py")), user_parts(cut_note_turn("[Note]"))]
    ... )
    >>> joined.content
    [{'type': 'text', 'text': 'fix a.py'}, {'type': 'text', 'text': '[Note]'}]
    >>> [kind for _, kind in user_parts(joined)]
    ['user', 'cut-note']
    >>> without_added_parts(joined).content
    'fix a.py'
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, TypeVar, get_args

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

# The key of the mark in a message's `response_metadata`.
ADDED_KEY = "context_governance"

AddedKind = Literal[
    "user-turn",
    "assistant-turn",
    "tool-result",
    "cut-note",
    "cut-data",
    "result-placeholder",
    "tool-output",
]
ADDED_KINDS: frozenset[str] = frozenset(get_args(AddedKind))
# The kind of a part that holds a user's own words.
USER_PART = "user"

SYNTHETIC_USER_CONTENT = "(conversation continued)"

MessageT = TypeVar("MessageT", bound=BaseMessage)
Block = str | dict[str, Any]
# A run of content blocks of one user message and what it is: USER_PART or an AddedKind.
UserPart = tuple[list[Block], str]


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


def cut_note_turn(text: str) -> HumanMessage:
    """The note at a cut, as a user turn of its own (joined to its neighbours as a part)."""
    return mark_added(HumanMessage(text), "cut-note")


def cut_data_turn(text: str) -> AIMessage:
    """What a cut quotes from the messages it leaves out (a summary, their values), as an
    assistant turn of its own right after the note: text taken from messages never sits
    in a user or system message (see docs/design.md, "What governance adds")."""
    return mark_added(AIMessage(text), "cut-data")


def _as_blocks(content: str | list[Block]) -> list[Block]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return list(content)


def _marked_parts(message: BaseMessage) -> list[list[Any]] | None:
    """The parts of a joined message's mark, where they describe its content exactly."""
    mark = message.response_metadata.get(ADDED_KEY)
    if not isinstance(mark, dict) or not isinstance(message.content, list):
        return None
    parts = mark.get("parts")
    if not isinstance(parts, list) or not all(
        isinstance(part, list)
        and len(part) == 2
        and isinstance(part[0], int)
        and part[0] > 0
        and (part[1] == USER_PART or part[1] in ADDED_KINDS)
        for part in parts
    ):
        return None
    if sum(part[0] for part in parts) != len(message.content):
        return None
    return parts


def user_parts(message: BaseMessage) -> list[UserPart]:
    """The runs of blocks of a user message, each with what it is.

    A message governance joined is split along its mark; any other message is one part:
    the user's words, or, for a message governance made, its kind.
    """
    parts = _marked_parts(message)
    if parts is None:
        blocks = _as_blocks(message.content)
        return [(blocks, added_kind(message) or USER_PART)] if blocks else []
    content = message.content
    assert isinstance(content, list)
    output: list[UserPart] = []
    start = 0
    for count, kind in parts:
        output.append((content[start : start + count], kind))
        start += count
    return output


def join_user_parts(
    parts_of_turns: Sequence[list[UserPart]], *, template: HumanMessage | None = None
) -> HumanMessage:
    """One user message made of the parts of several turns, in order, each intact.

    The message keeps `template`'s id and fields (by default a new message); its content
    is the blocks of every part, and its mark lists the parts.
    """
    parts = [part for turn in parts_of_turns for part in turn if part[0]]
    content: list[Block] = [block for blocks, _ in parts for block in blocks]
    base = template if template is not None else HumanMessage("")
    metadata = {key: value for key, value in base.response_metadata.items() if key != ADDED_KEY}
    metadata[ADDED_KEY] = {"parts": [[len(blocks), kind] for blocks, kind in parts]}
    return base.model_copy(update={"content": content or "", "response_metadata": metadata})


def without_added_parts(message: HumanMessage) -> HumanMessage | None:
    """The message with only the user's own words: what governance added is taken out.

    Returns the message itself where it holds nothing governance added, and None where it
    holds nothing else. A single text block left alone becomes plain text again.
    """
    if added_kind(message) is not None:
        return None
    parts = _marked_parts(message)
    if parts is None:
        return message
    kept = [(blocks, kind) for blocks, kind in user_parts(message) if kind == USER_PART]
    if not kept:
        return None
    if len(kept) == len(parts):
        return message
    if len(kept) == 1 and len(kept[0][0]) == 1:
        [block] = kept[0][0]
        if isinstance(block, dict) and set(block) == {"type", "text"} and block["type"] == "text":
            metadata = {
                key: value for key, value in message.response_metadata.items() if key != ADDED_KEY
            }
            return message.model_copy(
                update={"content": block["text"], "response_metadata": metadata}
            )
    return join_user_parts([kept], template=message)
