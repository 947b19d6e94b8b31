"""What a reasoning model needs back exactly as it sent it, found on a LangChain message.

Reasoning models return state with their answer that the provider checks when the
conversation is sent back, and LangChain keeps it on the `AIMessage` the client built:

- Anthropic: `thinking` blocks (with a `signature`) and `redacted_thinking` blocks (with
  `data`) in the content, first in the message; the signature fails if a block is edited,
  merged, reordered or made up.
- OpenAI (Responses API, langchain-openai): `reasoning` items in the content (each with an
  `id` and, with `include=["reasoning.encrypted_content"]`, `encrypted_content`), the
  `function_call` items they lead to, or, in the older format, `additional_kwargs
  ["reasoning"]` and the call-id map `additional_kwargs["__openai_function_call_ids__"]`.
- Gemini (langchain-google-genai): the thought signature of each function call in
  `additional_kwargs["__gemini_function_call_thought_signatures__"]`, keyed by tool-call
  id; text and thinking parts carry theirs in `extras["signature"]` or
  `thought_signature`; older messages in `function_call_signature` blocks.
- DeepSeek (and other OpenAI-compatible reasoning servers): `additional_kwargs
  ["reasoning_content"]`, which DeepSeek wants back with every response that made tool
  calls.
- The providers' own compaction: an Anthropic `compaction` block (`content`, `signature`)
  and an OpenAI or xAI compaction item (`encrypted_content`; langchain-openai keeps it as
  it came, or in its v1 output as a `non_standard` block around it). The summary stands
  for everything before it: the request starts at the newest one
  (`provider_compaction_start`).

Governance treats all of it as part of its message: a message carrying it is never
merged into another, and its blocks are never edited or moved by a pass.

Some of it is bound to its prefix (docs/reasoning.md): Anthropic's thinking blocks on
models with preserved thinking, OpenAI's reasoning items on its newer models. Such a
block (`bound_reasoning_blocks`) is valid only behind the very prefix it was made after;
where governance changed that prefix, the whole of the message's bound reasoning is left
out on purpose (`without_bound_reasoning`), and the copy says so
(`reasoning_left_out`).

Example:
    >>> from langchain_core.messages import AIMessage
    >>> thinking = {"type": "thinking", "thinking": "Look it up.", "signature": "EqQB"}
    >>> carries_reasoning(AIMessage([thinking, {"type": "text", "text": "Done."}]))
    True
    >>> opens_with_thinking(AIMessage([thinking]))
    True
    >>> carries_reasoning(AIMessage("Done."))
    False
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from langchain_context_governance._added import added_kind
from langchain_context_governance._messages import declared_tool_call_ids

__all__ = [
    "GEMINI_SIGNATURES_KEY",
    "OPENAI_FUNCTION_CALL_IDS_KEY",
    "SIGNED_THINKING_TYPES",
    "bound_reasoning_blocks",
    "carries_bound_reasoning",
    "carries_provider_compaction",
    "carries_reasoning",
    "opens_with_thinking",
    "provider_compaction_start",
    "reasoning_blocks",
    "reasoning_left_out",
    "reasoning_state",
    "signed_thinking_blocks",
    "thinking_tool_loop_start",
    "tool_loop_opening",
    "without_bound_reasoning",
]

# Anthropic's signed blocks.
SIGNED_THINKING_TYPES = frozenset({"thinking", "redacted_thinking"})
# Content blocks that hold reasoning state: Anthropic's, OpenAI's reasoning and function-call
# items, Gemini's signature sidecars, and the providers' compaction blocks and items.
_COMPACTION = "compaction"
_REASONING_BLOCK_TYPES = SIGNED_THINKING_TYPES | {
    "reasoning",
    "function_call",
    "function_call_signature",
    _COMPACTION,
}
# Blocks valid only behind the prefix they were made after (docs/reasoning.md).
_BOUND_BLOCK_TYPES = SIGNED_THINKING_TYPES | {"reasoning"}
# Where a message's copy says that governance left its bound reasoning out on purpose;
# clients never send `response_metadata`.
_LEFT_OUT_KEY = "context_governance_reasoning_left_out"
# Where langchain-openai and langchain-google-genai keep per-call state, keyed by call id.
OPENAI_FUNCTION_CALL_IDS_KEY = "__openai_function_call_ids__"
GEMINI_SIGNATURES_KEY = "__gemini_function_call_thought_signatures__"
_REASONING_KWARGS = ("reasoning", "reasoning_content", OPENAI_FUNCTION_CALL_IDS_KEY)


def _carries_signature(block: Mapping[str, Any]) -> bool:
    extras = block.get("extras")
    return bool(
        block.get("thought_signature") or (isinstance(extras, Mapping) and extras.get("signature"))
    )


def _is_compaction(block: Any) -> bool:
    """An Anthropic `compaction` block, an OpenAI compaction item, or langchain-openai's
    v1 `non_standard` block around one."""
    if not isinstance(block, Mapping):
        return False
    if block.get("type") == _COMPACTION:
        return True
    value = block.get("value")
    return (
        block.get("type") == "non_standard"
        and isinstance(value, Mapping)
        and value.get("type") == _COMPACTION
    )


def _is_reasoning_block(block: Any) -> bool:
    if not isinstance(block, Mapping):
        return False
    return (
        block.get("type") in _REASONING_BLOCK_TYPES
        or _carries_signature(block)
        or _is_compaction(block)
    )


def reasoning_blocks(message: BaseMessage) -> list[dict[str, Any]]:
    """The content blocks of `message` that hold reasoning state, in their order."""
    if not isinstance(message, AIMessage) or not isinstance(message.content, list):
        return []
    return [block for block in message.content if _is_reasoning_block(block)]  # type: ignore[misc]


def signed_thinking_blocks(message: BaseMessage) -> list[dict[str, Any]]:
    """Anthropic's `thinking` and `redacted_thinking` blocks of `message`, in their order."""
    return [
        block for block in reasoning_blocks(message) if block.get("type") in SIGNED_THINKING_TYPES
    ]


def bound_reasoning_blocks(message: BaseMessage) -> list[dict[str, Any]]:
    """The blocks of `message` valid only behind the prefix they were made after: Anthropic's
    `thinking` and `redacted_thinking` blocks, OpenAI's `reasoning` items."""
    return [block for block in reasoning_blocks(message) if block.get("type") in _BOUND_BLOCK_TYPES]


def carries_bound_reasoning(message: BaseMessage) -> bool:
    """Whether `message` holds reasoning bound to its prefix (`bound_reasoning_blocks`), also
    in langchain-openai's older format (`additional_kwargs["reasoning"]`)."""
    if not isinstance(message, AIMessage):
        return False
    return bool(bound_reasoning_blocks(message) or message.additional_kwargs.get("reasoning"))


def _without_item_id(block: Any) -> Any:
    """An OpenAI item without the id that ties it to the response's reasoning item."""
    if not isinstance(block, Mapping):
        return block
    if block.get("type") in ("function_call", "text") and "id" in block:
        return {key: value for key, value in block.items() if key != "id"}
    extras = block.get("extras")
    if block.get("type") == "tool_call" and isinstance(extras, Mapping) and "item_id" in extras:
        return {**block, "extras": {k: v for k, v in extras.items() if k != "item_id"}}
    return block


def without_bound_reasoning(message: AIMessage) -> AIMessage:
    """A copy of `message` without its bound reasoning, saying it was left out on purpose.

    Anthropic: its `thinking` and `redacted_thinking` blocks go; its text and tool calls
    stay (what Anthropic's docs ask of a turn kept behind a rewritten prefix). OpenAI: its
    `reasoning` items go, and so do the item ids of its other output (`fc_...`, `msg_...`),
    which the API would otherwise take for items sent without their reasoning item.

    Example:
        >>> thinking = {"type": "thinking", "thinking": "", "signature": "EqQB"}
        >>> copy = without_bound_reasoning(AIMessage([thinking, {"type": "text", "text": "Hi"}]))
        >>> copy.content, reasoning_left_out(copy)
        ([{'type': 'text', 'text': 'Hi'}], True)
    """
    update: dict[str, Any] = {
        "response_metadata": {**message.response_metadata, _LEFT_OUT_KEY: True}
    }
    if isinstance(message.content, list):
        bound = bound_reasoning_blocks(message)
        openai = any(block.get("type") == "reasoning" for block in bound)
        content = [block for block in message.content if not any(block is b for b in bound)]
        update["content"] = [_without_item_id(block) for block in content] if openai else content
    kwargs = message.additional_kwargs
    if kwargs.get("reasoning") or OPENAI_FUNCTION_CALL_IDS_KEY in kwargs:
        update["additional_kwargs"] = {
            key: value
            for key, value in kwargs.items()
            if key not in ("reasoning", OPENAI_FUNCTION_CALL_IDS_KEY)
        }
        # The older format sends the response's id (`resp_...`) with its message id
        # (`msg_...`) as the message item's id.
        metadata = update["response_metadata"]
        update["response_metadata"] = {k: v for k, v in metadata.items() if k != "id"}
    return message.model_copy(update=update)


def reasoning_left_out(message: BaseMessage) -> bool:
    """Whether `message` is a copy whose bound reasoning governance left out on purpose."""
    return bool(message.response_metadata.get(_LEFT_OUT_KEY))


def carries_provider_compaction(message: BaseMessage) -> bool:
    """Whether `message` holds a provider's compaction block or item."""
    if not isinstance(message, AIMessage) or not isinstance(message.content, list):
        return False
    return any(_is_compaction(block) for block in message.content)


def provider_compaction_start(messages: Sequence[BaseMessage]) -> int | None:
    """The index of the newest message holding a provider's compaction, if one does.

    The provider's summary stands for everything before it: Anthropic takes exactly one
    `compaction` block, first in `messages` (a message before it is a 400,
    `compaction_block_misplaced`), and what an OpenAI compaction item replaced need not be
    sent again.

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> summary = {"type": "compaction", "content": "The user asked...", "signature": "Eu"}
        >>> history = [HumanMessage("hi"), AIMessage([summary]), HumanMessage("go")]
        >>> provider_compaction_start(history)
        1
    """
    for index in range(len(messages) - 1, -1, -1):
        if carries_provider_compaction(messages[index]):
            return index
    return None


def opens_with_thinking(message: BaseMessage) -> bool:
    """Whether the content of `message` starts with a `thinking` or `redacted_thinking` block."""
    content = message.content
    if not isinstance(content, list) or not content:
        return False
    first = content[0]
    return isinstance(first, Mapping) and first.get("type") in SIGNED_THINKING_TYPES


def reasoning_state(message: BaseMessage) -> tuple[Any, ...]:
    """Everything in `message` a provider checks when it comes back: blocks, then kwargs.

    Empty for a message that carries none. Two messages with equal state carry the same
    reasoning byte for byte.
    """
    if not isinstance(message, AIMessage):
        return ()
    kwargs = message.additional_kwargs
    named = tuple(
        (key, kwargs[key]) for key in (*_REASONING_KWARGS, GEMINI_SIGNATURES_KEY) if kwargs.get(key)
    )
    return (*reasoning_blocks(message), *named)


def carries_reasoning(message: BaseMessage) -> bool:
    """Whether `message` holds reasoning state a provider wants back with it, unchanged."""
    return bool(reasoning_state(message))


def tool_loop_opening(messages: Sequence[BaseMessage], end: int | None = None) -> int | None:
    """The assistant message that opens the tool loop `messages[:end]` ends in, if it does.

    The loop runs from the first assistant message after the last user message to the
    tool results at the end; Anthropic reads it as one assistant turn. System messages
    at the end do not end it: every profile moves them to the front.
    """
    end = len(messages) if end is None else end
    while end > 0 and isinstance(messages[end - 1], SystemMessage):
        end -= 1
    if end == 0 or not isinstance(messages[end - 1], ToolMessage):
        return None
    opening = None
    for index in range(end - 1, -1, -1):
        message = messages[index]
        if isinstance(message, HumanMessage):
            break
        if isinstance(message, AIMessage):
            opening = index
    return opening


def thinking_tool_loop_start(messages: Sequence[BaseMessage], end: int | None = None) -> int | None:
    """Where the tool loop `messages[:end]` ends in starts, when it starts with thinking.

    Anthropic wants that loop's opening message, thinking block first, with the rest of the
    loop: a cut keeps the messages from this index on together, or drops them all
    (`SummarizationMiddleware` cuts inside it, langchain-ai/langchain#34794).

    The user turns governance added (for alternation) do not end the agent's tool loop: a
    request governed again, in which the provider rules added such turns inside a loop, is
    cut as its history was. A response without tool calls ends the turn before the loop
    (the user turn after it opens a new one). An opening whose thinking governance left
    out (its prefix had changed) still opens a thinking loop, for the same reason.

    Example:
        >>> from langchain_core.messages import HumanMessage, ToolMessage
        >>> thinking = {"type": "thinking", "thinking": "Read it.", "signature": "EqQB"}
        >>> call = {"name": "read_file", "args": {}, "id": "toolu_1"}
        >>> thinking_tool_loop_start(
        ...     [HumanMessage("go"), AIMessage([thinking], tool_calls=[call]),
        ...      ToolMessage("text", tool_call_id="toolu_1")]
        ... )
        1
    """
    end = len(messages) if end is None else end
    first = tool_loop_opening(messages, end)
    if first is None or not _led_by_thinking(messages[first]):
        return None
    opening = None
    for index in range(end - 1, -1, -1):
        message = messages[index]
        if isinstance(message, HumanMessage) and added_kind(message) != "user-turn":
            break
        if isinstance(message, AIMessage):
            if opening is not None and not declared_tool_call_ids(message):
                break
            opening = index
    return opening if opening is not None and _led_by_thinking(messages[opening]) else None


def _led_by_thinking(message: BaseMessage) -> bool:
    """Whether `message` opens with a thinking block, or did before governance left it out."""
    return opens_with_thinking(message) or reasoning_left_out(message)
