"""Answer every tool call directly after the assistant message that made it."""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.messages.utils import MessageLikeRepresentation

from langchain_context_governance._added import mark_added
from langchain_context_governance._messages import (
    as_message_list,
    iter_declared_tool_calls,
    results_run_end,
)
from langchain_context_governance.passes._dual_use import runnable_when_called_without_messages

BACKFILL_CONTENT = "[Tool result unavailable — call was interrupted or lost]"


def backfilled_result(call_id: str, name: str) -> ToolMessage:
    """The placeholder result of an unanswered call; the same message on every call."""
    result = ToolMessage(
        BACKFILL_CONTENT,
        tool_call_id=call_id,
        name=name,
        status="error",
        id=f"{call_id}-backfilled-result",
    )
    return mark_added(result, "tool-result")


def _first_result_positions(messages: list[BaseMessage]) -> dict[str, list[int]]:
    positions: dict[str, list[int]] = {}
    for index, message in enumerate(messages):
        if isinstance(message, ToolMessage):
            positions.setdefault(message.tool_call_id, []).append(index)
    return positions


def backfill_missing_tool_results_with_count(
    messages: list[BaseMessage],
) -> tuple[list[BaseMessage], int]:
    """Answer each call right after its assistant message; return the list and messages changed.

    A result that exists but stands later (separated from its call by other messages)
    is moved back next to its call instead of being replaced, so no tool output is
    lost. A call with no result at all gets a placeholder error result. Returns the
    very same list when every call is already answered in place.
    """
    if not any(isinstance(message, AIMessage) for message in messages):
        return messages, 0
    positions: dict[str, list[int]] | None = None
    moved: set[int] = set()
    output: list[BaseMessage] = []
    changed = 0
    index = 0
    while index < len(messages):
        message = messages[index]
        index += 1
        if index - 1 in moved:
            continue
        output.append(message)
        if not isinstance(message, AIMessage):
            continue
        calls = list(iter_declared_tool_calls(message))
        if not calls:
            continue
        run_end = results_run_end(messages, index)
        in_run = {
            result.tool_call_id
            for position, result in enumerate(messages[index:run_end], start=index)
            if isinstance(result, ToolMessage) and position not in moved
        }
        for position in range(index, run_end):
            if position not in moved:
                output.append(messages[position])
        index = run_end
        for call_id, name in calls:
            if call_id in in_run:
                continue
            if positions is None:
                positions = _first_result_positions(messages)
            later = [p for p in positions.get(call_id, []) if p >= run_end and p not in moved]
            if later:
                moved.add(later[0])
                output.append(messages[later[0]])
            else:
                output.append(backfilled_result(call_id, name))
            changed += 1
    if changed == 0:
        return messages, 0
    return output, changed


@runnable_when_called_without_messages
def backfill_missing_tool_results(
    messages: Sequence[MessageLikeRepresentation],
) -> list[BaseMessage]:
    """Give every tool call a result directly after its assistant message.

    Providers reject a call left unanswered ("tool_use ids were found without
    tool_result blocks immediately after"). For each call without a result, a
    `ToolMessage(BACKFILL_CONTENT, tool_call_id=<id>, name=<tool name>)` is inserted
    right after that assistant message's existing results. A result that exists but
    stands later in the history is moved back next to its call rather than lost.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> history = [
        ...     HumanMessage("read it"),
        ...     AIMessage("", tool_calls=[{"name": "read_file", "args": {}, "id": "c1"}]),
        ...     HumanMessage("sorry, I restarted"),
        ... ]
        >>> [m.type for m in backfill_missing_tool_results(history)]
        ['human', 'ai', 'tool', 'human']
    """
    filled, _ = backfill_missing_tool_results_with_count(as_message_list(messages))
    return list(filled)
