"""The `context-governance` command: govern, check and demo, formats, reports, exit codes."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage, messages_to_dict
from typer.testing import CliRunner

from langchain_context_governance import ContextGovernor
from langchain_context_governance.anthropic_messages import anthropic_body
from langchain_context_governance.cli import EXIT_BAD_INPUT, EXIT_BROKEN_RULES, app
from langchain_context_governance.rules.validate import validate_messages
from langchain_context_governance.transcripts import (
    TRANSCRIPT_FORMATS,
    dump_transcript,
    parse_transcript,
)
from tests.builders import tool_loop

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
    assert "none (no window)" in result.stderr


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
    assert lines == [
        f"{source}: message 2: unanswered-tool-call: Tool call 'call_1' (read_file) is not "
        "answered by a tool message directly after the assistant message that declares it.",
        f"{source}: message 4: orphan-tool-result: Tool result for 'call_stray' answers no "
        "tool call declared by an earlier assistant message.",
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
    result = runner.invoke(app, ["demo", "--steps", "1", "--window", "1000", "--no-chart"])

    assert result.exit_code == EXIT_BAD_INPUT
    assert_one_line_error(result.stderr, "demo:", "1000")


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
    assert "[default: none: no snipping]" in result.stdout
