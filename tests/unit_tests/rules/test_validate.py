"""The provider-rules validator, rule by rule, with each provider's real error text.

Each test's docstring quotes the error the rule prevents. The last section checks our
"mistral" profile against Mistral's own validator, `mistral_common`, run offline.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from langchain_context_governance.rules.table import HOSTED_PROFILES
from langchain_context_governance.rules.validate import PROVIDERS, Violation, validate_messages
from tests.builders import ai_calls, call, result
from tests.oracles import mistral_common_accepts

# The hosted API profiles and their union; the chat-template profiles have tests of their own.
API_PROFILES = (*HOSTED_PROFILES, "strict")

# Nine letters and digits: legal for every profile, Mistral's included.
C1, C2, C3 = "call00001", "call00002", "call00003"


def found(messages: list[Any], provider: str = "openai") -> list[tuple[int, str]]:
    return [(v.index, v.rule) for v in validate_messages(messages, provider=provider)]


def rules(messages: list[Any], provider: str) -> set[str]:
    return {v.rule for v in validate_messages(messages, provider=provider)}


LEGAL: dict[str, list[Any]] = {
    "plain chat": [
        SystemMessage("You are terse."),
        HumanMessage("Capital of France?"),
        AIMessage("Paris."),
        HumanMessage("And Italy?"),
    ],
    "one tool call, ends on its result": [
        SystemMessage("You are a coding agent."),
        HumanMessage("read main.py"),
        ai_calls(call(C1, "read_file", path="main.py")),
        result(C1, "print('hi')", name="read_file"),
    ],
    "parallel calls answered out of order": [
        HumanMessage("weather in three cities"),
        ai_calls(call(C1, "weather"), call(C2, "weather"), call(C3, "weather")),
        result(C3, "rain"),
        result(C1, "sun"),
        result(C2, "snow"),
        AIMessage("Sun, snow and rain."),
        HumanMessage("thanks"),
    ],
    "list content and an error status": [
        HumanMessage("run the tests"),
        ai_calls(call(C1, "pytest"), content="Running them now."),
        ToolMessage([{"type": "text", "text": "2 failed"}], tool_call_id=C1, status="error"),
        ai_calls(call(C2, "pytest")),
        ToolMessage("", tool_call_id=C2),
    ],
    "anthropic tool_use blocks": [
        HumanMessage("search it"),
        AIMessage(
            [
                {"type": "text", "text": "Searching."},
                {"type": "tool_use", "id": C1, "name": "search", "input": {"q": "x"}},
            ],
            tool_calls=[call(C1, "search", q="x")],
        ),
        result(C1, "3 hits"),
    ],
    "invalid tool call answered": [
        HumanMessage("parse"),
        AIMessage(
            "",
            invalid_tool_calls=[
                {
                    "name": "parse",
                    "args": "{oops",
                    "id": C1,
                    "error": None,
                    "type": "invalid_tool_call",
                }
            ],
        ),
        result(C1, "Error: arguments are not valid JSON", name="parse"),
    ],
    "streamed replies kept as chunks": [
        HumanMessage("hi"),
        AIMessageChunk(
            content="",
            tool_call_chunks=[
                {"name": "search", "args": "{}", "id": C1, "index": 0, "type": "tool_call_chunk"}
            ],
        ),
        result(C1, "found"),
        AIMessageChunk(content="Found it."),
        HumanMessage("thanks"),
    ],
    "two leading system messages": [
        SystemMessage("You are an agent."),
        SystemMessage("Today is Monday."),
        HumanMessage("hi"),
    ],
    "several tool rounds": [
        HumanMessage("fix the bug"),
        ai_calls(call(C1, "read_file")),
        result(C1, "code"),
        ai_calls(call(C2, "write_file")),
        result(C2, "ok"),
        AIMessage("Fixed."),
        HumanMessage("now run it"),
        ai_calls(call(C3, "run")),
        result(C3, "passed"),
    ],
}


# What some profiles reject of the LEGAL requests: the chat-template profiles what their
# templates reject (Qwen3.5's an invalid tool call), and "gemini" the invalid tool call
# ChatGoogleGenerativeAI would drop.
PROFILE_FINDS: dict[tuple[str, str], set[str]] = {
    ("invalid tool call answered", "gemini"): {"invalid-tool-call"},
    ("invalid tool call answered", "qwen"): {"invalid-tool-call"},
    ("invalid tool call answered", "strict"): {"invalid-tool-call"},
    ("two leading system messages", "strict"): {"several-system-messages"},
    ("two leading system messages", "qwen"): {"several-system-messages"},
    ("two leading system messages", "mistral_template"): {"several-system-messages"},
    ("two leading system messages", "llama3"): {"several-system-messages"},
    ("parallel calls answered out of order", "llama3"): {"parallel-tool-calls"},
    **{(name, "gemma"): {"system-role"} for name in LEGAL if LEGAL[name][0].type == "system"},
}
for _name in LEGAL:
    if any(m.type == "tool" for m in LEGAL[_name]):
        PROFILE_FINDS.setdefault((_name, "gemma"), set()).add("tool-traffic")


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("name", list(LEGAL))
def test_legal_requests_validate_clean_for_every_profile(name: str, provider: str) -> None:
    """Hosted APIs take every LEGAL request; a template profile only what its template takes."""
    expected = PROFILE_FINDS.get((name, provider), set())
    assert rules(LEGAL[name], provider) == expected


def test_dict_messages_are_read_like_convert_to_messages() -> None:
    request = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
    ]
    assert found(request) == [(2, "last-not-user-or-tool")]


def test_validator_reads_without_changing_anything(mutation_guard: Any) -> None:
    request = mutation_guard.watch(
        [HumanMessage("hi"), ai_calls(call(C1)), HumanMessage("again"), result(C1)]
    )
    assert validate_messages(request, provider="strict")


def test_a_long_legal_history_validates_clean() -> None:
    request: list[BaseMessage] = [HumanMessage("go")]
    for n in range(2_000):
        call_id = f"c{n:08d}"
        request += [ai_calls(call(call_id)), result(call_id)]
    assert validate_messages(request, provider="strict") == []


# --- Tool-call pairing: every profile ---------------------------------------------------


@pytest.mark.parametrize("provider", API_PROFILES)
def test_orphan_tool_result(provider: str) -> None:
    """OpenAI: "messages with role 'tool' must be a response to a preceding message with
    'tool_calls'"; Anthropic: "unexpected `tool_use_id` found in `tool_result` blocks"."""
    request = [HumanMessage("hi"), result(C1)]
    violations = validate_messages(request, provider=provider)
    assert [(v.index, v.rule) for v in violations] == [(1, "orphan-tool-result")]
    assert C1 in violations[0].message


def test_result_before_its_call_is_an_orphan_and_the_call_is_unanswered() -> None:
    request = [HumanMessage("hi"), result(C1), ai_calls(call(C1)), HumanMessage("?")]
    assert found(request) == [(1, "orphan-tool-result"), (2, "unanswered-tool-call")]


@pytest.mark.parametrize("provider", API_PROFILES)
def test_unanswered_tool_call_names_each_missing_id(provider: str) -> None:
    """OpenAI: "An assistant message with 'tool_calls' must be followed by tool messages
    responding to each 'tool_call_id'. The following tool_call_ids did not have response
    messages: ..."; Anthropic: "`tool_use` ids were found without `tool_result` blocks
    immediately after"."""
    request = [HumanMessage("hi"), ai_calls(call(C1), call(C2, "grep"), call(C3)), result(C1)]
    violations = validate_messages(request, provider=provider)
    assert [(v.index, v.rule) for v in violations] == [
        (1, "unanswered-tool-call"),
        (1, "unanswered-tool-call"),
    ]
    assert C2 in violations[0].message
    assert "grep" in violations[0].message
    assert C3 in violations[1].message


def test_result_after_a_user_message_is_not_adjacent() -> None:
    """Mistral: "Unexpected role 'tool' after role 'user'"; Gemini: "Please ensure that
    function response turn comes immediately after a function call turn."."""
    request = [HumanMessage("hi"), ai_calls(call(C1)), HumanMessage("hurry"), result(C1)]
    violations = validate_messages(request)
    assert [(v.index, v.rule) for v in violations] == [
        (1, "unanswered-tool-call"),
        (3, "tool-result-not-adjacent"),
    ]
    assert C1 in violations[1].message
    assert "message 1" in violations[1].message


def test_result_in_a_later_run_is_not_adjacent() -> None:
    request = [
        HumanMessage("hi"),
        ai_calls(call(C1)),
        AIMessage("thinking"),
        ai_calls(call(C2)),
        result(C2),
        result(C1),
    ]
    assert found(request) == [
        (1, "unanswered-tool-call"),
        (2, "consecutive-assistant"),
        (3, "consecutive-assistant"),
        (5, "tool-result-not-adjacent"),
    ]


@pytest.mark.parametrize("provider", API_PROFILES)
def test_second_result_for_a_call(provider: str) -> None:
    """Mistral: "Duplicate tool call id ... in tool results"."""
    request = [HumanMessage("hi"), ai_calls(call(C1)), result(C1), result(C1)]
    violations = validate_messages(request, provider=provider)
    assert [(v.index, v.rule) for v in violations] == [(3, "duplicate-tool-result")]
    assert C1 in violations[0].message


def test_second_result_turns_later_is_still_a_duplicate() -> None:
    request = [
        HumanMessage("hi"),
        ai_calls(call(C1)),
        result(C1),
        AIMessage("done"),
        HumanMessage("again"),
        result(C1),
    ]
    assert found(request) == [(5, "duplicate-tool-result")]


def test_same_id_twice_in_one_assistant_message() -> None:
    """Mistral: "Duplicate tool call id {id} in assistant message"; Anthropic: "`tool_use`
    ids must be unique"."""
    request = [HumanMessage("hi"), ai_calls(call(C1), call(C1)), result(C1)]
    violations = validate_messages(request)
    assert [(v.index, v.rule) for v in violations] == [(1, "duplicate-tool-call-id")]
    assert C1 in violations[0].message


def test_tool_call_without_an_id() -> None:
    """OpenAI requires messages[i].tool_calls[j].id; Mistral: "Tool call id has to be
    defined in serving mode."."""
    no_id = {"name": "search", "args": {}, "id": None, "type": "tool_call"}
    request = [HumanMessage("hi"), AIMessage("", tool_calls=[no_id]), HumanMessage("?")]
    violations = validate_messages(request)
    assert [(v.index, v.rule) for v in violations] == [(1, "tool-call-without-id")]
    assert "search" in violations[0].message


# --- Turn order: every profile ------------------------------------------------------------


@pytest.mark.parametrize("provider", API_PROFILES)
def test_consecutive_user_messages(provider: str) -> None:
    """Gemini: "Please ensure that multiturn requests alternate between user and model."."""
    assert found([HumanMessage("a"), HumanMessage("b")], provider) == [(1, "consecutive-user")]


@pytest.mark.parametrize("provider", API_PROFILES)
def test_consecutive_assistant_messages(provider: str) -> None:
    """Anthropic (legacy): "roles must alternate between \"user\" and \"assistant\"";
    Gemini: "Please ensure that function call turn comes immediately after a user turn or
    after a function response turn."."""
    request = [HumanMessage("a"), AIMessage("b"), AIMessage("c"), HumanMessage("d")]
    assert found(request, provider) == [(2, "consecutive-assistant")]


@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini", "mistral"])
def test_first_message_after_the_system_prompt_must_be_a_user_message(provider: str) -> None:
    """Anthropic: "messages: first message must use the \"user\" role"."""
    request = [SystemMessage("s"), AIMessage("Hello!"), HumanMessage("hi")]
    assert found(request, provider) == [(1, "first-not-user")]


@pytest.mark.parametrize("provider", API_PROFILES)
def test_request_must_not_end_with_an_assistant_message(provider: str) -> None:
    """Mistral: "Expected last role User or Tool (or Assistant with prefix) for serving but
    got assistant"; Gemini: "Please ensure multiturn requests end with a user role or a
    function response."."""
    assert found([HumanMessage("hi"), AIMessage("Hello")], provider) == [
        (1, "last-not-user-or-tool")
    ]


def test_request_must_not_end_with_a_system_message() -> None:
    assert found([HumanMessage("hi"), SystemMessage("be brief")]) == [(1, "last-not-user-or-tool")]


@pytest.mark.parametrize("provider", API_PROFILES)
@pytest.mark.parametrize("request_", [[], [SystemMessage("You are an agent.")]])
def test_empty_request_or_only_a_system_prompt(provider: str, request_: list[Any]) -> None:
    """OpenAI: "[] is too short - 'messages'"; Mistral: "Conversation must have at least one
    message"."""
    assert found(request_, provider) == [(-1, "empty-request")]


def test_other_message_types_are_reported() -> None:
    request = [HumanMessage("hi"), ChatMessage(role="critic", content="meh"), HumanMessage("ok")]
    violations = validate_messages(request)
    assert [(v.index, v.rule) for v in violations] == [(1, "unsupported-message-type")]
    assert "HumanMessage" in violations[0].message


# --- Rules only some providers enforce ----------------------------------------------------


MID_SYSTEM = [HumanMessage("hi"), AIMessage("hello"), SystemMessage("be brief"), HumanMessage("?")]


@pytest.mark.parametrize(
    ("provider", "expected"),
    [
        ("anthropic", [(2, "system-not-first")]),
        ("gemini", [(2, "system-not-first")]),
        (
            "strict",
            [
                (2, "several-system-messages"),
                (2, "system-after-assistant-or-tool"),
                (2, "system-not-first"),
            ],
        ),
        ("openai", []),
        ("glm", []),
        ("mistral", [(2, "system-after-assistant-or-tool")]),
    ],
)
def test_system_message_after_the_conversation_started(
    provider: str, expected: list[tuple[int, str]]
) -> None:
    """langchain-anthropic: "System message must be at beginning of message list.";
    LangChain Google GenAI: "System message should be the first one"; mistral_common:
    "Unexpected role 'system' after role 'assistant'"."""
    assert sorted(found(MID_SYSTEM, provider)) == expected


@pytest.mark.parametrize(
    ("provider", "expected"),
    [
        ("glm", [(3, "system-then-assistant")]),
        (
            "strict",
            [
                (2, "several-system-messages"),
                (2, "system-after-assistant-or-tool"),
                (2, "system-not-first"),
                (3, "system-then-assistant"),
            ],
        ),
        ("openai", []),
    ],
)
def test_system_message_followed_by_an_assistant_message(
    provider: str, expected: list[tuple[int, str]]
) -> None:
    """Zhipu GLM error 1214: "messages 参数非法。请检查文档。" when a system message is
    followed directly by an assistant message."""
    request = [
        HumanMessage("q"),
        AIMessage("a"),
        SystemMessage("note"),
        AIMessage("b"),
        HumanMessage("c"),
    ]
    assert sorted(found(request, provider)) == sorted(expected)


def test_glm_system_then_assistant_at_the_start() -> None:
    request = [SystemMessage("s"), AIMessage("Hi, I am GLM."), HumanMessage("hi")]
    assert sorted(found(request, "glm")) == [(1, "first-not-user"), (1, "system-then-assistant")]


@pytest.mark.parametrize("provider", ["anthropic", "gemini", "mistral", "strict"])
@pytest.mark.parametrize(
    "empty", [AIMessage(""), AIMessage("   \n"), AIMessage([{"type": "text", "text": ""}])]
)
def test_assistant_message_without_content_or_tool_calls(provider: str, empty: AIMessage) -> None:
    """Anthropic: "messages: text content blocks must be non-empty" / "must contain
    non-whitespace text"; mistral_common (tokenizers before v7): "Assistant message must
    have either content or tool_calls"."""
    request = [HumanMessage("hi"), empty, HumanMessage("hello?")]
    violations = validate_messages(request, provider=provider)
    assert [(v.index, v.rule) for v in violations] == [(1, "empty-content")]
    assert "Message 1" in violations[0].message


@pytest.mark.parametrize("provider", ["openai", "glm"])
def test_openai_compatible_providers_accept_empty_messages(provider: str) -> None:
    assert found([HumanMessage(""), AIMessage(""), HumanMessage("?")], provider) == []


def test_anthropic_rejects_an_empty_user_message() -> None:
    """Vertex/Gemini: "Unable to submit request because it has an empty text parameter."."""
    assert found([HumanMessage("")], "anthropic") == [(0, "empty-content")]
    assert found([HumanMessage("")], "gemini") == [(0, "empty-content")]


def test_anthropic_names_the_empty_text_block() -> None:
    request = [
        HumanMessage("hi"),
        ai_calls(call(C1), content=[{"type": "text", "text": ""}]),
        result(C1),
    ]
    violations = validate_messages(request, provider="anthropic")
    assert [(v.index, v.rule) for v in violations] == [(1, "empty-content")]
    assert "block 0" in violations[0].message


def test_images_without_text_are_content() -> None:
    image = {"type": "image", "url": "https://example.com/cat.png"}
    assert found([HumanMessage([image])], "anthropic") == []


def test_anthropic_tool_use_ids_must_be_unique_across_the_request() -> None:
    """Anthropic: "`tool_use` ids must be unique"."""
    request = [
        HumanMessage("hi"),
        ai_calls(call(C1)),
        result(C1),
        ai_calls(call(C1)),
        result(C1),
    ]
    assert found(request, "anthropic") == [(3, "reused-tool-call-id")]
    assert found(request, "openai") == []


def test_anthropic_tool_call_id_pattern() -> None:
    """Anthropic tool_use ids must match ^[a-zA-Z0-9_-]+$ ("String should match pattern")."""
    request = [HumanMessage("hi"), ai_calls(call("fn|1")), result("fn|1")]
    assert found(request, "anthropic") == [(1, "tool-call-id-format"), (2, "tool-call-id-format")]
    assert (
        found(
            [HumanMessage("hi"), ai_calls(call("toolu_01A-b")), result("toolu_01A-b")], "anthropic"
        )
        == []
    )


def test_mistral_tool_call_ids_are_nine_letters_or_digits() -> None:
    """mistral_common: "Tool call id was call_1 but must be a-z, A-Z, 0-9, with a length of
    9."."""
    request = [HumanMessage("hi"), ai_calls(call("call_1")), result("call_1")]
    violations = validate_messages(request, provider="mistral")
    assert [(v.index, v.rule) for v in violations] == [
        (1, "tool-call-id-format"),
        (2, "tool-call-id-format"),
    ]
    assert "call_1" in violations[0].message
    assert found(request, "openai") == []


def test_mistral_tool_names() -> None:
    """mistral_common: "Function name was web search but must be a-z, A-Z, 0-9, or contain
    underscores and dashes, with a maximum length of 64."."""
    request = [HumanMessage("hi"), ai_calls(call(C1, "web search")), result(C1, name="web search")]
    assert found(request, "mistral") == [(1, "tool-name-format"), (2, "tool-name-format")]
    assert found(request, "openai") == []


@pytest.mark.parametrize(("length", "expected"), [(40, []), (41, [(1, "tool-call-id-too-long")])])
def test_openai_tool_call_ids_have_at_most_40_characters(
    length: int, expected: list[tuple[int, str]]
) -> None:
    """OpenAI: "Invalid 'messages[1].tool_calls[0].id': string too long. Expected a string with
    maximum length 40, but got a string with length 41 instead."."""
    call_id = "a" * length
    request = [HumanMessage("hi"), ai_calls(call(call_id)), result(call_id)]
    assert found(request, "openai") == expected


MALFORMED: dict[str, list[Any]] = {
    "mid system": MID_SYSTEM,
    "system then assistant": [SystemMessage("s"), AIMessage("a"), HumanMessage("b")],
    "empty assistant": [HumanMessage("hi"), AIMessage(""), HumanMessage("?")],
    "reused id": [
        HumanMessage("a"),
        ai_calls(call(C1)),
        result(C1),
        ai_calls(call(C1)),
        result(C1),
    ],
    "bad id": [HumanMessage("a"), ai_calls(call("x.y")), result("x.y")],
    "long id": [HumanMessage("a"), ai_calls(call("b" * 41)), result("b" * 41)],
    "bad name": [HumanMessage("a"), ai_calls(call(C1, "a b")), result(C1)],
    "orphan": [HumanMessage("a"), result(C1)],
}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_strict_flags_every_rule_any_hosted_profile_flags(name: str) -> None:
    request = MALFORMED[name]
    flagged_somewhere = set().union(*(rules(request, p) for p in HOSTED_PROFILES))
    assert flagged_somewhere
    assert rules(request, "strict") >= flagged_somewhere


# --- The validator's own contract -----------------------------------------------------------


def test_unknown_provider_names_the_setting_and_the_choices() -> None:
    with pytest.raises(
        ValueError, match=r"provider must be one of 'openai', .*'strict'; got 'claude'"
    ):
        validate_messages([HumanMessage("hi")], provider="claude")


def test_violations_come_in_message_order() -> None:
    request = [
        AIMessage("first"),
        result(C1),
        HumanMessage("a"),
        HumanMessage("b"),
        ai_calls(call(C2)),
    ]
    indices = [v.index for v in validate_messages(request, provider="strict")]
    assert indices == sorted(indices)
    assert len(indices) >= 5


def test_violation_is_frozen() -> None:
    violation = Violation(index=0, rule="orphan-tool-result", message="m")
    with pytest.raises(dataclasses.FrozenInstanceError):
        violation.index = 1  # type: ignore[misc]


# --- Independent oracle: Mistral's own validator ------------------------------------------


@pytest.mark.parametrize("name", list(LEGAL))
def test_legal_requests_pass_mistral_common_and_our_mistral_profile(name: str) -> None:
    accepted, reason = mistral_common_accepts(LEGAL[name])
    assert accepted, reason
    assert validate_messages(LEGAL[name], provider="mistral") == []


REJECTED_BY_MISTRAL: dict[str, list[Any]] = {
    "orphan result": [HumanMessage("hi"), result(C1)],
    "result after a user message": [
        HumanMessage("hi"),
        ai_calls(call(C1)),
        HumanMessage("hurry"),
        result(C1),
    ],
    "result after the system prompt": [SystemMessage("s"), result(C1), HumanMessage("hi")],
    "trailing assistant": [HumanMessage("hi"), AIMessage("Hello")],
    "trailing tool call": [HumanMessage("hi"), ai_calls(call(C1))],
    "bad tool-call id": [HumanMessage("hi"), ai_calls(call("call_1")), result("call_1")],
    "unanswered parallel call": [HumanMessage("hi"), ai_calls(call(C1), call(C2)), result(C1)],
    "duplicate result": [HumanMessage("hi"), ai_calls(call(C1)), result(C1), result(C1)],
    "duplicate call id": [HumanMessage("hi"), ai_calls(call(C1), call(C1)), result(C1), result(C1)],
    "result for another call": [HumanMessage("hi"), ai_calls(call(C1)), result(C2)],
    "bad tool name": [HumanMessage("hi"), ai_calls(call(C1, "web search")), result(C1)],
    "empty request": [],
    "assistant first": [AIMessage("Hello")],
}


@pytest.mark.parametrize("name", list(REJECTED_BY_MISTRAL))
def test_requests_mistral_common_rejects_are_flagged_by_our_mistral_profile(name: str) -> None:
    request = REJECTED_BY_MISTRAL[name]
    accepted, reason = mistral_common_accepts(request)
    assert not accepted, "mistral_common accepted a request this test expects it to reject"
    assert reason
    assert validate_messages(request, provider="mistral"), f"mistral_common said: {reason}"


def test_oracle_sends_invalid_tool_calls_like_langchain_openai() -> None:
    """convert_to_openai_messages drops invalid tool calls; the oracle must not, or the
    answered invalid call below would look like an orphan result to mistral_common."""
    request = LEGAL["invalid tool call answered"]
    assert mistral_common_accepts(request) == (True, "")
    without_result = [*request[:-1], HumanMessage("next")]
    assert mistral_common_accepts(without_result)[0] is False


def test_mistral_rejects_a_system_message_after_a_tool_message() -> None:
    """mistral_common: "Unexpected role 'system' after role 'tool'"."""
    from tests.oracles import mistral_common_accepts

    request = [
        HumanMessage("go"),
        AIMessage("", tool_calls=[{"name": "grep", "args": {}, "id": "abcDEF123"}]),
        ToolMessage("found", tool_call_id="abcDEF123"),
        SystemMessage("be brief"),
        HumanMessage("and now?"),
    ]
    accepted, reason = mistral_common_accepts(request)
    assert not accepted and "Unexpected role" in reason
    rules = [v.rule for v in validate_messages(request, provider="mistral")]
    assert rules == ["system-after-assistant-or-tool"]
    assert "system-after-assistant-or-tool" not in [
        v.rule for v in validate_messages(request, provider="openai")
    ]
