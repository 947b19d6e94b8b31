"""Offload (issue 30): what the model can still get back of what it needs, and at what cost.

The governor at its defaults against the same governor with `offload=True` (each run a
thread of its own in the process's embedded store), replayed call by
call on the real runs, the tool-heavy replay (BFCL) and the tool loop (its seeds replayed
as runs: a call before every assistant message, with the loop's budget):

- *needed facts visible* (`benchmarks.fidelity`) and *needed facts retrievable*: those
  visible, or held by the text behind a handle the request shows (what `read_context`
  reads back: a cleared result, a cut text, a cut's transcript);
- *hit ratio* and *cost*, the prefix-cache measure of `benchmarks.loop` (offload against
  the defaults: a handle must cost what today's placeholder costs);
- *store bytes per thread*: what a run's thread keeps at its end (median and largest);
- *ms per call*: the policy's time per call, with offload its writes to the store (an
  embedded store, after each call) included.

A scripted reader: on the real runs, before each call whose needed values the request
does not show but a handle it shows holds, the agent calls the governor's own
`read_context` tool (its page bound and all) with `pattern` set to those values, the
handle holding most of them first, following the offset a page gives where more may
match; *extra calls per task* are those reads per run, and *read back* the share of the
values looked for that the answers showed. The run itself goes on as recorded (the reads
are not added to its history).
"""

from __future__ import annotations

import itertools
import re
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from benchmarks.fidelity import call_values, message_text, request_text
from benchmarks.histories import build_tool_loop
from benchmarks.loop import MessageTokenMemo
from benchmarks.policies import (
    GOVERNOR_MAX_OUTPUT_TOKENS,
    GOVERNOR_SAFETY_BUFFER,
    NamedPolicy,
    RequestBuilder,
)
from benchmarks.report import Target, markdown_table
from benchmarks.trajectories import (
    Trajectory,
    TrajectoryResult,
    call_points,
    combine,
    replay_trajectory,
    trajectory_budget,
)

__all__ = [
    "OFFLOAD_OFF",
    "OFFLOAD_ON",
    "OffloadReplay",
    "OffloadingGovernor",
    "ReaderCounts",
    "Run",
    "loop_trajectories",
    "offload_policies",
    "offload_table",
    "offload_targets",
    "read_back",
    "reader_table",
    "real_runs",
    "replay_offload",
]

OFFLOAD_OFF = "ContextGovernor(defaults)"
OFFLOAD_ON = "ContextGovernor(offload=True)"
_THREADS = itertools.count()
_HANDLE = re.compile(r'read_context\(handle="([a-z2-7]{10})"')
# A run of a replay: its trajectory, input budget, the tokens of the tool definitions sent
# with it, those definitions, its excluded tools.
Run = tuple[Trajectory, int, int, Sequence[Any] | None, frozenset[str]]


class OffloadingGovernor:
    """A governor with `offload=True` on a thread of its own (in the process's embedded
    store, as the middleware without a graph store keeps it), as a request builder that
    can also read back what the handles of a request hold."""

    def __init__(self, **settings: Any) -> None:
        from langchain_context_governance import ContextGovernor, OffloadStore
        from langchain_context_governance.offload import embedded_store

        self.thread = f"offload-{next(_THREADS)}"
        self.governor = ContextGovernor(offload=True, **settings)
        self.kept = OffloadStore(embedded_store())
        self._read: dict[str, str] = {}

    def __call__(self, messages: list[BaseMessage]) -> list[BaseMessage]:
        return self.governor.govern(messages, thread_id=self.thread).messages

    def handles(self, request: Sequence[BaseMessage]) -> list[str]:
        """The handles `request` shows, each once, in order."""
        found = (_HANDLE.findall(message_text(message)) for message in request)
        return list(dict.fromkeys(handle for handles in found for handle in handles))

    def read(self, handle: str) -> str:
        """What `handle` holds ("" where nothing): it never changes, so it is read once."""
        text = self._read.get(handle)
        if text is None:
            content = self.kept.read(self.thread, handle)
            text = self._read[handle] = content.text if content.status == "found" else ""
        return text

    def text_behind(self, request: Sequence[BaseMessage]) -> str:
        return "\n".join(self.read(handle) for handle in self.handles(request))

    def kept_bytes(self) -> int:
        return self.kept.kept_bytes(self.thread)


@dataclass
class OffloadReplay:
    """One policy's results over the runs of a replay, and the bytes each run kept."""

    results: list[TrajectoryResult] = field(default_factory=list)
    kept_bytes: list[int] = field(default_factory=list)


def _settings(
    budget: int, tools: Sequence[Any] | None = None, exclude_tools: frozenset[str] = frozenset()
) -> dict[str, Any]:
    """The governor's settings for an input budget of `budget` (its window sized for it)."""
    return {
        "context_window_tokens": budget + GOVERNOR_MAX_OUTPUT_TOKENS + GOVERNOR_SAFETY_BUFFER,
        "max_output_tokens": GOVERNOR_MAX_OUTPUT_TOKENS,
        "safety_buffer": GOVERNOR_SAFETY_BUFFER,
        "tools": None if tools is None else list(tools),
        "exclude_tools": exclude_tools,
    }


def offload_policies(
    budget: int, *, tools: Sequence[Any] | None = None, exclude_tools: frozenset[str] = frozenset()
) -> tuple[NamedPolicy, NamedPolicy, list[OffloadingGovernor]]:
    """The governor at its defaults and with offload, sized so its input budget is
    `budget`; and the list the offloading builders are put in as they are made."""
    from langchain_context_governance import ContextGovernor

    settings = _settings(budget, tools, exclude_tools)
    made: list[OffloadingGovernor] = []

    def defaults() -> RequestBuilder:
        return ContextGovernor(**settings).invoke

    def offloading() -> RequestBuilder:
        builder = OffloadingGovernor(**settings)
        made.append(builder)
        return builder

    return NamedPolicy(OFFLOAD_OFF, defaults), NamedPolicy(OFFLOAD_ON, offloading), made


def replay_offload(runs: Sequence[Run], memo: MessageTokenMemo) -> dict[str, OffloadReplay]:
    """Both policies on every run."""
    replays = {OFFLOAD_OFF: OffloadReplay(), OFFLOAD_ON: OffloadReplay()}
    for trajectory, budget, tools_tokens, tools, excluded in runs:
        off, on, made = offload_policies(budget, tools=tools, exclude_tools=excluded)
        for policy in (off, on):
            result = replay_trajectory(
                policy,
                trajectory,
                budget=budget - tools_tokens,
                memo=memo,
                exclude_tools=excluded,
            )
            replays[policy.name].results.append(result)
        replays[OFFLOAD_ON].kept_bytes.append(made[-1].kept_bytes())
    return replays


def real_runs(trajectories: Sequence[Trajectory], memo: MessageTokenMemo) -> list[Run]:
    """The real runs with the budget every policy gets on them, no tools."""
    return [(t, trajectory_budget(t, memo), 0, None, frozenset()) for t in trajectories]


def loop_trajectories(iterations: int, seeds: Sequence[int], budget: int) -> list[Run]:
    """The tool loop of each seed as a run, with the loop's budget."""
    runs: list[Run] = []
    for seed in seeds:
        messages = [
            message for chunk in build_tool_loop(iterations, seed=seed) for message in chunk
        ]
        runs.append(
            (Trajectory(f"loop seed {seed}", "loop", messages), budget, 0, None, frozenset())
        )
    return runs


def _bytes(sizes: Sequence[int]) -> str:
    if not sizes:
        return "-"
    return f"{statistics.median(sizes) / 1024:,.0f} / {max(sizes) / 1024:,.0f} KiB"


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def offload_table(replays_by_kind: dict[str, dict[str, OffloadReplay]]) -> str:
    """Per replay and policy: facts visible and retrievable, hits, cost, bytes kept."""
    rows = []
    for kind, replays in replays_by_kind.items():
        off = combine(replays[OFFLOAD_OFF].results)
        for name, replay in replays.items():
            total = combine(replay.results)
            rows.append(
                [
                    kind,
                    name,
                    str(total.calls),
                    _share(total.fidelity.facts_share),
                    _share(total.fidelity.retrievable_share),
                    _share(total.hit_ratio),
                    f"{total.priced_cost / off.priced_cost:.3f}" if off.priced_cost else "-",
                    str(total.rejected),
                    str(total.over_budget),
                    _bytes(replay.kept_bytes),
                    f"{total.seconds / total.calls * 1000:.2f}" if total.calls else "-",
                ]
            )
    header = [
        "replay",
        "policy",
        "calls",
        "needed facts visible",
        "needed facts retrievable",
        "hit ratio",
        "cost / defaults",
        "rejected",
        "over budget",
        "store per thread (median / max)",
        "ms per call",
    ]
    return markdown_table(header, rows)


def offload_targets(replays_by_kind: dict[str, dict[str, OffloadReplay]]) -> list[Target]:
    """Every needed fact retrievable with offload; hits and cost within 1 point."""
    targets = []
    for kind, replays in replays_by_kind.items():
        off = combine(replays[OFFLOAD_OFF].results)
        on = combine(replays[OFFLOAD_ON].results)
        retrievable = on.fidelity.retrievable_share
        targets.append(
            Target(
                f"offload, {kind}: needed facts retrievable 100%",
                None if retrievable is None else retrievable == 1.0,
                f"{_share(retrievable)} ({on.fidelity.facts_retrievable}/"
                f"{on.fidelity.facts_needed}; visible {_share(on.fidelity.facts_share)})",
            )
        )
        hits = on.hit_ratio - off.hit_ratio
        targets.append(
            Target(
                f"offload, {kind}: hit ratio within 1 point of the defaults",
                abs(hits) <= 0.01,
                f"{on.hit_ratio:.1%} against {off.hit_ratio:.1%}",
            )
        )
        cost = on.priced_cost / off.priced_cost if off.priced_cost else None
        targets.append(
            Target(
                f"offload, {kind}: cost within 1% of the defaults",
                None if cost is None else abs(cost - 1) <= 0.01,
                "-" if cost is None else f"{cost:.4f} x the defaults",
            )
        )
    return targets


@dataclass
class ReaderCounts:
    """What the scripted reader did over a replay."""

    tasks: int = 0
    calls: int = 0
    calls_reading: int = 0
    values_behind: int = 0
    values_read: int = 0
    reads: int = 0

    @property
    def reads_per_task(self) -> float:
        return self.reads / self.tasks if self.tasks else 0.0


def _values_to_read(
    builder: OffloadingGovernor,
    request: Sequence[BaseMessage],
    next_message: BaseMessage,
    earlier: str,
) -> list[str]:
    """The needed values of the next call the request does not show but its handles hold."""
    if not (isinstance(next_message, AIMessage) and next_message.tool_calls):
        return []
    shown = request_text(request)
    hidden = [
        v for v in dict.fromkeys(call_values(next_message)) if v in earlier and v not in shown
    ]
    if not hidden:
        return []
    behind = builder.text_behind(request)
    return [value for value in hidden if value in behind]


def _read_all(
    read: Callable[[dict[str, Any]], str], handle: str, values: Sequence[str]
) -> list[str]:
    """The answers of reading the lines that hold `values` under `handle`, page after page."""
    arguments: dict[str, Any] = {
        "handle": handle,
        "pattern": "|".join(re.escape(value) for value in values),
    }
    answers = []
    while True:
        answer = read(arguments)
        answers.append(answer)
        last = answer.rsplit("\n", 1)[-1]
        if "more may match" not in last:
            return answers
        arguments["offset"] = int(last.rsplit("offset=", 1)[1].rstrip(")]"))


def read_back(run: Run, counts: ReaderCounts) -> None:
    """The scripted reader on one run (see the module doc), added to `counts`.

    The values are asked for together, the handle that holds most of them first; a value
    its page did not show (a long line shown around another match) is asked for alone.
    """
    trajectory, budget, _, tools, excluded = run
    builder = OffloadingGovernor(**_settings(budget, tools, excluded))
    tool = builder.governor.read_context_tool()
    config: Any = {"configurable": {"thread_id": builder.thread}}

    def read(arguments: dict[str, Any]) -> str:
        return str(tool.invoke(arguments, config=config))

    messages = trajectory.messages
    counts.tasks += 1
    for point in call_points(messages):
        history = messages[:point]
        request = builder(history)
        counts.calls += 1
        wanted = _values_to_read(builder, request, messages[point], request_text(history))
        if not wanted:
            continue
        counts.calls_reading += 1
        counts.values_behind += len(wanted)
        texts = {handle: builder.read(handle) for handle in builder.handles(request)}
        pending, missed = list(wanted), []
        while pending:
            handle = max(texts, key=lambda h: sum(value in texts[h] for value in pending))
            asked = [value for value in pending if value in texts[handle]]
            pages = _read_all(read, handle, asked)
            counts.reads += len(pages)
            answers = "\n".join(pages)
            missed += [(handle, value) for value in asked if value not in answers]
            pending = [value for value in pending if value not in asked]
        counts.values_read += len(wanted) - len(missed)
        for handle, value in missed:
            answers = _read_all(read, handle, [value])
            counts.reads += len(answers)
            counts.values_read += value in "\n".join(answers)


def reader_table(counts_by_kind: dict[str, ReaderCounts]) -> str:
    rows = []
    for kind, counts in counts_by_kind.items():
        values = "-"
        if counts.values_behind:
            share = counts.values_read / counts.values_behind
            values = f"{counts.values_read}/{counts.values_behind} ({share:.1%})"
        rows.append(
            [
                kind,
                str(counts.tasks),
                str(counts.calls),
                str(counts.calls_reading),
                str(counts.reads),
                f"{counts.reads_per_task:.2f}",
                values,
            ]
        )
    header = [
        "replay",
        "runs",
        "calls",
        "calls needing a read",
        "read_context calls",
        "extra calls per task",
        "values read back",
    ]
    return markdown_table(header, rows)
