"""The note that marks where a cut dropped messages, so the model knows they existed.

Without it, a request cut from 110 messages to 14 reads as a conversation that just
began, and the model may redo the work the dropped messages hold. The note is a
function of how many messages were dropped (and of a summary of them, where one is
given), so it stays the same, and the provider's prompt cache keeps it, until the next
cut. It never becomes a message of its own between two user turns: it is appended to the
user message that opens the request after the system messages (the pinned task, where
there is one), or is that user message where the request would open with an assistant
message. So role alternation holds without a merge that would move it.
"""

from __future__ import annotations

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from langchain_context_governance.passes.alternation import Content, merge_contents

NOTE_PREFIX = "[Context note: "
CUT_NOTE = (
    NOTE_PREFIX + "{omitted} of this conversation {verb} omitted here to fit the context "
    "window. Work done in {them} may already be complete; check the current state before "
    "repeating it.]"
)
SUMMARY_NOTE = (
    NOTE_PREFIX + "{omitted} of this conversation {verb} omitted here to fit the context "
    "window. Summary of {them}:]\n{summary}"
)


def cut_note(omitted: int, summary: str | None = None) -> str:
    """The note for `omitted` dropped messages, with the summary of them where given."""
    if omitted <= 0:
        raise ValueError(f"omitted must be > 0, got {omitted}")
    words = {
        "omitted": f"{omitted:,} earlier message" + ("s" if omitted > 1 else ""),
        "verb": "were" if omitted > 1 else "was",
        "them": "them" if omitted > 1 else "it",
    }
    if summary:
        return SUMMARY_NOTE.format(summary=summary.strip(), **words)
    return CUT_NOTE.format(**words)


def cut_note_position(messages: list[BaseMessage]) -> int:
    """Where the note goes: the first message after the leading system messages."""
    position = 0
    while position < len(messages) and isinstance(messages[position], SystemMessage):
        position += 1
    return position


def without_cut_note(content: Content) -> Content:
    """`content` without the note an earlier cut appended to it.

    A history stored back as governed (LangGraph's `replace` mode) carries the note of
    each cut; the next cut's note replaces it instead of piling up after it.
    """
    if isinstance(content, str):
        if content.startswith(NOTE_PREFIX):
            return ""
        end = content.rfind("\n\n" + NOTE_PREFIX)
        return content if end < 0 else content[:end]
    last = content[-1] if content else None
    if isinstance(last, dict) and str(last.get("text", "")).startswith(NOTE_PREFIX):
        return content[:-1]
    return content


def attach_cut_note(messages: list[BaseMessage], note: str) -> list[BaseMessage]:
    """A copy of `messages` with `note` at the cut point (see the module docstring)."""
    position = cut_note_position(messages)
    output = list(messages)
    carrier = messages[position] if position < len(messages) else None
    if isinstance(carrier, HumanMessage):
        content = without_cut_note(carrier.content)
        output[position] = carrier.model_copy(update={"content": merge_contents(content, note)})
    else:
        output.insert(position, HumanMessage(note))
    return output
