"""Wall-clock timings of the request builders on seeded histories.

Cold: the first call of a fresh builder (new governor, new counter) on a history it has never
seen; each repetition uses a history with its own seed, so no cache can carry over.
Steady: one builder follows a growing history; after each appended iteration the call is timed.
The steady history starts about half the timed growth below the nominal size, so the median
timed call sees about the nominal number of messages. The steady history is one of three kinds:
"clean"; "damaged" (`build_damaged_history`: old unanswered calls and an assistant answer the
growth continues after); "reloaded" (clean, but every call gets equal messages as new objects,
as the first call of each LangGraph run gets them from the checkpointer; the copy is not timed).
`time_fitting` times steady calls on a clean history the builders' budget holds whole
("fits": nothing to compact or cut, the call costs what it costs to keep the request legal).
"""

from __future__ import annotations

import dataclasses
import gc
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from langchain_core.messages import BaseMessage

from benchmarks.histories import (
    DAMAGED_HISTORY_MIN_MESSAGES,
    HistoryGenerator,
    build_damaged_history,
    build_history,
    reload_messages,
)
from benchmarks.policies import NamedPolicy, RequestBuilder

__all__ = [
    "HISTORY_KINDS",
    "HistoryKind",
    "Repetitions",
    "Timing",
    "time_all",
    "time_call",
    "time_cold",
    "time_fitting",
    "time_history_kinds",
    "time_steady",
    "warm_up",
]

Phase = Literal["cold", "steady"]
HistoryKind = Literal["clean", "damaged", "reloaded", "fits"]
HISTORY_KINDS: tuple[HistoryKind, ...] = ("clean", "damaged", "reloaded")
# Mean messages an iteration appends (an AI step with 1-3 calls, or answer plus follow-up).
MESSAGES_PER_ITERATION = 3
WARM_UP_MESSAGES = 40


@dataclass(frozen=True)
class Repetitions:
    """How many calls to time at one size, and the wall-clock cap per builder and phase.

    At least `minimum` calls are timed even past the cap.
    """

    cold: int
    steady: int
    cap_seconds: float
    minimum: int = 3


@dataclass(frozen=True)
class Timing:
    policy: str
    size: int
    phase: Phase
    seconds: list[float]
    sizes: list[int]
    history: HistoryKind = "clean"

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    @property
    def median_size(self) -> int:
        return int(statistics.median(self.sizes))


def time_call(build_request: RequestBuilder, messages: list[BaseMessage]) -> float:
    """Seconds one call takes, with the garbage collector settled before and off during it."""
    gc.collect()
    gc.disable()
    try:
        started = time.perf_counter()
        build_request(messages)
        return time.perf_counter() - started
    finally:
        gc.enable()


def time_cold(
    policies: Sequence[NamedPolicy], size: int, repetitions: Repetitions, *, seed: int
) -> list[Timing]:
    """Cold timings of every policy; the histories are built once and shared by policies."""
    seconds: dict[str, list[float]] = {policy.name: [] for policy in policies}
    spent: dict[str, float] = dict.fromkeys(seconds, 0.0)
    for repetition in range(repetitions.cold):
        history = build_history(size, seed=seed + 1 + repetition)
        for policy in policies:
            if _capped(spent[policy.name], len(seconds[policy.name]), repetitions):
                continue
            took = time_call(policy.make(), history)
            seconds[policy.name].append(took)
            spent[policy.name] += took
    return [
        Timing(name, size, "cold", values, [size] * len(values)) for name, values in seconds.items()
    ]


def time_steady(
    policy: NamedPolicy,
    size: int,
    repetitions: Repetitions,
    *,
    seed: int,
    history_kind: HistoryKind = "clean",
) -> Timing:
    """Steady timings of one builder following a history that grows one iteration a call."""
    generator = HistoryGenerator(seed=seed)
    start = max(4, size - repetitions.steady * MESSAGES_PER_ITERATION // 2)
    if history_kind == "damaged":
        history = build_damaged_history(
            max(start, DAMAGED_HISTORY_MIN_MESSAGES), generator=generator
        )
    else:
        history = build_history(start, generator=generator)
    build_request = policy.make()
    build_request(history)  # the warm-up call a running agent has already made
    seconds: list[float] = []
    sizes: list[int] = []
    while len(seconds) < repetitions.steady and not _capped(
        sum(seconds), len(seconds), repetitions
    ):
        history = [*history, *generator.iteration()]
        sent = reload_messages(history) if history_kind == "reloaded" else history
        seconds.append(time_call(build_request, sent))
        sizes.append(len(history))
    return Timing(policy.name, size, "steady", seconds, sizes, history_kind)


def _capped(spent: float, done: int, repetitions: Repetitions) -> bool:
    return done >= repetitions.minimum and spent >= repetitions.cap_seconds


def warm_up(policies: Sequence[NamedPolicy]) -> None:
    """One untimed call of each policy on a small history, so that one-off process costs
    (lazy imports, loading the encoding) land on no policy's first timed call."""
    history = build_history(WARM_UP_MESSAGES, seed=-1)
    for policy in policies:
        policy.make()(history)


def time_history_kinds(
    policies: Sequence[tuple[NamedPolicy, Sequence[HistoryKind]]],
    size: int,
    repetitions: Repetitions,
    *,
    seed: int,
    progress: Callable[[str], None] = lambda _: None,
) -> list[Timing]:
    """Steady timings of each policy on each of its history kinds other than "clean"."""
    timings = []
    for policy, kinds in policies:
        for kind in kinds:
            if kind == "clean":
                continue
            progress(f"timing steady calls of {policy.name} on a {kind} history at {size}")
            timings.append(time_steady(policy, size, repetitions, seed=seed, history_kind=kind))
    return timings


def time_fitting(
    policies: Sequence[NamedPolicy],
    size: int,
    repetitions: Repetitions,
    *,
    seed: int,
    progress: Callable[[str], None] = lambda _: None,
) -> list[Timing]:
    """Steady timings of each policy on a clean history its budget holds whole (the
    policies are made with such a budget), reported as history kind "fits"."""
    timings = []
    for policy in policies:
        progress(f"timing steady calls of {policy.name} on a {size}-message history that fits")
        timing = time_steady(policy, size, repetitions, seed=seed)
        timings.append(dataclasses.replace(timing, history="fits"))
    return timings


def time_all(
    policies: Sequence[NamedPolicy],
    sizes: Sequence[int],
    repetitions: Callable[[int], Repetitions],
    *,
    seed: int,
    progress: Callable[[str], None] = lambda _: None,
) -> list[Timing]:
    """Cold then steady timings of every policy at every size."""
    warm_up(policies)
    timings: list[Timing] = []
    for size in sizes:
        plan = repetitions(size)
        progress(f"timing cold calls at {size} messages")
        timings.extend(time_cold(policies, size, plan, seed=seed))
        for policy in policies:
            progress(f"timing steady calls of {policy.name} at {size} messages")
            timings.append(time_steady(policy, size, plan, seed=seed))
    return timings
