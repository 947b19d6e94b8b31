"""PostgreSQL-backed scale run: one LangGraph agent, many concurrent threads, a restart.

`python benchmarks/scale.py` (`make scale`): on a throwaway PostgreSQL cluster
(`benchmarks.postgres`), one `create_react_agent` graph with the governor as pre-model node
and `AsyncPostgresSaver` as checkpointer runs, as asyncio tasks:

1. one thread alone (the timing baseline), `--iterations` tool iterations;
2. `--threads` threads at once, `--iterations` tool iterations each (turn 1);
3. a "restart": a new governor, a new graph and a new connection pool, then every thread's
   second turn (`--resumed-iterations` tool iterations), resumed from the checkpoints.

The model is a strict `ScriptedChatModel`: a request that breaks the strict provider rules
or does not fit its window raises, and fails the thread. The window is far smaller than a
thread's history, so governance must compact and cut. Checks, printed as PASS/FAIL:

- every thread finished, and every request the model received is legal (strict rules) and
  within the governor's budget and the model's window;
- nothing lost: each thread's stored history holds every message of both turns, in order;
- identical requests after a restart: a new governor instance re-governing a thread's stored
  history (as it stood at each turn's last model call) sends the request the running
  governor sent, and the old governor re-governing the history as it stood at the first
  call after the restart sends what the new one sent;
- governance p50 with all threads at once <= 2x the p50 of the thread alone (the node's
  `ContextGovernor.govern` call, timed; not judged with `--ci`, which only prints it).

Then the fleet (`benchmarks.fleet`: worker processes taking turns on the same threads) and
offload (`benchmarks.offload_fleet`: two worker processes on one `AsyncPostgresStore`
read back each other's handles).

Exit status 1 when a check fails. `--ci` (`make scale-ci`, run by `.ci/run`) is the short
version: 10 threads x 10 iterations, 3 resumed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import contextvars
import functools
import re
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Run as a script, Python puts benchmarks/ on the path, not the repository root.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langchain_core.tools import BaseTool

from benchmarks.concurrency import govern_by_thread
from benchmarks.fleet import (
    FleetSettings,
    RecordedState,
    cold_versus_steady,
    fleet_report,
    run_fleet,
)
from benchmarks.offload_fleet import offload_fleet_report, run_offload_fleet
from benchmarks.postgres import throwaway_cluster
from benchmarks.report import Target, render_targets
from langchain_context_governance import ContextGovernor
from langchain_context_governance.rules.validate import validate_messages
from langchain_context_governance.testing import ScriptedChatModel
from tests.agent_tools import (
    AGENT_OUTPUT_TOKENS,
    AGENT_WINDOW_TOKENS,
    MODULE_COUNT,
    Summary,
    summarize,
    workspace_tools,
    write_workspace,
)

__all__ = ["main"]

PROVIDER = "strict"
KEEP_RECENT = 4
# The threads of step 1 and 2 are numbered from here and from 0 (three digits in call ids).
SOLO_THREAD = 900
POOL_SIZE = 20
# Three graph steps (governance, model, tools) per iteration, with room to spare.
RECURSION_PER_ITERATION = 4
TIMING_RATIO_LIMIT = 2.0
# A call id: "c", thread (3 digits), turn (1), iteration (4): the 9 alphanumerics every
# provider profile accepts, so no profile rewrites it.
CALL_ID = re.compile(r"^c(\d{3})(\d)(\d{4})$")
QUESTION = re.compile(r"^thread (\d+), turn (\d): ")


def question(thread: int, turn: int) -> str:
    return f"thread {thread}, turn {turn}: review the modules and report what you find"


def final_answer(thread: int, turn: int) -> str:
    return f"Thread {thread}, turn {turn}: all modules reviewed."


def tool_call(thread: int, turn: int, iteration: int) -> dict[str, Any]:
    """The tool call of one iteration; mostly read_file, a grep every fifth, an exec every
    seventh, as tests.agent_tools.exploration_script does."""
    call_id = f"c{thread:03d}{turn}{iteration:04d}"
    module = (thread + iteration) % MODULE_COUNT
    if iteration % 5 == 4:
        name, args = "grep", {"pattern": f"total_{module}_1\\d"}
    elif iteration % 7 == 6:
        name, args = "exec", {"expression": f"sum(range({iteration}))"}
    else:
        name, args = "read_file", {"path": f"module_{module}.py"}
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}


class Script:
    """The model's replies: the next tool call of the thread's turn, or the final answer.

    Read from the request alone (its last message is the question or the latest tool
    result), so one model serves every thread.
    """

    def __init__(self, iterations_by_turn: dict[int, int]) -> None:
        self.iterations_by_turn = iterations_by_turn

    def __call__(self, request: list[BaseMessage]) -> AIMessage:
        last = request[-1]
        if isinstance(last, HumanMessage):
            asked = QUESTION.match(str(last.content))
            if asked is None:
                raise ValueError(f"the request ends on an unknown question: {last.content!r}")
            thread, turn, iteration = int(asked[1]), int(asked[2]), 0
        elif isinstance(last, ToolMessage):
            called = CALL_ID.match(last.tool_call_id)
            if called is None:
                raise ValueError(f"the request ends on an unknown call id {last.tool_call_id!r}")
            thread, turn, iteration = int(called[1]), int(called[2]), int(called[3]) + 1
        else:
            raise ValueError(f"the request ends on a {last.type} message")
        if iteration >= self.iterations_by_turn[turn]:
            return AIMessage(final_answer(thread, turn))
        return AIMessage("", tool_calls=[tool_call(thread, turn, iteration)])


def expected_turn(thread: int, turn: int, iterations: int, tools: dict[str, BaseTool]) -> Summary:
    """What one turn of a thread must leave in the stored history."""
    summary: Summary = [("human", question(thread, turn), None)]
    for iteration in range(iterations):
        call = tool_call(thread, turn, iteration)
        summary.append(("ai", "", [(call["name"], call["args"], call["id"])]))
        summary.append(("tool", tools[call["name"]].invoke(call["args"]), call["id"]))
    summary.append(("ai", final_answer(thread, turn), []))
    return summary


def wire(messages: Sequence[BaseMessage]) -> list[tuple[Any, ...]]:
    """What a provider receives of each message (ids and metadata left out)."""
    return [
        (
            m.type,
            m.content,
            [(c["name"], c["args"], c["id"]) for c in m.tool_calls]
            if isinstance(m, AIMessage)
            else None,
            m.tool_call_id if isinstance(m, ToolMessage) else None,
        )
        for m in messages
    ]


@dataclass
class GovernedCall:
    thread: str
    turn: int
    history_length: int
    request: list[BaseMessage]
    seconds: float
    changed: bool
    prefix_known: bool


# The `govern` calls of the node running in this task: wall time around the node would
# also count the other threads' work done while the node awaits its callbacks.
_governed: contextvars.ContextVar[list[tuple[float, Any]]] = contextvars.ContextVar("governed")


@contextlib.contextmanager
def timing_govern_calls() -> Iterator[None]:
    """Record every `ContextGovernor.govern` call (seconds, result) in the current task's
    list."""
    govern = ContextGovernor.govern

    # wraps: the signature stays the governor's, so callers still see its keywords.
    @functools.wraps(govern)
    def timed_govern(governor: ContextGovernor, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        result = govern(governor, *args, **kwargs)
        seconds = time.perf_counter() - started
        governed = _governed.get(None)
        if governed is not None:
            governed.append((seconds, result))
        return result

    ContextGovernor.govern = timed_govern  # type: ignore[method-assign]
    try:
        yield
    finally:
        ContextGovernor.govern = govern  # type: ignore[method-assign]


@dataclass
class TimedGovernance:
    """The governor's pre-model node, with its `govern` calls timed and recorded."""

    governor: ContextGovernor
    turn: int
    calls: list[GovernedCall] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._hook = self.governor.as_pre_model_hook()

    async def node(self, state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        governed: list[tuple[float, Any]] = []
        _governed.set(governed)
        update = await self._hook.ainvoke(state, config)
        if not governed:
            raise RuntimeError("the pre-model node made no ContextGovernor.govern call to time")
        seconds = sum(spent for spent, _ in governed)
        prefix_known = governed[-1][1].report.unchanged_prefix_messages is not None
        thread = str(config.get("configurable", {}).get("thread_id"))
        request = update["llm_input_messages"]
        changed = wire(request) != wire(state["messages"])
        self.calls.append(
            GovernedCall(
                thread, self.turn, len(state["messages"]), request, seconds, changed, prefix_known
            )
        )
        return update

    def runnable(self) -> RunnableLambda[Any, dict[str, Any]]:
        return RunnableLambda(self.node, name="context_governance")


def make_governor(model: ScriptedChatModel, tools: list[BaseTool]) -> ContextGovernor:
    return ContextGovernor.from_model(
        model.bind_tools(tools), tools=tools, keep_recent=KEEP_RECENT, provider=PROVIDER
    )


def thread_config(thread: int, iterations: int) -> RunnableConfig:
    return {
        "configurable": {"thread_id": f"thread-{thread}"},
        "recursion_limit": RECURSION_PER_ITERATION * (iterations + 2),
    }


async def run_turn(
    conninfo: str,
    model: ScriptedChatModel,
    tools: list[BaseTool],
    governance: TimedGovernance,
    threads: Sequence[int],
    iterations: int,
    *,
    set_up: bool = False,
) -> list[BaseException]:
    """One turn of every thread at once, on a graph with its own connection pool."""
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from langgraph.prebuilt import create_react_agent
    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool

    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        conninfo,
        max_size=POOL_SIZE,
        kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
        open=False,
    )
    await pool.open()
    try:
        saver = AsyncPostgresSaver(pool)
        if set_up:
            await saver.setup()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            # The timed node wraps the hook, so LangGraph cannot read the hook's own schema:
            # the state declares the record's channel instead (RecordedState).
            graph = create_react_agent(
                model,
                tools,
                pre_model_hook=governance.runnable(),
                checkpointer=saver,
                state_schema=RecordedState,
            )
        runs = [
            graph.ainvoke(
                {"messages": [HumanMessage(question(thread, governance.turn))]},
                thread_config(thread, iterations),
            )
            for thread in threads
        ]
        outcomes = await asyncio.gather(*runs, return_exceptions=True)
        return [outcome for outcome in outcomes if isinstance(outcome, BaseException)]
    finally:
        await pool.close()


async def stored_histories(conninfo: str, threads: Sequence[int]) -> dict[str, list[BaseMessage]]:
    """Each thread's messages as the checkpointer gives them back, on a new connection."""
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    histories = {}
    async with AsyncPostgresSaver.from_conn_string(conninfo) as saver:
        for thread in threads:
            config: RunnableConfig = {"configurable": {"thread_id": f"thread-{thread}"}}
            stored = await saver.aget_tuple(config)
            messages = stored.checkpoint["channel_values"].get("messages", []) if stored else []
            histories[f"thread-{thread}"] = list(messages)
    return histories


@dataclass
class ScaleSettings:
    threads: int
    iterations: int
    resumed_iterations: int
    judge_timing: bool


async def run_scale(conninfo: str, settings: ScaleSettings, workspace: Path) -> list[Target]:
    write_workspace(workspace)
    tools = workspace_tools(workspace)
    tools_by_name = {t.name: t for t in tools}
    iterations = {1: settings.iterations, 2: settings.resumed_iterations}
    model = ScriptedChatModel(
        Script(iterations),
        provider=PROVIDER,
        max_input_tokens=AGENT_WINDOW_TOKENS,
        max_output_tokens=AGENT_OUTPUT_TOKENS,
    )
    threads = list(range(settings.threads))
    old = TimedGovernance(make_governor(model, tools), turn=1)
    _progress("one thread alone")
    errors = await run_turn(
        conninfo, model, tools, old, [SOLO_THREAD], settings.iterations, set_up=True
    )
    solo_seconds = [call.seconds for call in old.calls]
    _progress(f"{settings.threads} threads at once, {settings.iterations} tool iterations each")
    errors += await run_turn(conninfo, model, tools, old, threads, settings.iterations)
    many_seconds = [call.seconds for call in old.calls[len(solo_seconds) :]]
    _progress("restart: a new governor, graph and pool; the second turn of every thread")
    new = TimedGovernance(make_governor(model, tools), turn=2)
    errors += await run_turn(conninfo, model, tools, new, threads, settings.resumed_iterations)
    stored = await stored_histories(conninfo, [SOLO_THREAD, *threads])

    targets = [
        _finished(errors),
        _governance_cut([*old.calls, *new.calls]),
        _legal_and_within_budget(model, old.governor),
        _nothing_lost(stored, threads, iterations, tools_by_name),
        _same_after_restart(stored, old, new, model, tools),
    ]
    solo, many = statistics.median(solo_seconds), statistics.median(many_seconds)
    print(
        f"\nGovernance per call (its govern call, timed inside the pre-model node): 1 thread p50 "
        f"{solo * 1000:.3g} ms ({len(solo_seconds)} calls); {settings.threads} threads p50 "
        f"{many * 1000:.3g} ms ({len(many_seconds)} calls), p99 "
        f"{_p99(many_seconds) * 1000:.3g} ms; after the restart p50 "
        f"{statistics.median(c.seconds for c in new.calls) * 1000:.3g} ms "
        f"({len(new.calls)} calls)"
    )
    print(_prefix_unknown([*old.calls, *new.calls]))
    description = f"governance p50 at {settings.threads} threads <= {TIMING_RATIO_LIMIT:g} x at 1"
    ratio = many / solo
    targets.append(
        Target(
            description,
            ratio <= TIMING_RATIO_LIMIT if settings.judge_timing else None,
            f"ratio {ratio:.2f}" + ("" if settings.judge_timing else ", not judged with --ci"),
        )
    )
    return targets


def _prefix_unknown(calls: Sequence[GovernedCall]) -> str:
    """How many calls after a thread's first on each governor (one a turn here) did not
    know the unchanged prefix."""
    seen: set[tuple[str, int]] = set()
    later = unknown = 0
    for call in calls:
        if (call.thread, call.turn) in seen:
            later += 1
            unknown += not call.prefix_known
        seen.add((call.thread, call.turn))
    return (
        f"report.unchanged_prefix_messages unknown on {unknown} of {later} calls "
        "after a thread's first on each governor"
    )


def _p99(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, -(-99 * len(ordered) // 100) - 1)]


def _finished(errors: Sequence[BaseException]) -> Target:
    detail = "all threads finished"
    if errors:
        detail = f"{len(errors)} runs failed; first: {type(errors[0]).__name__}: {errors[0]}"
    return Target("every thread's runs finished", not errors, detail)


def _governance_cut(calls: Sequence[GovernedCall]) -> Target:
    """The window is small enough that governance had to compact or cut the history."""
    changed = sum(call.changed for call in calls)
    cut = sum(1 for call in calls if len(call.request) < call.history_length)
    return Target(
        "the window made governance compact or cut the history",
        changed > 0,
        f"{changed} of {len(calls)} requests differ from their history, {cut} shorter",
    )


def _legal_and_within_budget(model: ScriptedChatModel, governor: ContextGovernor) -> Target:
    budget = governor.budget
    assert budget is not None
    tools = model.bound_tools
    problems = []
    for number, request in enumerate(model.requests):
        violations = validate_messages(request, provider=PROVIDER)
        if violations:
            problems.append(f"request {number}: {violations[0]}")
        tokens = governor.count_tokens(request)
        if tokens > budget:
            problems.append(f"request {number}: {tokens} tokens > budget {budget}")
        window_tokens = count_tokens_approximately(request, tools=tools)
        if window_tokens > AGENT_WINDOW_TOKENS:
            problems.append(f"request {number}: {window_tokens} tokens > window")
    detail = f"{len(model.requests)} requests, budget {budget} tokens"
    if problems:
        detail = f"{len(problems)} problems; first: {problems[0]}"
    return Target(
        "every request legal (strict rules) and within the budget and the window",
        bool(model.requests) and not problems,
        detail,
    )


def _nothing_lost(
    stored: dict[str, list[BaseMessage]],
    threads: Sequence[int],
    iterations: dict[int, int],
    tools: dict[str, BaseTool],
) -> Target:
    expected_solo = expected_turn(SOLO_THREAD, 1, iterations[1], tools)
    lost = []
    if summarize(stored[f"thread-{SOLO_THREAD}"]) != expected_solo:
        lost.append(f"thread-{SOLO_THREAD}")
    messages = len(stored[f"thread-{SOLO_THREAD}"])
    for thread in threads:
        expected = [
            *expected_turn(thread, 1, iterations[1], tools),
            *expected_turn(thread, 2, iterations[2], tools),
        ]
        history = stored[f"thread-{thread}"]
        messages += len(history)
        ids = [m.id for m in history]
        if summarize(history) != expected or None in ids or len(set(ids)) != len(ids):
            lost.append(f"thread-{thread} ({len(history)} of {len(expected)} messages)")
    detail = f"{messages} messages in {len(stored)} threads"
    if lost:
        detail = f"{len(lost)} threads differ; first: {lost[0]}"
    return Target(
        "nothing lost: every thread's checkpoint holds its whole history", not lost, detail
    )


def _same_after_restart(
    stored: dict[str, list[BaseMessage]],
    old: TimedGovernance,
    new: TimedGovernance,
    model: ScriptedChatModel,
    tools: list[BaseTool],
) -> Target:
    """Requests are a function of the history and settings: checked with a governor that
    never saw the thread, and with the old governor after the restart."""
    differences = []
    checked = 0
    last_calls: dict[tuple[str, int], GovernedCall] = {}
    for call in [*old.calls, *new.calls]:
        last_calls[(call.thread, call.turn)] = call
    for (thread, turn), call in last_calls.items():
        restarted = govern_by_thread(make_governor(model, tools))
        again = restarted(stored[thread][: call.history_length], thread).messages
        checked += 1
        if wire(again) != wire(call.request):
            differences.append(f"{thread} turn {turn}, a new governor")
    first_after_restart: dict[str, GovernedCall] = {}
    for call in new.calls:
        first_after_restart.setdefault(call.thread, call)
    old_governor = govern_by_thread(old.governor)
    for thread, call in first_after_restart.items():
        again = old_governor(stored[thread][: call.history_length], thread).messages
        checked += 1
        if wire(again) != wire(call.request):
            differences.append(f"{thread} turn 2, the old governor")
    detail = f"{checked} requests re-governed"
    if differences:
        detail = f"{len(differences)} of {checked} differ; first: {differences[0]}"
    return Target(
        "identical requests after a restart (same history, another governor instance)",
        not differences,
        detail,
    )


def _progress(message: str) -> None:
    print(f"... {message}", file=sys.stderr, flush=True)


def parse_arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=None, help="50; 10 with --ci")
    parser.add_argument("--iterations", type=int, default=None, help="40; 10 with --ci")
    parser.add_argument(
        "--resumed-iterations", type=int, default=None, help="tool iterations of turn 2: 5; 3"
    )
    parser.add_argument(
        "--ci", action="store_true", help="the short version: fewer threads, timing not judged"
    )
    fleet = parser.add_argument_group("fleet: several worker processes, each turn on the next")
    fleet.add_argument("--workers", type=int, default=4, help="worker processes: 4")
    fleet.add_argument("--fleet-threads", type=int, default=None, help="16; 4 with --ci")
    fleet.add_argument("--turns", type=int, default=None, help="turns per thread: 6; 3")
    fleet.add_argument(
        "--fleet-iterations", type=int, default=None, help="tool iterations a turn: 8; 6"
    )
    parser.add_argument(
        "--offload-threads",
        type=int,
        default=None,
        help="threads of the offload run (benchmarks.offload_fleet): 8; 2 with --ci",
    )
    fleet.add_argument(
        "--lengths",
        type=int,
        nargs="+",
        default=None,
        help="history lengths of the cold-call timing: 250 1000 2000; 250",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    arguments = parse_arguments(argv)
    settings = ScaleSettings(
        threads=arguments.threads or (10 if arguments.ci else 50),
        iterations=arguments.iterations or (10 if arguments.ci else 40),
        resumed_iterations=arguments.resumed_iterations or (3 if arguments.ci else 5),
        judge_timing=not arguments.ci,
    )
    fleet = FleetSettings(
        threads=arguments.fleet_threads or (4 if arguments.ci else 16),
        turns=arguments.turns or (3 if arguments.ci else 6),
        iterations=arguments.fleet_iterations or (6 if arguments.ci else 8),
        workers=arguments.workers,
        lengths=tuple(arguments.lengths or ((250,) if arguments.ci else (250, 1_000, 2_000))),
    )
    started = time.perf_counter()
    print(
        f"# Scale run: {settings.threads} threads x {settings.iterations} tool iterations, "
        f"then a restart and {settings.resumed_iterations} more each, on PostgreSQL"
    )
    with throwaway_cluster() as conninfo, tempfile.TemporaryDirectory() as workspace:
        with timing_govern_calls():
            targets = asyncio.run(run_scale(conninfo, settings, Path(workspace)))
        _progress(
            f"fleet: {fleet.workers} worker processes, {fleet.threads} threads x {fleet.turns} "
            "turns, each turn on the next worker"
        )
        text, fleet_targets = fleet_report(
            run_fleet(conninfo, fleet, Path(workspace)),
            cold_versus_steady(fleet.lengths),
            judge_timing=settings.judge_timing,
        )
        print(text)
        targets += fleet_targets
        offload_threads = arguments.offload_threads or (2 if arguments.ci else 8)
        _progress(f"offload: {offload_threads} threads, each turn on the other of two workers")
        text, offload_targets = offload_fleet_report(run_offload_fleet(conninfo, offload_threads))
        print(text)
        targets += offload_targets
    print("\n" + render_targets(targets))
    print(f"\nTotal wall time: {time.perf_counter() - started:.0f} s")
    outcomes = [target.passed for target in targets]
    # The plain closing line CI reads: the checks, as a test runner would count them.
    print(
        f"scale: {outcomes.count(True)} passed, {outcomes.count(False)} failed, "
        f"{outcomes.count(None)} skipped"
    )
    return 1 if False in outcomes else 0


if __name__ == "__main__":
    sys.exit(main())
