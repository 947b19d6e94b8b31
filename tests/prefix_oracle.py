"""An independent prefix check of signed thinking, on what langchain-anthropic puts on the wire.

Anthropic's models with preserved thinking bind each `thinking` and `redacted_thinking`
block to what preceded it when the block was made: the top-level `system`, the `tools`
and every message before the block (platform.claude.com/docs/en/build-with-claude/
preserved-thinking/prefix-checks). The documented rules this oracle applies:

- `cache_control` markers are left out of the comparison, wherever they are;
- earlier thinking blocks are not compared as content, but the thinking blocks sent before
  a block must be those it was made after, less a leading run (the oldest first): "Removing
  a leading run of thinking blocks, oldest first ... Removing a thinking block from anywhere
  else invalidates every thinking block after it" (build-with-claude/thinking, "Only in the
  conversation that produced it");
- after a `compaction` block the checked prefix starts at that block ("After a compaction,
  the checked prefix starts from the compaction block").

It works on `_format_messages` of langchain-anthropic (the body the real client sends),
never on the package's own view of a message. A replay records, for every response, the
request it was made from (`PrefixOracle.made_from`); `PrefixOracle.check` then judges every
signed block of a later request.

Example:
    >>> from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    >>> oracle = PrefixOracle()
    >>> call = {"name": "read_file", "args": {}, "id": "toolu_1"}
    >>> first = [HumanMessage("read a.py")]
    >>> reply = AIMessage([thinking_block("s1"), tool_use(call)], tool_calls=[call])
    >>> oracle.made_from(first, reply)
    >>> later = [*first, reply, ToolMessage("print(1)", tool_call_id="toolu_1")]
    >>> oracle.check(later).invalid
    ()
    >>> edited = [HumanMessage("read b.py"), *later[1:]]
    >>> oracle.check(edited).invalid
    ('s1',)
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_anthropic.chat_models import _format_messages
from langchain_core.messages import AIMessage, BaseMessage
from langchain_openai.chat_models.base import _construct_responses_api_input

__all__ = [
    "OracleVerdict",
    "PrefixOracle",
    "WireRequest",
    "openai_wire_request",
    "thinking_block",
    "tool_use",
    "wire_request",
]

_THINKING = ("thinking", "redacted_thinking", "reasoning")


def thinking_block(signature: str, text: str = "") -> dict[str, Any]:
    """A thinking block as langchain-anthropic keeps it on an `AIMessage`."""
    return {"signature": signature, "thinking": text, "type": "thinking"}


def tool_use(call: Mapping[str, Any]) -> dict[str, Any]:
    """The `tool_use` block of a call, as langchain-anthropic keeps it."""
    return {
        "id": call["id"],
        "input": call["args"],
        "name": call["name"],
        "type": "tool_use",
        "toolset_name": None,
    }


@dataclass(frozen=True)
class WireRequest:
    """What langchain-anthropic sends for a request: `system`, `tools`, `messages`."""

    system: Any
    tools: Any
    messages: list[dict[str, Any]]


def wire_request(messages: Sequence[BaseMessage], tools: Any = None) -> WireRequest:
    """The body langchain-anthropic builds for `messages` (`_format_messages`)."""
    system, formatted = _format_messages(list(messages), model=None)
    return WireRequest(system, tools, formatted)


def openai_wire_request(messages: Sequence[BaseMessage], tools: Any = None) -> WireRequest:
    """The input langchain-openai builds for `messages` on the Responses API, each item as
    a message of one block (`_construct_responses_api_input`)."""
    items = _construct_responses_api_input(list(messages))
    return WireRequest(None, tools, [_as_message(item) for item in items])


def body_request(body: Mapping[str, Any]) -> WireRequest:
    """A request body a real client sent (Anthropic's Messages API or OpenAI's Responses)."""
    if "input" in body:
        items = body["input"]
        return WireRequest(
            body.get("instructions"), body.get("tools"), list(map(_as_message, items))
        )
    return WireRequest(body.get("system"), body.get("tools"), list(body["messages"]))


def _as_message(item: Mapping[str, Any]) -> dict[str, Any]:
    return {"role": str(item.get("role") or item.get("type")), "content": [dict(item)]}


def _block_key(block: Mapping[str, Any]) -> str:
    return str(
        block.get("signature")
        or block.get("data")
        or block.get("encrypted_content")
        or block.get("id")
    )


def _blocks(message: Mapping[str, Any]) -> list[Any]:
    content = message.get("content")
    if isinstance(content, list):
        return content
    return [] if content in ("", None) else [{"type": "text", "text": content}]


def _without_cache_control(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _without_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_without_cache_control(item) for item in value]
    return value


def _compared(blocks: Sequence[Any]) -> str:
    """Blocks as the check compares them: without thinking, without `cache_control`."""
    kept = [
        block
        for block in blocks
        if not (isinstance(block, Mapping) and block.get("type") in _THINKING)
    ]
    return json.dumps(_without_cache_control(kept), sort_keys=True, default=str)


@dataclass(frozen=True)
class _Position:
    message: int
    block: int


def _checked_start(request: WireRequest) -> int:
    """The first message of the checked prefix: the newest one opening with `compaction`."""
    start = 0
    for index, message in enumerate(request.messages):
        blocks = _blocks(message)
        if any(isinstance(b, Mapping) and b.get("type") == "compaction" for b in blocks):
            start = index
    return start


@dataclass(frozen=True)
class _Prefix:
    """What a thinking block was made after, in the form the check compares."""

    system: str
    tools: str
    # Each earlier message (from the checked start) without its thinking blocks, by role.
    messages: tuple[tuple[str, str], ...]
    # The message the block is in, up to the block, without thinking.
    own: tuple[str, str]
    # The thinking blocks before it, oldest first.
    thinking: tuple[str, ...]


def _prefix_at(request: WireRequest, position: _Position) -> _Prefix:
    start = _checked_start(request)
    earlier = request.messages[start : position.message]
    own = request.messages[position.message]
    own_blocks = _blocks(own)[: position.block]
    thinking = [
        _block_key(block)
        for message in earlier
        for block in _blocks(message)
        if isinstance(block, Mapping) and block.get("type") in _THINKING
    ]
    thinking += [
        _block_key(block)
        for block in own_blocks
        if isinstance(block, Mapping) and block.get("type") in _THINKING
    ]
    return _Prefix(
        system=json.dumps(_without_cache_control(request.system), sort_keys=True, default=str),
        tools=json.dumps(_without_cache_control(request.tools), sort_keys=True, default=str),
        messages=tuple((m["role"], _compared(_blocks(m))) for m in earlier),
        own=(own["role"], _compared(own_blocks)),
        thinking=tuple(thinking),
    )


def _thinking_positions(request: WireRequest) -> Iterator[tuple[str, _Position]]:
    for index, message in enumerate(request.messages):
        for offset, block in enumerate(_blocks(message)):
            if isinstance(block, Mapping) and block.get("type") in _THINKING:
                yield _block_key(block), _Position(index, offset)


@dataclass(frozen=True)
class OracleVerdict:
    """The signed blocks of a request (by signature), as the prefix check would judge them.

    `unknown` are blocks the oracle never saw made (no `made_from` for their response).
    """

    valid: tuple[str, ...] = ()
    invalid: tuple[str, ...] = ()
    unknown: tuple[str, ...] = ()


@dataclass
class PrefixOracle:
    """The prefix each signed block was made after, and the check of later requests.

    `openai`: judge OpenAI reasoning items on the Responses API input langchain-openai
    builds, by the same rules (OpenAI documents that reasoning items after a prefix change
    are dropped, not what a change is: the oracle holds them to Anthropic's rules).
    """

    tools: Any = None
    openai: bool = False
    _made_after: dict[str, _Prefix] = field(default_factory=dict)

    def _wire(self, messages: Sequence[BaseMessage]) -> WireRequest:
        if self.openai:
            return openai_wire_request(messages, self.tools)
        return wire_request(messages, self.tools)

    def made_from(self, request: Sequence[BaseMessage], response: AIMessage) -> None:
        """Record that `response` was the model's answer to `request`."""
        self._record(self._wire([*request, response]), self._wire(request))

    def made_from_body(self, body: Mapping[str, Any], response: AIMessage) -> None:
        """Record that `response` answered the request a real client sent as `body`."""
        sent = body_request(body)
        answer = self._wire([response]).messages
        self._record(WireRequest(sent.system, sent.tools, [*sent.messages, *answer]), sent)

    def _record(self, wire: WireRequest, request: WireRequest) -> None:
        """The blocks of `wire` the request did not send are the answer's (an answer the
        client joins to an assistant message before it, as after a compaction block,
        included)."""
        sent = {key for key, _ in _thinking_positions(request)}
        for key, position in _thinking_positions(wire):
            if key not in sent:
                self._made_after[key] = _prefix_at(wire, position)

    def check(self, request: Sequence[BaseMessage]) -> OracleVerdict:
        """Judge every signed block `request` sends."""
        return self.check_wire(self._wire(request))

    def check_body(self, body: Mapping[str, Any]) -> OracleVerdict:
        """Judge every signed block of a body a real client sent."""
        return self.check_wire(body_request(body))

    def check_wire(self, wire: WireRequest) -> OracleVerdict:
        """Judge every signed block of `wire`."""
        valid: list[str] = []
        invalid: list[str] = []
        unknown: list[str] = []
        for key, position in _thinking_positions(wire):
            made_after = self._made_after.get(key)
            if made_after is None:
                unknown.append(key)
            elif _still_valid(made_after, _prefix_at(wire, position)):
                valid.append(key)
            else:
                invalid.append(key)
        return OracleVerdict(tuple(valid), tuple(invalid), tuple(unknown))


def _still_valid(made_after: _Prefix, now: _Prefix) -> bool:
    if (made_after.system, made_after.tools) != (now.system, now.tools):
        return False
    if (made_after.messages, made_after.own) != (now.messages, now.own):
        return False
    # Only a leading run of the earlier thinking blocks may be missing.
    sent = now.thinking
    return (
        len(sent) <= len(made_after.thinking)
        and made_after.thinking[len(made_after.thinking) - len(sent) :] == sent
    )
