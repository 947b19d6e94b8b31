"""apply_provider_rules and ContextGovernor(provider=...), profile by profile.

Each test's name or docstring quotes the provider error its repair prevents.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import Runnable

from langchain_context_governance import (
    SYNTHETIC_USER_CONTENT,
    ContextGovernor,
    apply_provider_rules,
)
from langchain_context_governance.passes.backfill import BACKFILL_CONTENT
from langchain_context_governance.rules.apply import apply_provider_rules_with_count
from langchain_context_governance.rules.ids import UNNAMED_TOOL, stable_tool_call_id
from langchain_context_governance.rules.validate import PROVIDERS, validate_messages
from tests.builders import ai_calls, call, result
from tests.oracles import mistral_common_accepts
from tests.unit_tests.conftest import MutationGuard

MISTRAL_ID = "a1B2c3D4e"


def thinking(signature: str) -> dict[str, Any]:
    return {"type": "thinking", "thinking": "let me see", "signature": signature}


def call_ids(message: BaseMessage) -> list[str | None]:
    assert isinstance(message, AIMessage)
    return [tool_call["id"] for tool_call in message.tool_calls]


def governed(history: list[BaseMessage], provider: str) -> list[BaseMessage]:
    return ContextGovernor(provider=provider).invoke(history)


# --- every profile ---------------------------------------------------------------------


@pytest.mark.parametrize("provider", [p for p in PROVIDERS if p != "gemma"])
def test_a_legal_request_comes_back_as_the_same_list(
    provider: str, mutation_guard: MutationGuard
) -> None:
    history = mutation_guard.watch(
        [
            SystemMessage("be brief"),
            HumanMessage("read it"),
            ai_calls(call(MISTRAL_ID, "read_file")),
            result(MISTRAL_ID, "text", name="read_file"),
        ]
    )
    repaired, changed = apply_provider_rules_with_count(list(history), provider=provider)
    assert changed == 0
    assert validate_messages(repaired, provider=provider) == []


def test_unchanged_input_is_returned_as_the_very_same_list() -> None:
    history: list[BaseMessage] = [HumanMessage("hi")]
    repaired, changed = apply_provider_rules_with_count(history, provider="strict")
    assert repaired is history
    assert changed == 0


def test_an_unknown_provider_is_a_value_error_naming_the_setting() -> None:
    with pytest.raises(ValueError, match="provider"):
        apply_provider_rules([HumanMessage("hi")], provider="claude")
    with pytest.raises(ValueError, match="provider must be one of"):
        ContextGovernor(provider="claude")


def test_called_without_messages_it_is_a_runnable_with_the_provider_bound() -> None:
    runnable = apply_provider_rules(provider="mistral")
    assert isinstance(runnable, Runnable)
    out = runnable.invoke([HumanMessage("go"), ai_calls(call("c1")), result("c1")])
    assert call_ids(out[1]) == [stable_tool_call_id("c1")]


def test_the_governor_reports_the_profile_step_under_the_public_name() -> None:
    history = [HumanMessage("go"), ai_calls(call("c1")), result("c1")]
    report = ContextGovernor(provider="mistral").govern(history).report
    assert report.changes["apply_provider_rules"] == 2


def test_a_tool_call_without_an_id_gets_a_stable_id_and_a_placeholder_result(
    mutation_guard: MutationGuard,
) -> None:
    """OpenAI: "Missing required parameter: 'messages[1].tool_calls[0].id'"."""
    history = mutation_guard.watch(
        [HumanMessage("go"), AIMessage("", tool_calls=[{"name": "grep", "args": {}, "id": None}])]
    )
    first = governed(list(history), "openai")
    assert [m.type for m in first] == ["human", "ai", "tool"]
    [new_id] = call_ids(first[1])
    assert new_id and first[2].tool_call_id == new_id  # type: ignore[attr-defined]
    assert first[2].content == BACKFILL_CONTENT
    assert call_ids(governed(list(history), "openai")[1]) == [new_id]


def test_an_id_repeated_inside_one_message_is_split_into_two_calls() -> None:
    """Mistral: "Duplicate tool call id c1 in assistant message"."""
    history = [HumanMessage("go"), ai_calls(call("c1"), call("c1")), result("c1", "hit")]
    out = governed(history, "openai")
    first_id, second_id = call_ids(out[1])
    assert first_id == "c1" and second_id != "c1"
    assert [(m.tool_call_id, m.content) for m in out[2:]] == [  # type: ignore[attr-defined]
        ("c1", "hit"),
        (second_id, BACKFILL_CONTENT),
    ]


def test_openai_ids_over_40_characters_are_rewritten() -> None:
    """OpenAI: "string too long. Expected a string with maximum length 40"."""
    long_id = "call_" + "x" * 40
    out = governed([HumanMessage("go"), ai_calls(call(long_id)), result(long_id)], "openai")
    assert call_ids(out[1]) == [stable_tool_call_id(long_id)]
    assert out[2].tool_call_id == stable_tool_call_id(long_id)  # type: ignore[attr-defined]


@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini", "glm", "mistral"])
def test_a_request_never_ends_on_a_system_message(provider: str) -> None:
    """Mistral: "Expected last role User or Tool (or Assistant with prefix) for serving"."""
    history = [
        SystemMessage("rules"),
        HumanMessage("hi"),
        AIMessage("hello"),
        SystemMessage("remember the rules"),
    ]
    out = governed(history, provider)
    assert [(m.type, m.content) for m in out] == [
        ("system", "rules"),
        ("system", "remember the rules"),
        ("human", "hi"),
    ]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_two_responses_with_signed_thinking_get_a_user_turn_between_them(provider: str) -> None:
    """Anthropic: "roles must alternate between "user" and "assistant""; the signed
    thinking blocks reach the provider exactly as produced, one response each."""
    first = AIMessage([thinking("sig-1"), {"type": "text", "text": "one"}])
    second = AIMessage([thinking("sig-2"), {"type": "text", "text": "two"}])
    out = governed([HumanMessage("think"), first, second, HumanMessage("go on")], provider)
    assert [m.type for m in out] == ["human", "ai", "human", "ai", "human"]
    assert out[2].content == SYNTHETIC_USER_CONTENT
    assert (out[1], out[3]) == (first, second)


def test_reasoning_content_is_not_merged_into_another_response() -> None:
    history = [
        HumanMessage("q"),
        AIMessage("a", additional_kwargs={"reasoning_content": "r1"}),
        AIMessage("b", additional_kwargs={"reasoning_content": "r2"}),
        HumanMessage("next"),
    ]
    out = governed(history, "openai")
    answers = [(m.content, m.additional_kwargs) for m in out if isinstance(m, AIMessage)]
    assert answers == [("a", {"reasoning_content": "r1"}), ("b", {"reasoning_content": "r2"})]
    assert validate_messages(out) == []


# --- Mistral ---------------------------------------------------------------------------


def test_mistral_ids_become_nine_letters_or_digits_in_call_and_result(
    mutation_guard: MutationGuard,
) -> None:
    """Mistral: "Tool call id was call_0 but must be a-z, A-Z, 0-9, with a length of 9"."""
    history = mutation_guard.watch(
        [
            HumanMessage("two files"),
            ai_calls(call("call_0"), call(MISTRAL_ID)),
            result(MISTRAL_ID, "b"),
            result("call_0", "a"),
        ]
    )
    out = apply_provider_rules(history, provider="mistral")
    new_id = stable_tool_call_id("call_0")
    assert call_ids(out[1]) == [new_id, MISTRAL_ID]
    assert [m.tool_call_id for m in out[2:]] == [MISTRAL_ID, new_id]  # type: ignore[attr-defined]
    assert validate_messages(out, provider="mistral") == []


def test_mistral_ids_are_the_same_on_every_call_as_the_history_grows() -> None:
    """The same input id gives the same output id, so the provider's prompt cache holds."""
    turn = [HumanMessage("go"), ai_calls(call("call_0")), result("call_0")]
    grown = [*turn, AIMessage("done"), HumanMessage("again"), ai_calls(call("call_1"))]
    before = governed(turn, "mistral")
    after = governed(grown, "mistral")
    assert after[: len(before)] == before
    assert call_ids(after[1]) == [stable_tool_call_id("call_0")]


def test_mistral_rewrites_anthropic_tool_use_blocks_with_their_call() -> None:
    tool_use = {"type": "tool_use", "id": "toolu_01", "name": "grep", "input": {}}
    history = [
        HumanMessage("go"),
        AIMessage([tool_use], tool_calls=[call("toolu_01", "grep")]),
        result("toolu_01"),
    ]
    out = apply_provider_rules(history, provider="mistral")
    new_id = stable_tool_call_id("toolu_01")
    assert out[1].content == [{**tool_use, "id": new_id}]
    assert call_ids(out[1]) == [new_id]


def test_mistral_tool_names_lose_characters_it_rejects() -> None:
    """Mistral: "Function name was web search but must be a-z, A-Z, 0-9, or contain
    underscores and dashes, with a maximum length of 64"."""
    history = [
        HumanMessage("go"),
        ai_calls(call(MISTRAL_ID, "web search"), call("b2C3d4E5f", "")),
        result(MISTRAL_ID, name="web search"),
        result("b2C3d4E5f"),
    ]
    out = apply_provider_rules(history, provider="mistral")
    assert [c["name"] for c in out[1].tool_calls] == ["web_search", UNNAMED_TOOL]  # type: ignore[attr-defined]
    assert out[2].name == "web_search"
    assert mistral_common_accepts(out) == (True, "")


def test_mistral_moves_a_system_message_that_follows_a_tool_result() -> None:
    """Mistral: "Unexpected role 'system' after role 'tool'"."""
    history = [
        HumanMessage("go"),
        ai_calls(call(MISTRAL_ID)),
        result(MISTRAL_ID),
        SystemMessage("be careful"),
        HumanMessage("next"),
    ]
    out = governed(history, "mistral")
    # The assistant turn: Mistral also rejects "Unexpected role 'user' after role 'tool'".
    assert [m.type for m in out] == ["system", "human", "ai", "tool", "ai", "human"]


MALFORMED_FOR_MISTRAL: dict[str, list[BaseMessage]] = {
    "Unexpected tool call id c9 in tool results": [
        HumanMessage("hi"),
        ai_calls(call(MISTRAL_ID)),
        result(MISTRAL_ID),
        result("c9"),
    ],
    "Not the same number of function calls and responses": [
        HumanMessage("hi"),
        ai_calls(call(MISTRAL_ID)),
        HumanMessage("still there?"),
    ],
    "Tool call id was call_0 but must be a-z, A-Z, 0-9, with a length of 9": [
        HumanMessage("hi"),
        ai_calls(call("call_0")),
        result("call_0"),
    ],
    "Unexpected role 'tool' after role 'user'": [
        HumanMessage("hi"),
        ai_calls(call(MISTRAL_ID)),
        HumanMessage("hurry"),
        result(MISTRAL_ID),
    ],
    "Expected last role User or Tool (or Assistant with prefix) for serving": [
        HumanMessage("hi"),
        AIMessage("hello"),
    ],
    "Function name was web search but must be a-z, A-Z, 0-9": [
        HumanMessage("hi"),
        ai_calls(call(MISTRAL_ID, "web search")),
        result(MISTRAL_ID),
    ],
    "Unexpected role 'system' after role 'assistant'": [
        HumanMessage("hi"),
        AIMessage("hello"),
        SystemMessage("late rule"),
        HumanMessage("next"),
    ],
}


@pytest.mark.parametrize("error", list(MALFORMED_FOR_MISTRAL))
def test_mistral_common_rejects_the_raw_request_and_accepts_the_governed_one(error: str) -> None:
    raw = MALFORMED_FOR_MISTRAL[error]
    accepted, message = mistral_common_accepts(raw)
    assert not accepted
    assert error in message
    assert mistral_common_accepts(governed(raw, "mistral")) == (True, "")


# --- Anthropic -------------------------------------------------------------------------


def test_anthropic_ids_used_twice_in_a_request_are_made_unique() -> None:
    """Anthropic: "`tool_use` ids must be unique"."""
    history = [
        HumanMessage("go"),
        ai_calls(call("call_0")),
        result("call_0", "first"),
        HumanMessage("again"),
        ai_calls(call("call_0")),
        result("call_0", "second"),
    ]
    out = governed(history, "anthropic")
    renamed = call_ids(out[4])[0]
    assert call_ids(out[1]) == ["call_0"] and renamed != "call_0"
    assert (out[5].tool_call_id, out[5].content) == (renamed, "second")  # type: ignore[attr-defined]
    assert validate_messages(out, provider="anthropic") == []


def test_anthropic_ids_with_other_characters_are_rewritten() -> None:
    """Anthropic: tool_use.id "String should match pattern '^[a-zA-Z0-9_-]+$'"."""
    out = governed([HumanMessage("go"), ai_calls(call("fc.1")), result("fc.1")], "anthropic")
    assert call_ids(out[1]) == [stable_tool_call_id("fc.1")]


def test_anthropic_gets_no_empty_text_blocks_and_no_blank_messages(
    mutation_guard: MutationGuard,
) -> None:
    """Anthropic: "messages: text content blocks must be non-empty"."""
    history = mutation_guard.watch(
        [
            SystemMessage(" "),
            HumanMessage([{"type": "text", "text": ""}, {"type": "text", "text": "hi"}]),
            AIMessage(""),
            HumanMessage("still there?"),
            AIMessage([thinking("sig"), {"type": "text", "text": " "}]),
            HumanMessage(""),
        ]
    )
    out = governed(list(history), "anthropic")
    assert [(m.type, m.content) for m in out] == [
        ("human", [{"type": "text", "text": "hi"}, {"type": "text", "text": "still there?"}]),
        ("ai", [thinking("sig")]),
        ("human", SYNTHETIC_USER_CONTENT),
    ]


def test_anthropic_moves_system_messages_to_the_start() -> None:
    """langchain-anthropic: "System message must be at beginning of message list"."""
    history = [
        SystemMessage("rules"),
        HumanMessage("hi"),
        AIMessage("hello"),
        SystemMessage("new rule"),
        HumanMessage("next"),
    ]
    out = governed(history, "anthropic")
    assert [m.content for m in out] == ["rules", "new rule", "hi", "hello", "next"]


def test_anthropic_first_message_is_a_user_even_before_a_tool_call() -> None:
    """Anthropic: "messages: first message must use the "user" role"."""
    history = [SystemMessage("agent"), ai_calls(call("c1")), result("c1")]
    out = governed(history, "anthropic")
    assert [m.type for m in out] == ["system", "human", "ai", "tool"]


def test_anthropic_result_after_the_conversation_moved_on_answers_nothing() -> None:
    """Anthropic: "`tool_use` ids were found without `tool_result` blocks immediately after".

    The governor decides each group once: the call was answered with the placeholder
    when the user spoke, and the late result is dropped rather than rewrite that prefix.
    """
    history = [HumanMessage("go"), ai_calls(call("c1")), HumanMessage("hurry"), result("c1", "r")]
    report = ContextGovernor(provider="anthropic").govern(history).report
    out = governed(history, "anthropic")
    assert [(m.type, m.content) for m in out] == [
        ("human", "go"),
        ("ai", ""),
        ("tool", BACKFILL_CONTENT),
        ("human", "hurry"),
    ]
    assert report.changes["drop_orphan_tool_results"] == 1


# --- GLM and Gemini --------------------------------------------------------------------


def test_glm_never_sends_a_system_message_followed_by_an_assistant_message() -> None:
    """Zhipu GLM error 1214: "messages 参数非法。请检查文档。"."""
    history = [
        SystemMessage("rules"),
        AIMessage("hello, how can I help?"),
        HumanMessage("hi"),
        AIMessage("yes?"),
        SystemMessage("reminder"),
        AIMessage("anything else?"),
        HumanMessage("no"),
    ]
    out = governed(history, "glm")
    assert validate_messages(out, provider="glm") == []
    pairs = itertools.pairwise(out)
    assert not any(isinstance(a, SystemMessage) and isinstance(b, AIMessage) for a, b in pairs)
    assert [m.content for m in out if isinstance(m, HumanMessage)][-1] == "no"


def test_gemini_gets_no_empty_text_parameter() -> None:
    """Vertex: "Unable to submit request because it has an empty text parameter."."""
    history = [HumanMessage("hi"), AIMessage("\n"), HumanMessage("anyone?")]
    out = governed(history, "gemini")
    assert [(m.type, m.content) for m in out] == [
        ("human", [{"type": "text", "text": "hi"}, {"type": "text", "text": "anyone?"}])
    ]


def test_a_request_of_blank_system_messages_only_still_has_a_user_turn() -> None:
    """Anthropic: "messages: at least one message is required"."""
    out = apply_provider_rules([SystemMessage("")], provider="gemini")
    assert [(m.type, m.content) for m in out] == [("human", SYNTHETIC_USER_CONTENT)]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_ids_and_names_with_lone_surrogates_are_repaired_not_crashed_on(provider: str) -> None:
    """A lone surrogate (JSON "\\udc80") cannot be encoded as UTF-8; the id is hashed anyway."""
    bad_id, bad_name = "call\udc80x", "gr\ud800ep"
    history = [
        HumanMessage("hi"),
        ai_calls(call(bad_id, bad_name, q="\udcff"), {**call("", "plain"), "id": None}),
        result(bad_id, "r", name=bad_name),
    ]
    result_ = ContextGovernor(provider=provider).govern(history)
    assert not result_.report.fell_back
    assert validate_messages(result_.messages, provider=provider) == []
    assert len(stable_tool_call_id(bad_id)) == 9


def test_responses_merged_after_a_late_system_message_moves_keep_reasoning_content_legal():
    """Found by `make fuzz`: moving the system message out from between two responses
    merges them, which gives the first one's `reasoning_content` to the second one's
    calls; the next calls without it must then be repaired too, in the same pass."""
    call = {"name": "read_file", "args": {}, "id": "c1", "type": "tool_call"}
    history = [
        HumanMessage("go"),
        AIMessage("thinking aloud", additional_kwargs={"reasoning_content": "plan"}),
        SystemMessage("late rules"),
        AIMessage("", tool_calls=[call]),
        ToolMessage("one", tool_call_id="c1"),
        AIMessage("", tool_calls=[{**call, "id": "c2"}]),
        ToolMessage("two", tool_call_id="c2"),
    ]
    repaired = apply_provider_rules(history, provider="strict")

    assert validate_messages(repaired, provider="strict") == []
    assert apply_provider_rules(repaired, provider="strict") == repaired
