"""Make user and assistant turns alternate the way every provider accepts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.messages.utils import MessageLikeRepresentation

from langchain_context_governance._added import (
    SYNTHETIC_USER_CONTENT,
    join_user_parts,
    synthetic_user_turn,
    user_parts,
)
from langchain_context_governance._messages import as_message_list
from langchain_context_governance._reasoning import carries_reasoning
from langchain_context_governance.passes._dual_use import runnable_when_called_without_messages

Content = str | list[str | dict[str, Any]]


def _as_blocks(content: Content) -> list[str | dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return list(content)


def merge_contents(first: Content, second: Content) -> Content:
    """Join two contents without losing any part: text by a blank line, blocks in order."""
    if isinstance(first, str) and isinstance(second, str):
        if not first:
            return second
        if not second:
            return first
        return f"{first}\n\n{second}"
    return _as_blocks(first) + _as_blocks(second)


def _merge_user(first: HumanMessage, second: HumanMessage) -> HumanMessage:
    """Two user turns as one message whose content blocks hold each turn intact.

    Each turn's words stay a run of whole blocks (a string becomes one text block), and
    the message's mark says where each run starts and whether governance added it, so
    nothing is ever joined into a user's text or searched for in it (see `_added.py`).
    """
    return join_user_parts([user_parts(first), user_parts(second)], template=first)


def _merge_assistant(first: AIMessage, second: AIMessage) -> AIMessage:
    return first.model_copy(
        update={
            "content": merge_contents(first.content, second.content),
            "tool_calls": [*first.tool_calls, *second.tool_calls],
            "invalid_tool_calls": [*first.invalid_tool_calls, *second.invalid_tool_calls],
        }
    )


def can_merge_turns(previous: BaseMessage, message: BaseMessage) -> bool:
    """Whether `message` may be merged into `previous` (two user or two assistant turns)."""
    if isinstance(previous, HumanMessage) and isinstance(message, HumanMessage):
        return True
    if isinstance(previous, AIMessage) and isinstance(message, AIMessage):
        # A response carrying reasoning state (signed thinking, reasoning items, thought
        # signatures, reasoning_content) must reach the provider as its own message:
        # merged, its thinking would no longer open it, and the merged message keeps only
        # the first one's additional_kwargs. See rules/reasoning.py.
        return not carries_reasoning(message)
    return False


def merge_turns(previous: BaseMessage, message: BaseMessage) -> BaseMessage:
    """`previous` with `message` merged into it, losing no text and no tool call."""
    if isinstance(previous, HumanMessage) and isinstance(message, HumanMessage):
        return _merge_user(previous, message)
    assert isinstance(previous, AIMessage) and isinstance(message, AIMessage)
    return _merge_assistant(previous, message)


def merge_leading_user_turns(messages: list[BaseMessage]) -> list[BaseMessage]:
    """`messages` with the user turns that meet right after the system messages joined.

    After a cut the pinned task, the note and the latest user message meet at the front;
    joined here, each stays its own run of blocks (see `_merge_user`). Returns the very
    same list when there is nothing to join.
    """
    first = 0
    while first < len(messages) and isinstance(messages[first], SystemMessage):
        first += 1
    stop = first
    while stop < len(messages) and isinstance(messages[stop], HumanMessage):
        stop += 1
    if stop - first < 2:
        return messages
    joined = messages[first]
    for message in messages[first + 1 : stop]:
        joined = merge_turns(joined, message)
    return [*messages[:first], joined, *messages[stop:]]


def merge_consecutive_turns(messages: list[BaseMessage]) -> tuple[list[BaseMessage], int]:
    """Merge runs of user messages and runs of assistant messages; return list and count."""
    output: list[BaseMessage] = []
    merged = 0
    for message in messages:
        if output and can_merge_turns(output[-1], message):
            output[-1] = merge_turns(output[-1], message)
            merged += 1
        else:
            output.append(message)
    if merged == 0:
        return messages, 0
    return output, merged


def _text_of(message: AIMessage) -> str:
    return message.text.strip() if isinstance(message.text, str) else ""


def drop_trailing_assistant_messages(
    messages: list[BaseMessage],
) -> tuple[list[BaseMessage], int]:
    """Drop assistant messages at the end (no prefill); return list and count.

    Where that would leave only system messages, the last dropped assistant message
    becomes a user message instead, so the request keeps something to answer.
    """
    end = len(messages)
    while end > 0 and isinstance(messages[end - 1], AIMessage):
        end -= 1
    if end == len(messages):
        return messages, 0
    kept = messages[:end]
    if all(isinstance(message, SystemMessage) for message in kept):
        last = messages[-1]
        assert isinstance(last, AIMessage)
        text = _text_of(last) or SYNTHETIC_USER_CONTENT
        kept.append(HumanMessage(text))
    return kept, len(messages) - end


def insert_user_before_leading_assistant(
    messages: list[BaseMessage],
) -> tuple[list[BaseMessage], int]:
    """Put a synthetic user turn before an assistant message that opens the conversation.

    Zhipu/GLM rejects system followed by assistant (error 1214) and Anthropic needs
    the first message to come from the user.
    """
    for index, message in enumerate(messages):
        if isinstance(message, SystemMessage):
            continue
        if not isinstance(message, AIMessage):
            return messages, 0
        synthetic = synthetic_user_turn()
        return [*messages[:index], synthetic, *messages[index:]], 1
    return messages, 0


def guarantee_user_turn(
    messages: list[BaseMessage], *, has_conversation: bool = True
) -> tuple[list[BaseMessage], int]:
    """The one place a request gets the user turn it needs; return the list and count.

    No request ends on an assistant turn (no prefill), and the first message after the
    system messages is a user turn: where the request opens with an assistant message, or
    holds nothing but system messages once trailing assistant turns are left out, a
    synthetic user turn (marked as added) goes right after the system messages. An empty
    request gets one only where the conversation had something to answer
    (`has_conversation`): tool results alone are all orphans and leave nothing.
    """
    end = len(messages)
    while end > 0 and isinstance(messages[end - 1], AIMessage):
        end -= 1
    output = messages if end == len(messages) else messages[:end]
    changed = len(messages) - end
    first = 0
    while first < len(output) and isinstance(output[first], SystemMessage):
        first += 1
    if first < len(output) and isinstance(output[first], HumanMessage):
        return output, changed
    if not output and not has_conversation:
        return output, changed
    return [*output[:first], synthetic_user_turn(), *output[first:]], changed + 1


def enforce_role_alternation_with_count(
    messages: list[BaseMessage],
) -> tuple[list[BaseMessage], int]:
    """Run the three alternation repairs; return the list and messages changed."""
    merged, merge_count = merge_consecutive_turns(messages)
    trimmed, drop_count = drop_trailing_assistant_messages(merged)
    opened, insert_count = insert_user_before_leading_assistant(trimmed)
    return opened, merge_count + drop_count + insert_count


@runnable_when_called_without_messages
def enforce_role_alternation(
    messages: Sequence[MessageLikeRepresentation],
) -> list[BaseMessage]:
    """Merge consecutive same-role turns, drop trailing assistant turns, open with a user.

    - Consecutive user messages merge into one whose content blocks hold each turn
      intact (a string becomes one text block; the message's mark says where each turn
      starts, see `_added.py`). Consecutive assistant messages merge into one, losing no
      text and no tool call: string contents are joined by a blank line, list contents
      are concatenated block by block, and an assistant message with tool calls absorbs
      the text of a plain neighbour. System and tool messages are never merged. An
      assistant response that carries reasoning state (signed thinking blocks, OpenAI
      reasoning items, Gemini thought signatures, `reasoning_content`) is never merged
      into the one before it: that state must reach the provider with its own message,
      as produced.
    - Assistant messages at the end are dropped (no prefill). Where that would leave
      only system messages, the last dropped one becomes a user message.
    - Where the first non-system message is an assistant message, a user message with
      `SYNTHETIC_USER_CONTENT` is inserted before it.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
        >>> history = [
        ...     SystemMessage("be brief"),
        ...     AIMessage("hello"),
        ...     HumanMessage("a"),
        ...     HumanMessage("b"),
        ...     AIMessage("done"),
        ... ]
        >>> [m.content for m in enforce_role_alternation(history)][:3]
        ['be brief', '(conversation continued)', 'hello']
        >>> enforce_role_alternation(history)[-1].content
        [{'type': 'text', 'text': 'a'}, {'type': 'text', 'text': 'b'}]
    """
    repaired, _ = enforce_role_alternation_with_count(as_message_list(messages))
    return list(repaired)
