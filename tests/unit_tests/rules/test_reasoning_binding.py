"""Reasoning bound to its prefix: the rules as data, and `validate_messages(history=...)`."""

from __future__ import annotations

from typing import Any

from langchain.agents.middleware import ClearToolUsesEdit
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    trim_messages,
)
from langchain_core.messages.utils import count_tokens_approximately

from benchmarks.thinking import build_thinking_history
from langchain_context_governance import validate_messages
from langchain_context_governance.rules.reasoning import (
    PREFIX_BINDINGS,
    PROVIDER_COMPACTIONS,
    check_against_history,
    compaction_first,
    prefix_bindings,
)
from langchain_context_governance.rules.table import PROVIDERS


def thinking(signature: str) -> dict[str, Any]:
    return {"type": "thinking", "thinking": "", "signature": signature}


def loop() -> list[BaseMessage]:
    calls = [
        {"name": "read_file", "args": {"path": f"{n}.py"}, "id": f"toolu_{n}"} for n in range(3)
    ]
    history: list[BaseMessage] = [SystemMessage("sys"), HumanMessage("fix the bug")]
    for n, call in enumerate(calls):
        history += [
            AIMessage([thinking(f"s{n}")], tool_calls=[call]),
            ToolMessage("x" * 900, tool_call_id=call["id"]),
        ]
    return history


def rules_of(
    request: list[BaseMessage], history: list[BaseMessage], provider: str = "anthropic"
) -> list[str]:
    return [v.rule for v in validate_messages(request, provider=provider, history=history)]


def test_every_binding_names_its_source_and_outcome() -> None:
    for rule in (*PREFIX_BINDINGS, *PROVIDER_COMPACTIONS):
        assert rule.prevents and rule.source and rule.profiles
    for binding in PREFIX_BINDINGS:
        assert binding.outcome and binding.models
    assert {b.code for b in prefix_bindings("strict")} == {
        "thinking-prefix-changed",
        "reasoning-prefix-changed",
    }
    assert [p for p in PROVIDERS if prefix_bindings(p)] == ["openai", "anthropic", "strict"]


def test_the_history_as_it_is_passes() -> None:
    history = loop()
    assert rules_of(history, history) == []


def test_a_compacted_result_invalidates_every_block_after_it() -> None:
    history = loop()
    request = list(history)
    request[3] = ToolMessage("[cleared]", tool_call_id="toolu_0")
    violations = validate_messages(request, provider="anthropic", history=history)
    assert [(v.index, v.rule) for v in violations] == [
        (4, "thinking-prefix-changed"),
        (6, "thinking-prefix-changed"),
    ]
    assert "history message 4" in violations[0].message


def test_a_leading_run_of_thinking_may_go_and_cache_control_is_not_compared() -> None:
    def text(words: str, **extra: Any) -> list[str | dict[Any, Any]]:
        return [{"type": "text", "text": words, **extra}]

    history: list[BaseMessage] = [
        SystemMessage("sys"),
        HumanMessage(text("what does a.py do?")),
        AIMessage([thinking("first"), *text("It parses.")]),
        *loop()[1:],
    ]
    request = list(history)
    request[1] = HumanMessage(text("what does a.py do?", cache_control={"type": "ephemeral"}))
    request[2] = AIMessage(text("It parses."))
    assert rules_of(request, history) == []
    middle = list(history)
    middle[4] = AIMessage([], tool_calls=history[4].tool_calls)  # type: ignore[attr-defined]
    assert "thinking-prefix-changed" in rules_of(middle, history)


def test_openai_reasoning_items_are_checked_on_the_openai_profile() -> None:
    history = build_thinking_history(seed=2, turns=2, shape="openai")[:-1]
    request = list(history)
    first_result = next(i for i, m in enumerate(request) if isinstance(m, ToolMessage))
    request[first_result] = request[first_result].model_copy(update={"content": "[cleared]"})
    assert rules_of(history, history, "openai") == []
    assert set(rules_of(request, history, "openai")) == {"reasoning-prefix-changed"}
    assert "reasoning-prefix-changed" not in rules_of(request, history, "mistral")


def test_langchain_trimming_breaks_the_prefix_the_governor_keeps() -> None:
    """What the issue measured: trim_messages and ClearToolUsesEdit send thinking behind a
    prefix they changed."""
    history = build_thinking_history(seed=1)
    budget = count_tokens_approximately(history) // 2
    trimmed = trim_messages(
        history,
        max_tokens=budget,
        token_counter=count_tokens_approximately,
        strategy="last",
        start_on="human",
        include_system=True,
    )
    assert "thinking-prefix-changed" in rules_of(trimmed, history)
    cleared = [m.model_copy() for m in history]
    ClearToolUsesEdit(trigger=budget, keep=3).apply(
        cleared, count_tokens=count_tokens_approximately
    )
    assert "thinking-prefix-changed" in rules_of(cleared, history)


def test_a_compaction_block_goes_first() -> None:
    block = AIMessage([{"type": "compaction", "content": "Summary", "signature": "Eu"}])
    request = [SystemMessage("sys"), HumanMessage("old"), block, HumanMessage("go on")]
    assert rules_of(request, request) == ["compaction-block-misplaced"]
    repaired, removed = compaction_first(request)
    assert removed == 1 and repaired == [request[0], block, request[3]]
    assert validate_messages(repaired, provider="anthropic") == []
    assert validate_messages(repaired, provider="openai") != []  # a user first, there
    twice = [SystemMessage("sys"), block, HumanMessage("a"), block, HumanMessage("b")]
    assert "more-than-one-compaction-block" in rules_of(twice, twice)


def test_the_check_starts_at_the_compaction() -> None:
    block = AIMessage([{"type": "compaction", "content": "Summary", "signature": "Eu"}])
    tail = loop()[1:]
    history = [SystemMessage("sys"), HumanMessage("old"), AIMessage("old answer"), block, *tail]
    request = [SystemMessage("sys"), block, *tail]
    assert check_against_history(request, history, provider="anthropic") == []
