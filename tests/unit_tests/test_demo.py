"""The offline demo: its tools, its script, and a summary that matches what the model received."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from rich.console import Console

from langchain_context_governance import ContextGovernor
from langchain_context_governance.demo import (
    CRASHED_CALL_ID,
    DEFAULT_WINDOW_TOKENS,
    DemoResult,
    build_demo_model,
    build_task_script,
    build_workspace_tools,
    call_line,
    crashed_session_history,
    run_demo,
    run_demo_in_terminal,
    summary_table,
    write_chart,
)
from langchain_context_governance.rules.validate import validate_messages
from langchain_context_governance.transcripts import sample_workspace_path

# Enough steps for the raw history to outgrow the default window (it does near step 12).
STEPS = 16


@pytest.fixture(scope="module")
def result() -> DemoResult:
    return run_demo(steps=STEPS)


@pytest.fixture(scope="module")
def governor() -> ContextGovernor:
    """A governor counting exactly as the demo's does, to recount what the model received."""
    root = sample_workspace_path()
    return ContextGovernor.from_model(
        build_demo_model(root, steps=STEPS), tools=build_workspace_tools(root)
    )


def test_every_model_call_is_recorded_once(result: DemoResult) -> None:
    script = build_task_script(sample_workspace_path(), steps=STEPS)
    assert len(result.calls) == len(result.requests) == len(script) == STEPS + 1
    assert [call.number for call in result.calls] == list(range(1, STEPS + 2))
    assert result.final_answer == script[-1].content


def test_sent_tokens_are_the_tokens_of_the_requests_the_model_received(
    result: DemoResult, governor: ContextGovernor
) -> None:
    for call, request in zip(result.calls, result.requests, strict=True):
        assert call.sent_messages == len(request)
        assert call.sent_tokens == governor.count_tokens(request)
        assert call.sent_tokens <= result.budget
        assert validate_messages(request) == []


def test_raw_tokens_and_verdicts_match_the_stored_history(
    result: DemoResult, governor: ContextGovernor
) -> None:
    rejected = 0
    for call in result.calls:
        raw = result.history[: call.raw_messages]
        assert call.raw_tokens == governor.count_tokens(raw)
        broken = validate_messages(raw)
        assert call.raw_violations == tuple(broken)
        rejected += bool(broken) or governor.count_tokens(raw) > DEFAULT_WINDOW_TOKENS
    assert result.rejected_without_governance == rejected


def test_summary_numbers_add_up(result: DemoResult) -> None:
    saved = sum(call.raw_tokens - call.sent_tokens for call in result.calls)
    assert result.tokens_saved == saved > 0
    # The crashed call stays unanswered in the stored history, so every raw request
    # breaks a rule; the later ones are also too large.
    assert result.broke_a_rule == len(result.calls)
    assert 0 < result.over_window < len(result.calls)
    assert sum(call.changes.get("snip_history", 0) for call in result.calls) > 0


def test_the_stored_history_stays_whole(result: DemoResult) -> None:
    start = crashed_session_history()
    assert [m.content for m in result.history[: len(start)]] == [m.content for m in start]
    answered = {m.tool_call_id for m in result.history if isinstance(m, ToolMessage)}
    assert CRASHED_CALL_ID not in answered
    declared = [
        call["id"]
        for message in result.history[len(start) :]
        if isinstance(message, AIMessage)
        for call in message.tool_calls
    ]
    assert answered == set(declared)
    assert result.tool_calls_run == len(declared)


def test_the_script_is_deterministic_and_ends_with_an_answer() -> None:
    root = sample_workspace_path()
    first = build_task_script(root, steps=5)
    second = build_task_script(root, steps=5)
    assert [m.model_dump() for m in first] == [m.model_dump() for m in second]
    assert all(reply.tool_calls for reply in first[:-1])
    assert not first[-1].tool_calls
    assert len(build_task_script(root)) > 40


def test_steps_must_be_positive() -> None:
    with pytest.raises(ValueError, match="steps must be >= 1"):
        build_task_script(sample_workspace_path(), steps=0)


def test_tools_read_the_workspace() -> None:
    root = sample_workspace_path()
    tools = {tool.name: tool for tool in build_workspace_tools(root)}
    assert "invoicing/" in tools["list_dir"].invoke({"path": "."}).splitlines()
    text = tools["read_file"].invoke({"path": "invoicing/money.py"})
    assert text.splitlines()[0].startswith("   1  ")
    hits = tools["grep"].invoke({"pattern": "def round_money("})
    assert hits.startswith("invoicing/money.py:")
    assert tools["grep"].invoke({"pattern": "no such text anywhere"}).startswith("no match")


def test_tools_stay_inside_the_workspace() -> None:
    tools = {tool.name: tool for tool in build_workspace_tools(sample_workspace_path())}
    with pytest.raises(ValueError, match="outside the workspace"):
        tools["read_file"].invoke({"path": "../../governor.py"})


def test_write_chart_writes_a_png(result: DemoResult, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    path = write_chart(result, tmp_path / "chart.png")
    assert path == tmp_path / "chart.png"
    assert path.read_bytes().startswith(b"\x89PNG")


def test_terminal_run_prints_a_line_per_call_without_a_tty(tmp_path: Path) -> None:
    output = io.StringIO()
    console = Console(file=output, force_terminal=False, width=100)

    shown = run_demo_in_terminal(steps=3, chart_path=None, console=console)

    text = output.getvalue()
    for call in shown.calls:
        assert call_line(call) in text
    assert "Demo summary" in text
    assert f"{shown.rejected_without_governance} of {len(shown.calls)}" in text
    assert "Chart" not in text


def test_a_window_that_holds_every_history_says_nothing_was_saved() -> None:
    """`demo --window 200000` printed "saved -1,250 (-0%)": the backfill adds tokens."""
    roomy = run_demo(steps=STEPS, context_window_tokens=200_000)
    assert roomy.tokens_saved < 0
    stream = io.StringIO()
    Console(file=stream, width=200).print(summary_table(roomy))
    printed = stream.getvalue()
    assert f"none: every history fit the window (the repairs added {-roomy.tokens_saved:,}" in (
        printed
    )
    assert "-0%" not in printed
