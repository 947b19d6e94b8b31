"""Read and write agent transcripts, for the command line and the demos.

Five formats are recognised from the text alone:

- ``openai-json``: a JSON array of OpenAI chat-completions messages;
- ``openai-jsonl``: the same messages, one JSON object per line;
- ``openai-request``: a request body, a JSON object with a ``"messages"`` key; its other
  keys (``model``, ``tools``, ...) are kept and written back;
- ``anthropic-request``: an Anthropic Messages request body (``system``, ``messages`` with
  ``tool_use`` / ``tool_result`` blocks, ``tools`` with ``input_schema``); read and written
  by `langchain_context_governance.anthropic_messages`, its other keys kept;
- ``langchain``: the ``[{"type": "human", "data": {...}}]`` form of
  ``langchain_core.messages.messages_to_dict``.

Loading is strict, because a transcript that is silently misread cannot be governed:
every problem raises `TranscriptError`, whose one-line message names the file, the
message index and what is wrong. Writing uses the format a transcript was read in,
so ``dump_transcript(t.messages, format=t.format, request=t.request)`` reads back equal.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal, get_args

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    SystemMessage,
    ToolMessage,
    convert_to_messages,
    convert_to_openai_messages,
    is_data_content_block,
    messages_from_dict,
    messages_to_dict,
)
from pydantic import ValidationError

from langchain_context_governance._added import added_kind
from langchain_context_governance.anthropic_messages import (
    AnthropicFormatError,
    anthropic_body,
    looks_like_anthropic,
    read_anthropic_body,
)

__all__ = [
    "OPENAI_MESSAGE_KEYS",
    "TRANSCRIPT_FORMATS",
    "Transcript",
    "TranscriptError",
    "TranscriptFormat",
    "decode_transcript",
    "dump_transcript",
    "load_transcript",
    "parse_transcript",
    "sample_transcript_path",
    "sample_workspace_path",
]

TranscriptFormat = Literal[
    "openai-json", "openai-jsonl", "openai-request", "anthropic-request", "langchain"
]
TRANSCRIPT_FORMATS: tuple[TranscriptFormat, ...] = get_args(TranscriptFormat)

OPENAI_ROLES = ("system", "developer", "user", "assistant", "tool")

# Content blocks of other providers' formats (Anthropic, Bedrock, LangChain's standard
# blocks) that langchain-core translates; an OpenAI transcript never holds them as they are.
_FOREIGN_PART_TYPES = frozenset(
    {
        "image",
        "audio",
        "video",
        "tool_use",
        "tool_result",
        "function_call",
        "json",
        "guard_content",
        "media",
        "thinking",
        "redacted_thinking",
        "reasoning",
    }
)

# OpenAI content parts and the payload each carries under its own type name.
_OPENAI_PART_PAYLOADS: dict[str, type] = {
    "text": str,
    "refusal": str,
    "image_url": dict,
    "input_audio": dict,
    "file": dict,
}

_REQUEST_FORMATS = ("openai-request", "anthropic-request")

# json.dumps joins a valid pair into one character, so a surrogate left is a lone one.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")

# Written first, in this order, so a transcript reads top-down like a conversation.
_OPENAI_KEY_ORDER = ("role", "name", "content", "tool_calls", "tool_call_id", "status")

_OPENAI_TEXT_ROLE_KEYS = frozenset({"role", "content", "name"})
OPENAI_MESSAGE_KEYS: dict[str, frozenset[str]] = {
    "system": _OPENAI_TEXT_ROLE_KEYS,
    "developer": _OPENAI_TEXT_ROLE_KEYS,
    "user": _OPENAI_TEXT_ROLE_KEYS,
    "assistant": _OPENAI_TEXT_ROLE_KEYS | {"tool_calls", "function_call", "audio"},
    "tool": frozenset({"role", "content", "tool_call_id"}),
}
"""The keys a Chat Completions message of each role may have: those ChatOpenAI writes
(langchain-openai's `_convert_message_to_dict`); a tool message has no name."""

# Content parts ChatOpenAI leaves out of a Chat Completions request (another provider's
# tool uses and reasoning; `_format_message_content`).
_UNSENT_OPENAI_PART_TYPES = frozenset(
    {"tool_use", "thinking", "reasoning_content", "function_call", "code_interpreter_call"}
)


@dataclass(frozen=True)
class Transcript:
    """Messages read from a transcript, with the format they were read in.

    ``request`` holds the other keys of a request body (``model``, ``tools``, ...) and is
    empty for the other formats.
    """

    messages: list[BaseMessage]
    format: TranscriptFormat
    request: dict[str, Any] = field(default_factory=dict)
    # The file's own number of each message where it differs from the list index.
    numbers: tuple[int | None, ...] = ()

    def number_of(self, index: int) -> int | None:
        """The number the file gives message `index`: its index, but in an Anthropic body
        the body's turn (a user turn's results and text share one), None for `system`.

        >>> Transcript([], "openai-json").number_of(3)
        3
        """
        return self.numbers[index] if self.numbers else index


class TranscriptError(ValueError):
    """A transcript that cannot be read; ``str()`` is one line naming file and message.

    >>> str(TranscriptError("chat.json", "has no 'role'", index=3))
    "chat.json: message 3: has no 'role'"
    """

    def __init__(self, source: str, problem: str, *, index: int | None = None) -> None:
        self.source = source
        self.index = index
        self.problem = " ".join(problem.split())
        where = source if index is None else f"{source}: message {index}"
        super().__init__(f"{where}: {self.problem}")


class _MessageProblem(ValueError):
    """What is wrong with one message; the caller adds the file and the index."""


def load_transcript(path: str | Path) -> Transcript:
    """Read a transcript file in any of the `TRANSCRIPT_FORMATS`.

    >>> transcript = load_transcript(sample_transcript_path())
    >>> transcript.format, transcript.messages[0].type
    ('openai-json', 'system')
    """
    source = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise TranscriptError(source, f"cannot be read: {error.strerror or error}") from error
    return parse_transcript(decode_transcript(data, source=source), source=source)


def decode_transcript(data: bytes, *, source: str) -> str:
    """UTF-8 text (a byte order mark is dropped), or a TranscriptError naming the byte.

    >>> decode_transcript(b"\\xef\\xbb\\xbf[]", source="chat.json")
    '[]'
    """
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise TranscriptError(source, f"is not UTF-8 text (byte {error.start})") from error


def parse_transcript(text: str, *, source: str = "<input>") -> Transcript:
    """Read a transcript from text; ``source`` names it in error messages.

    >>> transcript = parse_transcript('[{"role": "user", "content": "hi"}]')
    >>> transcript.format, transcript.messages
    ('openai-json', [HumanMessage(content='hi', additional_kwargs={}, response_metadata={})])
    """
    if not text.strip():
        raise TranscriptError(source, "the file is empty")
    try:
        document = json.loads(text)
    except RecursionError as error:
        raise TranscriptError(source, "the JSON is nested too deeply to read") from error
    except json.JSONDecodeError as error:
        records = _json_lines(text, source)
        if records is None:
            raise TranscriptError(
                source,
                f"not valid JSON: {error.msg} at line {error.lineno}, column {error.colno}",
            ) from error
        return Transcript(_read_messages(records, _openai_message, source), "openai-jsonl")
    except ValueError as error:
        raise TranscriptError(source, _unreadable_json(error)) from error
    return _transcript_from_document(document, source)


def _unreadable_json(error: ValueError) -> str:
    """What json.loads refused beyond its syntax: Python's limit on an integer's digits
    (its advice to raise the limit is for programmers, not for this input)."""
    return f"the JSON cannot be read: {str(error).splitlines()[0].split(';')[0]}"


def _json_lines(text: str, source: str) -> list[Any] | None:
    """The records of a JSONL text, or None when the text does not look like JSONL.

    It looks like JSONL when it has several non-blank lines and the first one is a
    JSON object by itself; a broken pretty-printed array starts with a lone ``[``.
    """
    # Only "\n" ends a line: JSON text may hold U+2028 or U+0085, which splitlines() splits on.
    numbered_lines = [
        (number, line) for number, line in enumerate(text.split("\n"), 1) if line.strip()
    ]
    if len(numbered_lines) < 2 or not _is_json_object(numbered_lines[0][1]):
        return None
    records = []
    for index, (number, line) in enumerate(numbered_lines):
        try:
            records.append(json.loads(line))
        except RecursionError as error:
            raise TranscriptError(
                source, f"line {number}: the JSON is nested too deeply to read", index=index
            ) from error
        except json.JSONDecodeError as error:
            raise TranscriptError(
                source,
                f"not valid JSON (line {number}, column {error.colno}): {error.msg}",
                index=index,
            ) from error
        except ValueError as error:
            raise TranscriptError(
                source, f"line {number}: {_unreadable_json(error)}", index=index
            ) from error
    return records


def _is_json_object(line: str) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except (ValueError, RecursionError):
        return False


def _transcript_from_document(document: Any, source: str) -> Transcript:
    if isinstance(document, list):
        if _looks_like_langchain(document):
            return Transcript(_read_messages(document, _langchain_message, source), "langchain")
        return Transcript(_read_messages(document, _openai_message, source), "openai-json")
    if isinstance(document, dict) and "messages" in document:
        records = document["messages"]
        if not isinstance(records, list):
            raise TranscriptError(
                source, f"'messages' must be a JSON array, got {_json_type(records)}"
            )
        if looks_like_anthropic(document):
            return _anthropic_transcript(document, source)
        request = {key: value for key, value in document.items() if key != "messages"}
        messages = _read_messages(records, _openai_message, source)
        return Transcript(messages, "openai-request", request)
    if isinstance(document, dict) and "role" in document:
        # A JSONL file holding a single message is a single JSON object.
        return Transcript(_read_messages([document], _openai_message, source), "openai-jsonl")
    if isinstance(document, dict):
        raise TranscriptError(
            source, "a JSON object must be a request body with 'messages' or a message with 'role'"
        )
    raise TranscriptError(source, f"expected a JSON array of messages, got {_json_type(document)}")


def _anthropic_transcript(document: dict[str, Any], source: str) -> Transcript:
    try:
        body = read_anthropic_body(document)
    except AnthropicFormatError as error:
        raise TranscriptError(source, str(error), index=error.index) from error
    if not any(not isinstance(message, SystemMessage) for message in body.messages):
        raise TranscriptError(source, "the transcript has no messages")
    for message, turn in zip(body.messages, body.turns, strict=True):
        try:
            _check_message(message)
        except _MessageProblem as problem:
            raise TranscriptError(source, str(problem), index=turn) from problem
    return Transcript(body.messages, "anthropic-request", body.rest, tuple(body.turns))


def _looks_like_langchain(records: list[Any]) -> bool:
    first = records[0] if records else None
    return isinstance(first, dict) and "role" not in first and {"type", "data"} <= first.keys()


def _read_messages(
    records: list[Any], read_one: Callable[[Any], BaseMessage], source: str
) -> list[BaseMessage]:
    if not records:
        raise TranscriptError(source, "the transcript has no messages")
    messages = []
    for index, record in enumerate(records):
        try:
            message = read_one(record)
            _check_message(message)
        except _MessageProblem as problem:
            raise TranscriptError(source, str(problem), index=index) from problem
        messages.append(message)
    return messages


def _check_message(message: BaseMessage) -> None:
    """Problems both formats can carry: calls nobody can answer, empty turns."""
    if isinstance(message, AIMessage):
        calls = [*message.tool_calls, *message.invalid_tool_calls]
        for position, call in enumerate(calls):
            if not call.get("id"):
                raise _MessageProblem(f"tool call {position} ({call.get('name')}) has no id")
        if not message.content and not calls:
            raise _MessageProblem("assistant message has neither content nor tool calls")
    if isinstance(message, ToolMessage) and not message.tool_call_id:
        raise _MessageProblem("tool message has no tool_call_id")


def _openai_message(record: Any) -> BaseMessage:
    """One OpenAI chat message, read by langchain-core's `convert_to_messages`.

    Only what the conversion would get wrong or report without the index is checked
    here: the record's shape, its role, a missing content, and empty call arguments.
    """
    if not isinstance(record, dict):
        raise _MessageProblem(f"expected a JSON object, got {_json_type(record)}")
    role = record.get("role")
    if role is None:
        raise _MessageProblem("has no 'role'")
    if role not in OPENAI_ROLES:
        raise _MessageProblem(f"unknown role {role!r}; expected one of {', '.join(OPENAI_ROLES)}")
    record = dict(record)
    if record.get("content") is None:
        if role != "assistant":
            raise _MessageProblem(f"{role} message has no content")
        record["content"] = ""
    if not record.get("name"):
        # An empty name is no name; OpenAI output leaves it out.
        record.pop("name", None)
    if record.get("tool_calls") is not None:
        record["tool_calls"] = _tool_calls(record["tool_calls"])
    try:
        [message] = convert_to_messages([record])
    except ValidationError as error:
        first = error.errors()[0]
        location = ".".join(str(part) for part in first["loc"]) or "message"
        raise _MessageProblem(f"{role} message: {location}: {first['msg']}") from error
    except json.JSONDecodeError as error:
        raise _MessageProblem(
            f"tool call arguments are not valid JSON: {error.msg} at column {error.colno}"
        ) from error
    except KeyError as error:
        raise _MessageProblem(f"{role} message cannot be read: it has no {error}") from error
    except (ValueError, TypeError, AttributeError) as error:
        reason = str(error).splitlines()[0] if str(error) else repr(error)
        raise _MessageProblem(f"{role} message cannot be read: {reason}") from error
    return message


def _tool_calls(calls: Any) -> list[dict[str, Any]]:
    """The calls with a shape the conversion reads; "" or null arguments (some providers
    send them for no arguments) become "{}"."""
    if not isinstance(calls, list):
        raise _MessageProblem(f"'tool_calls' must be a JSON array, got {_json_type(calls)}")
    shaped = []
    for position, call in enumerate(calls):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            raise _MessageProblem(f"tool call {position} has no 'function' object")
        if function.get("arguments") in ("", None):
            call = {**call, "function": {**function, "arguments": "{}"}}
        shaped.append(call)
    return shaped


def _openai_part_problem(part: Any) -> str | None:
    """Why ``part`` is not an OpenAI content part, or None when it is one.

    Part types OpenAI may add later pass, as long as they are not another provider's.
    """
    if not isinstance(part, dict) or not isinstance(part.get("type"), str):
        return "is not an object with a 'type'"
    kind = part["type"]
    if kind in _FOREIGN_PART_TYPES or is_data_content_block(part):
        return f"has type {kind!r} in a form OpenAI chat messages do not use"
    payload = _OPENAI_PART_PAYLOADS.get(kind)
    if payload is not None and not isinstance(part.get(kind), payload):
        return f"of type {kind!r} has no {kind!r} {'string' if payload is str else 'object'}"
    return None


def _langchain_message(record: Any) -> BaseMessage:
    if not isinstance(record, dict) or not {"type", "data"} <= record.keys():
        raise _MessageProblem("expected a LangChain message dict with 'type' and 'data'")
    kind, data = record["type"], record["data"]
    if not isinstance(kind, str):
        raise _MessageProblem(f"'type' must be a string, got {_json_type(kind)}")
    if not isinstance(data, dict):
        raise _MessageProblem(f"'data' must be a JSON object, got {_json_type(data)}")
    # Checked here so both formats say the same, and langchain-core's KeyError never shows.
    if data.get("content") is None:
        raise _MessageProblem(f"{kind} message has no content")
    if kind == "tool" and not data.get("tool_call_id"):
        raise _MessageProblem("tool message has no tool_call_id")
    try:
        return messages_from_dict([record])[0]
    except ValidationError as error:
        first = error.errors()[0]
        location = ".".join(str(part) for part in first["loc"]) or "data"
        raise _MessageProblem(f"{kind} message: {location}: {first['msg']}") from error
    except (ValueError, TypeError, KeyError, AttributeError) as error:
        # langchain-core's validators assume well-formed fields and fail in assorted ways.
        raise _MessageProblem(f"{kind} message cannot be read: {error!r}") from error


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def dump_transcript(
    messages: Sequence[BaseMessage],
    *,
    format: TranscriptFormat,
    request: Mapping[str, Any] | None = None,
) -> str:
    """Write messages as the text of a transcript file in ``format``.

    ``request`` is the rest of an ``openai-request`` or ``anthropic-request`` body; it is
    refused for the other formats rather than silently dropped. An ``openai-request``
    body holds each message as ChatOpenAI sends it to the Chat Completions API: only the
    keys the API defines for its role (`OPENAI_MESSAGE_KEYS`: a tool message has no
    name), without the content parts ChatOpenAI leaves out (thinking, another provider's
    tool uses). The message arrays (``openai-json``, ``openai-jsonl``) are transcripts:
    they also keep a tool result's name and, for a failed one, ``"status": "error"``
    (not for a result governance added, which has only the keys of a request's).
    Artifacts and metadata are only kept by the ``langchain`` format.

    >>> from langchain_core.messages import HumanMessage
    >>> print(dump_transcript([HumanMessage("hi")], format="openai-jsonl"), end="")
    {"role": "user", "content": "hi"}
    """
    if format not in TRANSCRIPT_FORMATS:
        raise ValueError(f"format must be one of {', '.join(TRANSCRIPT_FORMATS)}; got {format!r}")
    if request and format not in _REQUEST_FORMATS:
        raise ValueError(
            f"request is only written with format='openai-request' or 'anthropic-request', "
            f"not {format!r}"
        )
    if request and "messages" in request:
        raise ValueError("request must not contain 'messages'; pass them as messages")
    if format == "langchain":
        return _json_document(messages_to_dict(list(messages)))
    if format == "anthropic-request":
        return _json_document(anthropic_body(messages, request or {}))
    if format == "openai-request":
        records = [
            _openai_request_message(index, message) for index, message in enumerate(messages)
        ]
        return _json_document({**(request or {}), "messages": records})
    records = [_openai_record(index, message) for index, message in enumerate(messages)]
    if format == "openai-jsonl":
        return "".join(_json_text(record) + "\n" for record in records)
    return _json_document(records)


def _openai_record(index: int, message: BaseMessage) -> dict[str, Any]:
    """A transcript's message: the Chat Completions shape, a tool result's name and status.

    A message governance added (a backfilled result, a note) has only the keys of its
    role: nothing was read for it, and a transcript without names gets none from it.
    """
    record = _chat_completions_message(index, message)
    if added_kind(message) is not None:
        allowed = OPENAI_MESSAGE_KEYS[record["role"]]
        return _ordered({key: value for key, value in record.items() if key in allowed})
    if isinstance(message, ToolMessage) and message.status == "error":
        record["status"] = "error"
    return _ordered(record)


def _openai_request_message(index: int, message: BaseMessage) -> dict[str, Any]:
    """A request body's message as ChatOpenAI sends it: the keys its role has, no more."""
    record = _chat_completions_message(index, message)
    if isinstance(record.get("content"), list):
        record["content"] = [
            _sent_part(part, record["role"])
            for part in record["content"]
            if _part_type(part) not in _UNSENT_OPENAI_PART_TYPES
        ]
    if isinstance(message, AIMessage):
        _add_legacy_call_and_audio(record, message)
        if (record.get("tool_calls") or record.get("function_call")) and not record["content"]:
            record["content"] = None
    allowed = OPENAI_MESSAGE_KEYS[record["role"]]
    return _ordered({key: value for key, value in record.items() if key in allowed})


def _sent_part(part: Any, role: str) -> Any:
    """A tool result's text part with only the keys ChatOpenAI keeps of it."""
    if role != "tool" or _part_type(part) != "text" or "text" not in part:
        return part
    return {key: part[key] for key in ("type", "text", "prompt_cache_breakpoint") if key in part}


def _add_legacy_call_and_audio(record: dict[str, Any], message: AIMessage) -> None:
    """What ChatOpenAI sends beside the content: a legacy `function_call` where there are
    no tool calls, and the id of an audio answer (the API takes only the id back)."""
    if not record.get("tool_calls") and "function_call" in message.additional_kwargs:
        record["function_call"] = message.additional_kwargs["function_call"]
    audio_ids = [
        part["id"]
        for part in (message.content if isinstance(message.content, list) else [])
        if isinstance(part, dict) and part.get("type") == "audio" and part.get("id")
    ]
    raw_audio = message.additional_kwargs.get("audio")
    if audio_ids:
        record["audio"] = {"id": audio_ids[-1]}
    elif isinstance(raw_audio, dict):
        record["audio"] = {"id": raw_audio["id"]} if "id" in raw_audio else raw_audio


def _chat_completions_message(index: int, message: BaseMessage) -> dict[str, Any]:
    # "block" keeps list content a list, "string" keeps string content a string.
    text_format: Literal["string", "block"] = (
        "block" if isinstance(message.content, list) else "string"
    )
    try:
        record = convert_to_openai_messages(message, text_format=text_format)
    except (ValueError, TypeError, NotImplementedError) as error:
        raise ValueError(
            f"message {index} cannot be written as an OpenAI message: {error}"
        ) from error
    if isinstance(message.content, list) and all(
        _openai_part_problem(part) is None for part in message.content
    ):
        # Already OpenAI parts: kept as written, where the conversion drops unknown keys.
        record["content"] = list(message.content)
    if record.get("role") not in OPENAI_ROLES:
        raise ValueError(
            f"message {index}: a {message.type!r} message has no OpenAI chat role "
            f"(one of {', '.join(OPENAI_ROLES)})"
        )
    if isinstance(message, AIMessage):
        _add_invalid_tool_calls(record, message)
    if record.get("tool_calls") and record.get("content") == "":
        # OpenAI's own form of "no text, only calls".
        record["content"] = None
    return record


def _part_type(part: Any) -> Any:
    return part.get("type") if isinstance(part, dict) else None


def _add_invalid_tool_calls(record: dict[str, Any], message: AIMessage) -> None:
    """Keep calls whose arguments did not parse; langchain-openai sends them too."""
    calls = list(record.get("tool_calls", []))
    for invalid in message.invalid_tool_calls:
        function = {"name": invalid.get("name") or "", "arguments": invalid.get("args") or ""}
        calls.append({"type": "function", "id": invalid.get("id"), "function": function})
    if calls:
        record["tool_calls"] = calls


def _ordered(record: dict[str, Any]) -> dict[str, Any]:
    first = {key: record[key] for key in _OPENAI_KEY_ORDER if key in record}
    return first | {key: value for key, value in record.items() if key not in first}


def _json_document(value: Any) -> str:
    return _json_text(value, indent=2) + "\n"


def _json_text(value: Any, *, indent: int | None = None) -> str:
    """JSON as UTF-8 can hold it: non-ASCII text as it is, a lone surrogate (a "\\ud800"
    escape read from JSON; UTF-8 cannot encode it) escaped as it was read."""
    text = json.dumps(value, indent=indent, ensure_ascii=False)
    return _LONE_SURROGATE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


def sample_transcript_path() -> Path:
    """The bundled coding-agent session, an OpenAI JSON transcript of about 300 messages.

    >>> sample_transcript_path().name
    'sample_transcript.json'
    """
    return _data_path("sample_transcript.json")


def sample_workspace_path() -> Path:
    """The bundled project (an ``invoicing`` package with failing tests) the sample reads.

    >>> (sample_workspace_path() / "invoicing" / "money.py").is_file()
    True
    """
    return _data_path("workspace")


def _data_path(name: str) -> Path:
    # Wheels install unzipped, so package data is a real file on disk.
    return Path(str(resources.files("langchain_context_governance") / "data" / name))
