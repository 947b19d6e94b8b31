from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from langchain_context_governance._messages import declared_tool_call_ids, has_tool_calls
from langchain_context_governance.transcripts import (
    TRANSCRIPT_FORMATS,
    TranscriptError,
    dump_transcript,
    load_transcript,
    parse_transcript,
    sample_transcript_path,
    sample_workspace_path,
)

GENERATOR = Path(__file__).resolve().parents[2] / "scripts" / "make_sample_transcript.py"


def read_call(call_id: str, path: str) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": "read_file", "arguments": json.dumps({"path": path})},
    }


def conversation() -> list[BaseMessage]:
    """Everything the OpenAI formats can carry, in one conversation."""
    return [
        SystemMessage("You are a coding agent."),
        SystemMessage("Answer in English.", additional_kwargs={"__openai_role__": "developer"}),
        HumanMessage("Fix the tests.", name="dana"),
        AIMessage(
            "Reading both files.",
            tool_calls=[
                {"id": "call_a", "name": "read_file", "args": {"path": "a.py"}},
                {"id": "call_b", "name": "read_file", "args": {"path": "b.py", "limit": 40}},
            ],
        ),
        ToolMessage("print('a')", tool_call_id="call_a", name="read_file"),
        ToolMessage("no such file", tool_call_id="call_b", name="read_file", status="error"),
        AIMessage("", tool_calls=[{"id": "call_c", "name": "list_dir", "args": {}}]),
        ToolMessage([{"type": "text", "text": "a.py"}], tool_call_id="call_c"),
        HumanMessage(
            [
                {"type": "text", "text": "Here is the screenshot."},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
            ]
        ),
        AIMessage([{"type": "text", "text": "Done: b.py was missing."}], name="coder"),
    ]


def as_chat_completions_sends_it(messages: list[BaseMessage]) -> list[BaseMessage]:
    """A request body's tool messages have neither a name nor a status."""
    return [
        ToolMessage(message.content, tool_call_id=message.tool_call_id)
        if isinstance(message, ToolMessage)
        else message
        for message in messages
    ]


def as_text(records: Any) -> str:
    return json.dumps(records)


def error_of(text: str) -> TranscriptError:
    with pytest.raises(TranscriptError) as caught:
        parse_transcript(text, source="chat.json")
    return caught.value


# --------------------------------------------------------------------------- round trips


# Anthropic bodies join leading system messages into one `system`; tested on their own.
LOSSLESS_FORMATS = [format for format in TRANSCRIPT_FORMATS if format != "anthropic-request"]


@pytest.mark.parametrize("format", LOSSLESS_FORMATS)
def test_dump_then_parse_gives_equal_messages(format: str) -> None:
    request = {"model": "gpt-4.1", "tools": [{"type": "function"}]}
    text = dump_transcript(
        conversation(),
        format=format,  # type: ignore[arg-type]
        request=request if format == "openai-request" else None,
    )

    transcript = parse_transcript(text)

    assert transcript.messages == (
        as_chat_completions_sends_it(conversation())
        if format == "openai-request"
        else conversation()
    )
    assert transcript.format == format
    assert transcript.request == (request if format == "openai-request" else {})


@pytest.mark.parametrize("format", TRANSCRIPT_FORMATS)
def test_load_dump_load_round_trips_a_file(format: str, tmp_path: Path) -> None:
    path = tmp_path / "chat.txt"
    path.write_text(dump_transcript(conversation(), format=format), encoding="utf-8")  # type: ignore[arg-type]

    first = load_transcript(path)
    text = dump_transcript(first.messages, format=first.format, request=first.request)
    second = parse_transcript(text)

    assert second == first
    assert text == path.read_text(encoding="utf-8")


def test_round_trip_keeps_the_rest_of_a_request_body() -> None:
    body = {
        "model": "gpt-4.1-mini",
        "temperature": 0,
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"type": "function", "function": {"name": "read_file", "parameters": {}}}],
    }

    transcript = parse_transcript(as_text(body))
    written = json.loads(
        dump_transcript(transcript.messages, format="openai-request", request=transcript.request)
    )

    assert transcript.request == {k: v for k, v in body.items() if k != "messages"}
    assert written == body


def test_openai_output_uses_openai_shapes() -> None:
    records = json.loads(dump_transcript(conversation(), format="openai-json"))

    assert [record["role"] for record in records] == [
        "system",
        "developer",
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
        "tool",
        "user",
        "assistant",
    ]
    assert records[3]["tool_calls"][1] == {
        "id": "call_b",
        "type": "function",
        "function": {"name": "read_file", "arguments": '{"path": "b.py", "limit": 40}'},
    }
    assert records[6]["content"] is None
    assert records[5]["status"] == "error"
    assert "status" not in records[4]
    assert records[2]["name"] == "dana"


def test_dump_keeps_calls_whose_arguments_did_not_parse() -> None:
    message = AIMessage(
        "",
        invalid_tool_calls=[
            {
                "type": "invalid_tool_call",
                "id": "call_x",
                "name": "grep",
                "args": "{bad",
                "error": None,
            }
        ],
    )

    [record] = json.loads(dump_transcript([message], format="openai-json"))

    assert record["tool_calls"] == [
        {"type": "function", "id": "call_x", "function": {"name": "grep", "arguments": "{bad"}}
    ]
    assert record["content"] is None


def test_openai_parts_are_written_back_as_they_were() -> None:
    parts = [
        {"type": "text", "text": "cached", "cache_control": {"type": "ephemeral"}},
        {"type": "video_url", "video_url": {"url": "https://example.com/v.mp4"}},
    ]
    text = as_text([{"role": "user", "content": parts}])

    written = json.loads(dump_transcript(parse_transcript(text).messages, format="openai-json"))

    assert written == [{"role": "user", "content": parts}]


def test_anthropic_tool_use_blocks_become_openai_tool_calls() -> None:
    message = AIMessage(
        [
            {"type": "text", "text": "Searching."},
            {"type": "tool_use", "id": "toolu_1", "name": "grep", "input": {"pattern": "x"}},
        ],
        tool_calls=[{"id": "toolu_1", "name": "grep", "args": {"pattern": "x"}}],
    )

    [record] = json.loads(dump_transcript([message], format="openai-json"))

    assert record["content"] == [{"type": "text", "text": "Searching."}]
    assert [call["id"] for call in record["tool_calls"]] == ["toolu_1"]


def test_empty_list_content_beside_tool_calls_reads_back_the_same() -> None:
    call = read_call("call_1", "a.py")
    text = as_text([{"role": "assistant", "content": [], "tool_calls": [call]}])

    transcript = parse_transcript(text)

    assert not transcript.messages[0].content
    assert (
        parse_transcript(dump_transcript(transcript.messages, format="openai-json")) == transcript
    )


def test_jsonl_lines_end_only_at_newlines() -> None:
    messages = [HumanMessage("a\u2028b\x85c"), AIMessage("ok")]

    text = dump_transcript(messages, format="openai-jsonl")

    assert parse_transcript(text).messages == messages


def test_dump_leaves_its_input_alone() -> None:
    messages = conversation()
    before = [message.model_copy(deep=True) for message in messages]

    for format in TRANSCRIPT_FORMATS:
        dump_transcript(messages, format=format)

    assert messages == before


# --------------------------------------------------------------------------- detection


def test_json_array_of_openai_messages_is_openai_json() -> None:
    transcript = parse_transcript(as_text([{"role": "user", "content": "hi"}]))

    assert transcript.format == "openai-json"
    assert transcript.messages == [HumanMessage("hi")]


def test_one_object_per_line_is_openai_jsonl() -> None:
    text = '{"role": "user", "content": "hi"}\n\n{"role": "assistant", "content": "hello"}\n'

    transcript = parse_transcript(text)

    assert transcript.format == "openai-jsonl"
    assert transcript.messages == [HumanMessage("hi"), AIMessage("hello")]


def test_a_single_message_line_is_openai_jsonl() -> None:
    transcript = parse_transcript('{"role": "user", "content": "hi"}\n')

    assert transcript.format == "openai-jsonl"
    assert dump_transcript(transcript.messages, format=transcript.format) == (
        '{"role": "user", "content": "hi"}\n'
    )


def test_object_with_messages_is_an_openai_request() -> None:
    transcript = parse_transcript(
        as_text({"model": "m", "messages": [{"role": "user", "content": "x"}]})
    )

    assert transcript.format == "openai-request"
    assert transcript.request == {"model": "m"}


def test_messages_to_dict_form_is_langchain() -> None:
    text = as_text(
        [{"type": "human", "data": {"content": "hi"}}, {"type": "ai", "data": {"content": "yo"}}]
    )

    transcript = parse_transcript(text)

    assert transcript.format == "langchain"
    assert transcript.messages == [HumanMessage("hi"), AIMessage("yo")]


def test_a_byte_order_mark_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "chat.json"
    path.write_bytes(b"\xef\xbb\xbf" + as_text([{"role": "user", "content": "hi"}]).encode())

    assert load_transcript(path).messages == [HumanMessage("hi")]


# --------------------------------------------------------------------------- lenient cases


def test_null_content_is_fine_on_an_assistant_message_with_tool_calls() -> None:
    text = as_text(
        [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": None, "tool_calls": [read_call("call_1", "a.py")]},
            {"role": "tool", "tool_call_id": "call_1", "content": "x = 1"},
        ]
    )

    messages = parse_transcript(text).messages

    assert messages[1] == AIMessage(
        "", tool_calls=[{"id": "call_1", "name": "read_file", "args": {"path": "a.py"}}]
    )


@pytest.mark.parametrize("arguments", ["", None, {"path": "a.py"}])
def test_empty_or_decoded_arguments_are_accepted(arguments: Any) -> None:
    call = read_call("call_1", "a.py")
    call["function"]["arguments"] = arguments
    text = as_text([{"role": "assistant", "content": None, "tool_calls": [call]}])

    [message] = parse_transcript(text).messages

    assert isinstance(message, AIMessage)
    assert message.tool_calls[0]["args"] == (arguments or {})


# --------------------------------------------------------------------------- errors


def test_text_that_is_not_json_names_line_and_column() -> None:
    error = error_of('[\n  {"role": "user", "content": "hi"},\n  {"role": }\n]')

    assert str(error) == "chat.json: not valid JSON: Expecting value at line 3, column 12"
    assert error.index is None


def test_a_broken_jsonl_line_names_its_message_and_line() -> None:
    error = error_of('{"role": "user", "content": "a"}\n{"role": "assistant", "content": "b"\n')

    assert str(error) == (
        "chat.json: message 1: not valid JSON (line 2, column 37): Expecting ',' delimiter"
    )
    assert error.index == 1


@pytest.mark.parametrize("text", ["", "   \n\n"])
def test_an_empty_file_is_refused(text: str) -> None:
    assert str(error_of(text)) == "chat.json: the file is empty"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("42", "chat.json: expected a JSON array of messages, got a number"),
        ('"hello"', "chat.json: expected a JSON array of messages, got a string"),
        ("[]", "chat.json: the transcript has no messages"),
        ('{"model": "m"}', "chat.json: a JSON object must be a request body with 'messages'"),
        ('{"messages": {}}', "chat.json: 'messages' must be a JSON array, got an object"),
        ('{"messages": []}', "chat.json: the transcript has no messages"),
        ("[1, 2]", "chat.json: message 0: expected a JSON object, got a number"),
        ('[{"content": "hi"}]', "chat.json: message 0: has no 'role'"),
    ],
)
def test_a_document_that_is_not_a_list_of_messages_is_refused(text: str, problem: str) -> None:
    assert str(error_of(text)).startswith(problem)


def test_an_unknown_role_names_the_message() -> None:
    error = error_of(
        as_text([{"role": "user", "content": "a"}, {"role": "critic", "content": "b"}])
    )

    assert str(error).startswith("chat.json: message 1: unknown role 'critic'; expected one of")
    assert error.index == 1


def test_a_tool_call_without_an_id_is_refused() -> None:
    call = read_call("", "a.py")
    del call["id"]
    text = as_text([{"role": "user", "content": "a"}, {"role": "assistant", "tool_calls": [call]}])

    assert (
        str(error_of(text))
        == "chat.json: message 1: assistant message cannot be read: it has no 'id'"
    )


def test_a_tool_message_without_tool_call_id_is_refused() -> None:
    text = as_text(
        [
            {"role": "assistant", "content": None, "tool_calls": [read_call("call_1", "a.py")]},
            {"role": "tool", "content": "x = 1"},
        ]
    )

    assert str(error_of(text)) == (
        "chat.json: message 1: tool message cannot be read: it has no 'tool_call_id'"
    )


@pytest.mark.parametrize(
    "assistant",
    [
        {"role": "assistant", "content": None},
        {"role": "assistant"},
        {"role": "assistant", "content": "", "tool_calls": []},
    ],
)
def test_an_assistant_message_with_nothing_in_it_is_refused(assistant: dict[str, Any]) -> None:
    error = error_of(as_text([{"role": "user", "content": "a"}, assistant]))

    assert str(error) == (
        "chat.json: message 1: assistant message has neither content nor tool calls"
    )


@pytest.mark.parametrize("role", ["system", "developer", "user", "tool"])
def test_a_message_without_content_is_refused(role: str) -> None:
    message: dict[str, Any] = {"role": role, "content": None}
    if role == "tool":
        message["tool_call_id"] = "call_1"

    error = error_of(as_text([{"role": "user", "content": "a"}, message]))

    assert str(error) == f"chat.json: message 1: {role} message has no content"


def test_arguments_that_are_not_json_are_refused() -> None:
    call = read_call("call_1", "a.py")
    call["function"]["arguments"] = '{"path": "a.py"'

    error = error_of(as_text([{"role": "assistant", "content": None, "tool_calls": [call]}]))

    assert str(error) == (
        "chat.json: message 0: tool call arguments are not valid JSON: "
        "Expecting ',' delimiter at column 16"
    )


def test_arguments_that_are_not_an_object_are_refused() -> None:
    call = read_call("call_1", "a.py")
    call["function"]["arguments"] = "[1, 2]"

    error = error_of(as_text([{"role": "assistant", "content": None, "tool_calls": [call]}]))

    assert str(error) == (
        "chat.json: message 0: assistant message: tool_calls.0.args: "
        "Input should be a valid dictionary"
    )


@pytest.mark.parametrize(
    ("message", "problem"),
    [
        (
            {"role": "user", "content": 5},
            "user message: content.str: Input should be a valid string",
        ),
        ({"role": "user", "content": "hi", "name": 3}, "user message: name: Input should be"),
        (
            {"role": "tool", "content": "x", "tool_call_id": "c", "status": "ok"},
            "tool message: status: Input should be 'success' or 'error'",
        ),
        (
            {"role": "assistant", "tool_calls": {"id": "c"}},
            "'tool_calls' must be a JSON array, got an object",
        ),
        (
            {"role": "assistant", "tool_calls": [{"id": "c", "type": "custom"}]},
            "tool call 0 has no 'function' object",
        ),
        (
            {"role": "assistant", "tool_calls": [{"id": "c", "function": {"arguments": "{}"}}]},
            "assistant message cannot be read: it has no 'name'",
        ),
    ],
)
def test_malformed_fields_name_the_field(message: dict[str, Any], problem: str) -> None:
    assert str(error_of(as_text([message]))).startswith(f"chat.json: message 0: {problem}")


def test_a_written_call_with_broken_arguments_is_refused_on_reading() -> None:
    message = AIMessage(
        "",
        invalid_tool_calls=[
            {
                "type": "invalid_tool_call",
                "id": "call_x",
                "name": "grep",
                "args": "{bad",
                "error": None,
            }
        ],
    )

    error = error_of(dump_transcript([message], format="openai-json"))

    assert "message 0: tool call arguments are not valid JSON" in str(error)


@pytest.mark.parametrize(
    ("record", "problem"),
    [
        ({"type": "tool", "data": {"content": "x"}}, "tool message has no tool_call_id"),
        ({"type": "human", "data": {}}, "human message has no content"),
        ({"type": "human", "data": {"content": 5}}, "human message: content.str: Input should be"),
        ({"type": "human", "data": "hi"}, "'data' must be a JSON object, got a string"),
        ({"type": "robot", "data": {"content": "x"}}, "robot message cannot be read"),
        ({"type": 7, "data": {"content": "x"}}, "'type' must be a string, got a number"),
        (
            {"type": "ai", "data": {"content": "", "tool_calls": "0"}},
            "ai message cannot be read",
        ),
        (
            {"role": "user", "content": "x"},
            "expected a LangChain message dict with 'type' and 'data'",
        ),
        (
            {
                "type": "ai",
                "data": {"content": "", "tool_calls": [{"name": "grep", "args": {}, "id": None}]},
            },
            "tool call 0 (grep) has no id",
        ),
        (
            {"type": "ai", "data": {"content": ""}},
            "assistant message has neither content nor tool calls",
        ),
    ],
)
def test_langchain_errors_name_the_message(record: dict[str, Any], problem: str) -> None:
    text = as_text([{"type": "human", "data": {"content": "hi"}}, record])

    error = error_of(text)

    assert str(error).startswith("chat.json: message 1: ")
    assert problem in str(error)


def test_errors_are_one_line() -> None:
    text = as_text(
        [{"type": "human", "data": {"content": "hi"}}, {"type": "robot", "data": {"content": "x"}}]
    )

    assert "\n" not in str(error_of(text))


def test_a_missing_file_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "missing.json"

    with pytest.raises(TranscriptError) as caught:
        load_transcript(path)

    assert str(caught.value) == f"{path}: cannot be read: No such file or directory"


def test_a_directory_cannot_be_read(tmp_path: Path) -> None:
    with pytest.raises(TranscriptError, match="cannot be read"):
        load_transcript(tmp_path)


def test_a_file_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "chat.json"
    path.write_bytes(b'[{"role": "user", "content": "\xff"}]')

    with pytest.raises(TranscriptError) as caught:
        load_transcript(path)

    assert str(caught.value) == f"{path}: is not UTF-8 text (byte 30)"


def test_load_errors_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "chat.json"
    path.write_text(as_text([{"role": "user", "content": "a"}, {"role": "bot", "content": "b"}]))

    with pytest.raises(TranscriptError, match=re.escape(f"{path}: message 1: unknown role 'bot'")):
        load_transcript(path)


# --------------------------------------------------------------------------- dump settings


def test_dump_refuses_an_unknown_format() -> None:
    with pytest.raises(ValueError, match="format must be one of"):
        dump_transcript([HumanMessage("hi")], format="yaml")  # type: ignore[arg-type]


def test_dump_refuses_a_request_for_other_formats() -> None:
    with pytest.raises(ValueError, match="request is only written with format='openai-request'"):
        dump_transcript([HumanMessage("hi")], format="openai-json", request={"model": "m"})


def test_dump_refuses_a_request_holding_messages() -> None:
    with pytest.raises(ValueError, match="request must not contain 'messages'"):
        dump_transcript([HumanMessage("hi")], format="openai-request", request={"messages": []})


def test_dump_names_a_message_openai_cannot_hold() -> None:
    messages = [HumanMessage("hi"), FunctionMessage(content="result", name="f")]

    with pytest.raises(ValueError, match="message 1: a 'function' message has no OpenAI chat role"):
        dump_transcript(messages, format="openai-json")


def test_langchain_format_keeps_what_openai_cannot() -> None:
    message = ToolMessage("x", tool_call_id="c", artifact={"rows": 3}, id="m1")

    [loaded] = parse_transcript(dump_transcript([message], format="langchain")).messages

    assert loaded == message


# --------------------------------------------------------------------------- bundled data


@pytest.fixture(scope="module")
def sample() -> list[BaseMessage]:
    transcript = load_transcript(sample_transcript_path())
    assert transcript.format == "openai-json"
    return transcript.messages


def test_sample_is_a_few_hundred_messages_under_the_size_limit(sample: list[BaseMessage]) -> None:
    assert 250 <= len(sample) <= 350
    assert sample_transcript_path().stat().st_size < 1_500_000


def test_sample_opens_with_a_system_prompt_and_a_task(sample: list[BaseMessage]) -> None:
    assert isinstance(sample[0], SystemMessage)
    assert isinstance(sample[1], HumanMessage)
    assert "fix the failing tests" in str(sample[1].content)


def test_sample_has_parallel_calls(sample: list[BaseMessage]) -> None:
    widths = [len(message.tool_calls) for message in sample if isinstance(message, AIMessage)]

    assert sum(width >= 2 for width in widths) >= 5
    assert max(widths) == 3


def test_sample_uses_all_five_tools(sample: list[BaseMessage]) -> None:
    names = {call["name"] for m in sample if isinstance(m, AIMessage) for call in m.tool_calls}

    assert names == {"read_file", "grep", "exec", "list_dir", "write_file"}


def test_sample_answers_every_call_right_after_it_but_one(sample: list[BaseMessage]) -> None:
    unanswered = []
    for index, message in enumerate(sample):
        expected = declared_tool_call_ids(message)
        following = sample[index + 1 : index + 1 + len(expected)]
        answered = [m.tool_call_id for m in following if isinstance(m, ToolMessage)]
        if answered != expected:
            unanswered.append(index)
            assert answered == []

    assert len(unanswered) == 1
    after = sample[unanswered[0] + 1]
    assert isinstance(after, HumanMessage)
    assert after.content == "sorry, I had to restart, please continue"


def test_sample_has_no_tool_result_without_its_call(sample: list[BaseMessage]) -> None:
    declared = {call_id for message in sample for call_id in declared_tool_call_ids(message)}
    results = [message.tool_call_id for message in sample if isinstance(message, ToolMessage)]

    assert set(results) <= declared
    assert len(results) == len(set(results))


def test_sample_has_large_tool_results(sample: list[BaseMessage]) -> None:
    sizes = [len(str(message.content)) for message in sample if isinstance(message, ToolMessage)]

    assert max(sizes) >= 10_000
    assert sum(2_000 <= size <= 20_000 for size in sizes) >= 30


def test_sample_has_a_follow_up_request_and_ends_with_an_answer(
    sample: list[BaseMessage],
) -> None:
    follow_ups = [
        index
        for index, message in enumerate(sample)
        if isinstance(message, HumanMessage)
        and index > 1
        and isinstance(sample[index - 1], AIMessage)
        and not has_tool_calls(sample[index - 1])
    ]

    assert len(follow_ups) == 1
    assert "CHANGELOG" in str(sample[follow_ups[0]].content)
    assert isinstance(sample[-1], AIMessage)
    assert not has_tool_calls(sample[-1])


def test_sample_workspace_is_a_small_project() -> None:
    root = sample_workspace_path()
    files = [
        path
        for path in root.rglob("*")
        if path.is_file()
        and not any(part.startswith((".", "__pycache__")) for part in path.relative_to(root).parts)
    ]
    python_files = [path for path in files if path.suffix == ".py"]

    assert 8 <= len(files) <= 15
    assert len(python_files) >= 8
    assert max(path.stat().st_size for path in files) > 8_000


def run_workspace_tests(root: Path) -> list[str]:
    """Node ids of the failing tests of a workspace copy, from a real pytest run."""
    environment = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rf"],
        cwd=root,
        env=environment,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode in (0, 1), result.stdout + result.stderr
    return failed_in_log(result.stdout)


def failed_in_log(log: str) -> list[str]:
    return sorted(re.findall(r"^FAILED (.+?)(?: - .*)?$", log, flags=re.MULTILINE))


def copy_workspace(destination: Path) -> Path:
    shutil.copytree(
        sample_workspace_path(),
        destination,
        ignore=shutil.ignore_patterns("__pycache__", ".*"),
    )
    return destination


def exec_results(sample: list[BaseMessage], command: str) -> list[str]:
    """The answered results of every `exec` call of `command`, in order."""
    results = {m.tool_call_id: str(m.content) for m in sample if isinstance(m, ToolMessage)}
    calls = [
        call
        for message in sample
        if isinstance(message, AIMessage)
        for call in message.tool_calls
        if call["name"] == "exec" and call["args"]["command"] == command
    ]
    return [results[call["id"]] for call in calls if call["id"] in results]


def test_workspace_fails_as_the_sample_says(sample: list[BaseMessage], tmp_path: Path) -> None:
    logged = failed_in_log(exec_results(sample, "python -m pytest")[0])

    assert len(logged) == 12
    assert run_workspace_tests(copy_workspace(tmp_path / "workspace")) == logged


def test_sample_writes_make_the_workspace_pass(sample: list[BaseMessage], tmp_path: Path) -> None:
    root = copy_workspace(tmp_path / "workspace")
    writes = [
        call["args"]
        for message in sample
        if isinstance(message, AIMessage)
        for call in message.tool_calls
        if call["name"] == "write_file"
    ]
    for write in writes:
        (root / write["path"]).write_text(write["content"], encoding="utf-8")

    assert len(writes) == 6
    assert run_workspace_tests(root) == []
    assert "36 passed" in exec_results(sample, "python -m pytest -q")[-1]


def load_generator(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_sample_transcript", GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # dataclasses look their module up while the module is still being executed.
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    return module


def test_generator_is_deterministic_and_matches_the_bundled_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    generator = load_generator(monkeypatch)

    generator.main(["--output", str(tmp_path / "one")])
    generator.main(["--output", str(tmp_path / "two")])

    one = (tmp_path / "one" / "sample_transcript.json").read_bytes()
    assert one == (tmp_path / "two" / "sample_transcript.json").read_bytes()
    # Compared as JSON so that a formatting change in a dependency does not fail here,
    # while any change of content means the bundled file needs regenerating.
    assert json.loads(one) == json.loads(sample_transcript_path().read_bytes())


@pytest.mark.parametrize(
    "text", ["[" * 100_000 + "]" * 100_000, '{"a": ' * 100_000 + "1" + "}" * 100_000]
)
def test_json_nested_too_deeply_is_refused_in_one_line(text: str) -> None:
    assert str(error_of(text)) == "chat.json: the JSON is nested too deeply to read"
