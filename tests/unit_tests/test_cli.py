"""The `context-governance` command: govern, check and demo, formats, reports, exit codes."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    messages_to_dict,
)
from langchain_core.messages.tool import invalid_tool_call
from typer.testing import CliRunner

from langchain_context_governance import ContextGovernor
from langchain_context_governance.anthropic_messages import anthropic_body, legal_prefill
from langchain_context_governance.cli import EXIT_BAD_INPUT, EXIT_BROKEN_RULES, app
from langchain_context_governance.rules.validate import validate_messages
from langchain_context_governance.transcripts import (
    OPENAI_MESSAGE_KEYS,
    TRANSCRIPT_FORMATS,
    TranscriptError,
    dump_transcript,
    parse_transcript,
)
from tests.builders import tool_loop
from tests.strategies import IMAGE_BLOCK, histories
from tests.wire import RecordingServer, WireClients

runner = CliRunner()

READ_CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "read_file", "arguments": '{"path": "a.py"}'},
}
# Breaks two rules: call_1 is never answered, and the last message answers nothing.
BROKEN = [
    {"role": "system", "content": "You are a coding agent."},
    {"role": "user", "content": "read a.py"},
    {"role": "assistant", "content": None, "tool_calls": [READ_CALL]},
    {"role": "user", "content": "sorry, I restarted"},
    {"role": "tool", "tool_call_id": "call_stray", "content": "stray result"},
]
CLEAN = [
    {"role": "user", "content": "read a.py"},
    {"role": "assistant", "content": None, "tool_calls": [READ_CALL]},
    {"role": "tool", "tool_call_id": "call_1", "content": "print('a')"},
]
REQUEST_KEYS = {"model": "gpt-4o-mini", "temperature": 0}


def write_messages(path: Path, records: list[dict[str, Any]], fmt: str) -> Path:
    """Write OpenAI message records to `path` in transcript format `fmt`."""
    if fmt == "openai-json":
        text = json.dumps(records)
    elif fmt == "openai-jsonl":
        text = "\n".join(json.dumps(record) for record in records) + "\n"
    elif fmt == "openai-request":
        text = json.dumps({**REQUEST_KEYS, "messages": records})
    elif fmt == "anthropic-request":
        messages = parse_transcript(json.dumps(records)).messages
        text = json.dumps(anthropic_body(messages, {"system": "Be brief.", **REQUEST_KEYS}))
    else:
        messages = parse_transcript(json.dumps(records)).messages
        text = json.dumps(messages_to_dict(messages))
    path.write_text(text, encoding="utf-8")
    return path


def governed_by_default(records: list[dict[str, Any]]) -> list[BaseMessage]:
    return ContextGovernor().govern(parse_transcript(json.dumps(records)).messages).messages


def assert_one_line_error(stderr: str, *parts: str) -> None:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    for part in parts:
        assert part in lines[0]
    assert "Traceback" not in stderr


@pytest.mark.parametrize("fmt", TRANSCRIPT_FORMATS)
def test_govern_writes_the_governed_messages_in_the_input_format(tmp_path: Path, fmt: str) -> None:
    source = write_messages(tmp_path / "in.txt", BROKEN, fmt)
    out = tmp_path / "out.txt"

    result = runner.invoke(app, ["govern", str(source), "-o", str(out)])

    assert result.exit_code == 0, result.stderr
    assert result.stdout == ""
    written = parse_transcript(out.read_text(encoding="utf-8"))
    assert written.format == fmt
    provider = "anthropic" if fmt == "anthropic-request" else "openai"
    assert validate_messages(written.messages, provider=provider) == []
    read = parse_transcript(source.read_text(encoding="utf-8"))
    governed = ContextGovernor(provider=provider).govern(read.messages).messages
    expected = parse_transcript(dump_transcript(governed, format=fmt, request=read.request))
    assert [(m.type, m.content) for m in written.messages] == [
        (m.type, m.content) for m in expected.messages
    ]
    assert written.request == read.request


def test_govern_without_output_writes_to_stdout(tmp_path: Path) -> None:
    source = write_messages(tmp_path / "in.json", BROKEN, "openai-json")

    result = runner.invoke(app, ["govern", str(source)])

    assert result.exit_code == 0, result.stderr
    expected = dump_transcript(governed_by_default(BROKEN), format="openai-json")
    assert result.stdout == expected


def test_govern_prints_the_report_as_a_table_on_stderr(tmp_path: Path) -> None:
    source = write_messages(tmp_path / "in.json", BROKEN, "openai-json")

    result = runner.invoke(app, ["govern", str(source), "-o", str(tmp_path / "out.json")])

    assert result.exit_code == 0
    for pass_name in ("drop_orphan_tool_results", "backfill_missing_tool_results"):
        assert pass_name in result.stderr
    assert "tokens" in result.stderr
    # Without a window nothing is measured against a budget: no "within budget" verdict.
    assert "repairs only" in result.stderr
    assert "within budget" not in result.stderr


def test_report_json_matches_the_governor_report(tmp_path: Path) -> None:
    source = write_messages(tmp_path / "in.json", BROKEN, "openai-json")
    out = tmp_path / "out.json"

    result = runner.invoke(app, ["govern", str(source), "-o", str(out), "--report-json"])

    assert result.exit_code == 0
    report = json.loads(result.stderr)
    expected = ContextGovernor().govern(parse_transcript(json.dumps(BROKEN)).messages).report
    assert report["changes"] == expected.changes
    assert report["changes"]["drop_orphan_tool_results"] == 1
    assert report["changes"]["backfill_missing_tool_results"] == 1
    assert (report["tokens_before"], report["tokens_after"]) == (
        expected.tokens_before,
        expected.tokens_after,
    )
    assert report["budget"] is None
    assert report["within_budget"] is True


def test_window_snips_a_long_transcript_into_the_budget(tmp_path: Path) -> None:
    history = tool_loop(40, size=800)
    source = tmp_path / "long.json"
    source.write_text(dump_transcript(history, format="openai-json"), encoding="utf-8")
    window, max_output = 3_000, 500
    arguments = ["govern", str(source), "--window", str(window), "--max-output", str(max_output)]

    result = runner.invoke(app, [*arguments, "--keep-recent", "4", "--report-json"])

    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stderr)
    assert report["budget"] == window - max_output - 1024
    assert report["tokens_before"] > report["budget"] >= report["tokens_after"]
    assert report["changes"]["snip_history"] > 0
    governed = parse_transcript(result.stdout).messages
    assert len(governed) == report["messages_after"] < len(history)
    assert validate_messages(governed) == []


def test_counter_tiktoken_counts_with_the_bundled_encoding(tmp_path: Path) -> None:
    source = write_messages(tmp_path / "in.json", CLEAN, "openai-json")

    approximate = runner.invoke(app, ["govern", str(source), "--report-json"])
    tiktoken = runner.invoke(app, ["govern", str(source), "--counter", "tiktoken", "--report-json"])

    assert approximate.exit_code == tiktoken.exit_code == 0
    messages = parse_transcript(json.dumps(CLEAN)).messages
    expected = ContextGovernor(token_counter="tiktoken").count_tokens(messages)
    assert json.loads(tiktoken.stderr)["tokens_before"] == expected
    assert json.loads(approximate.stderr)["tokens_before"] == ContextGovernor().count_tokens(
        messages
    )


def test_model_takes_window_and_output_from_the_langchain_profile(tmp_path: Path) -> None:
    pytest.importorskip("langchain_openai")
    source = write_messages(tmp_path / "in.json", CLEAN, "openai-json")

    from_profile = runner.invoke(
        app, ["govern", str(source), "--model", "gpt-4o-mini", "--report-json"]
    )
    overridden = runner.invoke(
        app,
        ["govern", str(source), "--model", "gpt-4o-mini", "--max-output", "1000", "--report-json"],
    )

    assert from_profile.exit_code == 0, from_profile.stderr
    # gpt-4o-mini's profile: 128,000 input tokens, 16,384 output tokens; 1,024 safety buffer.
    assert json.loads(from_profile.stderr)["budget"] == 128_000 - 16_384 - 1_024
    assert json.loads(overridden.stderr)["budget"] == 128_000 - 1_000 - 1_024


@pytest.mark.parametrize("model", ["no-such-model", "openai:no-such-model"])
def test_unknown_model_is_one_line_and_exit_2(tmp_path: Path, model: str) -> None:
    source = write_messages(tmp_path / "in.json", CLEAN, "openai-json")
    out = tmp_path / "out.json"

    result = runner.invoke(app, ["govern", str(source), "--model", model, "-o", str(out)])

    assert result.exit_code == EXIT_BAD_INPUT
    assert_one_line_error(result.stderr, f"--model {model}", "--window")
    assert not out.exists()


def test_window_too_small_for_the_output_reservation_is_one_line(tmp_path: Path) -> None:
    source = write_messages(tmp_path / "in.json", CLEAN, "openai-json")

    result = runner.invoke(app, ["govern", str(source), "--window", "100"])

    assert result.exit_code == EXIT_BAD_INPUT
    assert_one_line_error(result.stderr, "--window", "100 - 4096 - 1024")


def test_govern_applies_the_provider_profile(tmp_path: Path) -> None:
    source = write_messages(tmp_path / "in.json", BROKEN, "openai-json")
    assert validate_messages(BROKEN, provider="mistral") != []

    default = runner.invoke(app, ["govern", str(source)])
    mistral = runner.invoke(app, ["govern", str(source), "--provider", "mistral"])

    assert default.exit_code == 0 and mistral.exit_code == 0, mistral.stderr
    governed = parse_transcript(mistral.stdout).messages
    assert validate_messages(governed, provider="mistral") == []
    # Only the profile rewrites tool-call ids to Mistral's 9 characters.
    assert validate_messages(parse_transcript(default.stdout).messages, provider="mistral") != []


def test_unknown_provider_is_a_usage_error(tmp_path: Path) -> None:
    source = write_messages(tmp_path / "in.json", CLEAN, "openai-json")

    result = runner.invoke(app, ["check", str(source), "--provider", "acme"])

    assert result.exit_code == 2
    assert "acme" in result.stderr


@pytest.mark.parametrize("fmt", TRANSCRIPT_FORMATS)
def test_check_lists_each_broken_rule_and_exits_1(tmp_path: Path, fmt: str) -> None:
    source = write_messages(tmp_path / "in.txt", BROKEN, fmt)

    result = runner.invoke(app, ["check", str(source)])

    assert result.exit_code == EXIT_BROKEN_RULES
    lines = result.stdout.strip().splitlines()
    # An Anthropic body's own numbering: the system prompt is no message of it.
    call, stray = (1, 3) if fmt == "anthropic-request" else (2, 4)
    assert lines == [
        f"{source}: message {call}: unanswered-tool-call: Tool call 'call_1' (read_file) is not "
        "answered by a tool message directly after the assistant message that declares it.",
        f"{source}: message {stray}: orphan-tool-result: Tool result for 'call_stray' answers "
        "no tool call declared by an earlier assistant message.",
    ]
    assert "2 broken rules" in result.stderr


def test_check_names_the_whole_request_for_request_level_rules(tmp_path: Path) -> None:
    source = write_messages(
        tmp_path / "in.json", [{"role": "system", "content": "hi"}], "openai-json"
    )

    result = runner.invoke(app, ["check", str(source)])

    assert result.exit_code == EXIT_BROKEN_RULES
    assert result.stdout.startswith(f"{source}: request: empty-request: ")


def test_check_a_clean_transcript_exits_0(tmp_path: Path) -> None:
    source = write_messages(tmp_path / "in.json", CLEAN, "openai-json")

    result = runner.invoke(app, ["check", str(source)])

    assert result.exit_code == 0
    assert "no broken rules" in result.stdout


def test_check_uses_the_rules_of_the_provider(tmp_path: Path) -> None:
    source = write_messages(tmp_path / "in.json", CLEAN, "openai-json")

    openai = runner.invoke(app, ["check", str(source), "--provider", "openai"])
    mistral = runner.invoke(app, ["check", str(source), "--provider", "mistral"])

    assert openai.exit_code == 0
    assert mistral.exit_code == EXIT_BROKEN_RULES
    # Mistral wants tool call ids of exactly 9 letters and digits; "call_1" is not one.
    assert "message 1:" in mistral.stdout


BAD_INPUTS = {
    "not-json": ('[{"role": "user", "content": "hi"}', "not valid JSON"),
    "unknown-role": (
        json.dumps([{"role": "user", "content": "hi"}, {"role": "wizard", "content": "x"}]),
        "message 1: unknown role 'wizard'",
    ),
    "tool-call-without-id": (
        json.dumps(
            [
                {"role": "user", "content": "hi"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"type": "function", "function": {"name": "f", "arguments": "{}"}}
                    ],
                },
            ]
        ),
        "message 1: assistant message cannot be read: it has no 'id'",
    ),
    "no-content-no-tool-calls": (
        json.dumps([{"role": "user", "content": "hi"}, {"role": "assistant", "content": None}]),
        "message 1: assistant message has neither content nor tool calls",
    ),
}


@pytest.mark.parametrize("command", ["govern", "check"])
@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_is_one_line_exit_2_and_writes_nothing(
    tmp_path: Path, command: str, case: str
) -> None:
    text, problem = BAD_INPUTS[case]
    source = tmp_path / f"{case}.json"
    source.write_text(text, encoding="utf-8")
    out = tmp_path / "out.json"
    out.write_text("previous run", encoding="utf-8")
    arguments = [command, str(source)] + (["-o", str(out)] if command == "govern" else [])

    result = runner.invoke(app, arguments)

    assert result.exit_code == EXIT_BAD_INPUT
    assert_one_line_error(result.stderr, f"{source}: ", problem)
    assert result.stdout == ""
    assert out.read_text(encoding="utf-8") == "previous run"


def test_missing_file_is_one_line_and_exit_2(tmp_path: Path) -> None:
    missing = tmp_path / "missing.json"
    out = tmp_path / "out.json"

    result = runner.invoke(app, ["govern", str(missing), "-o", str(out)])

    assert result.exit_code == EXIT_BAD_INPUT
    assert_one_line_error(result.stderr, str(missing))
    assert not out.exists()


def test_unwritable_output_is_one_line_and_exit_2(tmp_path: Path) -> None:
    source = write_messages(tmp_path / "in.json", CLEAN, "openai-json")
    out = tmp_path / "no-such-folder" / "out.json"

    result = runner.invoke(app, ["govern", str(source), "-o", str(out)])

    assert result.exit_code == EXIT_BAD_INPUT
    assert_one_line_error(result.stderr, str(out))


def test_demo_prints_calls_and_summary_and_writes_the_chart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("matplotlib")
    monkeypatch.chdir(tmp_path)

    result = runner.invoke(app, ["demo", "--steps", "3"])

    assert result.exit_code == 0, result.output
    assert "Demo summary" in result.stdout
    assert "rejected without governance" in result.stdout
    assert (tmp_path / "context-governance-demo.png").read_bytes().startswith(b"\x89PNG")


def test_demo_chart_path_and_no_chart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("matplotlib")
    monkeypatch.chdir(tmp_path)
    chart = tmp_path / "charts.png"

    with_chart = runner.invoke(app, ["demo", "--steps", "2", "--chart", str(chart)])
    without_chart = runner.invoke(app, ["demo", "--steps", "2", "--no-chart"])

    assert with_chart.exit_code == without_chart.exit_code == 0
    assert chart.read_bytes().startswith(b"\x89PNG")
    assert "Chart" not in without_chart.stdout
    assert sorted(path.name for path in tmp_path.iterdir()) == ["charts.png"]


def test_demo_window_too_small_is_one_line(tmp_path: Path) -> None:
    # The demo model writes up to 1,000 tokens: a quarter of a 600-token window is
    # reserved for them, which leaves the 500-token safety buffer no room.
    result = runner.invoke(app, ["demo", "--steps", "1", "--window", "600", "--no-chart"])

    assert result.exit_code == EXIT_BAD_INPUT
    assert_one_line_error(result.stderr, "demo:", "600")


def test_python_dash_m_runs_the_same_program() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "langchain_context_governance", "--help"],
        capture_output=True,
        text=True,
        check=False,
    )

    assert completed.returncode == 0, completed.stderr
    for command in ("govern", "check", "demo"):
        assert command in completed.stdout


# --------------------------------------------------------------------------- request bodies

SCHEMA_TOOL = {
    "type": "function",
    "function": {
        "name": "read_file",
        "description": "Read a file of the workspace. " * 200,
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
    },
}


def test_the_tools_of_a_request_body_count_and_are_written_back(tmp_path: Path) -> None:
    body = {**REQUEST_KEYS, "tools": [SCHEMA_TOOL], "messages": CLEAN}
    with_tools = tmp_path / "with-tools.json"
    with_tools.write_text(json.dumps(body), encoding="utf-8")
    without = write_messages(tmp_path / "without.json", CLEAN, "openai-request")

    counted = runner.invoke(app, ["govern", str(with_tools), "--report-json", "-o", "-"])
    plain = runner.invoke(app, ["govern", str(without), "--report-json"])

    assert counted.exit_code == plain.exit_code == 0, counted.stderr
    tools_tokens = ContextGovernor().counter.count_tools([SCHEMA_TOOL])
    assert tools_tokens > 1_000
    before = json.loads(counted.stderr)["tokens_before"]
    assert before == json.loads(plain.stderr)["tokens_before"] + tools_tokens
    assert json.loads(counted.stdout)["tools"] == [SCHEMA_TOOL]


def test_an_anthropic_body_is_governed_by_anthropic_rules_and_written_in_kind(
    tmp_path: Path,
) -> None:
    body = {
        "model": "claude-sonnet-4-5",
        "system": "You are a coding agent.",
        "tools": [{"name": "read_file", "input_schema": {"type": "object"}}],
        "messages": [
            {"role": "user", "content": "read a.py"},
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {}}
                ],
            },
            {"role": "user", "content": "sorry, I restarted"},
        ],
    }
    source = tmp_path / "anthropic.json"
    source.write_text(json.dumps(body), encoding="utf-8")

    result = runner.invoke(app, ["govern", str(source), "--report-json", "-o", "-"])

    assert result.exit_code == 0, result.stderr
    written = json.loads(result.stdout)
    assert written["system"] == body["system"]
    assert written["tools"] == body["tools"]
    assert [turn["role"] for turn in written["messages"]] == ["user", "assistant", "user"]
    results = [block for block in written["messages"][2]["content"] if block["type"] != "text"]
    assert [block["tool_use_id"] for block in results] == ["toolu_1"]
    assert json.loads(result.stderr)["changes"]["backfill_missing_tool_results"] == 1
    checked = runner.invoke(app, ["check", str(source)])
    assert checked.exit_code == EXIT_BROKEN_RULES
    assert "broken rule for provider 'anthropic'" in checked.stderr


# --------------------------------------------------------------------------- streams, options


def test_dash_reads_stdin_and_writes_stdout() -> None:
    result = runner.invoke(app, ["govern", "-", "-o", "-"], input=json.dumps(BROKEN))

    assert result.exit_code == 0, result.stderr
    assert validate_messages(parse_transcript(result.stdout).messages) == []
    checked = runner.invoke(app, ["check", "-"], input=json.dumps(CLEAN))
    assert checked.exit_code == 0
    assert checked.stdout.startswith("-: 3 messages")


def test_binary_stdin_is_one_line_and_exit_2() -> None:
    result = runner.invoke(app, ["govern", "-"], input=b"\xff\xfe\x00binary")

    assert result.exit_code == EXIT_BAD_INPUT
    assert_one_line_error(result.stderr, "<stdin>: is not UTF-8 text")


UNREADABLE = {
    "directory": (None, "cannot be read"),
    "binary": (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xd8", "is not UTF-8 text"),
    "nested-too-deeply": (b"[" * 50_000 + b"]" * 50_000, "nested too deeply"),
    "bad-json": (b'[{"role": "user", "content": "hi"},]', "not valid JSON"),
}


@pytest.mark.parametrize("command", ["govern", "check"])
@pytest.mark.parametrize("case", sorted(UNREADABLE))
def test_unreadable_input_is_one_line_and_exit_2(tmp_path: Path, command: str, case: str) -> None:
    data, problem = UNREADABLE[case]
    source = tmp_path / case
    if data is None:
        source.mkdir()
    else:
        source.write_bytes(data)

    result = runner.invoke(app, [command, str(source)])

    assert result.exit_code == EXIT_BAD_INPUT
    assert_one_line_error(result.stderr, str(source), problem)


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_output_files_follow_the_umask(tmp_path: Path, umask: int, mode: int) -> None:
    source = write_messages(tmp_path / "in.json", CLEAN, "openai-json")
    out = tmp_path / "out.json"
    previous = os.umask(umask)
    try:
        result = runner.invoke(app, ["govern", str(source), "-o", str(out)])
    finally:
        os.umask(previous)

    assert result.exit_code == 0, result.stderr
    assert stat.S_IMODE(out.stat().st_mode) == mode


def test_an_existing_output_file_keeps_its_mode(tmp_path: Path) -> None:
    source = write_messages(tmp_path / "in.json", CLEAN, "openai-json")
    out = tmp_path / "out.json"
    out.write_text("previous", encoding="utf-8")
    out.chmod(0o640)

    assert runner.invoke(app, ["govern", str(source), "-o", str(out)]).exit_code == 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o640


def test_safety_buffer_sets_the_budget(tmp_path: Path) -> None:
    source = write_messages(tmp_path / "in.json", CLEAN, "openai-json")
    arguments = ["govern", str(source), "--window", "10000", "--max-output", "1000"]

    default = runner.invoke(app, [*arguments, "--report-json"])
    small = runner.invoke(app, [*arguments, "--safety-buffer", "0", "--report-json"])

    assert json.loads(default.stderr)["budget"] == 10_000 - 1_000 - 1_024
    assert json.loads(small.stderr)["budget"] == 9_000


def test_version_prints_the_package_version() -> None:
    result = runner.invoke(app, ["--version"])

    assert result.exit_code == 0
    assert result.stdout.strip() == f"context-governance {version('langchain-context-governance')}"


def test_help_shows_the_defaults() -> None:
    result = runner.invoke(app, ["govern", "--help"], env={"COLUMNS": "200"})

    assert result.exit_code == 0
    assert "[default: 4096, or the --model profile's]" in result.stdout
    assert "[default: 1024]" in result.stdout
    assert "[default: none: repairs only]" in result.stdout


# ------------------------------------------------ governed bodies as the real clients send them


@pytest.fixture(scope="module")
def wire() -> Iterator[WireClients]:
    with RecordingServer() as server:
        yield WireClients(server)


def governed_body(body: dict[str, Any]) -> dict[str, Any]:
    result = runner.invoke(app, ["govern", "-", "-o", "-"], input=json.dumps(body))
    assert result.exit_code == 0, result.stderr
    governed: dict[str, Any] = json.loads(result.stdout)
    return governed


def readable(body: dict[str, Any]) -> list[BaseMessage]:
    """The body's messages; a body the command refuses (a call without an id) is no example."""
    try:
        return parse_transcript(json.dumps(body)).messages
    except TranscriptError:
        assume(False)
        raise


def assert_same_messages_key_by_key(ours: list[Any], theirs: list[Any]) -> None:
    assert len(ours) == len(theirs)
    for index, (our, their) in enumerate(zip(ours, theirs, strict=True)):
        assert sorted(our) == sorted(their), f"message {index}: keys differ"
        for key in our:
            assert our[key] == their[key], f"message {index}: {key!r} differs"


def test_a_backfilled_result_in_an_openai_body_has_the_keys_of_a_tool_message(
    wire: WireClients,
) -> None:
    written = governed_body({**REQUEST_KEYS, "messages": BROKEN})
    [backfilled] = [m for m in written["messages"] if m["role"] == "tool"]
    assert sorted(backfilled) == sorted(OPENAI_MESSAGE_KEYS["tool"])
    governed = ContextGovernor().invoke(parse_transcript(json.dumps(BROKEN)).messages)
    sent = wire.send("ChatOpenAI", governed)
    assert isinstance(sent, dict)
    assert_same_messages_key_by_key(written["messages"], sent["messages"])


@settings(max_examples=40)
@given(history=histories())
def test_a_governed_openai_body_holds_what_chat_openai_sends(
    wire: WireClients, history: list[BaseMessage]
) -> None:
    body = json.loads(dump_transcript(history, format="openai-request", request=REQUEST_KEYS))
    read = readable(body)
    governed = ContextGovernor().invoke(read)
    assume(governed)
    written = governed_body(body)
    sent = wire.send("ChatOpenAI", governed)
    assert isinstance(sent, dict)
    assert_same_messages_key_by_key(written["messages"], sent["messages"])
    assert {key: written[key] for key in REQUEST_KEYS} == REQUEST_KEYS


def test_openai_message_keys_are_those_langchain_openai_writes() -> None:
    from langchain_openai.chat_models.base import _convert_message_to_dict

    every_field = [
        SystemMessage("s", name="n"),
        SystemMessage("d", name="n", additional_kwargs={"__openai_role__": "developer"}),
        HumanMessage("u", name="n"),
        AIMessage("a", name="n", tool_calls=[{"name": "f", "args": {"x": 1}, "id": "c1"}]),
        AIMessage("", invalid_tool_calls=[invalid_tool_call(name="f", args="{", id="c2")]),
        AIMessage("a", additional_kwargs={"function_call": {"name": "f", "arguments": "{}"}}),
        AIMessage([{"type": "text", "text": "hi"}, {"type": "audio", "id": "audio_1"}]),
        AIMessage([{"type": "thinking", "thinking": "t", "signature": "s"}], tool_calls=[]),
        ToolMessage("t", tool_call_id="c1", name="f", status="error", artifact={"x": 1}),
        ToolMessage([{"type": "text", "text": "t", "extra": 1}], tool_call_id="c2"),
    ]
    written = json.loads(dump_transcript(every_field, format="openai-request"))["messages"]
    for record, message in zip(written, every_field, strict=True):
        assert record == _convert_message_to_dict(message)
        assert set(record) <= OPENAI_MESSAGE_KEYS[record["role"]]


def anthropic_image_blocks(history: list[BaseMessage]) -> list[BaseMessage]:
    """An Anthropic body holds images as Anthropic image blocks, not OpenAI image_url parts."""
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "x"}}
    return [
        message.model_copy(
            update={"content": [image if b == IMAGE_BLOCK else b for b in message.content]}
        )
        if isinstance(message.content, list)
        else message
        for message in history
    ]


def without_default_is_error(turn: dict[str, Any]) -> dict[str, Any]:
    """`"is_error": false` is the API's default: ChatAnthropic writes it, a body may not."""
    if not isinstance(turn["content"], list):
        return turn
    blocks = [
        {k: v for k, v in block.items() if (k, v) != ("is_error", False)}
        for block in turn["content"]
    ]
    return {**turn, "content": blocks}


@settings(max_examples=40)
@given(history=histories())
def test_a_governed_anthropic_body_holds_what_chat_anthropic_sends(
    wire: WireClients, history: list[BaseMessage]
) -> None:
    # A system prompt: a body without one or tool blocks reads as an OpenAI body.
    history = [SystemMessage("Be brief."), *anthropic_image_blocks(history)]
    try:
        body = anthropic_body(history, {"model": "claude-sonnet-4-5", "max_tokens": 64})
    except ValueError:
        assume(False)  # a late system message has no place in a body
    read = readable(body)
    # A final assistant turn the API takes as a prefill is sent after the governed turns.
    prefill = legal_prefill(read, body)
    if prefill is not None:
        read = read[:-1]
    governed = ContextGovernor(provider="anthropic").invoke(read) + ([prefill] if prefill else [])
    written = governed_body(body)
    sent = wire.send("ChatAnthropic", governed)
    assert isinstance(sent, dict)
    assert written.get("system") == sent.get("system")
    assert_same_messages_key_by_key(
        [without_default_is_error(turn) for turn in written["messages"]],
        [without_default_is_error(turn) for turn in sent["messages"]],
    )


ANTHROPIC_CALL = {
    "role": "assistant",
    "content": [{"type": "tool_use", "id": "toolu_1", "name": "grep", "input": {}}],
}


def test_anthropic_violations_and_errors_name_the_bodys_own_messages(tmp_path: Path) -> None:
    body = {
        "system": "You search code.",
        "messages": [
            {"role": "user", "content": "find x"},
            ANTHROPIC_CALL,
            {"role": "user", "content": "never mind"},
        ],
    }
    source = tmp_path / "body.json"
    source.write_text(json.dumps(body), encoding="utf-8")
    checked = runner.invoke(app, ["check", str(source)])
    assert checked.exit_code == EXIT_BROKEN_RULES
    # The call is the body's message 1 (message 2 of the list checked, after the system).
    assert checked.stdout.startswith(f"{source}: message 1: unanswered-tool-call: ")

    no_id = {"role": "assistant", "content": [{**ANTHROPIC_CALL["content"][0], "id": ""}]}
    body["messages"] = [{"role": "user", "content": "find x"}, no_id]
    source.write_text(json.dumps(body), encoding="utf-8")
    refused = runner.invoke(app, ["check", str(source)])
    assert refused.exit_code == EXIT_BAD_INPUT
    assert_one_line_error(refused.stderr, f"{source}: message 1: tool call 0 (grep) has no id")


PREFILLED = {
    "model": "claude-sonnet-4-5",
    "system": "Answer in JSON.",
    "messages": [
        {"role": "user", "content": "find x"},
        ANTHROPIC_CALL,
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "x=1"}],
        },
        {"role": "assistant", "content": '{"x":'},
    ],
}


def test_a_final_assistant_prefill_in_an_anthropic_body_is_kept() -> None:
    checked = runner.invoke(app, ["check", "-"], input=json.dumps(PREFILLED))
    assert checked.exit_code == 0, checked.stdout
    assert governed_body(PREFILLED) == PREFILLED


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (
            {"messages": [*PREFILLED["messages"][:-1], {"role": "assistant", "content": "{ "}]},
            "whitespace",
        ),
        ({"thinking": {"type": "enabled", "budget_tokens": 1024}}, "extended thinking"),
    ],
)
def test_a_final_assistant_turn_the_api_refuses_as_a_prefill_is_reported_and_removed(
    change: dict[str, Any], why: str
) -> None:
    body = {**PREFILLED, **change}
    checked = runner.invoke(app, ["check", "-"], input=json.dumps(body))
    assert checked.exit_code == EXIT_BROKEN_RULES, why
    assert "last-not-user-or-tool" in checked.stdout
    assert governed_body(body)["messages"][-1]["role"] == "user"


def test_the_command_reads_at_most_max_input_mb() -> None:
    endless = runner.invoke(app, ["check", "/dev/zero", "--max-input-mb", "1"])
    assert endless.exit_code == EXIT_BAD_INPUT
    assert_one_line_error(endless.stderr, "/dev/zero: larger than 1 MB", "--max-input-mb")
    too_much = json.dumps([{"role": "user", "content": "x" * 1_100_000}])
    piped = runner.invoke(app, ["govern", "-", "--max-input-mb", "1"], input=too_much)
    assert piped.exit_code == EXIT_BAD_INPUT
    assert_one_line_error(piped.stderr, "<stdin>: larger than 1 MB")
    assert runner.invoke(app, ["check", "-", "--max-input-mb", "2"], input=too_much).exit_code == 0


@pytest.mark.parametrize("provider", ["openai", "anthropic", "mistral", "strict"])
def test_lone_surrogates_are_governed_and_written_back_as_escapes(provider: str) -> None:
    # JSON's "\ud800" escape reads into a lone surrogate, which UTF-8 cannot encode.
    text = (
        '[{"role": "user", "content": "find \\ud800"},'
        ' {"role": "assistant", "content": null, "tool_calls": [{"id": "c\\udfff",'
        ' "type": "function", "function": {"name": "grep", "arguments": "{}"}}]}]'
    )
    result = runner.invoke(app, ["govern", "-", "--provider", provider], input=text)
    assert result.exit_code == 0, result.stderr
    result.stdout.encode("utf-8")
    governed = parse_transcript(result.stdout).messages
    assert governed[0].content == "find \ud800"
    assert validate_messages(governed, provider=provider) == []


# ------------------------------------------------- what a newcomer met (issue 29, item 5)


def govern_stdin(document: Any, *options: str) -> Any:
    return runner.invoke(app, ["govern", "-", "-o", "-", *options], input=json.dumps(document))


def test_a_request_body_s_model_sizes_the_window_as_model_does() -> None:
    pytest.importorskip("langchain_openai")
    from_body = govern_stdin({"model": "gpt-4o-mini", "messages": CLEAN}, "--report-json")
    from_flag = govern_stdin({"messages": CLEAN}, "--report-json", "--model", "gpt-4o-mini")
    assert from_body.exit_code == from_flag.exit_code == 0
    budget = json.loads(from_body.stderr)["budget"]
    assert budget is not None and budget == json.loads(from_flag.stderr)["budget"]
    # An explicit --window wins over the body's model.
    windowed = govern_stdin(
        {"model": "gpt-4o-mini", "messages": CLEAN}, "--report-json", "--window", "9000"
    )
    assert json.loads(windowed.stderr)["budget"] == 9_000 - 4_096 - 1_024


def test_a_body_s_model_langchain_does_not_know_is_said_in_one_line_and_repaired() -> None:
    result = govern_stdin({"model": "my-own-llama", "messages": BROKEN})
    assert result.exit_code == 0
    said = result.stderr.splitlines()[0]
    assert 'the body\'s "model" my-own-llama' in said and "repairs only" in said
    governed = json.loads(result.stdout)["messages"]
    assert validate_messages(parse_transcript(json.dumps(governed)).messages) == []


def memory_then_tool_loop() -> list[BaseMessage]:
    """A task, a memory the agent cannot obtain again, then a long loop of file reads."""
    loop = tool_loop(30, size=700)
    memory = [
        AIMessage("", tool_calls=[{"name": "save_memory", "args": {}, "id": "mem_1"}]),
        ToolMessage("remember: account ACCT-4242", tool_call_id="mem_1", name="save_memory"),
    ]
    return [*loop[:2], *memory, *loop[2:]]


def govern_file(source: Path, *options: str) -> str:
    result = runner.invoke(app, ["govern", str(source), "--window", "6000", *options])
    assert result.exit_code == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize(
    ("options", "settings"),
    [
        (["--exclude-tools", "save_memory,other"], {"exclude_tools": {"save_memory", "other"}}),
        (
            ["--exclude-tools", "save_memory", "--exclude-tools", "other"],
            {"exclude_tools": {"save_memory", "other"}},
        ),
        (["--compaction", "keep_recent"], {"compaction": "keep_recent"}),
        (["--no-pin-task"], {"pin_task": False}),
    ],
)
def test_exclude_tools_compaction_and_pin_task_options_reach_the_governor(
    tmp_path: Path, options: list[str], settings: dict[str, Any]
) -> None:
    messages = memory_then_tool_loop()
    source = tmp_path / "loop.json"
    source.write_text(dump_transcript(messages, format="openai-json"), encoding="utf-8")
    governor = ContextGovernor(context_window_tokens=6_000, **settings)
    governed = govern_file(source, *options)
    assert governed == dump_transcript(governor.invoke(messages), format="openai-json")
    assert governed != govern_file(source)
    if "exclude_tools" in settings:
        assert "ACCT-4242" in governed


def test_a_bad_compaction_option_is_refused_in_one_line(tmp_path: Path) -> None:
    source = write_messages(tmp_path / "in.json", CLEAN, "openai-json")
    result = runner.invoke(app, ["govern", str(source), "--compaction", "newest"])
    assert result.exit_code == EXIT_BAD_INPUT
    assert "cache_aware" in result.stderr


@pytest.mark.parametrize("fmt", ["openai-json", "openai-jsonl"])
def test_a_backfilled_result_in_a_message_array_gets_no_name_or_status(
    tmp_path: Path, fmt: str
) -> None:
    source = write_messages(tmp_path / "in.json", BROKEN, fmt)
    result = runner.invoke(app, ["govern", str(source)])
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines() if fmt == "openai-jsonl" else None
    records = [json.loads(line) for line in lines] if lines else json.loads(result.stdout)
    [backfilled] = [record for record in records if record["role"] == "tool"]
    assert sorted(backfilled) == ["content", "role", "tool_call_id"]


FINAL_ANSWER = {"role": "assistant", "content": "a.py prints 'a'."}


@pytest.mark.parametrize("fmt", ["openai-json", "openai-jsonl", "langchain"])
def test_govern_on_a_stored_conversation_keeps_its_final_answer(tmp_path: Path, fmt: str) -> None:
    source = write_messages(tmp_path / "in", [*CLEAN, FINAL_ANSWER], fmt)
    checked = runner.invoke(app, ["check", str(source)])
    assert checked.exit_code == 0, checked.stdout
    result = runner.invoke(app, ["govern", str(source), "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.stderr
    assert "kept after" in result.stderr
    governed = parse_transcript((tmp_path / "out").read_text(encoding="utf-8")).messages
    assert isinstance(governed[-1], AIMessage) and governed[-1].content == FINAL_ANSWER["content"]
    assert len(governed) == len(CLEAN) + 1
    assert runner.invoke(app, ["check", str(tmp_path / "out")]).exit_code == 0


def test_a_request_body_ending_with_an_answer_is_still_a_request() -> None:
    result = govern_stdin({"messages": [*CLEAN, FINAL_ANSWER]}, "--report-json")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["messages"][-1]["role"] == "tool"
    assert json.loads(result.stderr)["kept_after"] == 0


# ------------------------------- every malformed body: one line and exit 2 (issue 28, item 5)

HUGE_NUMBER = "1" * 5_000


@pytest.mark.parametrize("command", ["govern", "check"])
@pytest.mark.parametrize(
    "text",
    [
        '[{"role": "user", "content": "hi", "n": ' + HUGE_NUMBER + "}]",
        '{"role": "user", "content": "hi"}\n{"role": "user", "content": ' + HUGE_NUMBER + "}\n",
        '{"model": "x", "messages": [], "seed": ' + HUGE_NUMBER + "}",
    ],
    ids=["array", "jsonl", "body"],
)
def test_a_number_of_5000_digits_is_bad_input_in_one_line(
    tmp_path: Path, command: str, text: str
) -> None:
    source = tmp_path / "huge.json"
    source.write_text(text, encoding="utf-8")
    result = runner.invoke(app, [command, str(source)])
    assert result.exit_code == EXIT_BAD_INPUT
    assert_one_line_error(result.stderr, str(source), "4300 digits")


JSON_SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)
MESSAGE_LIKE = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "tool", "system", "x"]) | JSON_SCALARS},
    optional={
        "content": JSON_VALUES,
        "tool_calls": JSON_VALUES,
        "tool_call_id": JSON_VALUES,
        "name": JSON_VALUES,
    },
)
MALFORMED_DOCUMENTS = (
    JSON_VALUES
    | st.lists(MESSAGE_LIKE, max_size=4)
    | st.fixed_dictionaries(
        {"messages": st.lists(MESSAGE_LIKE, max_size=4) | JSON_VALUES},
        optional={"model": JSON_VALUES, "tools": JSON_VALUES, "system": JSON_VALUES},
    )
)


@settings(max_examples=60, deadline=None)
@given(document=MALFORMED_DOCUMENTS)
def test_any_json_document_gets_an_answer_or_one_line_and_exit_2(document: Any) -> None:
    text = json.dumps(document)
    for command, answers in (("check", (0, EXIT_BROKEN_RULES)), ("govern", (0,))):
        result = runner.invoke(
            app, [command, "-", *(["-o", "-"] if command == "govern" else [])], input=text
        )
        # An exception the command did not turn into an exit code is a crash.
        assert result.exception is None or isinstance(result.exception, SystemExit), repr(
            result.exception
        )
        assert "Traceback" not in result.stderr
        if result.exit_code not in answers:
            assert result.exit_code == EXIT_BAD_INPUT
            assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_with_report_json_the_notice_about_the_body_s_model_is_a_field_of_the_json() -> None:
    """`govern ... --report-json 2> report.json` leaves a JSON file, also where the body's
    model cannot size the window (the one line it says goes into the report)."""
    result = govern_stdin({"model": "my-own-llama", "messages": BROKEN}, "--report-json")
    assert result.exit_code == 0
    report = json.loads(result.stderr)
    assert 'the body\'s "model" my-own-llama' in report["notice"]
    assert "repairs only" in report["notice"] and report["budget"] is None
    sized = govern_stdin({"messages": BROKEN}, "--report-json", "--window", "9000")
    assert json.loads(sized.stderr)["notice"] is None
