"""Where an assistant message keeps its tool calls, read and renamed in one place.

A call is declared in `tool_calls` or `invalid_tool_calls`, or only as an Anthropic
`tool_use` content block. Reasoning clients keep more per call: langchain-openai's
`function_call` items (with `call_id`) and its call-id map, langchain-google-genai's
thought signatures, both keyed by the call id. A call renamed in one place and not the
others would reach the provider as two calls, or lose its signature.

Example:
    >>> from langchain_core.messages import AIMessage
    >>> message = AIMessage(
    ...     "",
    ...     tool_calls=[{"name": "grep", "args": {}, "id": "c.1"}],
    ...     additional_kwargs={"__gemini_function_call_thought_signatures__": {"c.1": "sig"}},
    ... )
    >>> renamed = with_renamed_calls(message, {"c.1": "c1"})
    >>> renamed.tool_calls[0]["id"], renamed.additional_kwargs
    ('c1', {'__gemini_function_call_thought_signatures__': {'c1': 'sig'}})
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from langchain_context_governance._reasoning import (
    GEMINI_SIGNATURES_KEY,
    OPENAI_FUNCTION_CALL_IDS_KEY,
)

__all__ = [
    "call_key",
    "ids_in_request",
    "raw_call_ids",
    "renamed_block",
    "renamed_kwargs",
    "tool_use_blocks",
    "with_renamed_calls",
]

Content = str | list[str | dict[str, Any]]
# additional_kwargs entries keyed by call id.
_PER_CALL_KWARGS = (OPENAI_FUNCTION_CALL_IDS_KEY, GEMINI_SIGNATURES_KEY)


def tool_use_blocks(content: Content) -> list[dict[str, Any]]:
    """The Anthropic `tool_use` blocks of a message content."""
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_use"]


def raw_call_ids(message: AIMessage) -> list[str | None]:
    """Every call id as written: duplicates and missing ids included."""
    calls = [*message.tool_calls, *message.invalid_tool_calls, *tool_use_blocks(message.content)]
    return [call.get("id") for call in calls]


def call_key(call: Mapping[str, Any]) -> str:
    """What a call without an id is known by: its tool name and arguments."""
    arguments = json.dumps(call.get("args"), sort_keys=True, default=str)
    return f"{call.get('name') or ''}({arguments})"


def ids_in_request(messages: list[BaseMessage]) -> set[str]:
    """Every call id declared or answered in `messages`."""
    ids: set[str] = set()
    for message in messages:
        if isinstance(message, ToolMessage):
            ids.add(message.tool_call_id)
        elif isinstance(message, AIMessage):
            ids.update(call_id for call_id in raw_call_ids(message) if call_id)
    return ids


def renamed_block(block: str | dict[str, Any], renamed: Mapping[str, str]) -> str | dict[str, Any]:
    """A `tool_use` or OpenAI `function_call` block with its call id renamed by `renamed`."""
    if not isinstance(block, dict):
        return block
    key = {"tool_use": "id", "function_call": "call_id"}.get(str(block.get("type")))
    if key is None or block.get(key) not in renamed:
        return block
    return {**block, key: renamed[block[key]]}


def renamed_kwargs(kwargs: dict[str, Any], renamed: Mapping[str, str]) -> dict[str, Any]:
    """`additional_kwargs` with the keys of its per-call maps renamed by `renamed`."""
    updated = dict(kwargs)
    for name in _PER_CALL_KWARGS:
        per_call = kwargs.get(name)
        if isinstance(per_call, dict) and renamed.keys() & per_call.keys():
            updated[name] = {renamed.get(key, key): value for key, value in per_call.items()}
    return updated


def with_renamed_calls(message: AIMessage, renamed: Mapping[str, str]) -> AIMessage:
    """`message` with every call id in `renamed` renamed wherever the message keeps it:
    its calls, its `tool_use` and OpenAI `function_call` blocks, and the per-call maps of
    `additional_kwargs`."""

    def rename(call: Mapping[str, Any]) -> dict[str, Any]:
        call_id = call.get("id")
        if isinstance(call_id, str) and call_id in renamed:
            return {**call, "id": renamed[call_id]}
        return dict(call)

    content = message.content
    if isinstance(content, list):
        content = [renamed_block(block, renamed) for block in content]
    update = {
        "tool_calls": [rename(call) for call in message.tool_calls],
        "invalid_tool_calls": [rename(call) for call in message.invalid_tool_calls],
        "content": content,
        "additional_kwargs": renamed_kwargs(message.additional_kwargs, renamed),
    }
    return message.model_copy(update=update)
