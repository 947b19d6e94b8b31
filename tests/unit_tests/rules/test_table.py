"""The rule table: every rule's check finds what its repair removes, and the new rules."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from langchain_context_governance.rules.apply import apply_provider_rules_with_count
from langchain_context_governance.rules.table import (
    HOSTED_PROFILES,
    PROFILES,
    PROVIDERS,
    RULES,
    rules_named,
)
from langchain_context_governance.rules.turns import SYNTHETIC_ASSISTANT_CONTENT
from langchain_context_governance.rules.validate import validate_messages
from tests.builders import ai_calls, call, result
from tests.unit_tests.conftest import MutationGuard

C1, C2, C3 = "call00001", "call00002", "call00003"
GEMINI_SIGNATURES = "__gemini_function_call_thought_signatures__"
SIGNED_THINKING = {"type": "thinking", "thinking": "hm", "signature": "EqQB"}


def tool_use(call_id: str, name: str = "search") -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": {"q": "x"}}


def invalid(call_id: str, args: str = "{oops") -> dict[str, Any]:
    return {
        "name": "parse",
        "args": args,
        "id": call_id,
        "error": None,
        "type": "invalid_tool_call",
    }


# One request that breaks each rule, and nothing a repair run before it would change.
BROKEN: dict[str, list[BaseMessage]] = {
    "message-types": [HumanMessage("hi"), ChatMessage(role="critic", content="meh")],
    "tool-call-pairing": [HumanMessage("hi"), result(C1)],
    "tool-calls-declared": [HumanMessage("hi"), AIMessage([tool_use(C1)]), result(C1)],
    "tool-call-ids": [HumanMessage("hi"), ai_calls(call(C1), call(C1)), result(C1)],
    "unique-tool-call-ids": [
        HumanMessage("hi"),
        ai_calls(call(C1)),
        result(C1),
        ai_calls(call(C1)),
        result(C1),
    ],
    "openai-tool-call-id-length": [HumanMessage("hi"), ai_calls(call("x" * 41)), result("x" * 41)],
    "anthropic-tool-call-id-format": [HumanMessage("hi"), ai_calls(call("a.b")), result("a.b")],
    "nine-character-tool-call-ids": [HumanMessage("hi"), ai_calls(call("c1")), result("c1")],
    "tool-name-format": [HumanMessage("hi"), ai_calls(call(C1, "web search")), result(C1)],
    "no-invalid-tool-calls": [
        HumanMessage("hi"),
        AIMessage("", invalid_tool_calls=[invalid(C1)]),
        result(C1),
    ],
    "sendable-invalid-tool-calls": [
        HumanMessage("hi"),
        AIMessage("", tool_calls=[call(C1)], invalid_tool_calls=[{**invalid(C2), "name": ""}]),
        result(C1),
        result(C2),
    ],
    "one-tool-call-per-message": [
        HumanMessage("hi"),
        ai_calls(call(C1), call(C2)),
        result(C1),
        result(C2),
    ],
    "no-tool-role": [HumanMessage("hi"), ai_calls(call(C1)), result(C1)],
    "non-empty-content": [HumanMessage("hi"), AIMessage(" "), HumanMessage("?")],
    "system-not-first": [HumanMessage("hi"), AIMessage("a"), SystemMessage("s"), HumanMessage("b")],
    "system-after-assistant-or-tool": [
        HumanMessage("hi"),
        AIMessage("a"),
        SystemMessage("s"),
        HumanMessage("b"),
    ],
    "system-then-assistant": [SystemMessage("s"), AIMessage("a"), HumanMessage("b")],
    "one-leading-system-message": [SystemMessage("s"), SystemMessage("t"), HumanMessage("b")],
    "no-system-role": [SystemMessage("s"), HumanMessage("b")],
    "turn-order": [HumanMessage("a"), HumanMessage("b"), AIMessage("c")],
    "no-user-after-tool-results": [
        HumanMessage("hi"),
        ai_calls(call(C1)),
        result(C1),
        HumanMessage("b"),
    ],
    "request-has-a-turn": [SystemMessage("s")],
    "signed-thinking-blocks": [
        HumanMessage("hi"),
        AIMessage([{"type": "thinking", "thinking": "hm"}, {"type": "text", "text": "a"}]),
        HumanMessage("?"),
    ],
    "reasoning-items-with-their-output": [
        HumanMessage("hi"),
        AIMessage([{"type": "reasoning", "id": "rs_1", "summary": []}]),
        HumanMessage("?"),
    ],
    "thought-signatures-with-their-calls": [
        HumanMessage("hi"),
        ai_calls(call(C1)).model_copy(
            update={"additional_kwargs": {GEMINI_SIGNATURES: {"x": "s"}}}
        ),
        result(C1),
    ],
    "reasoning-content-with-tool-calls": [
        HumanMessage("hi"),
        ai_calls(call(C1)).model_copy(update={"additional_kwargs": {"reasoning_content": "r"}}),
        result(C1),
        ai_calls(call(C2)),
        result(C2),
    ],
    "thinking-opens-the-tool-loop": [
        HumanMessage("hi"),
        ai_calls(call(C1)),
        result(C1),
        AIMessage([SIGNED_THINKING], tool_calls=[call(C2)]),
        result(C2),
    ],
}


def test_every_rule_has_a_broken_example_and_a_profile() -> None:
    assert set(BROKEN) == {rule.name for rule in RULES}
    assert all(rule.profiles and rule.prevents and rule.source for rule in RULES)


@pytest.mark.parametrize("rule", RULES, ids=lambda rule: rule.name)
def test_the_check_finds_what_the_repair_removes(rule: Any, mutation_guard: MutationGuard) -> None:
    request = list(mutation_guard.watch(BROKEN[rule.name]))
    found = rule.check(request)
    assert found and {violation.rule for violation in found} <= set(rule.codes)
    repaired, changed = rule.repair(request)
    assert changed > 0 and repaired is not request
    assert rule.check(repaired) == []
    assert rule.repair(repaired) == (repaired, 0)


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("name", list(BROKEN))
def test_every_profile_repairs_everything_it_checks(provider: str, name: str) -> None:
    repaired, _ = apply_provider_rules_with_count(list(BROKEN[name]), provider=provider)
    assert validate_messages(repaired, provider=provider) == []


def test_strict_holds_every_hosted_rule_and_the_common_template_rules() -> None:
    strict = set(PROFILES["strict"])
    for profile in HOSTED_PROFILES:
        assert set(PROFILES[profile]) <= strict
    assert {
        "one-leading-system-message",
        "no-user-after-tool-results",
        "nine-character-tool-call-ids",
    } <= strict


def test_an_unknown_profile_or_rule_is_a_value_error_naming_it() -> None:
    with pytest.raises(ValueError, match="got 'llama'"):
        rules_named("llama")
    with pytest.raises(ValueError, match="no-such-rule"):
        rules_named("openai", ["no-such-rule"])


def test_mistral_gets_an_assistant_turn_between_tool_results_and_a_user() -> None:
    """Mistral: "Unexpected role 'user' after role 'tool'" (error 3230)."""
    history = [HumanMessage("go"), ai_calls(call(C1)), result(C1), HumanMessage("faster")]
    out, _ = apply_provider_rules_with_count(history, provider="mistral")
    assert [m.type for m in out] == ["human", "ai", "tool", "ai", "human"]
    assert out[3].content == SYNTHETIC_ASSISTANT_CONTENT
    assert apply_provider_rules_with_count(history, provider="openai") == (history, 0)


def test_parallel_calls_become_call_result_pairs_in_the_order_of_the_results() -> None:
    history = [
        HumanMessage("weather"),
        ai_calls(call(C1, "a"), call(C2, "b"), call(C3, "c"), content="Checking."),
        result(C3, "rain"),
        result(C1, "sun"),
        result(C2, "snow"),
        AIMessage("Mixed."),
        HumanMessage("ok"),
    ]
    out, _ = apply_provider_rules_with_count(history, provider="llama3")
    pairs = [
        (m.tool_calls[0]["id"], m.content) for m in out if isinstance(m, AIMessage) and m.tool_calls
    ]
    assert pairs == [(C3, "Checking."), (C1, ""), (C2, "")]
    assert [m.content for m in out if isinstance(m, ToolMessage)] == ["rain", "sun", "snow"]
    assert [m.type for m in out] == [
        "human",
        "ai",
        "tool",
        "ai",
        "tool",
        "ai",
        "tool",
        "ai",
        "human",
    ]


def test_tool_use_blocks_get_their_tool_calls_entry() -> None:
    """ChatOpenAI drops tool_use blocks that have no tool_calls entry."""
    history = [
        HumanMessage("hi"),
        AIMessage([{"type": "text", "text": "Looking."}, tool_use(C1)]),
        result(C1),
    ]
    out, _ = apply_provider_rules_with_count(history, provider="openai")
    assert [c["id"] for c in out[1].tool_calls] == [C1]  # type: ignore[attr-defined]
    assert out[1].tool_calls[0]["args"] == {"q": "x"}  # type: ignore[attr-defined]
    assert apply_provider_rules_with_count(history, provider="anthropic")[0][1] is history[1]


def test_gemini_gets_invalid_calls_as_calls_with_their_arguments() -> None:
    """ChatGoogleGenerativeAI drops invalid_tool_calls: "empty text parameter"."""
    history = [
        HumanMessage("parse"),
        AIMessage("", invalid_tool_calls=[invalid(C1), invalid(C2, '{"a": 1}')]),
        result(C1),
        result(C2),
    ]
    out, _ = apply_provider_rules_with_count(history, provider="gemini")
    assert out[1].invalid_tool_calls == []  # type: ignore[attr-defined]
    assert [c["args"] for c in out[1].tool_calls] == [{"arguments": "{oops"}, {"a": 1}]  # type: ignore[attr-defined]


def test_gemini_makes_reused_ids_unique() -> None:
    """Gemini pairs function responses with calls by id over the whole history."""
    request = BROKEN["unique-tool-call-ids"]
    assert {v.rule for v in validate_messages(request, provider="gemini")} == {
        "reused-tool-call-id"
    }
    out, _ = apply_provider_rules_with_count(list(request), provider="gemini")
    assert out[1].tool_calls[0]["id"] != out[3].tool_calls[0]["id"]  # type: ignore[attr-defined]
    assert out[4].tool_call_id == out[3].tool_calls[0]["id"]  # type: ignore[attr-defined]


def test_gemma_folds_system_text_into_the_first_user_message_and_tools_into_text() -> None:
    history = [
        SystemMessage("Be brief."),
        HumanMessage("read it"),
        ai_calls(call(C1, "read_file", path="a.py")),
        result(C1, "print(1)", name="read_file"),
    ]
    out, _ = apply_provider_rules_with_count(history, provider="gemma")
    assert [m.type for m in out] == ["human", "ai", "human"]
    assert out[0].content == "Be brief.\n\nread it"
    assert "read_file" in out[1].content and '"path": "a.py"' in out[1].content  # type: ignore[operator]
    assert "print(1)" in out[2].content  # type: ignore[operator]


def test_one_leading_system_message_merges_them_in_order() -> None:
    history = [
        SystemMessage("a"),
        HumanMessage("q"),
        AIMessage("r"),
        SystemMessage("b"),
        HumanMessage("s"),
    ]
    out, _ = apply_provider_rules_with_count(history, provider="qwen")
    assert [(m.type, m.content) for m in out] == [
        ("system", "a\n\nb"),
        ("human", "q"),
        ("ai", "r"),
        ("human", "s"),
    ]
