"""Reasoning state survives governance byte for byte: every pass, every profile, the governor.

Histories mix the malformed ones of tests/strategies.py with responses of reasoning models
as the LangChain clients build them: Anthropic signed thinking blocks (and redacted ones),
OpenAI Responses reasoning items with their `function_call` items, Gemini thought
signatures by call id, DeepSeek `reasoning_content`. For each output message that carries
any of it, exactly one input message carries the very same state: the same thinking blocks
in the same order, opening the message if they opened it, the same reasoning items, the
same signatures and reasoning text; per-call state (signatures, function-call items)
belongs to calls the message makes. A message whose calls a profile writes as text keeps
its thinking and reasoning, and loses only what belonged to the calls. The one exception is
reasoning bound to its prefix that the governor left out on purpose (its prefix changed,
docs/reasoning.md): such a message, marked, carries its source's state without it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

import langchain_context_governance as package
from langchain_context_governance import ContextGovernor
from langchain_context_governance._reasoning import (
    GEMINI_SIGNATURES_KEY,
    opens_with_thinking,
    reasoning_left_out,
    signed_thinking_blocks,
    tool_loop_opening,
    without_bound_reasoning,
)
from langchain_context_governance.rules.validate import PROVIDERS, validate_messages
from tests.strategies import budgets, histories, texts
from tests.unit_tests.conftest import MutationGuard

pytestmark = pytest.mark.fuzz

# A fifth of the profile's examples (40 in the default run): there are 27 of these tests.
SOME_EXAMPLES = settings(max_examples=max(40, settings.default.max_examples // 5))

CALL_IDS = ("toolu_01", "call_abc", "a1B2c3D4e", "c.1", "call_" + "x" * 40)


def call(call_id: str, name: str = "read_file") -> dict[str, Any]:
    return {"name": name, "args": {"path": "a.py"}, "id": call_id, "type": "tool_call"}


@st.composite
def anthropic_response(draw: st.DrawFn, tag: str) -> AIMessage:
    blocks: list[Any] = [
        {"type": "thinking", "thinking": f"{tag} {draw(texts)}", "signature": f"sig-{tag}"}
    ]
    if draw(st.booleans()):
        blocks.append({"type": "redacted_thinking", "data": f"redacted-{tag}"})
    calls = [call(draw(st.sampled_from(CALL_IDS)))] if draw(st.booleans()) else []
    blocks.extend(
        {"type": "tool_use", "id": c["id"], "name": c["name"], "input": c["args"]} for c in calls
    )
    if not calls or draw(st.booleans()):
        blocks.insert(len(blocks) - len(calls), {"type": "text", "text": draw(texts)})
    return AIMessage(blocks, tool_calls=calls)


@st.composite
def openai_response(draw: st.DrawFn, tag: str) -> AIMessage:
    reasoning = {
        "type": "reasoning",
        "id": f"rs_{tag}",
        "summary": [{"type": "summary_text", "text": draw(texts)}],
        "encrypted_content": f"enc-{tag}",
    }
    if draw(st.booleans()):
        call_id = draw(st.sampled_from(CALL_IDS))
        item = {
            "type": "function_call",
            "id": f"fc_{tag}",
            "call_id": call_id,
            "name": "read_file",
            "arguments": '{"path": "a.py"}',
            "status": "completed",
        }
        return AIMessage([reasoning, item], tool_calls=[call(call_id)])
    return AIMessage([reasoning, {"type": "text", "text": draw(texts), "id": f"msg_{tag}"}])


@st.composite
def gemini_response(draw: st.DrawFn, tag: str) -> AIMessage:
    ids = draw(st.lists(st.sampled_from(CALL_IDS), min_size=1, max_size=2, unique=True))
    signatures = {call_id: f"gsig-{tag}-{n}" for n, call_id in enumerate(ids)}
    kwargs = {GEMINI_SIGNATURES_KEY: signatures}
    return AIMessage("", tool_calls=[call(call_id) for call_id in ids], additional_kwargs=kwargs)


@st.composite
def deepseek_response(draw: st.DrawFn, tag: str) -> AIMessage:
    calls = [call(draw(st.sampled_from(CALL_IDS)))] if draw(st.booleans()) else []
    reasoning = {"reasoning_content": f"{tag} {draw(texts)}"}
    return AIMessage("" if calls else draw(texts), tool_calls=calls, additional_kwargs=reasoning)


RESPONSES = (anthropic_response, openai_response, gemini_response, deepseek_response)


@st.composite
def reasoning_histories(draw: st.DrawFn) -> list[BaseMessage]:
    """A malformed history with responses of reasoning models (and their results) inside."""
    history = draw(histories(max_size=6))
    for number in range(draw(st.integers(min_value=1, max_value=4))):
        response = draw(draw(st.sampled_from(RESPONSES))(f"r{number}"))
        turn: list[BaseMessage] = [response]
        turn.extend(
            ToolMessage(draw(texts), tool_call_id=c["id"], name=c["name"])
            for c in response.tool_calls
            if draw(st.integers(0, 3))  # now and then a call is left unanswered
        )
        position = draw(st.integers(min_value=0, max_value=len(history)))
        history[position:position] = turn
    return history


# --- what "the same state" means ------------------------------------------------------------


def as_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def blocks_of(message: BaseMessage, kind: str) -> list[str]:
    content = message.content if isinstance(message.content, list) else []
    return [as_json(b) for b in content if isinstance(b, dict) and b.get("type") == kind]


def call_ids(message: AIMessage) -> set[str]:
    return {c["id"] for c in [*message.tool_calls, *message.invalid_tool_calls] if c.get("id")}


def message_state(message: AIMessage) -> tuple[Any, ...]:
    """What must come back unchanged: thinking (and whether it opens the message), reasoning
    items, reasoning_content."""
    return (
        [as_json(block) for block in signed_thinking_blocks(message)],
        opens_with_thinking(message),
        blocks_of(message, "reasoning"),
        message.additional_kwargs.get("reasoning_content"),
    )


def call_state(message: AIMessage) -> tuple[Any, ...]:
    """What belongs to the calls: Gemini's signatures and OpenAI's items (their call ids
    follow a renamed call)."""
    signatures = message.additional_kwargs.get(GEMINI_SIGNATURES_KEY) or {}
    items = [
        as_json({**json.loads(item), "call_id": None})
        for item in blocks_of(message, "function_call")
    ]
    return (sorted(signatures.values()), items)


def carries_state(message: BaseMessage) -> bool:
    return isinstance(message, AIMessage) and (
        any(message_state(message)[index] for index in (0, 2, 3)) or any(call_state(message))
    )


def belongs_to(message: AIMessage, source: AIMessage) -> bool:
    """`message` carries the state of `source`: all of its own, and only call state it had."""
    if message_state(message) != message_state(source):
        return False
    signatures, items = call_state(message)
    source_signatures, source_items = call_state(source)
    return set(signatures) <= set(source_signatures) and set(items) <= set(source_items)


def has_message_state(message: AIMessage) -> bool:
    thinking, _, reasoning, reasoning_content = message_state(message)
    return bool(thinking or reasoning or reasoning_content)


def assert_state_survives(history: Sequence[BaseMessage], output: Sequence[BaseMessage]) -> None:
    """Each output message's state is one input message's, never made up or given twice.

    A message's own state (thinking, reasoning items, reasoning_content) comes from exactly
    one input message; per-call state may be shared out among the pieces of a split
    message, each signature and item going to one of them.
    """
    sources = [m for m in history if isinstance(m, AIMessage) and carries_state(m)]
    used: set[tuple[int, str]] = set()
    for message in output:
        if not carries_state(message):
            continue
        assert isinstance(message, AIMessage)
        left_out = reasoning_left_out(message)
        entries = [*call_state(message)[0], *call_state(message)[1]]
        matching = [
            s for s in sources if belongs_to(message, without_bound_reasoning(s) if left_out else s)
        ]
        assert matching, f"reasoning state changed or made up: {message!r}"
        # Sources whose state looks the same once their reasoning is left out (their item
        # ids go with it) cannot be told apart: the message's entries are one of them, the
        # first that has not given them yet.
        source = next(
            (s for s in matching if all((id(s), entry) not in used for entry in entries)),
            matching[0],
        )
        if has_message_state(message):
            sources.remove(source)
        for entry in entries:
            assert (id(source), entry) not in used, f"{entry} sent twice"
            used.add((id(source), entry))
        if message.tool_calls or message.invalid_tool_calls:
            signatures = message.additional_kwargs.get(GEMINI_SIGNATURES_KEY) or {}
            assert set(signatures) <= call_ids(message)
            items = [json.loads(item) for item in blocks_of(message, "function_call")]
            assert {item["call_id"] for item in items} <= call_ids(message)
        else:
            assert not any(call_state(message)), "per-call state left without its call"


# --- every pass, every profile, the governor ---------------------------------------------------

PASSES: dict[str, Callable[[list[BaseMessage], int], list[BaseMessage]]] = {
    "drop_orphan_tool_results": lambda m, _: package.drop_orphan_tool_results(m),
    "backfill_missing_tool_results": lambda m, _: package.backfill_missing_tool_results(m),
    "enforce_role_alternation": lambda m, _: package.enforce_role_alternation(m),
    "microcompact": lambda m, _: package.microcompact(m, keep_recent=0, min_chars=0),
    "snip_history": lambda m, budget: package.snip_history(m, max_tokens=budget),
    "compact_in_batches": lambda m, budget: package.compact_in_batches(m, max_tokens=budget),
    "truncate_oversized_messages": lambda m, budget: package.truncate_oversized_messages(
        m, max_tokens=budget
    ),
}


@pytest.mark.parametrize("name", list(PASSES))
@SOME_EXAMPLES
@given(history=reasoning_histories(), budget=budgets)
def test_every_pass_keeps_reasoning_state_byte_identical(
    name: str, history: list[BaseMessage], budget: int
) -> None:
    guard = MutationGuard()
    guard.watch(history)
    assert_state_survives(history, PASSES[name](history, budget))
    guard.check()


@pytest.mark.parametrize("provider", PROVIDERS)
@SOME_EXAMPLES
@given(history=reasoning_histories())
def test_every_profile_keeps_reasoning_state_byte_identical(
    provider: str, history: list[BaseMessage]
) -> None:
    repaired = package.apply_provider_rules(history, provider=provider)
    assert_state_survives(history, repaired)


@pytest.mark.parametrize("provider", PROVIDERS)
@SOME_EXAMPLES
@given(history=reasoning_histories(), budget=st.one_of(st.none(), budgets))
def test_the_governor_keeps_reasoning_state_and_validates(
    provider: str, history: list[BaseMessage], budget: int | None
) -> None:
    governor = ContextGovernor(
        provider=provider, context_window_tokens=budget, max_output_tokens=0, safety_buffer=0
    )
    governed = governor.invoke(history)
    assert_state_survives(history, governed)
    if any(not isinstance(message, ToolMessage) for message in history):
        assert validate_messages(governed, provider=provider) == []


@pytest.mark.parametrize("provider", ["anthropic", "strict"])
@pytest.mark.parametrize("compaction", ["cache_aware", "keep_recent"])
@SOME_EXAMPLES
@given(history=reasoning_histories(), budget=budgets)
def test_a_tool_loop_that_opens_with_thinking_is_sent_whole(
    provider: str, compaction: str, history: list[BaseMessage], budget: int
) -> None:
    """Anthropic: "a final `assistant` message must start with a thinking block"; the cut
    LangChain's SummarizationMiddleware makes inside the loop (langchain#34794) never happens.
    The opening's thinking goes only where governance left it out on purpose (its prefix
    changed): adaptive thinking, the only kind that binds to its prefix, takes that."""
    governed = ContextGovernor(
        provider=provider,
        context_window_tokens=budget,
        max_output_tokens=0,
        safety_buffer=0,
        compaction=compaction,
    ).invoke(history)
    whole = ContextGovernor(provider=provider).invoke(history)
    opening = tool_loop_opening(governed)
    # The loop the whole history sends opens with a thinking block: as this test was
    # written, before `thinking_tool_loop_start` also counted an opening whose thinking
    # governance left out (whose loop the governed request need not open with thinking).
    whole_opening = tool_loop_opening(whole)
    if (
        opening is not None
        and whole_opening is not None
        and opens_with_thinking(whole[whole_opening])
    ):
        assert opens_with_thinking(governed[opening]) or reasoning_left_out(governed[opening])
