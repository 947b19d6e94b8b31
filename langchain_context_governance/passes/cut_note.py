"""The note that marks where a cut dropped messages, so the model knows they existed.

Without it, a request cut from 110 messages to 14 reads as a conversation that just
began, and the model may redo the work the dropped messages hold. The note is a
function of how many messages were dropped (and of a summary of them, where one is
given), so it stays the same, and the provider's prompt cache keeps it, until the next
cut. It is governance's own text, never written into a user's: a user turn of its own,
marked as added (`_added.cut_note_turn`), placed right after the pinned task (or the
system messages). Where it meets other user turns (the task before it, the latest user
message after it), role alternation joins them into one message in which each turn,
the note included, is its own run of content blocks; a stored note (LangGraph's
`replace` mode) is found again by that mark and replaced at the next cut.
"""

from __future__ import annotations

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from langchain_context_governance._added import cut_note_turn
from langchain_context_governance.passes.alternation import merge_leading_user_turns

CUT_NOTE = (
    "[Context note: {omitted} of this conversation {verb} omitted here to fit the context "
    "window. Work done in {them} may already be complete; check the current state before "
    "repeating it.]"
)
SUMMARY_NOTE = (
    "[Context note: {omitted} of this conversation {verb} omitted here to fit the context "
    "window. Summary of {them}:]\n{summary}"
)
VALUES_NOTE = "\n[Values from {them}, newest first: {values}]"
# Where the room is small, every token of the note is one less for the conversation.
BRIEF_NOTE = "[Context note: {omitted} omitted here.]"
BRIEF_VALUES_NOTE = "\n[Values from {them}: {values}]"


def cut_note(
    omitted: int,
    summary: str | None = None,
    values: str = "",
    *,
    brief: bool = False,
) -> str:
    """The note for `omitted` dropped messages, with the summary of them where given, and
    the values they held (`cut_values.values_text`) where given.

    Example:
        >>> cut_note(3)[:46]
        '[Context note: 3 earlier messages of this conv'
        >>> cut_note(3, values="order_id: W123").splitlines()[1]
        '[Values from them, newest first: order_id: W123]'
    """
    if omitted <= 0:
        raise ValueError(f"omitted must be > 0, got {omitted}")
    words = {
        "omitted": f"{omitted:,} earlier message" + ("s" if omitted > 1 else ""),
        "verb": "were" if omitted > 1 else "was",
        "them": "them" if omitted > 1 else "it",
    }
    if summary:
        note = SUMMARY_NOTE.format(summary=summary.strip(), **words)
    else:
        note = (BRIEF_NOTE if brief else CUT_NOTE).format(**words)
    if values:
        template = BRIEF_VALUES_NOTE if brief else VALUES_NOTE
        note += template.format(values=values, **words)
    return note


def cut_note_position(messages: list[BaseMessage], *, after_task: bool) -> int:
    """Where the note goes: after the leading system messages and, with `after_task`,
    after the user message that opens the request (the pinned task)."""
    position = 0
    while position < len(messages) and isinstance(messages[position], SystemMessage):
        position += 1
    if after_task and position < len(messages) and isinstance(messages[position], HumanMessage):
        position += 1
    return position


def attach_cut_note(
    messages: list[BaseMessage], note: str, *, after_task: bool
) -> list[BaseMessage]:
    """A copy of `messages` with `note` as its own turn at the cut (see the module doc).

    Example:
        >>> from langchain_core.messages import AIMessage
        >>> request = [SystemMessage("rules"), HumanMessage("fix a.py"), AIMessage("ok")]
        >>> noted = attach_cut_note(request, "[Note]", after_task=True)
        >>> [m.type for m in noted], noted[1].content[0]["text"], noted[1].content[1]["text"]
        (['system', 'human', 'ai'], 'fix a.py', '[Note]')
    """
    position = cut_note_position(messages, after_task=after_task)
    noted = [*messages[:position], cut_note_turn(note), *messages[position:]]
    return merge_leading_user_turns(noted)
