"""Counting with a local Hugging Face tokenizer and the overhead of its chat template.

A model served from open weights (ChatHuggingFace, vLLM, llama.cpp) reads the prompt its
chat template makes of the request, tokenized by its tokenizer. Given that tokenizer as
`token_counter` (a `tokenizers.Tokenizer`, or a `transformers` tokenizer, which carries
its template), each message costs the tokens of its text plus what the template writes
around a message of its role; the request costs what the template writes once (a begin
token, the generation prompt). Those overheads are measured once, by rendering small
probe conversations and subtracting the tokens of their texts. Tool calls cost the tokens
of their JSON (name and arguments) on top of an assistant turn's overhead. Nothing is
downloaded: the tokenizer is the object given.

The count equals the tokens of the rendered request where the template writes each
message independently of its neighbours (ChatML, Llama 3, Mistral's templates do); a
template that writes the system prompt into a later turn is off by the tokens at the
seams.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

__all__ = ["HuggingFaceBackend", "is_tokenizer", "tokenizer_backend"]

Render = Callable[[Sequence[BaseMessage]], str]
"""The prompt a chat template makes of a conversation, with the generation prompt."""

# A text whose tokens are the same alone and inside a template (no leading space, no
# character that merges with a template's separators).
_PROBE = "Probe"
_PROBE_CALL_ID = "aB3dE5gH1"


def is_tokenizer(spec: object) -> bool:
    """Whether `spec` is a `tokenizers.Tokenizer` or a `transformers` tokenizer."""
    module = type(spec).__module__
    if module.startswith("tokenizers") and hasattr(spec, "encode"):
        return True
    return module.startswith("transformers") and hasattr(spec, "apply_chat_template")


def _token_counter(tokenizer: Any) -> Callable[[str], int]:
    """Tokens of a text; special tokens written in it (a rendered prompt's) count as such."""
    if type(tokenizer).__module__.startswith("tokenizers"):
        return lambda text: len(tokenizer.encode(text, add_special_tokens=False).ids)
    return lambda text: len(tokenizer.encode(text, add_special_tokens=False))


def _transformers_render(tokenizer: Any) -> Render | None:
    if not getattr(tokenizer, "chat_template", None):
        return None

    def render(messages: Sequence[BaseMessage]) -> str:
        conversation = [_template_dict(message) for message in messages]
        rendered = tokenizer.apply_chat_template(
            conversation, tokenize=False, add_generation_prompt=True
        )
        return str(rendered)

    return render


def _template_dict(message: BaseMessage) -> dict[str, Any]:
    role = {"human": "user", "ai": "assistant"}.get(message.type, message.type)
    entry: dict[str, Any] = {"role": role, "content": message.text}
    if isinstance(message, AIMessage) and message.tool_calls:
        entry["tool_calls"] = [
            {
                "id": call.get("id"),
                "type": "function",
                "function": {"name": call["name"], "arguments": call["args"]},
            }
            for call in message.tool_calls
        ]
    if isinstance(message, ToolMessage):
        entry["tool_call_id"] = message.tool_call_id
    return entry


@dataclass(frozen=True)
class _Overheads:
    """What the template writes around each role's message, and once per request."""

    request: int = 0
    user: int = 0
    assistant: int = 0
    system: int = 0
    tool: int = 0


def _measure_overheads(render: Render, count: Callable[[str], int]) -> _Overheads:
    probe = count(_PROBE)

    def extra(messages: Sequence[BaseMessage]) -> int:
        return count(render(messages)) - probe * len(messages)

    user, assistant = HumanMessage(_PROBE), AIMessage(_PROBE)
    one = extra([user])
    two = extra([user, assistant])
    three = extra([user, assistant, user])
    user_tokens = three - two
    overheads = _Overheads(
        request=one - user_tokens, user=user_tokens, assistant=two - one, system=user_tokens
    )
    # A template without a system role raises: its system text joins a turn, as a user's.
    with contextlib.suppress(Exception):
        overheads = _with(overheads, system=extra([SystemMessage(_PROBE), user]) - one)
    call = {"name": "f", "args": {}, "id": _PROBE_CALL_ID, "type": "tool_call"}
    caller = AIMessage("", tool_calls=[call])
    try:
        before = extra([user, caller]) + probe
        after = extra([user, caller, ToolMessage(_PROBE, tool_call_id=_PROBE_CALL_ID)])
        overheads = _with(overheads, tool=after - before)
    except Exception:  # a template without a tool role: results are written as user turns
        overheads = _with(overheads, tool=user_tokens)
    return overheads


def _with(overheads: _Overheads, **changes: int) -> _Overheads:
    values = {**overheads.__dict__, **{key: max(value, 0) for key, value in changes.items()}}
    return _Overheads(**values)


@dataclass(frozen=True)
class HuggingFaceBackend:
    """Counts a message's text with a local tokenizer plus its role's template overhead."""

    count_text: Callable[[str], int]
    overheads: _Overheads
    name: str
    exact: bool
    request_overhead: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "request_overhead", self.overheads.request)

    def count(self, message: BaseMessage) -> int:
        tokens = self.count_text(message.text)
        if isinstance(message, SystemMessage):
            return tokens + self.overheads.system
        if isinstance(message, ToolMessage):
            return tokens + self.overheads.tool
        if isinstance(message, AIMessage):
            calls = [
                json.dumps({"name": call["name"], "arguments": call["args"]}, ensure_ascii=False)
                for call in message.tool_calls
            ]
            return tokens + self.overheads.assistant + sum(self.count_text(c) for c in calls)
        return tokens + self.overheads.user


def tokenizer_backend(tokenizer: Any, *, render: Render | None = None) -> HuggingFaceBackend:
    """The backend counting with `tokenizer`; `render` (the template) where it has none."""
    count_text = _token_counter(tokenizer)
    render = render or _transformers_render(tokenizer)
    kind = type(tokenizer).__name__
    if render is None:
        return HuggingFaceBackend(count_text, _Overheads(), name=f"tokenizer:{kind}", exact=False)
    overheads = _measure_overheads(render, count_text)
    return HuggingFaceBackend(
        count_text, overheads, name=f"tokenizer:{kind} + chat template", exact=True
    )
