"""An independent check of the request rules, so the benchmark does not grade the governor
with the governor's own validator.

Rules: the request is not empty; the first non-system message is a user message; every tool
call is answered directly after its AIMessage and every tool result answers such a call; user
and assistant turns alternate; the last message is a user message or a tool result.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

__all__ = ["first_request_problem"]


def first_request_problem(messages: Sequence[BaseMessage]) -> str | None:
    """The first broken rule, naming the message index, or None for a legal request."""
    conversation_start = _count_leading_system_messages(messages)
    if conversation_start == len(messages):
        return "no user message: the request holds only system messages or nothing"
    if not isinstance(messages[conversation_start], HumanMessage):
        return f"message {conversation_start}: first non-system message is not a user message"
    if not isinstance(messages[-1], (HumanMessage, ToolMessage)):
        return (
            f"message {len(messages) - 1}: last message is neither a user message nor a tool result"
        )
    return _first_pairing_problem(messages, conversation_start)


def _count_leading_system_messages(messages: Sequence[BaseMessage]) -> int:
    count = 0
    while count < len(messages) and isinstance(messages[count], SystemMessage):
        count += 1
    return count


def _first_pairing_problem(messages: Sequence[BaseMessage], start: int) -> str | None:
    index = start
    previous_turn = ""
    while index < len(messages):
        message = messages[index]
        if isinstance(message, SystemMessage):
            return f"message {index}: system message inside the conversation"
        if isinstance(message, ToolMessage):
            return f"message {index}: tool result that answers no call directly before it"
        turn = "user" if isinstance(message, HumanMessage) else "assistant"
        if turn == previous_turn:
            return f"message {index}: two {turn} turns in a row"
        previous_turn = turn
        index += 1
        if isinstance(message, AIMessage) and message.tool_calls:
            index, problem = _skip_tool_results(messages, index, message)
            if problem:
                return problem
            # Tool results close the assistant turn: another assistant message may follow.
            previous_turn = "tool"
    return None


def _skip_tool_results(
    messages: Sequence[BaseMessage], index: int, call_message: AIMessage
) -> tuple[int, str | None]:
    """Consume the tool results after `call_message`; they must answer exactly its calls."""
    expected = {call["id"] for call in call_message.tool_calls}
    answered: set[str] = set()
    while index < len(messages) and isinstance(messages[index], ToolMessage):
        call_id = messages[index].tool_call_id  # type: ignore[attr-defined]
        if call_id not in expected or call_id in answered:
            return index, f"message {index}: tool result {call_id!r} answers no open call"
        answered.add(call_id)
        index += 1
    if answered != expected:
        missing = sorted(str(call_id) for call_id in expected - answered)
        return index, f"message {index - 1}: tool calls {missing} are not answered"
    return index, None
