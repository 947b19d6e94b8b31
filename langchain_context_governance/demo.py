"""The offline demo: a LangGraph coding agent runs one long task under a small context window.

The agent is `create_react_agent` with `ContextGovernor.as_pre_model_hook()`. Its tools
read the bundled workspace (an `invoicing` package); its model is a `ScriptedChatModel`
that plays back an audit of every public function, dozens of tool calls long, and rejects
any request a strict provider would reject. The session resumes after a crash that left
one tool call unanswered, as real checkpointed sessions do.

For every model call the demo keeps what the raw history would have cost and whether a
provider would have taken it, next to what governance actually sent.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.messages.tool import tool_call
from langchain_core.tools import BaseTool, StructuredTool
from pydantic import PrivateAttr
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table

from langchain_context_governance.governor import ContextGovernor
from langchain_context_governance.report import GovernanceResult
from langchain_context_governance.rules.validate import Violation, validate_messages
from langchain_context_governance.testing import ScriptedChatModel
from langchain_context_governance.transcripts import sample_workspace_path

__all__ = [
    "CRASHED_CALL_ID",
    "DEFAULT_MAX_OUTPUT_TOKENS",
    "DEFAULT_WINDOW_TOKENS",
    "CallRecord",
    "DemoResult",
    "build_demo_model",
    "build_task_script",
    "build_workspace_tools",
    "call_header",
    "call_line",
    "crashed_session_history",
    "plot_prompt_tokens",
    "run_demo",
    "run_demo_in_terminal",
    "summary_table",
    "write_chart",
]

# Small enough that the raw history outgrows it a third of the way through the task.
DEFAULT_WINDOW_TOKENS = 6_000
DEFAULT_MAX_OUTPUT_TOKENS = 1_000
DEFAULT_SAFETY_BUFFER = 500
# Dozens of iterations with a recursion limit of 25 per step would stop LangGraph early.
RECURSION_LIMIT = 1_000
# A line of `grep` output is cut here, as real grep tools do, so one hit stays one line.
MAX_GREP_LINE_CHARS = 120

SYSTEM_PROMPT = (
    "You are a careful coding agent working in the `invoicing` project. Read code with the "
    "tools, never guess, and finish with a short written report."
)
EARLIER_REQUEST = "Why does tests/test_render.py fail?"
TASK = (
    "We just restarted after the crash. New task: audit how money is rounded across the "
    "whole invoicing package. Read every module, find every call site of each public "
    "function, read the tests that cover it, then report where rounding happens more "
    "than once."
)
CRASHED_CALL_ID = "call_before_crash"

_PUBLIC_FUNCTION = re.compile(r"^def ([a-z]\w*)\(", re.MULTILINE)


def _inside(root: Path, relative: str) -> Path:
    path = (root / relative).resolve()
    if not path.is_relative_to(root.resolve()):
        raise ValueError(f"{relative!r} is outside the workspace")
    return path


def build_workspace_tools(root: Path) -> list[BaseTool]:
    """`list_dir`, `read_file` and `grep`, read-only and confined to the folder `root`.

    Example:
        >>> from langchain_context_governance.transcripts import sample_workspace_path
        >>> tools = {tool.name: tool for tool in build_workspace_tools(sample_workspace_path())}
        >>> "money.py" in tools["list_dir"].invoke({"path": "invoicing"})
        True
    """

    def list_dir(path: str = ".") -> str:
        """List the files and folders (ending in /) of a workspace folder."""
        folder = _inside(root, path)
        names = sorted(
            f"{child.name}/" if child.is_dir() else child.name
            for child in folder.iterdir()
            if child.name != "__pycache__"
        )
        return "\n".join(names)

    def read_file(path: str) -> str:
        """Read a workspace file, with line numbers."""
        lines = _inside(root, path).read_text(encoding="utf-8").splitlines()
        return "\n".join(f"{number:4d}  {line}" for number, line in enumerate(lines, 1))

    def grep(pattern: str) -> str:
        """Find the lines of the workspace's Python files that contain `pattern`."""
        hits = [
            f"{path.relative_to(root)}:{number}: {line.strip()[:MAX_GREP_LINE_CHARS]}"
            for path in sorted(root.rglob("*.py"))
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
            if pattern in line
        ]
        return "\n".join(hits) or f"no match for {pattern!r}"

    return [StructuredTool.from_function(function) for function in (list_dir, read_file, grep)]


def _planned_steps(root: Path) -> Iterator[list[tuple[str, dict[str, str]]]]:
    """The audit the scripted model performs: (tool, args) calls, step by step."""
    yield [("list_dir", {"path": "."})]
    yield [("list_dir", {"path": "invoicing"}), ("list_dir", {"path": "tests"})]
    for module in sorted((root / "invoicing").glob("*.py")):
        if module.name == "__init__.py":
            continue
        yield [("read_file", {"path": f"invoicing/{module.name}"})]
        for function in _PUBLIC_FUNCTION.findall(module.read_text(encoding="utf-8")):
            yield [("grep", {"pattern": f"{function}("})]
        test_file = root / "tests" / f"test_{module.name}"
        if test_file.is_file():
            yield [("read_file", {"path": f"tests/{test_file.name}"})]


def build_task_script(root: Path, *, steps: int | None = None) -> list[AIMessage]:
    """The scripted model's replies: one tool-call message per step, then the report.

    `steps` stops the audit early (at least one step). Ids are deterministic, so two
    runs send the same requests.

    Example:
        >>> from langchain_context_governance.transcripts import sample_workspace_path
        >>> script = build_task_script(sample_workspace_path(), steps=2)
        >>> [[call["name"] for call in reply.tool_calls] for reply in script]
        [['list_dir'], ['list_dir', 'list_dir'], []]
    """
    if steps is not None and steps < 1:
        raise ValueError(f"steps must be >= 1 or None, got {steps}")
    planned = list(_planned_steps(root))[:steps]
    replies = [
        AIMessage(
            "" if number > 1 else "I'll start by looking at the layout of the project.",
            tool_calls=[
                tool_call(name=name, args=args, id=f"call_{number:03d}_{position}")
                for position, (name, args) in enumerate(calls)
            ],
            id=f"reply_{number:03d}",
        )
        for number, calls in enumerate(planned, 1)
    ]
    tool_calls = sum(len(calls) for calls in planned)
    report = (
        f"Audit done: {tool_calls} tool calls over {len(planned)} steps. Amounts are rounded "
        "once, in `totals.compute_totals`, through `money.round_money`. Two findings: "
        "`tax.tax_for_item` taxes `item.unit_price` instead of the line's net amount (price "
        "times quantity), and `compute_totals` takes the discount off net plus tax, not net."
    )
    return [*replies, AIMessage(report, id="reply_final")]


def crashed_session_history() -> list[BaseMessage]:
    """The stored history the run resumes: the earlier turn's tool call was never answered."""
    crashed_call = tool_call(
        name="read_file", args={"path": "tests/test_render.py"}, id=CRASHED_CALL_ID
    )
    return [
        SystemMessage(SYSTEM_PROMPT),
        HumanMessage(EARLIER_REQUEST),
        AIMessage("", tool_calls=[crashed_call], id="reply_before_crash"),
        HumanMessage(TASK),
    ]


def build_demo_model(
    root: Path, *, steps: int | None = None, context_window_tokens: int = DEFAULT_WINDOW_TOKENS
) -> ScriptedChatModel:
    """The scripted model: strict like a real provider, with a small context window."""
    return ScriptedChatModel(
        build_task_script(root, steps=steps),
        max_input_tokens=context_window_tokens,
        max_output_tokens=DEFAULT_MAX_OUTPUT_TOKENS,
    )


@dataclass(frozen=True)
class CallRecord:
    """One model call: the raw history against the request governance sent."""

    number: int
    raw_messages: int
    sent_messages: int
    raw_tokens: int
    sent_tokens: int
    budget: int
    context_window_tokens: int
    changes: dict[str, int]
    raw_violations: tuple[Violation, ...]

    @property
    def raw_over_window(self) -> bool:
        """The raw history alone is larger than the model's context window."""
        return self.raw_tokens > self.context_window_tokens

    @property
    def raw_would_be_rejected(self) -> bool:
        """A provider would answer the raw history with a 400."""
        return bool(self.raw_violations) or self.raw_over_window


@dataclass(frozen=True)
class DemoResult:
    """Every model call of a demo run, the requests the model received and its answer.

    `history` is the stored conversation at the end, which governance never shortens.
    """

    calls: list[CallRecord]
    requests: list[list[BaseMessage]]
    history: list[BaseMessage]
    tool_calls_run: int
    final_answer: str
    context_window_tokens: int
    budget: int

    @property
    def tokens_saved(self) -> int:
        """Prompt tokens governance kept out of the requests, summed over all calls."""
        return sum(call.raw_tokens - call.sent_tokens for call in self.calls)

    @property
    def rejected_without_governance(self) -> int:
        """Calls whose raw history a provider would have rejected."""
        return sum(call.raw_would_be_rejected for call in self.calls)

    @property
    def broke_a_rule(self) -> int:
        """Calls whose raw history breaks a provider rule."""
        return sum(bool(call.raw_violations) for call in self.calls)

    @property
    def over_window(self) -> int:
        """Calls whose raw history does not fit the context window."""
        return sum(call.raw_over_window for call in self.calls)


# A small window holds few whole results: keep three, so compaction has room to act.
DEMO_KEEP_RECENT = 3


class _RecordingGovernor(ContextGovernor):
    """A ContextGovernor that keeps the result of each run for the demo's display."""

    _results: list[tuple[list[BaseMessage], GovernanceResult]] = PrivateAttr(default_factory=list)

    def govern(self, messages: Any, **per_call: Any) -> GovernanceResult:
        result = super().govern(messages, **per_call)
        self._results.append((list(messages), result))
        return result

    @property
    def results(self) -> list[tuple[list[BaseMessage], GovernanceResult]]:
        return self._results


def _call_record(
    number: int, raw: list[BaseMessage], result: GovernanceResult, *, window: int, budget: int
) -> CallRecord:
    report = result.report
    return CallRecord(
        number=number,
        raw_messages=report.messages_before,
        sent_messages=report.messages_after,
        raw_tokens=report.tokens_before,
        sent_tokens=report.tokens_after,
        budget=budget,
        context_window_tokens=window,
        changes=dict(report.changes),
        raw_violations=tuple(validate_messages(raw)),
    )


def _build_agent(model: ScriptedChatModel, tools: list[BaseTool], governor: ContextGovernor) -> Any:
    from langgraph.prebuilt import create_react_agent

    # create_react_agent is deprecated in favour of langchain's create_agent, but it needs
    # nothing beyond langgraph, which this package already depends on.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return create_react_agent(model, tools, pre_model_hook=governor.as_pre_model_hook())


def run_demo(
    *,
    steps: int | None = None,
    context_window_tokens: int = DEFAULT_WINDOW_TOKENS,
    on_call: Callable[[CallRecord], None] | None = None,
) -> DemoResult:
    """Run the agent over the bundled workspace; `on_call` sees each model call as it ends.

    Example:
        >>> result = run_demo(steps=3)
        >>> len(result.calls), result.rejected_without_governance
        (4, 4)
    """
    root = sample_workspace_path()
    tools = build_workspace_tools(root)
    model = build_demo_model(root, steps=steps, context_window_tokens=context_window_tokens)
    governor = _RecordingGovernor.from_model(
        model, tools=tools, safety_buffer=DEFAULT_SAFETY_BUFFER, keep_recent=DEMO_KEEP_RECENT
    )
    assert isinstance(governor, _RecordingGovernor) and governor.budget is not None
    agent = _build_agent(model, tools, governor)
    calls: list[CallRecord] = []
    messages: list[BaseMessage] = []
    config = {"recursion_limit": RECURSION_LIMIT}
    for state in agent.stream(
        {"messages": crashed_session_history()}, config, stream_mode="values"
    ):
        messages = state["messages"]
        for raw, result in governor.results[len(calls) :]:
            record = _call_record(
                len(calls) + 1, raw, result, window=context_window_tokens, budget=governor.budget
            )
            calls.append(record)
            if on_call is not None:
                on_call(record)
    return DemoResult(
        calls=calls,
        requests=list(model.requests),
        history=list(messages),
        tool_calls_run=sum(message.type == "tool" for message in messages),
        final_answer=str(messages[-1].content),
        context_window_tokens=context_window_tokens,
        budget=governor.budget,
    )


def plot_prompt_tokens(result: DemoResult, axes: Any) -> None:
    """Draw prompt tokens per call, raw history against governed request, on `axes`."""
    numbers = [call.number for call in result.calls]
    axes.plot(numbers, [call.raw_tokens for call in result.calls], label="raw history")
    axes.plot(numbers, [call.sent_tokens for call in result.calls], label="governed request")
    axes.axhline(result.context_window_tokens, color="red", linestyle=":", label="window")
    axes.axhline(result.budget, color="grey", linestyle="--", label="input budget")
    axes.set_xlabel("model call")
    axes.set_ylabel("prompt tokens")
    axes.set_title("Prompt tokens per model call")
    axes.legend()


def write_chart(result: DemoResult, path: Path) -> Path | None:
    """Write the chart of `plot_prompt_tokens` as a PNG; None when matplotlib is missing."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        return None
    # A bare Figure draws without pyplot, so no GUI backend or display is needed.
    figure = Figure(figsize=(8, 4.5), layout="constrained")
    plot_prompt_tokens(result, figure.subplots())
    figure.savefig(path, dpi=100)
    return path


# Short names keep a call on one line of an 80-column terminal.
_PASS_LABELS = {
    "drop_orphan_tool_results": "orphans",
    "backfill_missing_tool_results": "backfill",
    "microcompact": "microcompact",
    "snip_history": "snip",
    "enforce_role_alternation": "alternation",
}


def _changes_text(changes: dict[str, int]) -> str:
    done = [f"{_PASS_LABELS.get(name, name)} {count}" for name, count in changes.items() if count]
    return ", ".join(done) or "no change"


def _raw_verdict(call: CallRecord) -> str:
    if not call.raw_would_be_rejected:
        return "ok"
    reasons = ["rule"] if call.raw_violations else []
    if call.raw_over_window:
        reasons.append("window")
    return f"400: {'+'.join(reasons)}"


def call_header(budget: int) -> str:
    """The column heads above the `call_line`s of a run with input budget `budget`."""
    return f"call {'raw':>7} -> {'sent':>6}  {'raw alone':16}  passes (tokens; budget {budget:,})"


def call_line(call: CallRecord) -> str:
    """One model call: tokens of the raw history and of the request sent, what each pass did.

    `400: rule+window` marks a raw history a provider would reject, for breaking a rule,
    for not fitting the window, or both.
    """
    return (
        f"{call.number:4d} {call.raw_tokens:7,} -> {call.sent_tokens:6,}  "
        f"{_raw_verdict(call):16}  {_changes_text(call.changes)}"
    )


def _saved_text(result: DemoResult) -> str:
    """Tokens saved and their share; where the window held every history, what the repairs
    added instead (a backfilled result costs tokens, nothing needed cutting)."""
    saved = result.tokens_saved
    if saved <= 0:
        return f"none: every history fit the window (the repairs added {-saved:,} tokens)"
    raw_total = sum(call.raw_tokens for call in result.calls)
    return f"{saved:,} ({saved / raw_total:.0%})"


def summary_table(result: DemoResult) -> Table:
    """The end-of-run summary: calls, tokens saved, requests governance saved from a 400."""
    calls = len(result.calls)
    table = Table(title="Demo summary", title_justify="left", show_header=False)
    table.add_column("what")
    table.add_column("value", justify="right")
    table.add_row("model calls", f"{calls}")
    table.add_row("tool calls run", f"{result.tool_calls_run}")
    table.add_row(
        "context window / input budget", f"{result.context_window_tokens:,} / {result.budget:,}"
    )
    table.add_row(
        "largest raw history", f"{max((c.raw_tokens for c in result.calls), default=0):,} tokens"
    )
    table.add_row(
        "largest governed request",
        f"{max((c.sent_tokens for c in result.calls), default=0):,} tokens",
    )
    table.add_row("prompt tokens saved", _saved_text(result))
    table.add_row(
        "rejected without governance",
        f"{result.rejected_without_governance} of {calls} "
        f"({result.broke_a_rule} break a rule, {result.over_window} over the window)",
    )
    table.add_row("rejected with governance", "0 (the strict model checked every request)")
    return table


def run_demo_in_terminal(
    *,
    steps: int | None = None,
    context_window_tokens: int = DEFAULT_WINDOW_TOKENS,
    chart_path: Path | None = None,
    console: Console | None = None,
) -> DemoResult:
    """Run the demo with a progress bar, a line per model call, the summary and the chart."""
    console = console or Console()
    expected_calls = len(build_task_script(sample_workspace_path(), steps=steps))
    console.print(f"[bold]Task:[/bold] {TASK}\n")
    progress = Progress(
        TextColumn("model calls"),
        BarColumn(),
        MofNCompleteColumn(),
        console=console,
        transient=True,
        # Outside a terminal (CI, pipes) a live bar only adds noise; the lines remain.
        disable=not console.is_terminal,
    )
    with progress:
        bar = progress.add_task("calls", total=expected_calls)

        def show(call: CallRecord) -> None:
            if call.number == 1:
                console.print(call_header(call.budget), style="bold", highlight=False)
            console.print(call_line(call), highlight=False)
            progress.advance(bar)

        result = run_demo(steps=steps, context_window_tokens=context_window_tokens, on_call=show)
    console.print()
    console.print(summary_table(result))
    console.print(f"\n[bold]Agent's answer:[/bold] {result.final_answer}")
    if chart_path is not None:
        written = write_chart(result, chart_path)
        if written is None:
            console.print("No chart: install matplotlib (pip install matplotlib) to get one.")
        else:
            console.print(f"Chart of prompt tokens per call: {written}")
    return result
