"""Thinking agents: reasoning bound to its prefix, replayed call by call.

A thinking agent's every response opens with a signed thinking block (Anthropic, as
langchain-anthropic keeps it: a `thinking` block, then text and `tool_use` blocks), over
several user turns, each a tool loop of a few iterations. Each history is replayed the way
the agent ran: the policy builds the request before every assistant message (and once at
the end), the model's answer is the history's next assistant message, and the prefix
oracle (tests/prefix_oracle.py, on langchain-anthropic's own `_format_messages`) records
the request each block was made from and judges every later request:

- requests that would fail the prefix check (a block sent behind a prefix that changed;
  goal 0),
- bound blocks sent valid, sent invalid, and left out (a message of the request whose
  thinking the policy did not send),
- requests inside a tool loop whose opening thinking is sent, and valid,
- prefix-cache hits (leading messages sent as in the previous request) and the priced cost
  (a cache read at a tenth of a fresh token), next to the same agents without thinking.

The same seed always gives the same messages.

>>> history = build_thinking_history(seed=1, turns=2)
>>> history[0].type, history[1].type, history[2].content[0]["type"]
('system', 'human', 'thinking')
"""

from __future__ import annotations

import json
import logging
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.histories import FOLLOW_UPS, HistoryGenerator
from benchmarks.loop import CACHED_TOKEN_PRICE, UNCACHED_TOKEN_PRICE, MessageTokenMemo, sent_form
from benchmarks.report import Target, markdown_table

__all__ = [
    "BUDGET_SHARES",
    "ThinkingResult",
    "build_thinking_history",
    "replay_thinking",
    "run_thinking",
    "thinking_section",
    "without_thinking",
]

# Budgets as shares of the history's tokens: compaction and cuts at 40%, the last resort
# too at 15% (the measurement).
BUDGET_SHARES = (0.4, 0.15)
SEEDS = (0, 1, 2, 3, 4)
_THOUGHT_WORDS = (
    "check",
    "the failing test",
    "first,",
    "then read",
    "the module it imports",
    "and compare",
    "the budget arithmetic",
    "with what the caller expects",
    "before changing anything.",
)


def _thought(rng: random.Random) -> str:
    return " ".join(rng.choice(_THOUGHT_WORDS) for _ in range(rng.randint(30, 120)))


def _signed_response(message: AIMessage, signature: str, rng: random.Random) -> AIMessage:
    """`message` as langchain-anthropic returns a thinking model's response."""
    content: list[dict[str, Any]] = [
        {"signature": signature, "thinking": _thought(rng), "type": "thinking"}
    ]
    text = message.content if isinstance(message.content, str) else ""
    if text:
        content.append({"text": text, "type": "text"})
    content.extend(
        {
            "id": call["id"],
            "input": call["args"],
            "name": call["name"],
            "type": "tool_use",
            "toolset_name": None,
        }
        for call in message.tool_calls
    )
    return AIMessage(
        content,
        tool_calls=message.tool_calls,
        id=message.id,
        response_metadata={"stop_reason": "tool_use" if message.tool_calls else "end_turn"},
    )


def _reasoning_response(message: AIMessage, number: str, rng: random.Random) -> AIMessage:
    """`message` as langchain-openai returns a reasoning model's response on the Responses
    API: a reasoning item (encrypted), the text, the function-call items."""
    content: list[dict[str, Any]] = [
        {
            "id": f"rs_{number}",
            "summary": [],
            "type": "reasoning",
            "encrypted_content": f"gAAA{number}-{_thought(rng)}",
        }
    ]
    text = message.content if isinstance(message.content, str) else ""
    if text:
        content.append({"type": "text", "text": text, "annotations": [], "id": f"msg_{number}"})
    content.extend(
        {
            "arguments": json.dumps(call["args"]),
            "call_id": call["id"],
            "name": call["name"],
            "type": "function_call",
            "id": f"fc_{number}_{position}",
            "status": "completed",
        }
        for position, call in enumerate(message.tool_calls)
    )
    return AIMessage(content, tool_calls=message.tool_calls, id=message.id)


def build_thinking_history(
    *,
    seed: int = 0,
    turns: int = 4,
    iterations: tuple[int, int] = (3, 9),
    shape: str = "anthropic",
) -> list[BaseMessage]:
    """A thinking agent's history: a system prompt, then `turns` user turns, each a tool
    loop of `iterations` steps and an answer; every response opens with a signed thinking
    block (`shape="anthropic"`) or a reasoning item (`shape="openai"`)."""
    rng = random.Random(seed)
    steps = HistoryGenerator(seed=seed, follow_up_probability=0.0)
    history: list[BaseMessage] = list(steps.opening())
    signatures = 0

    def signed(message: AIMessage) -> AIMessage:
        nonlocal signatures
        signatures += 1
        if shape == "openai":
            return _reasoning_response(message, f"{seed}_{signatures}", rng)
        return _signed_response(message, f"sig-{seed}-{signatures}", rng)

    for turn in range(turns):
        if turn:
            history.append(HumanMessage(FOLLOW_UPS[turn % len(FOLLOW_UPS)], id=f"u{seed}-{turn}"))
        for _ in range(rng.randint(*iterations)):
            ai, *results = steps.iteration()
            assert isinstance(ai, AIMessage)
            history += [signed(ai), *results]
        history.append(signed(steps.final_answer()))
    return history


def without_thinking(history: Sequence[BaseMessage]) -> list[BaseMessage]:
    """The same agent without thinking: every thinking block taken out."""
    plain: list[BaseMessage] = []
    for message in history:
        if isinstance(message, AIMessage) and isinstance(message.content, list):
            content = [b for b in message.content if b.get("type") != "thinking"]  # type: ignore[union-attr]
            message = message.model_copy(update={"content": content})
        plain.append(message)
    return plain


def _signatures(message: BaseMessage) -> list[str]:
    """The keys the oracle knows the message's signed blocks by."""
    if not isinstance(message, AIMessage) or not isinstance(message.content, list):
        return []
    return [
        str(block.get("signature") or block.get("encrypted_content"))
        for block in message.content
        if isinstance(block, dict) and block.get("type") in ("thinking", "reasoning")
    ]


def _loop_opening(history: Sequence[BaseMessage]) -> AIMessage | None:
    """The assistant message that opens the tool loop `history` ends in, if it does."""
    if not history or not isinstance(history[-1], ToolMessage):
        return None
    opening = None
    for message in reversed(history):
        if isinstance(message, HumanMessage):
            break
        if isinstance(message, AIMessage):
            opening = message
    return opening


@dataclass
class ThinkingResult:
    """One policy over the thinking agents at one budget share."""

    policy: str
    share: float
    requests: int = 0
    failing: int = 0
    sent_valid: int = 0
    sent_invalid: int = 0
    left_out: int = 0
    in_loop: int = 0
    opening_kept: int = 0
    over_budget: int = 0
    sent_tokens: int = 0
    cached_tokens: int = 0
    seconds: float = 0.0
    first_failure: str | None = field(default=None, repr=False)

    @property
    def hit_ratio(self) -> float:
        return self.cached_tokens / self.sent_tokens if self.sent_tokens else 0.0

    @property
    def priced_cost(self) -> float:
        uncached = self.sent_tokens - self.cached_tokens
        return CACHED_TOKEN_PRICE * self.cached_tokens + UNCACHED_TOKEN_PRICE * uncached


Policy = Callable[[list[BaseMessage]], list[BaseMessage]]


def replay_thinking(
    name: str,
    make_policy: Callable[[int], Policy],
    histories: Sequence[list[BaseMessage]],
    *,
    share: float,
    thinking: bool = True,
) -> ThinkingResult:
    """Replay each history call by call under `make_policy(budget)` (budget: `share` of the
    history's tokens, approximately counted), judged by the prefix oracle."""
    from tests.prefix_oracle import PrefixOracle

    result = ThinkingResult(name, share)
    memo = MessageTokenMemo()
    started = time.perf_counter()
    for history in histories:
        budget = max(int(memo.count_all(history) * share), 1)
        policy = make_policy(budget)
        oracle = PrefixOracle()
        previous: list[BaseMessage] = []
        calls = [i for i, m in enumerate(history) if isinstance(m, AIMessage)]
        for call in [*calls, len(history)]:
            request = policy(history[:call])
            _judge(result, oracle, history, call, request, thinking=thinking)
            _count_cache(result, memo, previous, request, budget)
            previous = request
            if call < len(history):
                response = history[call]
                assert isinstance(response, AIMessage)
                oracle.made_from(request, response)
    result.seconds = time.perf_counter() - started
    return result


def _judge(
    result: ThinkingResult,
    oracle: Any,
    history: Sequence[BaseMessage],
    call: int,
    request: list[BaseMessage],
    *,
    thinking: bool,
) -> None:
    result.requests += 1
    if not thinking:
        return
    verdict = oracle.check(request)
    result.sent_valid += len(verdict.valid)
    result.sent_invalid += len(verdict.invalid) + len(verdict.unknown)
    if verdict.invalid or verdict.unknown:
        result.failing += 1
        if result.first_failure is None:
            result.first_failure = f"call {call}: {verdict.invalid or verdict.unknown}"
    sent = {signature for message in request for signature in _signatures(message)}
    ids = {message.id for message in request if isinstance(message, AIMessage)}
    result.left_out += sum(
        1
        for message in history[:call]
        if message.id in ids
        for signature in _signatures(message)
        if signature not in sent
    )
    opening = _loop_opening(history[:call])
    if opening is not None and _signatures(opening):
        result.in_loop += 1
        if set(_signatures(opening)) <= set(verdict.valid):
            result.opening_kept += 1


def _count_cache(
    result: ThinkingResult,
    memo: MessageTokenMemo,
    previous: list[BaseMessage],
    request: list[BaseMessage],
    budget: int,
) -> None:
    tokens = memo.count_all(request)
    result.sent_tokens += tokens
    result.over_budget += tokens > budget
    cached = 0
    for old, new in zip(previous, request, strict=False):
        if old is not new and sent_form(old) != sent_form(new):
            break
        cached += memo.count(new)
    result.cached_tokens += cached


def _governor_policy(compaction: str) -> Callable[[int], Policy]:
    from langchain_context_governance import ContextGovernor

    def make(budget: int) -> Policy:
        governor = ContextGovernor(
            context_window_tokens=budget,
            max_output_tokens=0,
            safety_buffer=0,
            provider="anthropic",
            compaction=compaction,  # type: ignore[arg-type]
        )
        return lambda messages: governor.invoke(messages)

    return make


def _record_path_policy(budget: int) -> Policy:
    """A fresh governor (another worker) for every call, given the previous call's record."""
    from langchain_context_governance import ContextGovernor

    record: dict[str, Any] | None = None

    def request(messages: list[BaseMessage]) -> list[BaseMessage]:
        nonlocal record
        governor = ContextGovernor(
            context_window_tokens=budget, max_output_tokens=0, safety_buffer=0, provider="anthropic"
        )
        result = governor.govern(messages, thread_id="thinking", record=record)
        record = result.record
        return result.messages

    return request


def _trim_policy(budget: int) -> Policy:
    from langchain_core.messages import trim_messages
    from langchain_core.messages.utils import count_tokens_approximately

    def request(messages: list[BaseMessage]) -> list[BaseMessage]:
        return trim_messages(
            messages,
            max_tokens=budget,
            token_counter=count_tokens_approximately,
            strategy="last",
            start_on="human",
            include_system=True,
        )

    return request


def _clear_tool_uses_policy(budget: int) -> Policy:
    from benchmarks.policies import clear_tool_uses_policy

    return clear_tool_uses_policy(budget).make()


POLICIES: tuple[tuple[str, Callable[[int], Policy]], ...] = (
    ("ContextGovernor cache_aware", _governor_policy("cache_aware")),
    ("ContextGovernor keep_recent", _governor_policy("keep_recent")),
    ("ContextGovernor, a new worker each call (record)", _record_path_policy),
    ("trim_messages", _trim_policy),
    ("ClearToolUsesEdit", _clear_tool_uses_policy),
    ("no editing", lambda budget: list),
)


def run_thinking(
    seeds: Sequence[int] = SEEDS, shares: Sequence[float] = BUDGET_SHARES
) -> list[ThinkingResult]:
    """Every policy over the thinking agents of `seeds`, at each budget share; the
    governor's cache_aware policy also over the same agents without thinking. The
    governor's warnings (once per conversation, hundreds here) are not printed."""
    package_logger = logging.getLogger("langchain_context_governance")
    level = package_logger.level
    package_logger.setLevel(logging.ERROR)
    try:
        return _run_thinking(seeds, shares)
    finally:
        package_logger.setLevel(level)


def _run_thinking(seeds: Sequence[int], shares: Sequence[float]) -> list[ThinkingResult]:
    histories = [build_thinking_history(seed=seed) for seed in seeds]
    plain = [without_thinking(history) for history in histories]
    results: list[ThinkingResult] = []
    for share in shares:
        for name, make in POLICIES:
            results.append(replay_thinking(name, make, histories, share=share))
        results.append(
            replay_thinking(
                "ContextGovernor cache_aware, no thinking",
                _governor_policy("cache_aware"),
                plain,
                share=share,
                thinking=False,
            )
        )
    return results


def thinking_section(results: Sequence[ThinkingResult]) -> tuple[str, list[Target]]:
    """The Markdown table of `results` and the targets: no governed request fails the
    prefix check."""
    rows = [
        [
            r.policy,
            f"{r.share:.0%}",
            f"{r.failing}/{r.requests}",
            str(r.sent_valid),
            str(r.sent_invalid),
            str(r.left_out),
            f"{r.opening_kept}/{r.in_loop}",
            str(r.over_budget),
            f"{r.hit_ratio:.1%}",
            f"{r.priced_cost:,.0f}",
        ]
        for r in results
    ]
    table = markdown_table(
        [
            "policy",
            "budget",
            "requests failing the prefix check",
            "blocks sent valid",
            "sent invalid",
            "left out",
            "loop opening kept",
            "over budget",
            "prefix-cache hits",
            "priced cost",
        ],
        rows,
    )
    targets = [
        Target(
            f"{r.policy} at {r.share:.0%}: no request fails the prefix check",
            r.failing == 0,
            f"{r.failing} of {r.requests}" + (f" (first: {r.first_failure})" if r.failing else ""),
        )
        for r in results
        if r.policy.startswith("ContextGovernor") and "no thinking" not in r.policy
    ]
    return table, targets


def main() -> None:
    results = run_thinking()
    table, targets = thinking_section(results)
    print(table)
    for target in targets:
        print(target)


if __name__ == "__main__":
    main()
