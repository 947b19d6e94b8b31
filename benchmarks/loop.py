"""The tool-loop simulation: what each policy sends, and what a provider's prefix cache saves.

Each iteration appends one AI tool call and its result to the stored history, then the
policy builds the request from the whole history. A request's cached tokens are the tokens of
its leading messages that are identical (as sent) to the previous request's leading messages.
Tokens are counted per message with LangChain's approximate counter, the unit every default
policy budgets in, so "within budget" means the same thing for all of them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from benchmarks.counters import approximate_tokens
from benchmarks.legality import first_request_problem
from benchmarks.policies import NamedPolicy

__all__ = [
    "CACHED_TOKEN_PRICE",
    "UNCACHED_TOKEN_PRICE",
    "LoopResult",
    "MessageTokenMemo",
    "combine_results",
    "common_prefix_length",
    "simulate_loop",
]

# Typical provider pricing: a cache read costs a tenth of a fresh input token.
CACHED_TOKEN_PRICE = 0.1
UNCACHED_TOKEN_PRICE = 1.0


class PromptCacheTotals:
    """Totals of a run's requests from its `sent_tokens` and `cached_tokens` series."""

    sent_tokens: list[int]
    cached_tokens: list[int]

    @property
    def total_sent(self) -> int:
        return sum(self.sent_tokens)

    @property
    def total_cached(self) -> int:
        return sum(self.cached_tokens)

    @property
    def hit_ratio(self) -> float:
        return self.total_cached / self.total_sent if self.total_sent else 0.0

    @property
    def priced_cost(self) -> float:
        uncached = self.total_sent - self.total_cached
        return CACHED_TOKEN_PRICE * self.total_cached + UNCACHED_TOKEN_PRICE * uncached


@dataclass(frozen=True)
class LoopResult(PromptCacheTotals):
    """Per-request series and totals of one policy over one simulated loop."""

    policy: str
    budget: int
    sent_tokens: list[int]
    cached_tokens: list[int]
    problems: list[str | None]
    prefix_breaks: list[bool]
    seconds: float

    @property
    def max_request(self) -> int:
        return max(self.sent_tokens, default=0)

    @property
    def over_budget(self) -> int:
        return sum(tokens > self.budget for tokens in self.sent_tokens)

    @property
    def all_within_budget(self) -> bool:
        return self.over_budget == 0

    @property
    def breaks(self) -> int:
        """Requests that do not start with the whole previous request."""
        return sum(self.prefix_breaks)

    @property
    def illegal(self) -> int:
        return sum(problem is not None for problem in self.problems)

    @property
    def first_problem(self) -> str | None:
        return next((p for p in self.problems if p is not None), None)


def combine_results(results: Sequence[LoopResult]) -> LoopResult:
    """One policy's results over several loops, as if the loops ran one after another."""
    first = results[0]
    return LoopResult(
        policy=first.policy,
        budget=first.budget,
        sent_tokens=[tokens for r in results for tokens in r.sent_tokens],
        cached_tokens=[tokens for r in results for tokens in r.cached_tokens],
        problems=[problem for r in results for problem in r.problems],
        prefix_breaks=[broken for r in results for broken in r.prefix_breaks],
        seconds=sum(r.seconds for r in results),
    )


class MessageTokenMemo:
    """Approximate tokens per message object, counted once.

    Keeps a reference to each counted message so its id() cannot be reused by another one.
    """

    def __init__(self) -> None:
        self._tokens: dict[int, tuple[BaseMessage, int]] = {}

    def count(self, message: BaseMessage) -> int:
        entry = self._tokens.get(id(message))
        if entry is None:
            entry = (message, approximate_tokens([message]))
            self._tokens[id(message)] = entry
        return entry[1]

    def count_all(self, messages: Sequence[BaseMessage]) -> int:
        return sum(self.count(message) for message in messages)


def sent_form(message: BaseMessage) -> str:
    """What the provider sees of a message; ids and metadata never reach its cache."""
    sent: dict[str, object] = {"role": message.type, "content": message.content}
    if isinstance(message, AIMessage) and message.tool_calls:
        sent["tool_calls"] = [[c["id"], c["name"], c["args"]] for c in message.tool_calls]
    if isinstance(message, ToolMessage):
        sent["tool_call_id"] = message.tool_call_id
    return json.dumps(sent, sort_keys=True, default=str)


def common_prefix_length(previous: Sequence[BaseMessage], current: Sequence[BaseMessage]) -> int:
    """How many leading messages of `current` are sent exactly as in `previous`."""
    length = 0
    for old, new in zip(previous, current, strict=False):
        if old is not new and sent_form(old) != sent_form(new):
            break
        length += 1
    return length


def simulate_loop(
    policy: NamedPolicy,
    chunks: Sequence[Sequence[BaseMessage]],
    *,
    budget: int,
    memo: MessageTokenMemo | None = None,
) -> LoopResult:
    """Grow the history chunk by chunk (the opening first) and build a request after each
    tool step; measure every request against `budget` and the previous request."""
    tokens = memo if memo is not None else MessageTokenMemo()
    build_request = policy.make()
    history = list(chunks[0])
    previous: list[BaseMessage] = []
    sent: list[int] = []
    cached: list[int] = []
    problems: list[str | None] = []
    breaks: list[bool] = []
    elapsed = 0.0
    for chunk in chunks[1:]:
        history = [*history, *chunk]
        started = time.perf_counter()
        request = build_request(history)
        elapsed += time.perf_counter() - started
        shared = common_prefix_length(previous, request)
        sent.append(tokens.count_all(request))
        cached.append(tokens.count_all(request[:shared]))
        breaks.append(shared < len(previous))
        problems.append(first_request_problem(request))
        previous = request
    return LoopResult(policy.name, budget, sent, cached, problems, breaks, elapsed)
