"""What is kept of a message that leaves a request, and the handle it is kept under.

An item is plain data (what a LangGraph `BaseStore` keeps as a value): a message's
readable text with a one-line description of it, or, for a cut, the handles of the
messages it left out. Its handle is a digest of the item itself, so the same history
gives the same handles on every worker, an item is written once however often it is
met (a result compacted, then cut, then met again by a worker taking the thread up),
and a handle says nothing about what it holds.

Example:
    >>> from langchain_core.messages import ToolMessage
    >>> item = result_item(ToolMessage("a.py\\nb.py", tool_call_id="c1"), "ls", {"path": "."})
    >>> item.value["about"], item.value["text"], len(item.handle)
    ('ls(path=".") result', 'a.py\\nb.py', 10)
    >>> result_item(ToolMessage("a.py\\nb.py", tool_call_id="c9"), "ls", {"path": "."}) == item
    True
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from langchain_context_governance._added import USER_PART, user_parts
from langchain_context_governance._messages import iter_declared_tool_calls, results_run_start

__all__ = [
    "BRIEF_ARGUMENTS_CHARACTERS",
    "HANDLE_CHARACTERS",
    "READ_CONTEXT",
    "OffloadItem",
    "answered_call",
    "brief_call",
    "called_result_item",
    "calls_by_id",
    "cut_item",
    "is_handle",
    "message_item",
    "readable_text",
    "result_item",
    "user_text_item",
]

# 10 base32 characters: 50 bits, so two items of one thread (a few thousand at most, see
# store.py) share a handle with a probability below one in 10^8, for about 6 tokens.
HANDLE_CHARACTERS = 10
_HANDLE = re.compile(rf"[a-z2-7]{{{HANDLE_CHARACTERS}}}")
# A call's arguments in a description: enough to tell two calls of one tool apart.
BRIEF_ARGUMENTS_CHARACTERS = 40
_WHITESPACE = re.compile(r"\s+")

# The name of the tool that reads an item back (tool.py).
READ_CONTEXT = "read_context"


@dataclass(frozen=True)
class OffloadItem:
    """What is kept under `handle`: `value`, a plain dict a store keeps as it is.

    A message item is `{"kind": "message", "role": ..., "about": ..., "text": ...}`; a
    cut item `{"kind": "cut", "about": ..., "parts": [handle, ...], "characters": n}`
    (the messages it left out, oldest first, each an item of its own).
    """

    handle: str
    value: dict[str, Any]

    @property
    def about(self) -> str:
        """The one line that says what the item holds."""
        return str(self.value["about"])

    @functools.cached_property
    def characters(self) -> int:
        """Characters of text the item reads back as (a cut: its messages' texts)."""
        if self.value["kind"] == "cut":
            return int(self.value["characters"])
        return len(self.value["text"])

    @property
    def size(self) -> int:
        """Bytes the item takes in a store, as counted against a thread's limit."""
        return len(json.dumps(self.value, ensure_ascii=False).encode())


def is_handle(text: object) -> bool:
    """Whether `text` has the shape of a handle (any other text names nothing).

    Example:
        >>> is_handle("k7f3q2m5xa"), is_handle("../index")
        (True, False)
    """
    return isinstance(text, str) and _HANDLE.fullmatch(text) is not None


def _handle_of(*fields: str) -> str:
    digest = hashlib.blake2b(digest_size=8)
    for field in fields:
        digest.update(field.encode("utf-8", "surrogatepass"))
        digest.update(b"\x00")
    return base64.b32encode(digest.digest()).decode("ascii").lower()[:HANDLE_CHARACTERS]


def _message(role: str, about: str, text: str) -> OffloadItem:
    value = {"kind": "message", "role": role, "about": about, "text": text}
    return OffloadItem(_handle_of("message", role, about, text), value)


def cut_item(parts: Sequence[OffloadItem]) -> OffloadItem:
    """The item of a cut: the handles of the messages it left out (oldest first).

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> cut = cut_item([message_item(HumanMessage("deploy to staging"))])
        >>> cut.about, cut.characters
        ('1 omitted message', 17)
    """
    count = len(parts)
    about = f"{count:,} omitted message" + ("s" if count != 1 else "")
    handles = [part.handle for part in parts]
    characters = sum(part.characters for part in parts)
    value = {"kind": "cut", "about": about, "parts": handles, "characters": characters}
    return OffloadItem(_handle_of("cut", *handles), value)


def _text_of_blocks(blocks: Iterable[Any]) -> str:
    texts: list[str] = []
    for block in blocks:
        if isinstance(block, str):
            texts.append(block)
        elif isinstance(block, dict) and block.get("type") == "text":
            text = block.get("text")
            texts.append(text if isinstance(text, str) else "")
        elif isinstance(block, dict):
            # Images and files are not text: the transcript says one was there.
            texts.append(f"[{block.get('type', 'non-text')} block]")
    return "\n".join(texts)


def readable_text(message: BaseMessage) -> str:
    """The text of `message` as a transcript shows it: its text blocks, a line for each
    other block, and an assistant message's tool calls with their arguments; a user
    message joined by governance shows the user's own words only."""
    if isinstance(message, HumanMessage):
        text = _text_of_blocks(
            block for blocks, kind in user_parts(message) if kind == USER_PART for block in blocks
        )
    else:
        content = message.content
        text = content if isinstance(content, str) else _text_of_blocks(content)
    if isinstance(message, AIMessage):
        calls = [
            f"{call['name']}({_json(call.get('args', {}))})"
            for call in message.tool_calls
            if call.get("name")
        ]
        text = "\n".join(part for part in (text, *calls) if part)
    return text


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def brief_call(name: str, args: Any, *, limit: int | None = BRIEF_ARGUMENTS_CHARACTERS) -> str:
    """`name(arguments)` on one line, the arguments cut to `limit` characters (None: whole).

    Example:
        >>> brief_call("bash", {"command": "pytest -q tests/unit_tests"})
        'bash(command="pytest -q tests/unit_tests")'
        >>> brief_call("write", {"path": "a.py", "text": "x" * 100})
        'write(path="a.py", text="xxxxxxxxxxxxxxxxxxxx…)'
    """
    if isinstance(args, dict):
        shown = ", ".join(f"{key}={_json(value)}" for key, value in args.items())
    elif args is None:
        shown = ""
    else:
        shown = str(args)
    shown = _WHITESPACE.sub(" ", shown).strip()
    if limit is not None and len(shown) > limit:
        shown = shown[: limit - 1] + "…"
    return f"{name or 'tool'}({shown})"


def result_item(message: ToolMessage, tool_name: str, args: Any) -> OffloadItem:
    """The item of a tool result of a call of `tool_name` with `args`. A result of
    `read_context` is not kept a second time: its item says which call reads it."""
    if tool_name == READ_CONTEXT:
        call = brief_call(tool_name, args, limit=None)
        return _message("tool", f"{call} result", f"[Not kept again: {call} reads it.]")
    return _message("tool", f"{brief_call(tool_name, args)} result", readable_text(message))


def user_text_item(text: str) -> OffloadItem:
    """The item of a user's words (a whole message, or one turn of a joined one)."""
    return _message("user", "user message", text)


def message_item(message: BaseMessage, tool_name: str = "", args: Any = None) -> OffloadItem:
    """The item of any message; a tool result's call is `tool_name` with `args`."""
    if isinstance(message, ToolMessage):
        return result_item(message, tool_name, args)
    if isinstance(message, HumanMessage):
        return user_text_item(readable_text(message))
    if isinstance(message, AIMessage):
        names = ", ".join(dict.fromkeys(call["name"] for call in message.tool_calls))
        about = f"assistant message calling {names}" if names else "assistant message"
        return _message("assistant", about, readable_text(message))
    return _message(message.type, f"{message.type} message", readable_text(message))


def _declared_args(message: AIMessage, call_id: str) -> tuple[str, Any] | None:
    for call in message.tool_calls:
        if call.get("id") == call_id:
            return call.get("name") or "", call.get("args")
    for invalid in message.invalid_tool_calls:
        if invalid.get("id") == call_id:
            return invalid.get("name") or "", invalid.get("args")
    if isinstance(message.content, list):
        for block in message.content:
            if (
                isinstance(block, dict)
                and block.get("type") == "tool_use"
                and block.get("id") == call_id
            ):
                return str(block.get("name") or ""), block.get("input")
    return None


def answered_call(messages: Sequence[BaseMessage], index: int) -> tuple[str, Any]:
    """The tool name and arguments of the call the result at `index` answers, where the
    result follows its call's assistant message (and the results before it); ("", None)
    where it does not."""
    result = messages[index]
    assert isinstance(result, ToolMessage)
    head = results_run_start(messages, index) - 1
    if head >= 0:
        call = messages[head]
        if isinstance(call, AIMessage):
            found = _declared_args(call, result.tool_call_id)
            if found is not None:
                return result.name or found[0], found[1]
    return result.name or "", None


def calls_by_id(messages: Sequence[BaseMessage]) -> dict[str, tuple[str, Any]]:
    """The tool name and arguments of every declared call of `messages`, by call id."""
    calls: dict[str, tuple[str, Any]] = {}
    for message in messages:
        if isinstance(message, AIMessage):
            for call_id, name in iter_declared_tool_calls(message):
                calls.setdefault(call_id, _declared_args(message, call_id) or (name, None))
    return calls


def called_result_item(message: ToolMessage, calls: dict[str, tuple[str, Any]]) -> OffloadItem:
    """`result_item` of a result whose call is found in `calls` (`calls_by_id`)."""
    name, args = calls.get(message.tool_call_id, ("", None))
    return result_item(message, message.name or name, args)
