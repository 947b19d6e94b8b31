"""How a call's cost grows with the history: steady calls and first contact, in CPU time.

A steady call (a conversation the governor has served, one iteration longer) should cost
what is new, not what the history holds: at 10,000 messages no more than 1.5 x at 1,000,
with the same window, so the request is as large at both sizes. First contact (a governor
that never saw the thread, without a record) replays the history once, so it grows
linearly: 100,000 messages at most 12 x 10,000. CPU time of this process
(`time.process_time`), so that other work on the machine moves the figures little;
`trim_messages` on the same histories for scale.

>>> first_contact_seconds(200, window=20_000) > 0
True
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from langchain_core.messages import BaseMessage, trim_messages

from benchmarks.histories import HistoryGenerator, build_history
from benchmarks.report import Target, markdown_table
from langchain_context_governance import ContextGovernor

__all__ = [
    "FIRST_CONTACT_SIZES",
    "STEADY_SIZES",
    "GrowthResult",
    "first_contact_seconds",
    "growth_table",
    "growth_targets",
    "measure_growth",
    "steady_seconds",
]

STEADY_SIZES = (1_000, 10_000)
FIRST_CONTACT_SIZES = (10_000, 100_000)
STEADY_GROWTH_LIMIT = 1.5
FIRST_CONTACT_GROWTH_LIMIT = 12.0
WINDOW_TOKENS = 128_000
STEADY_CALLS = 60


@dataclass(frozen=True)
class GrowthResult:
    """Median CPU seconds of the governor's steady call and its first contact by size,
    and of trim_messages on the same histories."""

    steady: dict[int, float]
    first_contact: dict[int, float]
    trim: dict[int, float]


def _cpu_seconds(call: Callable[[], object]) -> float:
    gc.collect()
    gc.disable()
    try:
        started = time.process_time()
        call()
        return time.process_time() - started
    finally:
        gc.enable()


def first_contact_seconds(size: int, *, window: int = WINDOW_TOKENS, seed: int = 1) -> float:
    """CPU seconds of a fresh governor's first call on a `size`-message history."""
    history = build_history(size, seed=seed)
    governor = ContextGovernor(context_window_tokens=window)
    return _cpu_seconds(lambda: governor.govern(history, thread_id="t"))


def steady_seconds(
    size: int, *, window: int = WINDOW_TOKENS, calls: int = STEADY_CALLS, seed: int = 1
) -> float:
    """Median CPU seconds of a served conversation's call, one iteration longer each time."""
    generator = HistoryGenerator(seed=seed)
    history: list[BaseMessage] = build_history(size, generator=generator)
    governor = ContextGovernor(context_window_tokens=window)
    governor.govern(history, thread_id="t")
    seconds = []
    for _ in range(calls):
        history = [*history, *generator.iteration()]
        seconds.append(_cpu_seconds(lambda grown=history: governor.govern(grown, thread_id="t")))
    return statistics.median(seconds)


def trim_seconds(size: int, *, window: int = WINDOW_TOKENS, seed: int = 1) -> float:
    """CPU seconds of trim_messages(approximate) on a `size`-message history."""
    history = build_history(size, seed=seed)
    return _cpu_seconds(
        lambda: trim_messages(
            history,
            max_tokens=window,
            token_counter="approximate",
            strategy="last",
            start_on="human",
            include_system=True,
        )
    )


def measure_growth(*, quick: bool = False) -> GrowthResult:
    """Every figure of the growth table (`quick`: 1,000 / 10,000 for first contact too)."""
    contact_sizes = STEADY_SIZES if quick else FIRST_CONTACT_SIZES
    calls = 10 if quick else STEADY_CALLS
    return GrowthResult(
        steady={size: steady_seconds(size, calls=calls) for size in STEADY_SIZES},
        first_contact={size: first_contact_seconds(size) for size in contact_sizes},
        trim={size: trim_seconds(size) for size in sorted({*STEADY_SIZES, *contact_sizes})},
    )


def growth_table(result: GrowthResult) -> str:
    sizes = sorted({*result.steady, *result.first_contact, *result.trim})

    def cell(values: dict[int, float], size: int) -> str:
        return f"{values[size] * 1000:,.1f}" if size in values else "-"

    rows = [
        [
            f"{size:,}",
            cell(result.steady, size),
            cell(result.first_contact, size),
            cell(result.trim, size),
        ]
        for size in sizes
    ]
    header = ["messages", "steady call (ms)", "first contact (ms)", "trim_messages (ms)"]
    return markdown_table(header, rows)


def growth_targets(result: GrowthResult) -> list[Target]:
    small, large = STEADY_SIZES
    steady = result.steady[large] / result.steady[small]
    targets = [
        Target(
            f"steady call at {large:,} messages <= {STEADY_GROWTH_LIMIT:g} x at {small:,} "
            "(same window)",
            steady <= STEADY_GROWTH_LIMIT,
            f"ratio {steady:.2f}",
        )
    ]
    contact_small, contact_large = sorted(result.first_contact)
    contact = result.first_contact[contact_large] / result.first_contact[contact_small]
    # 12 x for ten times the messages: linear, with a little room.
    limit = FIRST_CONTACT_GROWTH_LIMIT * (contact_large / contact_small) / 10
    targets.append(
        Target(
            f"first contact at {contact_large:,} messages <= {limit:g} x at {contact_small:,}",
            contact <= limit,
            f"ratio {contact:.2f}",
        )
    )
    return targets
