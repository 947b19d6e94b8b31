"""Where a steady call's time goes, part by part: the floor under the two timing targets
the governor misses (a steady call on a history reloaded as new objects, and on one that
fits its budget, at most 0.1 x `trim_messages(approximate)`).

The calls are the timing section's (`benchmarks.timing.time_steady`: one tool iteration
more each call, the governor's `invoke` as a chain uses it, no thread); each part is timed
inside them: the steps of the pipeline as `pipeline.STEPS` runs them, the report, the
record, the LCEL run around `govern` (config, callbacks), and what is left of `govern`:
reading the input, finding the conversation (by the content of its history where no
thread names it), taking up its state. For the reloaded history, the keys that find the
conversation by content (`_messages.message_keys_and_text`: every message's text, tool
calls and fields hashed) are timed apart on an equal copy, outside the calls.

Example:
    >>> parts = measure_call_parts("fits", size=60, budget=100_000, calls=2)
    >>> parts.calls, "repair the history" in parts.milliseconds
    (2, True)
"""

from __future__ import annotations

import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any
from unittest import mock

from langchain_core.messages import BaseMessage

import langchain_context_governance.governor as governor_module
import langchain_context_governance.pipeline as pipeline_module
from benchmarks.histories import HistoryGenerator, build_history, reload_messages
from benchmarks.policies import GOVERNOR_MAX_OUTPUT_TOKENS, GOVERNOR_SAFETY_BUFFER, trim_last
from benchmarks.report import markdown_table
from benchmarks.timing import MESSAGES_PER_ITERATION, HistoryKind, time_call
from langchain_context_governance import ContextGovernor
from langchain_context_governance._messages import message_keys_and_text

__all__ = ["CallParts", "call_parts_table", "measure_call_parts"]

LCEL_RUN = "LCEL run around govern (config, callbacks)"
REPORT = "the report"
RECORD = "the record"
REST_OF_GOVERN = "input read, conversation found, its state taken up"
CONTENT_KEYS = "of which: the history's content keys (timed apart)"


@dataclass(frozen=True)
class CallParts:
    """Mean milliseconds per call of each part, of the whole call, and of `trim_messages`
    (median) on the same history."""

    kind: HistoryKind
    messages: int
    calls: int
    milliseconds: dict[str, float]
    whole: float
    trim: float


@contextmanager
def _timed_parts(spent: dict[str, float]) -> Iterator[None]:
    """The steps, the report, the record and `govern` timed into `spent` (seconds)."""

    def timed(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                spent[name] += time.perf_counter() - started

        return run

    steps = tuple((name, timed(name, step)) for name, step in pipeline_module.STEPS)
    with ExitStack() as patches:
        patches.enter_context(mock.patch.object(pipeline_module, "STEPS", steps))
        for owner, attribute, name in (
            (governor_module, "report_of", REPORT),
            (ContextGovernor, "_with_record", RECORD),
            (ContextGovernor, "govern", "govern"),
        ):
            patched = timed(name, getattr(owner, attribute))
            patches.enter_context(mock.patch.object(owner, attribute, patched))
        yield


def measure_call_parts(
    kind: HistoryKind, *, size: int, budget: int, calls: int, seed: int = 0
) -> CallParts:
    """The parts of `calls` steady calls on a `kind` history ("fits" or "reloaded") that
    grows from about `size` messages, the governor's input budget `budget`."""
    governor = ContextGovernor(
        context_window_tokens=budget + GOVERNOR_MAX_OUTPUT_TOKENS + GOVERNOR_SAFETY_BUFFER,
        max_output_tokens=GOVERNOR_MAX_OUTPUT_TOKENS,
        safety_buffer=GOVERNOR_SAFETY_BUFFER,
        token_counter="approximate",
    )
    generator = HistoryGenerator(seed=seed)
    history: list[BaseMessage] = build_history(
        max(4, size - calls * MESSAGES_PER_ITERATION // 2), generator=generator
    )
    governor.invoke(history)
    spent: dict[str, float] = defaultdict(float)
    whole = 0.0
    with _timed_parts(spent):
        for _ in range(calls):
            history = [*history, *generator.iteration()]
            sent = reload_messages(history) if kind == "reloaded" else history
            whole += time_call(governor.invoke, sent)
    if kind == "reloaded":
        copies = [reload_messages(history) for _ in range(calls)]
        spent[CONTENT_KEYS] = sum(time_call(message_keys_and_text, copy) for copy in copies)
    steps = sum(spent[name] for name, _ in pipeline_module.STEPS)
    spent[LCEL_RUN] = whole - spent["govern"]
    spent[REST_OF_GOVERN] = spent.pop("govern") - steps - spent[REPORT] - spent[RECORD]
    trims = [
        time_call(
            lambda messages: trim_last(messages, budget=budget, token_counter="approximate"),
            history,
        )
        for _ in range(max(5, calls // 4))
    ]
    return CallParts(
        kind=kind,
        messages=len(history),
        calls=calls,
        milliseconds={name: seconds * 1000 / calls for name, seconds in spent.items()},
        whole=whole * 1000 / calls,
        trim=statistics.median(trims) * 1000,
    )


def call_parts_table(measured: list[CallParts]) -> str:
    """One column per history kind: each part's mean ms per call and its share of the call."""
    order = [
        LCEL_RUN,
        REST_OF_GOVERN,
        CONTENT_KEYS,
        *(name for name, _ in pipeline_module.STEPS),
        REPORT,
        RECORD,
    ]
    header = [
        "part",
        *(f"{parts.kind}, {parts.messages:,} messages: ms (share)" for parts in measured),
    ]
    rows = []
    for name in order:
        if not any(name in parts.milliseconds for parts in measured):
            continue
        rows.append([name, *(_cell(parts, name) for parts in measured)])
    rows.append(["whole call (mean)", *(f"{parts.whole:.3f}" for parts in measured)])
    rows.append(
        [
            "trim_messages(approximate) (median)",
            *(
                f"{parts.trim:.3f} (call / trim {parts.whole / parts.trim:.2f})"
                for parts in measured
            ),
        ]
    )
    return markdown_table(header, rows)


def _cell(parts: CallParts, name: str) -> str:
    if name not in parts.milliseconds:
        return "-"
    value = parts.milliseconds[name]
    return f"{value:.3f} ({value / parts.whole:.0%})"
