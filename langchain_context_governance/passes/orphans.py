"""Drop tool results that no earlier tool call asked for."""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.messages.utils import MessageLikeRepresentation

from langchain_context_governance._messages import as_message_list, iter_declared_tool_calls
from langchain_context_governance.passes._dual_use import runnable_when_called_without_messages


def drop_orphan_tool_results_with_count(
    messages: list[BaseMessage],
) -> tuple[list[BaseMessage], int]:
    """Drop orphan and duplicate tool results; return the list and how many were dropped.

    Returns the very same list when nothing is dropped.
    """
    declared: set[str] = set()
    answered: set[str] = set()
    keep: list[bool] | None = None
    for index, message in enumerate(messages):
        if isinstance(message, AIMessage):
            for call_id, _ in iter_declared_tool_calls(message):
                # A call id declared again (local models reuse "call_0") may be answered again.
                declared.add(call_id)
                answered.discard(call_id)
        elif isinstance(message, ToolMessage):
            call_id = message.tool_call_id
            if call_id in declared and call_id not in answered:
                answered.add(call_id)
                continue
            if keep is None:
                keep = [True] * len(messages)
            keep[index] = False
    if keep is None:
        return messages, 0
    kept = [message for message, flag in zip(messages, keep, strict=True) if flag]
    return kept, len(messages) - len(kept)


@runnable_when_called_without_messages
def drop_orphan_tool_results(
    messages: Sequence[MessageLikeRepresentation],
) -> list[BaseMessage]:
    """Remove tool results whose call was not declared earlier, and second results for a call.

    Providers reject such a request ("messages with role 'tool' must be a response
    to a preceding message with 'tool_calls'"). The first result for each declared
    call id stays; a result that comes before its call counts as an orphan.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
        >>> history = [
        ...     HumanMessage("hi"),
        ...     ToolMessage("stale", tool_call_id="gone"),
        ...     AIMessage("", tool_calls=[{"name": "grep", "args": {}, "id": "c1"}]),
        ...     ToolMessage("hit", tool_call_id="c1"),
        ...     ToolMessage("hit again", tool_call_id="c1"),
        ... ]
        >>> [m.content for m in drop_orphan_tool_results(history)]
        ['hi', '', 'hit']
    """
    kept, _ = drop_orphan_tool_results_with_count(as_message_list(messages))
    return list(kept)
