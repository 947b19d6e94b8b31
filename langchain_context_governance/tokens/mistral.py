"""Mistral models counted as Mistral's API tokenizes a request, with mistral_common offline.

mistral_common (the `mistral` extra) ships the tokenizers of Mistral's models in its
package data: Tekken for Mistral NeMo, Ministral 8B, Mistral Small 24.09 and Pixtral 12B;
the SentencePiece tokenizers (versions 1, 2, 3 and 7) for the older and the larger models.
Its instruct tokenizers turn a chat request into the ids the model reads, control tokens
included ([INST] ... [/INST] around a user turn, [TOOL_CALLS] before the calls and </s>
after an assistant turn, [TOOL_RESULTS] ... [/TOOL_RESULTS] around a result,
[AVAILABLE_TOOLS] ... [/AVAILABLE_TOOLS] around the tool definitions, <s> once).

Each message is converted as langchain-mistralai converts it (the content of an assistant
message that calls tools is dropped, a call id that is not nine letters or digits is
replaced by a hash of it, JSON is normalised as Mistral's request normaliser does) and
encoded by the instruct tokenizer's own method for its role; the tool definitions are
counted once a request, and <s> is the request overhead. The sum is what
`encode_chat_completion` gives for the whole request (tested on the real runs), with two
differences, both over-counts: two user messages in a row are merged by Mistral into one
turn (one [INST] pair fewer), and a v2 tokenizer does not send the calls and results
before the last user message. Where the instruct template merges the system prompt into
the last user message (versions 1-3) it costs its text and the "\\n\\n" that joins it.

Example:
    >>> tokenizer_for_model("open-mistral-nemo")
    MistralTokenizerChoice(file='tekken_240718', exact=True)
    >>> tokenizer_for_model("mistral-large-2411")
    MistralTokenizerChoice(file='v7', exact=True)
    >>> tokenizer_for_model("magistral-medium-latest").exact
    False
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage

__all__ = ["MistralBackend", "MistralTokenizerChoice", "is_mistral_model", "tokenizer_for_model"]

# Which bundled tokenizer a model name uses, by prefix, longest first. From mistral_common's
# own table of model names (MODEL_NAME_TO_TOKENIZER_CLS) and Mistral's aliases of them.
_EXACT_PREFIXES: tuple[tuple[str, str], ...] = (
    ("open-mistral-nemo", "tekken_240718"),
    ("mistral-nemo", "tekken_240718"),
    ("ministral-8b", "tekken_240718"),
    ("mistral-small-2409", "tekken_240718"),
    ("pixtral-12b", "tekken_240911"),
    ("mistral-large-2411", "v7"),
    ("pixtral-large-2411", "v7m1"),
    ("mistral-large-2407", "v3"),
    ("open-mixtral-8x22b", "v3"),
    ("codestral-mamba", "v3"),
    ("codestral-2405", "v3"),
    ("mistral-tiny-2407", "v3"),
    ("open-mistral-7b", "v3"),
    ("mistral-small-2402", "v2"),
    ("mistral-large-2402", "v2"),
    ("mistral-small-2312", "v2"),
    ("open-mixtral-8x7b", "v2"),
    ("mistral-tiny-2312", "v2"),
    ("mistral-medium-2312", "v1"),
)
# Names of Mistral's model families; those not in the table above use a newer tokenizer
# than mistral_common bundles, and are counted with Tekken as an estimate.
_MISTRAL_NAME = re.compile(r"(mistral|mixtral|ministral|codestral|pixtral|magistral|devstral)")
_NEAREST = "tekken_240718"

_LOCK = threading.Lock()
# Mistral's tool call ids: nine letters or digits (langchain-mistralai hashes others).
_MISTRAL_CALL_ID = re.compile(r"^[a-zA-Z0-9]{9}$")
_BASE62 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
# An image's tokens depend on its size, which is never fetched: a 1024x1024 image in
# Pixtral's 16-pixel patches (64 x 64 patches and a break token a row).
_UNMEASURED_IMAGE_TOKENS = 64 * 65


@dataclass(frozen=True)
class MistralTokenizerChoice:
    """The bundled tokenizer a model is counted with; `exact` where it is the model's own."""

    file: str
    exact: bool


def is_mistral_model(name: str) -> bool:
    """Whether `name` (a model name or a Hugging Face id) names a Mistral model."""
    return bool(_MISTRAL_NAME.search(name.lower()))


def tokenizer_for_model(name: str) -> MistralTokenizerChoice:
    """The bundled tokenizer for the Mistral model `name` (a "mistralai/" prefix is ignored)."""
    lowered = name.lower().rsplit("/", 1)[-1].removeprefix("mistral:")
    for prefix, file in _EXACT_PREFIXES:
        if lowered.startswith(prefix):
            return MistralTokenizerChoice(file, exact=True)
    if not is_mistral_model(lowered):
        raise ValueError(f"{name!r} names no Mistral model (token_counter='mistral:<model>')")
    return MistralTokenizerChoice(_NEAREST, exact=False)


def _load(file: str) -> Any:
    try:
        from mistral_common.tokens.tokenizers.mistral import MistralTokenizer
    except ImportError as error:
        raise ImportError(
            "counting Mistral models needs mistral_common: "
            'pip install "langchain-context-governance[mistral]"'
        ) from error
    loaders = {
        "tekken_240718": lambda: MistralTokenizer.v3(is_tekken=True),
        "tekken_240911": lambda: MistralTokenizer.v3(is_tekken=True, is_mm=True),
        "v7": MistralTokenizer.v7,
        "v7m1": lambda: MistralTokenizer.v7(is_mm=True),
        "v3": MistralTokenizer.v3,
        "v2": MistralTokenizer.v2,
        "v1": MistralTokenizer.v1,
    }
    return loaders[file]()


@functools.cache
def _tokenizer(file: str) -> Any:
    """The bundled tokenizer, loaded once per process (Tekken takes about two seconds)."""
    return _load(file)


def mistral_tokenizer(file: str) -> Any:
    """mistral_common's `MistralTokenizer` for a bundled file name of `tokenizer_for_model`."""
    with _LOCK:
        return _tokenizer(file)


def mistral_call_id(call_id: str) -> str:
    """The id langchain-mistralai sends for `call_id`: itself where it is nine letters or
    digits, else the first nine base-62 digits of its sha256."""
    if _MISTRAL_CALL_ID.match(call_id):
        return call_id
    number = int.from_bytes(hashlib.sha256(call_id.encode()).digest(), "big")
    digits = []
    while number:
        number, remainder = divmod(number, len(_BASE62))
        digits.append(_BASE62[remainder])
    return "".join(reversed(digits))[:9].rjust(9, "0")


def _normalized_json(text: str) -> str:
    """Mistral's request normaliser: JSON re-serialised, empty text as "{}"."""
    if not text:
        return "{}"
    try:
        return json.dumps(json.loads(text), ensure_ascii=False)
    except json.JSONDecodeError:
        return text


def _text_and_images(content: str | list[str | dict[str, Any]]) -> tuple[str, int]:
    """The text Mistral's normaliser makes of `content` (blocks joined by a blank line),
    and how many images it holds."""
    if isinstance(content, str):
        return content, 0
    texts: list[str] = []
    images = 0
    for block in content:
        if isinstance(block, str):
            texts.append(block)
        elif isinstance(block, dict):
            if block.get("type") == "text":
                texts.append(str(block.get("text") or ""))
            elif block.get("type") in ("image", "image_url"):
                images += 1
    return "\n\n".join(text for text in texts if text), images


def _version(instruct: Any) -> int:
    """The instruct tokenizer's version number (1, 2, 3, 7, 11, ...)."""
    return int(str(instruct.tokenizer.version.value).lstrip("v"))


@dataclass(frozen=True)
class MistralBackend:
    """Counts messages with a bundled mistral_common tokenizer (see the module docstring)."""

    file: str
    name: str
    exact: bool
    request_overhead: int = 1  # <s>

    def count(self, message: BaseMessage) -> int:
        from mistral_common.protocol.instruct import messages as mistral

        instruct = mistral_tokenizer(self.file).instruct_tokenizer
        text, images = _text_and_images(message.content)
        media = images * _UNMEASURED_IMAGE_TOKENS
        if isinstance(message, SystemMessage):
            if not text:
                return 0
            if _version(instruct) >= 7:
                system = mistral.SystemMessage(content=text)
                return len(instruct.encode_system_message(system)[0])
            # Versions 1-3: the system prompt is joined to the last user turn.
            return len(instruct.tokenizer.encode(text + "\n\n", bos=False, eos=False))
        if isinstance(message, AIMessage):
            return self._assistant_tokens(message, text, instruct, mistral) + media
        if isinstance(message, ToolMessage):
            # Mistral's normaliser re-serialises a JSON result before version 7 only.
            content = text if _version(instruct) >= 7 else _normalized_json(text)
            result = mistral.ToolMessage(
                content=content,
                tool_call_id=mistral_call_id(message.tool_call_id),
                name=message.name,
            )
            tokens, _, _ = instruct.encode_tool_message(result, False)
            return len(tokens) + media
        user = mistral.UserMessage(content=text)
        tokens, _, _ = instruct.encode_user_message(user, None, False, False, None)
        return len(tokens) + media

    @staticmethod
    def _assistant_tokens(message: AIMessage, text: str, instruct: Any, mistral: Any) -> int:
        from mistral_common.protocol.instruct.tool_calls import FunctionCall, ToolCall

        calls = [
            ToolCall(
                id=mistral_call_id(call.get("id") or "null") if call.get("id") else "null",
                function=FunctionCall(
                    name=call.get("name") or "",
                    arguments=_normalized_json(
                        json.dumps(call.get("args"), ensure_ascii=False)
                        if isinstance(call.get("args"), dict)
                        else str(call.get("args") or "")
                    ),
                ),
            )
            for call in [*message.tool_calls, *message.invalid_tool_calls]
        ]
        if calls:
            # langchain-mistralai drops the text of a message that calls tools.
            reply = mistral.AssistantMessage(tool_calls=calls)
        elif text.strip(" "):
            reply = mistral.AssistantMessage(content=text)
        else:
            return 1  # </s>: Mistral refuses an empty assistant message anyway
        try:
            return len(instruct.encode_assistant_message(reply, False))
        except Exception:
            # Version 1 has no tool calls: their JSON counted as text.
            return len(instruct.tokenizer.encode(str(reply.model_dump()), bos=False, eos=False))

    def count_tools(self, schemas: Sequence[dict[str, Any]]) -> int:
        """[AVAILABLE_TOOLS] and the definitions' JSON as Mistral writes it, once a request."""
        from mistral_common.protocol.instruct.tool_calls import Function, Tool

        instruct = mistral_tokenizer(self.file).instruct_tokenizer
        tools = []
        for schema in schemas:
            function = schema.get("function", schema)
            tools.append(
                Tool(
                    function=Function(
                        name=function.get("name", ""),
                        description=function.get("description", ""),
                        parameters=function.get("parameters") or {},
                    )
                ).model_dump(exclude={"function": {"strict": True}})
            )
        text = json.dumps(tools, ensure_ascii=False)
        return len(instruct.tokenizer.encode(text, bos=False, eos=False)) + 2
