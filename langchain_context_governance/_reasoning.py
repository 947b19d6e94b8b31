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

Governance treats all of it as part of its message: a message carrying it is never
merged into another, and its blocks are never edited, moved or dropped by a pass.

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

__all__ = [
    "GEMINI_SIGNATURES_KEY",
    "OPENAI_FUNCTION_CALL_IDS_KEY",
    "SIGNED_THINKING_TYPES",
    "carries_reasoning",
    "opens_with_thinking",
    "reasoning_blocks",
    "reasoning_state",
    "signed_thinking_blocks",
    "thinking_tool_loop_start",
    "tool_loop_opening",
]

# Anthropic's signed blocks.
SIGNED_THINKING_TYPES = frozenset({"thinking", "redacted_thinking"})
# Content blocks that hold reasoning state: Anthropic's, OpenAI's reasoning and function-call
# items, Gemini's signature sidecars.
_REASONING_BLOCK_TYPES = SIGNED_THINKING_TYPES | {
    "reasoning",
    "function_call",
    "function_call_signature",
}
# Where langchain-openai and langchain-google-genai keep per-call state, keyed by call id.
OPENAI_FUNCTION_CALL_IDS_KEY = "__openai_function_call_ids__"
GEMINI_SIGNATURES_KEY = "__gemini_function_call_thought_signatures__"
_REASONING_KWARGS = ("reasoning", "reasoning_content", OPENAI_FUNCTION_CALL_IDS_KEY)


def _carries_signature(block: Mapping[str, Any]) -> bool:
    extras = block.get("extras")
    return bool(
        block.get("thought_signature") or (isinstance(extras, Mapping) and extras.get("signature"))
    )


def _is_reasoning_block(block: Any) -> bool:
    if not isinstance(block, Mapping):
        return False
    return block.get("type") in _REASONING_BLOCK_TYPES or _carries_signature(block)


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
    opening = tool_loop_opening(messages, end)
    if opening is None or not opens_with_thinking(messages[opening]):
        return None
    return opening
