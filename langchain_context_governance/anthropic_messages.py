"""Anthropic Messages API request bodies to LangChain messages and back.

A body holds ``system`` (a string or text blocks) and ``messages`` of two roles: an
assistant turn carries ``tool_use`` blocks, and the next user turn starts with the
``tool_result`` blocks that answer them (Anthropic's "Tool use" guide, "Handling tool use
and tool result content blocks"). In LangChain a tool use is an entry of
``AIMessage.tool_calls`` and a result is a `ToolMessage`, which is what the governor's
passes read, so reading splits a user turn into its results and the rest, and writing
joins them again: ``anthropic_body(*messages_from_anthropic(body))`` gives back ``body``.

Example:
    >>> body = {"system": "Be brief.", "messages": [{"role": "user", "content": "hi"}]}
    >>> messages, rest = messages_from_anthropic(body)
    >>> [m.type for m in messages], rest
    (['system', 'human'], {})
    >>> anthropic_body(messages, rest) == body
    True
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
)
from langchain_core.messages.tool import tool_call

__all__ = [
    "AnthropicBody",
    "AnthropicFormatError",
    "anthropic_body",
    "legal_prefill",
    "looks_like_anthropic",
    "messages_from_anthropic",
    "read_anthropic_body",
]

ANTHROPIC_ONLY_BLOCK_TYPES = frozenset({"tool_use", "tool_result"})


class AnthropicFormatError(ValueError):
    """A message of the body cannot be read; `index` names it (None for the body)."""

    def __init__(self, problem: str, *, index: int | None = None) -> None:
        self.index = index
        super().__init__(problem)


def looks_like_anthropic(body: Mapping[str, Any]) -> bool:
    """True for a request body only Anthropic's API uses: a top-level ``system``, tools
    with ``input_schema``, or ``tool_use`` / ``tool_result`` blocks."""
    if "system" in body:
        return True
    tools = body.get("tools")
    if isinstance(tools, list) and any(
        isinstance(tool, dict) and "input_schema" in tool for tool in tools
    ):
        return True
    records = body.get("messages")
    return isinstance(records, list) and any(
        isinstance(record, dict)
        and isinstance(record.get("content"), list)
        and any(_block_type(block) in ANTHROPIC_ONLY_BLOCK_TYPES for block in record["content"])
        for record in records
    )


@dataclass(frozen=True)
class AnthropicBody:
    """A body read as LangChain messages.

    `turns` gives each message the number of the body's message it came from (None for
    the system prompt): a user turn's tool results and text become several messages,
    and errors and violations name the body's own numbering.
    """

    messages: list[BaseMessage]
    rest: dict[str, Any]
    turns: list[int | None]


def read_anthropic_body(body: Mapping[str, Any]) -> AnthropicBody:
    """The body's system prompt and messages as LangChain messages, with their turn numbers.

    Example:
        >>> body = {"messages": [
        ...     {"role": "user", "content": "weather?"},
        ...     {"role": "assistant", "content": [
        ...         {"type": "tool_use", "id": "t1", "name": "weather", "input": {}}]},
        ...     {"role": "user", "content": [
        ...         {"type": "tool_result", "tool_use_id": "t1", "content": "18C"},
        ...         {"type": "text", "text": "and tomorrow?"}]},
        ... ]}
        >>> read = read_anthropic_body({"system": "Be brief.", **body})
        >>> [m.type for m in read.messages], read.turns
        (['system', 'human', 'ai', 'tool', 'human'], [None, 0, 1, 2, 2])
    """
    rest = {key: value for key, value in body.items() if key not in ("system", "messages")}
    messages: list[BaseMessage] = []
    turns: list[int | None] = []
    if "system" in body:
        messages.append(SystemMessage(content=_system_content(body["system"])))
        turns.append(None)
    records = body.get("messages")
    if not isinstance(records, list):
        raise AnthropicFormatError("'messages' must be a JSON array")
    for index, record in enumerate(records):
        try:
            read = _read_turn(record)
        except AnthropicFormatError as error:
            raise AnthropicFormatError(str(error), index=index) from error
        messages.extend(read)
        turns.extend([index] * len(read))
    return AnthropicBody(messages, rest, turns)


def messages_from_anthropic(body: Mapping[str, Any]) -> tuple[list[BaseMessage], dict[str, Any]]:
    """The body's system prompt and messages as LangChain messages, and its other keys."""
    read = read_anthropic_body(body)
    return read.messages, read.rest


def legal_prefill(messages: Sequence[BaseMessage], rest: Mapping[str, Any]) -> AIMessage | None:
    """The body's final assistant turn where the Messages API takes it as a prefill.

    Claude continues a final assistant turn ("Prefill Claude's response") when it is
    text only, does not end in whitespace (the API refuses "final assistant content
    cannot end with trailing whitespace") and extended thinking is off (a prefill
    cannot follow thinking). Some models take no prefill at all (Claude Opus 4.6 answers
    400); the body's model is not looked up here.

    Example:
        >>> legal_prefill([HumanMessage("JSON please"), AIMessage("{")], {}).content
        '{'
        >>> legal_prefill([HumanMessage("JSON please"), AIMessage("{ ")], {}) is None
        True
    """
    if len(messages) < 2 or not isinstance(messages[-1], AIMessage):
        return None
    final = messages[-1]
    thinking = rest.get("thinking")
    if isinstance(thinking, Mapping) and thinking.get("type") != "disabled":
        return None
    if final.tool_calls or final.invalid_tool_calls:
        return None
    content = final.content
    if isinstance(content, str):
        text = content
    elif all(_block_type(block) == "text" for block in content):
        text = "".join(str(block.get("text", "")) for block in content if isinstance(block, dict))
    else:
        return None
    if not text or text != text.rstrip():
        return None
    return final


def _system_content(system: Any) -> str | list[str | dict[str, Any]]:
    if isinstance(system, str):
        return system
    if isinstance(system, list) and all(_block_type(block) == "text" for block in system):
        return list(system)
    raise AnthropicFormatError("'system' must be a string or a list of text blocks")


def _read_turn(record: Any) -> list[BaseMessage]:
    if not isinstance(record, dict):
        raise AnthropicFormatError("expected a JSON object with 'role' and 'content'")
    role, content = record.get("role"), record.get("content")
    if role not in ("user", "assistant"):
        raise AnthropicFormatError(f"role must be 'user' or 'assistant', got {role!r}")
    if isinstance(content, str):
        return [HumanMessage(content) if role == "user" else AIMessage(content)]
    if not isinstance(content, list) or not all(_block_type(b) for b in content):
        raise AnthropicFormatError("content must be a string or a list of typed blocks")
    if role == "assistant":
        return [_assistant_message(content)]
    results = [_tool_message(block) for block in content if _block_type(block) == "tool_result"]
    others = [block for block in content if _block_type(block) != "tool_result"]
    return [*results, *([HumanMessage(content=others)] if others else [])]


def _assistant_message(content: list[dict[str, Any]]) -> AIMessage:
    calls: list[ToolCall] = []
    kept: list[str | dict[str, Any]] = []
    for block in content:
        if block["type"] != "tool_use":
            kept.append(block)
            continue
        name, call_id, arguments = block.get("name"), block.get("id"), block.get("input", {})
        if not isinstance(name, str) or not isinstance(call_id, str):
            raise AnthropicFormatError("a tool_use block needs a string 'id' and 'name'")
        if not isinstance(arguments, dict):
            raise AnthropicFormatError(f"tool_use {call_id}: 'input' must be a JSON object")
        calls.append(tool_call(name=name, args=arguments, id=call_id))
    return AIMessage(content=kept, tool_calls=calls)


def _tool_message(block: dict[str, Any]) -> ToolMessage:
    call_id = block.get("tool_use_id")
    if not isinstance(call_id, str) or not call_id:
        raise AnthropicFormatError("a tool_result block needs a 'tool_use_id'")
    content = block.get("content", "")
    if not isinstance(content, (str, list)):
        raise AnthropicFormatError(f"tool_result {call_id}: content must be a string or blocks")
    status = "error" if block.get("is_error") else "success"
    return ToolMessage(content=content, tool_call_id=call_id, status=status)


def _block_type(block: Any) -> str | None:
    kind = block.get("type") if isinstance(block, dict) else None
    return kind if isinstance(kind, str) else None


def anthropic_body(messages: Sequence[BaseMessage], rest: Mapping[str, Any]) -> dict[str, Any]:
    """A request body of `rest` plus `messages`; results and user text share a user turn.

    Leading system messages become ``system``; ValueError names a message the Messages
    API cannot hold (a system message after the first turn).
    """
    body = dict(rest)
    leading = 0
    while leading < len(messages) and isinstance(messages[leading], SystemMessage):
        leading += 1
    if leading:
        body["system"] = _joined_system(messages[:leading])
    turns: list[dict[str, Any]] = []
    for index, message in enumerate(messages[leading:], start=leading):
        role, blocks = _turn_of(index, message)
        if turns and turns[-1]["role"] == role == "user" and _is_results_turn(turns[-1]):
            turns[-1]["content"] = [*turns[-1]["content"], *_as_blocks(blocks)]
        else:
            turns.append({"role": role, "content": blocks})
    body["messages"] = turns
    return body


def _joined_system(systems: Sequence[BaseMessage]) -> str | list[Any]:
    if len(systems) == 1:
        return _copied(systems[0].content)
    return [block for system in systems for block in _as_blocks(_copied(system.content))]


def _turn_of(index: int, message: BaseMessage) -> tuple[str, str | list[Any]]:
    if isinstance(message, HumanMessage):
        return "user", _copied(message.content)
    if isinstance(message, ToolMessage):
        result: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": message.tool_call_id,
            "content": _copied(message.content),
        }
        if message.status == "error":
            result["is_error"] = True
        return "user", [result]
    if isinstance(message, AIMessage):
        uses = [
            {"type": "tool_use", "id": call["id"], "name": call["name"], "input": call["args"]}
            for call in message.tool_calls
        ] + _sent_invalid_calls(message)
        if not uses:
            return "assistant", _copied(message.content)
        text = _as_blocks(_copied(message.content))
        return "assistant", [block for block in text if _block_type(block) != "tool_use"] + uses
    raise ValueError(
        f"message {index}: a {message.type!r} message has no place in an Anthropic request "
        "(system messages only lead it)"
    )


def _sent_invalid_calls(message: AIMessage) -> list[dict[str, Any]]:
    """Calls whose arguments did not parse, as ChatAnthropic sends them: those with an id
    and a name, with the arguments that parse as an object, else none."""
    uses = []
    for invalid in message.invalid_tool_calls:
        call_id, name = invalid.get("id"), invalid.get("name")
        if not call_id or not name:
            continue
        try:
            arguments = json.loads(invalid.get("args") or "{}")
        except json.JSONDecodeError:
            arguments = {}
        uses.append(
            {
                "type": "tool_use",
                "id": call_id,
                "name": name,
                "input": arguments if isinstance(arguments, dict) else {},
            }
        )
    return uses


def _is_results_turn(turn: dict[str, Any]) -> bool:
    content = turn["content"]
    return isinstance(content, list) and all(
        _block_type(block) == "tool_result" for block in content
    )


def _as_blocks(content: str | list[Any]) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return [
        {"type": "text", "text": block} if isinstance(block, str) else block for block in content
    ]


def _copied(content: str | list[Any]) -> str | list[Any]:
    return content if isinstance(content, str) else list(content)
