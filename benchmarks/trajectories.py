"""Real agent runs replayed call by call through each policy: what the model still sees.

The trajectories (OpenAI-format JSON files and a MANIFEST.json, kept outside the
repository) are read at run time. Each run is replayed as the agent made it: one model
call before every assistant message, on the history up to that message. Every policy
gets the same input budget: 40% of the whole run's tokens (approximate counter), at least
twice its system prompt, so every run is cut at some point whatever its length.

Per policy and call: legality (`benchmarks.legality`), the request's tokens against the
budget, the fidelity measures of `benchmarks.fidelity` (the task and the current user
turn verbatim where they fit a quarter of the budget, results of excluded tools, the
needed facts still visible), the share of the budget filled with original content
(messages sent as in the history; for a user message joined from several turns, the
original messages it holds), the prefix-cache hits and the priced cost of
`benchmarks.loop`, and the time the policy took.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from benchmarks.fidelity import FidelityCounts, request_text
from benchmarks.legality import first_request_problem
from benchmarks.loop import (
    CACHED_TOKEN_PRICE,
    UNCACHED_TOKEN_PRICE,
    MessageTokenMemo,
    PromptCacheTotals,
    common_prefix_length,
    sent_form,
)
from benchmarks.policies import NamedPolicy

__all__ = [
    "BUDGET_SHARE",
    "Trajectory",
    "TrajectoryResult",
    "call_costs",
    "combine",
    "like_for_like_cost_ratio",
    "load_trajectories",
    "replay_trajectory",
    "trajectory_budget",
]

# Input budget as a share of the whole run: small enough that every run gets cut.
# The figures use the same share (5,706 tokens for the 14,265-token SWE-agent run).
BUDGET_SHARE = 0.4
# The task and the latest user message count as lost only where they fit this share.
PINNABLE_SHARE = 0.25


@dataclass(frozen=True)
class Trajectory:
    name: str
    kind: str
    messages: list[BaseMessage]


@dataclass
class TrajectoryResult(PromptCacheTotals):
    """One policy on one trajectory: per-call series and counts."""

    policy: str
    trajectory: str
    budget: int
    sent_tokens: list[int] = field(default_factory=list)
    budgets: list[int] = field(default_factory=list)
    fittable: list[bool] = field(default_factory=list)
    cached_tokens: list[int] = field(default_factory=list)
    original_share: list[float] = field(default_factory=list)
    rejected: int = 0
    fidelity: FidelityCounts = field(default_factory=FidelityCounts)
    seconds: float = 0.0

    @property
    def calls(self) -> int:
        return len(self.sent_tokens)

    @property
    def over_budget(self) -> int:
        """Requests over budget, among those where the system messages and the task fit."""
        calls = zip(self.sent_tokens, self.budgets, self.fittable, strict=True)
        return sum(tokens > budget for tokens, budget, fits in calls if fits)

    @property
    def unfittable(self) -> int:
        """Calls where the system messages and the task (cut to its quarter) exceed the budget."""
        return sum(not fits for fits in self.fittable)


def combine(results: Sequence[TrajectoryResult]) -> TrajectoryResult:
    """One policy's results over several trajectories, as one series."""
    combined = TrajectoryResult(results[0].policy, "all", budget=0)
    for result in results:
        combined.sent_tokens += result.sent_tokens
        combined.budgets += result.budgets
        combined.fittable += result.fittable
        combined.cached_tokens += result.cached_tokens
        combined.original_share += result.original_share
        combined.rejected += result.rejected
        combined.fidelity.add(result.fidelity)
        combined.seconds += result.seconds
    return combined


def call_costs(result: TrajectoryResult) -> list[float]:
    """The priced cost of each call."""
    return [
        CACHED_TOKEN_PRICE * cached + UNCACHED_TOKEN_PRICE * (sent - cached)
        for sent, cached in zip(result.sent_tokens, result.cached_tokens, strict=True)
    ]


def like_for_like_cost_ratio(
    mine: Sequence[TrajectoryResult], peer: Sequence[TrajectoryResult]
) -> tuple[float | None, int]:
    """Cost of `mine` / cost of `peer`, over the calls where both requests are within
    budget; and how many calls that is."""
    own = other = 0.0
    calls = 0
    for result, peer_result in zip(mine, peer, strict=True):
        pairs = zip(
            call_costs(result),
            call_costs(peer_result),
            result.sent_tokens,
            peer_result.sent_tokens,
            result.budgets,
            strict=True,
        )
        for cost, peer_cost, sent, peer_sent, budget in pairs:
            if sent <= budget and peer_sent <= budget:
                own += cost
                other += peer_cost
                calls += 1
    return (own / other if other else None), calls


def _tool_calls(message: dict[str, Any]) -> list[dict[str, Any]]:
    calls = []
    for call in message.get("tool_calls") or []:
        function = call["function"]
        arguments = function.get("arguments") or "{}"
        try:
            args = json.loads(arguments) if isinstance(arguments, str) else dict(arguments)
        except json.JSONDecodeError:
            args = {"input": arguments}
        if not isinstance(args, dict):
            args = {"input": args}
        calls.append({"name": function["name"], "args": args, "id": call["id"]})
    return calls


def to_message(message: dict[str, Any]) -> BaseMessage:
    """One OpenAI-format message as a langchain-core message."""
    role = message["role"]
    content = message.get("content") or ""
    if role == "system":
        return SystemMessage(content)
    if role == "user":
        return HumanMessage(content)
    if role == "assistant":
        return AIMessage(content, tool_calls=_tool_calls(message))
    if role == "tool":
        return ToolMessage(content, tool_call_id=message["tool_call_id"], name=message.get("name"))
    raise ValueError(f"unknown role {role!r}")


def load_trajectories(directory: Path) -> list[Trajectory]:
    """Every trajectory the MANIFEST.json of `directory` lists, in its order."""
    manifest = json.loads((directory / "MANIFEST.json").read_text(encoding="utf-8"))
    trajectories = []
    for entry in manifest:
        raw = json.loads((directory / entry["file"]).read_text(encoding="utf-8"))
        messages = [to_message(message) for message in raw]
        name = entry["file"].removesuffix(".json")
        trajectories.append(Trajectory(name, entry.get("kind", ""), messages))
    return trajectories


def trajectory_budget(trajectory: Trajectory, memo: MessageTokenMemo) -> int:
    """40% of the run's tokens, but at least twice its system messages (the tau-bench
    policies take 1,500-1,900 tokens: a budget they fill leaves no room for a call)."""
    systems = [message for message in trajectory.messages if isinstance(message, SystemMessage)]
    share = int(memo.count_all(trajectory.messages) * BUDGET_SHARE)
    return max(share, 2 * memo.count_all(systems))


def call_points(messages: Sequence[BaseMessage]) -> list[int]:
    """The model calls of a run: before every assistant message after the first user one."""
    first_user = next(
        (index for index, message in enumerate(messages) if isinstance(message, HumanMessage)),
        len(messages),
    )
    return [
        index
        for index, message in enumerate(messages)
        if isinstance(message, AIMessage) and index > first_user
    ]


def text_of(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    parts = [
        block if isinstance(block, str) else str(block.get("text", ""))
        for block in content
        if isinstance(block, str) or (isinstance(block, dict) and block.get("type") == "text")
    ]
    return "\n\n".join(parts)


class _Originals:
    """The sent forms of a run's messages, so a request's original content is found fast."""

    def __init__(self, messages: Sequence[BaseMessage], memo: MessageTokenMemo) -> None:
        self._memo = memo
        self._forms: dict[str, int] = {}
        self._users: list[tuple[str, int]] = []
        for message in messages:
            tokens = memo.count(message)
            self._forms.setdefault(sent_form(message), tokens)
            if isinstance(message, HumanMessage) and text_of(message):
                self._users.append((text_of(message), tokens))

    def tokens(self, request: Sequence[BaseMessage], history: Sequence[BaseMessage]) -> int:
        known = {id(message) for message in history}
        total = 0
        for message in request:
            if id(message) in known:
                total += self._memo.count(message)
                continue
            form = sent_form(message)
            if form in self._forms:
                total += self._forms[form]
            elif isinstance(message, HumanMessage):
                text = text_of(message)
                total += sum(tokens for user, tokens in self._users if user in text)
        return total


def replay_trajectory(
    policy: NamedPolicy,
    trajectory: Trajectory,
    *,
    budget: int,
    memo: MessageTokenMemo,
    count: Callable[[Sequence[BaseMessage]], int] | None = None,
    exclude_tools: frozenset[str] = frozenset(),
) -> TrajectoryResult:
    """The policy's request before every assistant message of the run, measured.

    `budget` is what the messages may take (the tool definitions, where the policy sends
    some, are outside it); `exclude_tools` names the tools whose results must survive.
    """
    messages = trajectory.messages
    tokens_of = count if count is not None else memo.count_all
    originals = _Originals(messages, memo)
    build_request = policy.make()
    # An offloading policy reads back the text behind the handles a request shows.
    text_behind: Callable[[Sequence[BaseMessage]], str] | None = getattr(
        build_request, "text_behind", None
    )
    result = TrajectoryResult(policy.name, trajectory.name, budget)
    limit = int(budget * PINNABLE_SHARE)
    task = next(message for message in messages if isinstance(message, HumanMessage))
    systems = memo.count_all([m for m in messages if isinstance(m, SystemMessage)])
    fittable = systems + min(memo.count(task), limit) <= budget
    previous: list[BaseMessage] = []
    points = call_points(messages)
    earlier_text = request_text(messages[: points[0]]) if points else ""
    read = points[0] if points else 0
    for point in points:
        history = messages[:point]
        if point > read:
            earlier_text += "\n" + request_text(messages[read:point])
            read = point
        started = time.perf_counter()
        request = build_request(history)
        result.seconds += time.perf_counter() - started
        shared = common_prefix_length(previous, request)
        result.sent_tokens.append(tokens_of(request))
        result.budgets.append(budget)
        result.fittable.append(fittable)
        result.cached_tokens.append(tokens_of(request[:shared]))
        result.original_share.append(originals.tokens(request, history) / budget)
        result.rejected += first_request_problem(request) is not None
        result.fidelity.measure_call(
            history,
            request,
            next_message=messages[point],
            earlier_text=earlier_text,
            pinnable=limit,
            budget=budget,
            count=memo.count,
            excluded_tools=exclude_tools,
            behind_handles=(
                None if text_behind is None else functools.partial(text_behind, request)
            ),
        )
        previous = request
    return result
