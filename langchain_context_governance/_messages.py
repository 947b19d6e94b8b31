"""Small read-only helpers over langchain-core messages, shared by the passes.

Nothing here mutates a message: helpers either read one or build a new one.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator, Sequence
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_messages,
)
from langchain_core.messages.utils import MessageLikeRepresentation

__all__ = [
    "as_message_list",
    "content_fingerprint",
    "content_text_length",
    "declared_tool_call_ids",
    "has_tool_calls",
    "is_assistant",
    "is_system",
    "is_tool_result",
    "is_user",
    "iter_declared_tool_calls",
    "message_fingerprint",
    "tool_names_by_call_id",
]


def as_message_list(messages: Sequence[MessageLikeRepresentation]) -> list[BaseMessage]:
    """Return a new list of BaseMessage objects; the input is never returned itself.

    BaseMessage objects are taken as they are (no copy); anything else goes through
    `langchain_core.messages.convert_to_messages`, whose errors name what is wrong.
    """
    if isinstance(messages, (str, bytes)):
        raise TypeError("messages must be a sequence of messages, not a single string")
    items = list(messages)
    if all(map(isinstance, items, itertools.repeat(BaseMessage))):
        return items  # type: ignore[return-value]
    converted: list[BaseMessage] = []
    for index, item in enumerate(items):
        if isinstance(item, BaseMessage):
            converted.append(item)
            continue
        try:
            converted.extend(convert_to_messages([item]))
        except (ValueError, TypeError, NotImplementedError, KeyError) as error:
            raise ValueError(
                f"message {index} cannot be read as a chat message: {error}"
            ) from error
    return converted


def is_system(message: BaseMessage) -> bool:
    return isinstance(message, SystemMessage)


def is_user(message: BaseMessage) -> bool:
    return isinstance(message, HumanMessage)


def is_assistant(message: BaseMessage) -> bool:
    return isinstance(message, AIMessage)


def is_tool_result(message: BaseMessage) -> bool:
    return isinstance(message, ToolMessage)


def iter_declared_tool_calls(message: AIMessage) -> Iterator[tuple[str, str]]:
    """Yield (id, tool name) for every tool call an assistant message declares.

    A provider sees a call from three places: `tool_calls`, `invalid_tool_calls`
    (langchain-openai sends them as tool calls too) and Anthropic `tool_use` content
    blocks. Each id is yielded once; calls without an id cannot be answered and are
    skipped.
    """
    seen: set[str] = set()
    for call in message.tool_calls:
        call_id = call.get("id")
        if call_id and call_id not in seen:
            seen.add(call_id)
            yield call_id, call.get("name") or ""
    for invalid in message.invalid_tool_calls:
        call_id = invalid.get("id")
        if call_id and call_id not in seen:
            seen.add(call_id)
            yield call_id, invalid.get("name") or ""
    if isinstance(message.content, list):
        for block in message.content:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                call_id = block.get("id")
                if isinstance(call_id, str) and call_id and call_id not in seen:
                    seen.add(call_id)
                    yield call_id, str(block.get("name") or "")


def declared_tool_call_ids(message: BaseMessage) -> list[str]:
    """Ids of the tool calls an assistant message declares; empty for other messages."""
    if not isinstance(message, AIMessage):
        return []
    return [call_id for call_id, _ in iter_declared_tool_calls(message)]


def tool_names_by_call_id(messages: Sequence[BaseMessage]) -> dict[str, str]:
    """Map each declared tool-call id to its tool name."""
    names: dict[str, str] = {}
    for message in messages:
        if isinstance(message, AIMessage) and (
            message.tool_calls or message.invalid_tool_calls or isinstance(message.content, list)
        ):
            for call_id, name in iter_declared_tool_calls(message):
                names.setdefault(call_id, name)
    return names


def content_text_length(content: str | list[str | dict[str, Any]]) -> int:
    """Characters of text in a message content; image and file blocks count as zero."""
    if isinstance(content, str):
        return len(content)
    total = 0
    for block in content:
        if isinstance(block, str):
            total += len(block)
        elif isinstance(block, dict) and block.get("type") == "text":
            text = block.get("text")
            if isinstance(text, str):
                total += len(text)
    return total


def has_tool_calls(message: BaseMessage) -> bool:
    """True when an assistant message declares at least one answerable tool call."""
    if not isinstance(message, AIMessage):
        return False
    if message.tool_calls or message.invalid_tool_calls:
        return any(True for _ in iter_declared_tool_calls(message))
    if isinstance(message.content, list):
        return any(True for _ in iter_declared_tool_calls(message))
    return False


def _json_key(value: object) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def content_fingerprint(message: BaseMessage) -> int:
    """A hash of everything a token counter reads from `message`, the same for equal copies.

    A message reloaded from a checkpoint is a new object with the same fields, so it has
    the same fingerprint; a copy with other content does not. A string's hash is cached
    by Python on the string, so an unchanged message is fingerprinted in constant time.
    """
    content = message.content
    content_key = content if isinstance(content, str) else _json_key(content)
    calls_key = ""
    if isinstance(message, AIMessage) and (message.tool_calls or message.invalid_tool_calls):
        calls_key = _json_key([message.tool_calls, message.invalid_tool_calls])
    extra_key = _json_key(message.additional_kwargs) if message.additional_kwargs else ""
    call_id = message.tool_call_id if isinstance(message, ToolMessage) else None
    return hash((message.type, message.name, call_id, content_key, calls_key, extra_key))


def message_fingerprint(message: BaseMessage) -> int:
    """`content_fingerprint` plus the message id: what tells two history entries apart."""
    return hash((content_fingerprint(message), message.id))
