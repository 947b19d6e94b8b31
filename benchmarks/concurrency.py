"""Many conversations interleaved on one governor, in plain Python (no server, no threads).

A server runs one compiled graph, so one `ContextGovernor` serves every conversation. Here
`count` conversations take turns, one governed call each, round-robin; each conversation
grows by one tool iteration (an AIMessage with one tool call and its ToolMessage) between
its calls, as an agent loop does, and is named by its own `thread_id`. One conversation is
the baseline: `SEQUENTIAL_CONVERSATIONS` of them run one after another on one governor.

Measured per number of conversations: governance milliseconds per call (p50, p99) overall
and by history length; the memory the governor still holds after the run (traced with
tracemalloc in a second, untimed run, after the histories are dropped), per conversation;
the longest garbage-collector pause during the timed run; and how many calls after a
conversation's first did not know `report.unchanged_prefix_messages`.

>>> result = run_conversations(2, iterations=3, seed=0, measure_memory=False)
>>> result.calls, result.prefix_unknown
(8, 0)
"""

from __future__ import annotations

import gc
import inspect
import math
import time
import tracemalloc
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage

from benchmarks.histories import HistoryGenerator
from benchmarks.report import Target, markdown_table

__all__ = [
    "CONVERSATION_COUNTS",
    "ConcurrencyResult",
    "LargeMessageRetention",
    "concurrency_table",
    "concurrency_targets",
    "govern_by_thread",
    "large_message_table",
    "large_message_targets",
    "retained_with_large_messages",
    "run_conversations",
]

CONVERSATION_COUNTS = (1, 10, 50, 100)
# 2 + 2 x 85 = 172 messages at the last call, past the longest bucket.
ITERATIONS_PER_CONVERSATION = 85
# Calls whose history is within BUCKET_HALF_WIDTH messages of a bucket fall in it.
LENGTH_BUCKETS = (20, 80, 160)
BUCKET_HALF_WIDTH = 8
# The one-conversation baseline needs as many calls per bucket as the others have.
SEQUENTIAL_CONVERSATIONS = 10
# Small enough that governance must compact and cut well before 80 messages.
CONCURRENCY_WINDOW_TOKENS = 16_000
# Targets of issue 11, judged at the largest number of conversations measured.
P50_GROWTH_LIMIT = 1.5
LENGTH_GROWTH_LIMIT = 1.5
# Issue 17: conversations whose history holds two large user messages in a row (merged
# into one turn by the repairs); what the governor keeps must not grow with their size.
LARGE_MESSAGE_SIZES = (50, 50_000)
LARGE_MESSAGE_CONVERSATIONS = 20
LARGE_MESSAGE_ITERATIONS = 20
RETAINED_LIMIT_BYTES = 16 * 1024
RETAINED_GROWTH_LIMIT_BYTES = 1024

Govern = Callable[[list[BaseMessage], str], Any]


@dataclass
class ConcurrencyResult:
    """What one run of `conversations` interleaved conversations measured."""

    conversations: int
    seconds: list[float] = field(default_factory=list)
    seconds_by_bucket: dict[int, list[float]] = field(default_factory=dict)
    retained_bytes: int | None = None
    conversations_run: int = 0
    gc_pause_max: float = 0.0
    full_collections: int = 0
    later_calls: int = 0
    prefix_unknown: int = 0

    @property
    def calls(self) -> int:
        return len(self.seconds)

    @property
    def retained_per_conversation(self) -> float | None:
        if self.retained_bytes is None or not self.conversations_run:
            return None
        return self.retained_bytes / self.conversations_run


def percentile(values: Sequence[float], share: float) -> float:
    """The nearest-rank percentile: the smallest value at least `share` of values reach."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def make_governor() -> Any:
    from langchain_context_governance import ContextGovernor

    return ContextGovernor(context_window_tokens=CONCURRENCY_WINDOW_TOKENS)


def govern_by_thread(governor: Any) -> Govern:
    """`governor.govern` with the conversation's thread, where the governor accepts one."""
    if "thread_id" in inspect.signature(type(governor).govern).parameters:
        return lambda messages, thread_id: governor.govern(messages, thread_id=thread_id)
    return lambda messages, _thread_id: governor.govern(messages)


class GcPauses:
    """The longest collection and the number of full ones, from `gc.callbacks`."""

    def __init__(self) -> None:
        self.longest = 0.0
        self.full = 0
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        self.longest = max(self.longest, time.perf_counter() - self._started)
        if info.get("generation") == 2:
            self.full += 1

    @contextmanager
    def recording(self) -> Iterator[None]:
        gc.callbacks.append(self)
        try:
            yield
        finally:
            gc.callbacks.remove(self)


def _bucket(length: int) -> int | None:
    return next((b for b in LENGTH_BUCKETS if abs(length - b) <= BUCKET_HALF_WIDTH), None)


def _play_rounds(
    govern: Govern,
    count: int,
    *,
    iterations: int,
    seed: int,
    rounds: int,
    record: Callable[[int, float, Any, bool], None],
) -> None:
    for round_number in range(rounds):
        _play(
            govern,
            count,
            iterations=iterations,
            seed=seed,
            round_number=round_number,
            record=record,
        )


def _play(
    govern: Govern,
    count: int,
    *,
    iterations: int,
    seed: int,
    round_number: int,
    record: Callable[[int, float, Any, bool], None],
) -> None:
    """Play `count` conversations round-robin, one call each per turn, timing each call."""
    generators = [
        HistoryGenerator(seed=seed + round_number * count + i, max_tool_calls=1)
        for i in range(count)
    ]
    histories = [generator.opening() for generator in generators]
    threads = [f"conversation-{round_number}-{i}" for i in range(count)]
    for step in range(iterations + 1):
        for i in range(count):
            if step:
                histories[i] = [*histories[i], *generators[i].iteration()]
            started = time.perf_counter()
            result = govern(histories[i], threads[i])
            record(len(histories[i]), time.perf_counter() - started, result.report, step > 0)


def run_conversations(
    count: int, *, iterations: int = ITERATIONS_PER_CONVERSATION, seed: int, measure_memory: bool
) -> ConcurrencyResult:
    """Time `count` interleaved conversations on one governor (one conversation: several,
    one after another); then, if asked, trace the memory a second governor keeps."""
    rounds = SEQUENTIAL_CONVERSATIONS if count == 1 else 1
    result = ConcurrencyResult(conversations=count, conversations_run=count * rounds)
    result.seconds_by_bucket = {bucket: [] for bucket in LENGTH_BUCKETS}

    def record(length: int, seconds: float, report: Any, later: bool) -> None:
        result.seconds.append(seconds)
        bucket = _bucket(length)
        if bucket is not None:
            result.seconds_by_bucket[bucket].append(seconds)
        if later:
            result.later_calls += 1
            result.prefix_unknown += report.unchanged_prefix_messages is None

    govern = govern_by_thread(make_governor())
    pauses = GcPauses()
    gc.collect()
    with pauses.recording():
        _play_rounds(govern, count, iterations=iterations, seed=seed, rounds=rounds, record=record)
    result.gc_pause_max = pauses.longest
    result.full_collections = pauses.full
    if measure_memory:
        result.retained_bytes = retained_bytes(
            count, iterations=iterations, seed=seed, rounds=rounds
        )
    return result


def retained_bytes(count: int, *, iterations: int, seed: int, rounds: int) -> int:
    """Bytes a fresh governor (and what it keeps alive) holds after serving the
    conversations, traced by tracemalloc, with the histories themselves dropped."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        governor = make_governor()
        govern = govern_by_thread(governor)
        _play_rounds(
            govern, count, iterations=iterations, seed=seed, rounds=rounds, record=lambda *_: None
        )
        gc.collect()
        retained = tracemalloc.get_traced_memory()[0] - before
        del governor, govern
        return retained
    finally:
        tracemalloc.stop()


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.3g}"


def _p50_p99(values: Sequence[float]) -> str:
    if not values:
        return "-"
    return f"{_ms(percentile(values, 0.5))} / {_ms(percentile(values, 0.99))} ({len(values)})"


def concurrency_table(results: Sequence[ConcurrencyResult]) -> str:
    header = [
        "conversations",
        "calls",
        "p50 / p99 ms",
        *(f"~{bucket} messages p50 / p99 ms (n)" for bucket in LENGTH_BUCKETS),
        "retained KiB per conversation",
        "GC pause max ms",
        "full GCs",
        "prefix unknown after first call",
    ]
    rows = []
    for r in results:
        per_conversation = r.retained_per_conversation
        rows.append(
            [
                str(r.conversations),
                str(r.calls),
                f"{_ms(percentile(r.seconds, 0.5))} / {_ms(percentile(r.seconds, 0.99))}",
                *(_p50_p99(r.seconds_by_bucket[bucket]) for bucket in LENGTH_BUCKETS),
                "-" if per_conversation is None else f"{per_conversation / 1024:,.1f}",
                _ms(r.gc_pause_max),
                str(r.full_collections),
                f"{r.prefix_unknown}/{r.later_calls}",
            ]
        )
    return markdown_table(header, rows)


def concurrency_targets(results: Sequence[ConcurrencyResult]) -> list[Target]:
    """Issue 11's targets, at the largest number of conversations measured."""
    by_count = {r.conversations: r for r in results}
    if not by_count:
        return []
    most = by_count[max(by_count)]
    single = by_count.get(1)
    p50_description = (
        f"{most.conversations} interleaved conversations: p50 <= {P50_GROWTH_LIMIT} x "
        "the single-conversation p50"
    )
    if single is None or most is single:
        targets = [Target(p50_description, None, "needs 1 and more conversations")]
    else:
        ratio = percentile(most.seconds, 0.5) / percentile(single.seconds, 0.5)
        targets = [Target(p50_description, ratio <= P50_GROWTH_LIMIT, f"ratio {ratio:.2f}")]
    short, long = (
        most.seconds_by_bucket[LENGTH_BUCKETS[0]],
        most.seconds_by_bucket[LENGTH_BUCKETS[-1]],
    )
    length_description = (
        f"{most.conversations} interleaved conversations: p50 of ~{LENGTH_BUCKETS[-1]}-message "
        f"calls <= {LENGTH_GROWTH_LIMIT} x ~{LENGTH_BUCKETS[0]}-message calls"
    )
    if short and long:
        ratio = percentile(long, 0.5) / percentile(short, 0.5)
        targets.append(
            Target(length_description, ratio <= LENGTH_GROWTH_LIMIT, f"ratio {ratio:.2f}")
        )
    else:
        targets.append(Target(length_description, None, "histories too short"))
    unknown = sum(r.prefix_unknown for r in results)
    later = sum(r.later_calls for r in results)
    targets.append(
        Target(
            "unchanged prefix known on every call after a conversation's first",
            unknown == 0,
            f"unknown on {unknown} of {later} calls",
        )
    )
    return targets


@dataclass(frozen=True)
class LargeMessageRetention:
    """Bytes a governor keeps per conversation whose user messages are `message_chars` long."""

    message_chars: int
    conversations: int
    messages_per_conversation: int
    retained_per_conversation: float
    # What of it is the governor's token-count cache (shared by its conversations): an
    # int key and a count per message, bounded by the cache's size; as traced (what
    # clearing it frees).
    count_cache_per_conversation: float

    @property
    def state_per_conversation(self) -> float:
        return self.retained_per_conversation - self.count_cache_per_conversation


def retained_with_large_messages(
    message_chars: int,
    *,
    conversations: int = LARGE_MESSAGE_CONVERSATIONS,
    iterations: int = LARGE_MESSAGE_ITERATIONS,
    seed: int,
) -> LargeMessageRetention:
    """Bytes a fresh governor keeps per conversation, traced by tracemalloc after the
    histories are dropped, where each history opens with two user messages of
    `message_chars` characters in a row (the repairs merge them into one turn), then
    grows by one tool iteration per call, the conversations taking turns."""
    from langchain_core.messages import HumanMessage

    # Allocations made once per process (imports, first-use caches) are not counted.
    govern_by_thread(make_governor())(HistoryGenerator(seed=seed).opening(), "warm-up")
    generators = [HistoryGenerator(seed=seed + i, max_tool_calls=1) for i in range(conversations)]
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        governor = make_governor()
        govern = govern_by_thread(governor)
        histories = [
            [
                *generator.opening(),
                HumanMessage(f"{i} " + "a" * message_chars),
                HumanMessage(f"{i} " + "b" * message_chars),
            ]
            for i, generator in enumerate(generators)
        ]
        for step in range(iterations + 1):
            for i in range(conversations):
                if step:
                    histories[i] = [*histories[i], *generators[i].iteration()]
                govern(histories[i], f"large-{i}")
        length = len(histories[0])
        del histories
        gc.collect()
        retained = tracemalloc.get_traced_memory()[0] - before
        # The count cache as traced: what clearing it frees (its `approx_bytes` is an
        # estimate, which would move the state's figure by its error).
        governor.counter.clear_cache()
        gc.collect()
        cache = retained - (tracemalloc.get_traced_memory()[0] - before)
        del governor, govern
    finally:
        tracemalloc.stop()
    return LargeMessageRetention(
        message_chars, conversations, length, retained / conversations, cache / conversations
    )


def large_message_table(results: Sequence[LargeMessageRetention]) -> str:
    return markdown_table(
        [
            "user messages (2 in a row)",
            "conversations",
            "messages each",
            "retained KiB each",
            "of which the count cache",
            "the conversation's state",
        ],
        [
            [
                f"{r.message_chars:,} characters",
                str(r.conversations),
                str(r.messages_per_conversation),
                f"{r.retained_per_conversation / 1024:,.1f}",
                f"{r.count_cache_per_conversation / 1024:,.1f}",
                f"{r.state_per_conversation / 1024:,.1f}",
            ]
            for r in results
        ],
    )


def large_message_targets(results: Sequence[LargeMessageRetention]) -> list[Target]:
    """Issue 17: bounded per conversation, independent of the size of its messages."""
    if len(results) < 2:
        return []
    small, large = (
        min(results, key=lambda r: r.message_chars),
        max(results, key=lambda r: r.message_chars),
    )
    growth = large.state_per_conversation - small.state_per_conversation
    return [
        Target(
            f"a conversation's state with two {large.message_chars:,}-character user "
            f"messages <= {RETAINED_LIMIT_BYTES // 1024} KiB "
            f"({large.messages_per_conversation} messages; the count cache aside)",
            large.state_per_conversation <= RETAINED_LIMIT_BYTES,
            f"{large.state_per_conversation / 1024:.1f} KiB, "
            f"{large.retained_per_conversation / 1024:.1f} KiB with the count cache",
        ),
        Target(
            "a conversation's state does not grow with message size "
            f"(<= {RETAINED_GROWTH_LIMIT_BYTES} bytes from {small.message_chars:,} to "
            f"{large.message_chars:,} characters)",
            growth <= RETAINED_GROWTH_LIMIT_BYTES,
            f"{growth:+,.0f} bytes",
        ),
    ]
