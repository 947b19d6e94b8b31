"""Several worker processes on one PostgreSQL checkpointer: each turn on the next worker.

A LangGraph deployment runs several worker processes on one checkpointer, and a thread's
next run usually lands on another worker. `run_fleet` starts `workers` processes, each
with its own graph and governor (`create_react_agent` with the governor as pre-model
node, `AsyncPostgresSaver`, a state schema that declares the governance record), and
plays every thread's turns twice:

- "one worker": every turn of every thread on worker 0 (the reference);
- "fleet": turn k of thread t on worker (t + k) % workers, round-robin;
- "fleet-without-record": the same on a state schema without the record (what a graph
  whose state does not declare it gets: each worker keeps its own state), for comparison.

The model is the strict scripted model of `benchmarks.scale`; the summary model is
scripted too and deterministic (its text is a digest of what it is asked), and no tool
result may be compacted, so the window must cut and every cut asks for a summary.
Measured (checks printed as PASS/FAIL by `benchmarks.scale`):

- identical requests: every request the fleet sent equals, as the provider receives it
  (OpenAI's message dicts), the one worker's request at the same place;
- summary calls per cut: the summary model's calls divided by the cuts (the distinct
  summaries the one worker's requests carried: it asks once per cut); 1.00 for the fleet;
- first-call cache hits: for the first request of each turn after the first, the share
  of its tokens that the thread's previous request began with (what a provider's prefix
  cache serves); and how often the report's `unchanged_prefix_messages` said so;
- cold call against steady call by history length (`cold_versus_steady`, in one process):
  a steady call on a worker that served the thread's previous call, the first call on a
  worker that never saw the thread (reloaded history, the record given), and first
  contact (no record).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import gc
import hashlib
import json
import multiprocessing
import re
import statistics
import time
import warnings
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langgraph.prebuilt.chat_agent_executor import AgentState

from benchmarks.histories import HistoryGenerator, reload_messages
from benchmarks.report import Target, markdown_table
from langchain_context_governance import ContextGovernor, GovernanceResult
from langchain_context_governance.langgraph import GovernanceRecordField
from langchain_context_governance.testing import ScriptedChatModel

__all__ = [
    "COLD_WINDOW_TOKENS",
    "ColdTiming",
    "FleetResult",
    "FleetSettings",
    "cold_versus_steady",
    "fleet_report",
    "run_fleet",
]

SOLO = "one-worker"
FLEET = "fleet"
# The fleet again, on a state schema without the record: each worker keeps its own state.
FLEET_WITHOUT_RECORD = "fleet-without-record"
SUMMARY = re.compile(r"Summary [0-9a-f]{12}")
# Issue 17: the first call of a run on a worker that never saw the thread, given the
# thread's record, costs at most this many steady calls (at 2,000 messages).
COLD_TARGET = 3.0
# The cold-call measurement's window: the benchmark's 32k window (budget 26,880).
COLD_WINDOW_TOKENS = 32_000
COLD_REPETITIONS = 5
STEADY_CALLS = 20


@dataclass(frozen=True)
class FleetSettings:
    threads: int
    turns: int
    iterations: int
    workers: int
    lengths: tuple[int, ...]


@dataclass(frozen=True)
class CallRecord:
    """One governed call as a worker saw it (plain data, sent back to the parent)."""

    thread: int
    turn: int
    call: int
    history_length: int
    seconds: float
    digests: tuple[str, ...]
    tokens: tuple[int, ...]
    reported_prefix: int | None
    summaries: tuple[str, ...]


@dataclass
class FleetResult:
    settings: FleetSettings
    calls: dict[str, list[CallRecord]] = field(default_factory=dict)
    summary_calls: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0


class RecordedState(AgentState):
    """create_react_agent's state with the governance record, kept by the checkpointer."""

    context_governance: GovernanceRecordField


def summary_reply(request: list[BaseMessage]) -> AIMessage:
    """A deterministic summary: a digest of everything it was asked to summarize."""
    # The transcript is quoted as data in the assistant turn of the summary request.
    digest = hashlib.blake2b(request[2].text.encode(), digest_size=6).hexdigest()
    return AIMessage(f"Summary {digest}: the modules read so far, and what they compute.")


def payload_digests(request: Sequence[BaseMessage]) -> tuple[str, ...]:
    """A digest of each message as the provider receives it (OpenAI's message dicts)."""
    from langchain_openai.chat_models.base import _convert_message_to_dict

    return tuple(
        hashlib.blake2b(
            json.dumps(_convert_message_to_dict(message), sort_keys=True).encode(),
            digest_size=8,
        ).hexdigest()
        for message in request
    )


# The worker process's graph-independent parts, made once by `_start_worker`.
_worker: _Worker | None = None
# The govern calls of the node running in the current task: (seconds, result).
_governed: contextvars.ContextVar[list[tuple[float, GovernanceResult]]] = contextvars.ContextVar(
    "governed"
)


class _Worker:
    """One worker process: a model, a summary model and a governor, kept across turns."""

    def __init__(self, conninfo: str, workspace: str, settings: FleetSettings) -> None:
        from benchmarks.scale import PROVIDER, Script
        from tests.agent_tools import AGENT_OUTPUT_TOKENS, AGENT_WINDOW_TOKENS, workspace_tools

        self.conninfo = conninfo
        self.settings = settings
        self.tools = workspace_tools(Path(workspace))
        iterations = {turn: settings.iterations for turn in range(settings.turns)}
        self.model = ScriptedChatModel(
            Script(iterations),
            provider=PROVIDER,
            max_input_tokens=AGENT_WINDOW_TOKENS,
            max_output_tokens=AGENT_OUTPUT_TOKENS,
        )
        self.summaries = ScriptedChatModel(summary_reply)
        self.governor = fleet_governor(self.model, self.tools, self.summaries)
        self.hook = self.governor.as_pre_model_hook()

    async def node(self, state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        governed: list[tuple[float, GovernanceResult]] = []
        _governed.set(governed)
        update: dict[str, Any] = await self.hook.ainvoke(state, config)
        seconds, result = governed[-1]
        thread, turn = _thread_of(config), self.turn
        request = update["llm_input_messages"]
        self.calls.append(
            CallRecord(
                thread=thread,
                turn=turn,
                call=sum(1 for c in self.calls if (c.thread, c.turn) == (thread, turn)),
                history_length=len(state["messages"]),
                seconds=seconds,
                digests=payload_digests(request),
                tokens=tuple(count_tokens_approximately([m]) for m in request),
                reported_prefix=result.report.unchanged_prefix_messages,
                summaries=tuple(sorted({s for m in request for s in SUMMARY.findall(m.text)})),
            )
        )
        return update

    def run_turn(self, scenario: str, threads: Sequence[int], turn: int) -> tuple[Any, ...]:
        self.turn = turn
        self.calls: list[CallRecord] = []
        asked = len(self.summaries.requests)
        errors = asyncio.run(self._run(scenario, threads, turn))
        return self.calls, len(self.summaries.requests) - asked, errors

    async def _run(self, scenario: str, threads: Sequence[int], turn: int) -> list[str]:
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
        from langgraph.prebuilt import create_react_agent
        from psycopg.rows import dict_row
        from psycopg_pool import AsyncConnectionPool

        from benchmarks.scale import RECURSION_PER_ITERATION, question

        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            self.conninfo,
            max_size=max(4, len(threads)),
            kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
            open=False,
        )
        await pool.open()
        try:
            saver = AsyncPostgresSaver(pool)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                graph = create_react_agent(
                    self.model,
                    self.tools,
                    pre_model_hook=RunnableLambda(self.node, name="context_governance"),
                    checkpointer=saver,
                    state_schema=AgentState if scenario == FLEET_WITHOUT_RECORD else RecordedState,
                )
            runs = [
                graph.ainvoke(
                    {"messages": [HumanMessage(question(thread, turn))]},
                    {
                        "configurable": {"thread_id": f"{scenario}-{thread}"},
                        "recursion_limit": RECURSION_PER_ITERATION * (self.settings.iterations + 2),
                    },
                )
                for thread in threads
            ]
            outcomes = await asyncio.gather(*runs, return_exceptions=True)
        finally:
            await pool.close()
        return [
            f"{type(outcome).__name__}: {outcome}"
            for outcome in outcomes
            if isinstance(outcome, BaseException)
        ]


def fleet_governor(
    model: ScriptedChatModel, tools: Sequence[Any], summaries: ScriptedChatModel
) -> ContextGovernor:
    """The scale run's governor with a summary model; no result is compacted, so it cuts."""
    from benchmarks.scale import KEEP_RECENT, PROVIDER

    return ContextGovernor.from_model(
        model.bind_tools(tools),
        tools=tools,
        keep_recent=KEEP_RECENT,
        provider=PROVIDER,
        exclude_tools=frozenset(tool.name for tool in tools),
        summary_model=summaries,
    )


def _thread_of(config: RunnableConfig) -> int:
    thread_id = str((config.get("configurable") or {}).get("thread_id"))
    return int(thread_id.rsplit("-", 1)[1])


def _start_worker(conninfo: str, workspace: str, settings: FleetSettings) -> None:
    global _worker
    _worker = _Worker(conninfo, workspace, settings)
    _time_governance()


def _run_turn_in_worker(scenario: str, threads: Sequence[int], turn: int) -> tuple[Any, ...]:
    assert _worker is not None
    return _worker.run_turn(scenario, threads, turn)


def _time_governance() -> None:
    """Record each `agovern` call (seconds, result) in the current task's list.

    Wall time around the node would also count the other threads' work done while the
    node awaits its callbacks; this counts the governor's own call (the summary model's
    answer included where a cut asks for one).
    """
    agovern = ContextGovernor.agovern

    async def timed_agovern(governor: ContextGovernor, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        result = await agovern(governor, *args, **kwargs)
        seconds = time.perf_counter() - started
        governed = _governed.get(None)
        if governed is not None:
            governed.append((seconds, result))
        return result

    ContextGovernor.agovern = timed_agovern  # type: ignore[method-assign]


def run_fleet(conninfo: str, settings: FleetSettings, workspace: Path) -> FleetResult:
    """Every turn of every thread on one worker, then round-robin on `workers` workers."""
    started = time.perf_counter()
    result = FleetResult(settings)
    context = multiprocessing.get_context("spawn")
    with contextlib.ExitStack() as stack:
        pools = [
            stack.enter_context(
                ProcessPoolExecutor(
                    1,
                    mp_context=context,
                    initializer=_start_worker,
                    initargs=(conninfo, str(workspace), settings),
                )
            )
            for _ in range(settings.workers)
        ]
        threads = list(range(settings.threads))
        scenarios = ((SOLO, 1), (FLEET, settings.workers), (FLEET_WITHOUT_RECORD, settings.workers))
        for scenario, workers in scenarios:
            result.calls[scenario] = []
            result.summary_calls[scenario] = 0
            for turn in range(settings.turns):
                jobs = [
                    pools[worker].submit(
                        _run_turn_in_worker,
                        scenario,
                        [t for t in threads if (t + turn) % workers == worker],
                        turn,
                    )
                    for worker in range(workers)
                ]
                for job in jobs:
                    calls, asked, errors = job.result()
                    result.calls[scenario].extend(calls)
                    result.summary_calls[scenario] += asked
                    result.errors.extend(errors)
    result.seconds = time.perf_counter() - started
    return result


def _by_place(calls: Sequence[CallRecord]) -> dict[tuple[int, int, int], CallRecord]:
    return {(c.thread, c.turn, c.call): c for c in calls}


def _identical(calls: Sequence[CallRecord], reference: dict[Any, CallRecord]) -> int:
    return sum(
        1
        for place, record in _by_place(calls).items()
        if place in reference and reference[place].digests == record.digests
    )


def _leading_equal(first: Sequence[str], second: Sequence[str]) -> int:
    count = 0
    for a, b in zip(first, second, strict=False):
        if a != b:
            break
        count += 1
    return count


@dataclass(frozen=True)
class FirstCalls:
    """The first request of each turn after a thread's first, against its previous one."""

    hit_shares: list[float]
    reported_right: int

    @property
    def count(self) -> int:
        return len(self.hit_shares)


def first_calls(calls: Sequence[CallRecord]) -> FirstCalls:
    places = _by_place(calls)
    last_call: dict[tuple[int, int], int] = {}
    for thread, turn, call in places:
        last_call[(thread, turn)] = max(call, last_call.get((thread, turn), 0))
    shares, right = [], 0
    for (thread, turn, call), record in sorted(places.items()):
        if call != 0 or turn == 0:
            continue
        previous = places[(thread, turn - 1, last_call[(thread, turn - 1)])]
        unchanged = _leading_equal(previous.digests, record.digests)
        shares.append(sum(record.tokens[:unchanged]) / max(sum(record.tokens), 1))
        right += record.reported_prefix == unchanged
    return FirstCalls(shares, right)


def cuts_summarized(calls: Sequence[CallRecord]) -> int:
    return len({(c.thread, summary) for c in calls for summary in c.summaries})


@dataclass(frozen=True)
class ColdTiming:
    """Milliseconds of a call at `length` messages: steady, cold with a record, first contact."""

    length: int
    steady: float
    cold_with_record: float
    first_contact: float
    # The record's size as JSON, and what of it is the repairs' and the replay's decisions.
    record_bytes: int
    resume_bytes: int


def cold_versus_steady(lengths: Sequence[int], *, seed: int = 0) -> list[ColdTiming]:
    """The first call of a run on a worker that never saw the thread, against a steady call.

    A steady call: the worker served the thread's previous call (median of the last
    `STEADY_CALLS` calls of a growing history). Cold with a record: a new governor, the
    history reloaded (new objects, as a checkpoint gives them) and the record of the
    previous call, as another worker finds them (median of `COLD_REPETITIONS`). First
    contact: the same without the record.
    """
    timings = []
    for length in lengths:
        generator = HistoryGenerator(seed=seed + length)
        history = generator.opening()
        while len(history) < length - STEADY_CALLS * 4:
            history = [*history, *generator.iteration()]
        warm = cold_governor()
        result = warm.govern(history, thread_id="t")
        steady: list[float] = []
        for _ in range(STEADY_CALLS):
            history = [*history, *generator.iteration()]
            seconds, result = _timed(warm, history, record=result.record)
            steady.append(seconds)
        history = [*history, *generator.iteration()]
        with_record, first_contact = [], []
        for _ in range(COLD_REPETITIONS):
            reloaded = reload_messages(history)
            with_record.append(_timed(cold_governor(), reloaded, record=result.record)[0])
            reloaded = reload_messages(history)
            first_contact.append(_timed(cold_governor(), reloaded, record=None)[0])
        assert result.record is not None
        timings.append(
            ColdTiming(
                length=len(history),
                steady=statistics.median(steady) * 1000,
                cold_with_record=statistics.median(with_record) * 1000,
                first_contact=statistics.median(first_contact) * 1000,
                record_bytes=len(json.dumps(result.record)),
                resume_bytes=len(json.dumps(result.record["resume"])),
            )
        )
    return timings


def cold_governor() -> ContextGovernor:
    return ContextGovernor(
        context_window_tokens=COLD_WINDOW_TOKENS, summary_model=ScriptedChatModel(summary_reply)
    )


def _timed(
    governor: ContextGovernor, history: list[BaseMessage], *, record: Any
) -> tuple[float, GovernanceResult]:
    with _collector_paused():
        started = time.perf_counter()
        result = governor.govern(history, thread_id="t", record=record)
        return time.perf_counter() - started, result


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def fleet_report(
    result: FleetResult, cold: Sequence[ColdTiming], *, judge_timing: bool = True
) -> tuple[str, list[Target]]:
    """The tables and the checks of a fleet run (timing printed, not judged, where not
    `judge_timing`)."""
    settings = result.settings
    solo, fleet = result.calls[SOLO], result.calls[FLEET]
    solo_places, fleet_places = _by_place(solo), _by_place(fleet)
    differing = [
        place
        for place, record in solo_places.items()
        if place not in fleet_places or fleet_places[place].digests != record.digests
    ]
    cuts = {name: cuts_summarized(calls) for name, calls in result.calls.items()}
    firsts = {name: first_calls(calls) for name, calls in result.calls.items()}
    rows = []
    for name in (SOLO, FLEET, FLEET_WITHOUT_RECORD):
        calls = result.calls[name]
        first = firsts[name]
        later = [c.seconds for c in calls if c.call > 0]
        opening = [c.seconds for c in calls if c.call == 0]
        rows.append(
            [
                name,
                str(len(calls)),
                str(result.summary_calls[name]),
                str(cuts[name]),
                f"{result.summary_calls[name] / max(cuts[SOLO], 1):.2f}",
                f"{statistics.mean(first.hit_shares) * 100:.1f}%" if first.count else "-",
                f"{min(first.hit_shares) * 100:.1f}%" if first.count else "-",
                f"{first.reported_right}/{first.count}",
                f"{statistics.median(opening) * 1000:.3g}" if opening else "-",
                f"{statistics.median(later) * 1000:.3g}" if later else "-",
            ]
        )
    table = markdown_table(
        [
            "run",
            "requests",
            "summary calls",
            "distinct summaries sent",
            "calls per cut",
            "first-call cache hits (mean)",
            "(min)",
            "prefix report right",
            "first call of a turn p50 ms",
            "later calls p50 ms",
        ],
        rows,
    )
    cold_table = markdown_table(
        [
            "messages",
            "steady ms",
            "cold, with the record ms",
            "x steady",
            "first contact ms",
            "record bytes (JSON)",
            "of which decisions",
        ],
        [
            [
                f"{t.length:,}",
                f"{t.steady:.3g}",
                f"{t.cold_with_record:.3g}",
                f"{t.cold_with_record / t.steady:.1f}",
                f"{t.first_contact:.3g}",
                f"{t.record_bytes:,}",
                f"{t.resume_bytes:,}",
            ]
            for t in cold
        ],
    )
    text = (
        f"\n## Fleet: {settings.workers} worker processes, {settings.threads} threads x "
        f"{settings.turns} turns x {settings.iterations} tool iterations, each turn on the "
        f"next worker ({result.seconds:.0f} s)\n\n{table}\n\n"
        f"Cold call against steady call (one process, {COLD_WINDOW_TOKENS:,}-token window):"
        f"\n\n{cold_table}\n"
    )
    fleet_first = firsts[FLEET]
    targets = [
        Target(
            "fleet: every run finished, every request legal (strict) and within the window",
            not result.errors,
            f"{len(fleet)} + {len(solo)} requests"
            if not result.errors
            else f"{len(result.errors)} failed; first: {result.errors[0]}",
        ),
        Target(
            f"fleet: requests identical to one worker's ({settings.workers} workers, round-robin)",
            not differing and len(fleet) == len(solo),
            f"{len(solo) - len(differing)} of {len(solo)} identical (without the record: "
            f"{_identical(result.calls[FLEET_WITHOUT_RECORD], solo_places)})"
            + (f"; first differing: {differing[0]}" if differing else ""),
        ),
        Target(
            "fleet: one summary call per cut",
            cuts[SOLO] > 0
            and result.summary_calls[FLEET] == cuts[SOLO]
            and result.summary_calls[SOLO] == cuts[SOLO],
            f"{result.summary_calls[FLEET]} calls for {cuts[SOLO]} cuts (one worker: "
            f"{result.summary_calls[SOLO]}; without the record: "
            f"{result.summary_calls[FLEET_WITHOUT_RECORD]})",
        ),
        Target(
            "fleet: the prefix report of each turn's first call compares with the thread's "
            "previous request",
            fleet_first.count > 0 and fleet_first.reported_right == fleet_first.count,
            f"right on {fleet_first.reported_right} of {fleet_first.count}",
        ),
    ]
    if cold:
        longest = max(cold, key=lambda t: t.length)
        ratio = longest.cold_with_record / longest.steady
        targets.append(
            Target(
                f"cold call with the record <= {COLD_TARGET:g} x a steady call at "
                f"{longest.length:,} messages",
                ratio <= COLD_TARGET if judge_timing else None,
                f"{ratio:.1f} x ({longest.cold_with_record:.3g} ms against "
                f"{longest.steady:.3g} ms; first contact {longest.first_contact:.3g} ms)"
                + ("" if judge_timing else ", not judged with --ci"),
            )
        )
    return text, targets
