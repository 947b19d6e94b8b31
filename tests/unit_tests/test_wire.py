"""The governed request, as each real client puts it on the wire, passes that provider's rules.

langchain-openai, langchain-anthropic, langchain-mistralai and langchain-google-genai send
their requests to a recording server on 127.0.0.1 (tests/wire.py), with dummy keys; the
captured JSON bodies are judged by the provider rules in tests/wire_rules.py, which share
no code with the package's validator. Governed histories must all pass, while the same
histories ungoverned must mostly fail, so the checks are shown to have teeth.

The clients must also send the governed request as it is: a client that warns it moved
or removed a message (ChatAnthropic moves a late system message into `system`,
ChatGoogleGenerativeAI drops an empty user message) fails the property.

One hand-written case covers an invalid tool call that ChatAnthropic leaves out of the
request (one without a name): governed, it gets no result, so no orphan tool_result reaches
Anthropic. Random histories rarely have one, so the property alone would not show it.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from langchain_context_governance import ContextGovernor
from tests.builders import ai_calls, call, result
from tests.strategies import budgets, histories
from tests.wire import (
    CLIENT_PROFILES,
    ClientRefusal,
    RecordingServer,
    WireClients,
    with_positional_call_ids,
)
from tests.wire_rules import WIRE_RULES, Payload, WireViolation, wire_violations

GEMINI = "ChatGoogleGenerativeAI"
# The same histories on every run (derandomized, no example database), so a gap that only
# some histories show is found on every run or on none, and CI cannot flake on it. No
# shrinking: each example is several HTTP round trips, and the histories are small already.
WIRE_EXAMPLES = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    phases=(Phase.explicit, Phase.generate),
    suppress_health_check=[HealthCheck.too_slow],
)
MIN_RAW_REJECTED_SHARE = 0.5


@pytest.fixture(scope="module")
def wire() -> Iterator[WireClients]:
    with RecordingServer() as server:
        yield WireClients(server)


def has_conversation(history: Sequence[BaseMessage]) -> bool:
    return any(not isinstance(message, ToolMessage) for message in history)


def governed(
    client: str, history: Sequence[BaseMessage], budget: int | None = None
) -> list[BaseMessage]:
    """The request the governor builds for `client`, within `budget` tokens if one is given."""
    governor = ContextGovernor(
        provider=CLIENT_PROFILES[client],
        context_window_tokens=budget,
        max_output_tokens=0,
        safety_buffer=0,
    )
    return governor.invoke(list(history))


def rejections(wire: WireClients, client: str, messages: Sequence[BaseMessage]) -> list[str]:
    """Why the provider would refuse what `client` sends for `messages` (empty: accepted).

    For Gemini, whose wire format has no call ids, this includes a result given to the
    wrong call: the body must not change when every call gets an id of its own.
    """
    payload = wire.send(client, messages)
    if isinstance(payload, ClientRefusal):
        return [f"client refused: {payload.error}"]
    found = [f"{v.rule} at {v.where}: {v.detail}" for v in rule_check(client, payload)]
    if client == GEMINI and payload != wire.send(client, with_positional_call_ids(messages)):
        found.append("gemini-result-paired-by-id: a function response is another call's result")
    return found


def rule_check(client: str, payload: Payload) -> list[WireViolation]:
    return wire_violations(CLIENT_PROFILES[client], payload)


# --- Properties over random and malformed histories --------------------------------------


@pytest.mark.parametrize("client", list(CLIENT_PROFILES))
@WIRE_EXAMPLES
@given(history=histories(), budget=st.one_of(st.none(), budgets))
def test_governed_requests_pass_the_provider_rules_on_the_wire(
    wire: WireClients, client: str, history: list[BaseMessage], budget: int | None
) -> None:
    if not has_conversation(history):
        return
    messages = governed(client, history, budget)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UserWarning)
        assert rejections(wire, client, messages) == []
    rewrites = [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
    assert rewrites == [], f"{client} rewrote the governed request"


@pytest.mark.parametrize("client", list(CLIENT_PROFILES))
def test_raw_histories_are_mostly_rejected_on_the_wire(wire: WireClients, client: str) -> None:
    outcomes: list[bool] = []

    @WIRE_EXAMPLES
    @given(history=histories())
    def send_raw(history: list[BaseMessage]) -> None:
        if has_conversation(history):
            outcomes.append(bool(rejections(wire, client, history)))

    send_raw()
    assert len(outcomes) >= 40
    rejected_share = sum(outcomes) / len(outcomes)
    assert rejected_share >= MIN_RAW_REJECTED_SHARE, f"{rejected_share:.0%} of raw rejected"


# --- Hand-written cases from issue 14 -----------------------------------------------------


def anthropic_style_call(content_text: str = "let me look") -> AIMessage:
    """A call that exists only as an Anthropic `tool_use` block, with no `tool_calls` entry."""
    return AIMessage(
        [
            {"type": "text", "text": content_text},
            {"type": "tool_use", "id": "toolu_01", "name": "search", "input": {"q": "x"}},
        ]
    )


CONTENT_BLOCK_CALL = [
    HumanMessage("find x"),
    anthropic_style_call(),
    ToolMessage("found x", tool_call_id="toolu_01"),
    HumanMessage("thanks, and y?"),
]


def test_chat_openai_drops_tool_use_blocks_and_orphans_their_result(wire: WireClients) -> None:
    payload = wire.send("ChatOpenAI", CONTENT_BLOCK_CALL)

    assert not isinstance(payload, ClientRefusal)
    assert [v.rule for v in rule_check("ChatOpenAI", payload)] == ["openai-tool-without-call"]


@pytest.mark.parametrize("client", ["ChatOpenAI", "ChatMistralAI"])
def test_governed_content_block_calls_pass_on_the_wire(wire: WireClients, client: str) -> None:
    assert rejections(wire, client, governed(client, CONTENT_BLOCK_CALL)) == []


INVALID_CALL_ONLY = [
    HumanMessage("look it up"),
    AIMessage(
        "",
        invalid_tool_calls=[
            {"name": "search", "args": "{not json", "id": "c1", "error": "bad json"}
        ],
    ),
    HumanMessage("try again"),
]


def test_chat_google_drops_invalid_tool_calls_and_sends_an_empty_text_part(
    wire: WireClients,
) -> None:
    payload = wire.send(GEMINI, INVALID_CALL_ONLY)

    assert not isinstance(payload, ClientRefusal)
    assert [v.rule for v in rule_check(GEMINI, payload)] == ["gemini-empty-text-part"]


def test_governed_invalid_call_only_passes_gemini_on_the_wire(wire: WireClients) -> None:
    assert rejections(wire, GEMINI, governed(GEMINI, INVALID_CALL_ONLY)) == []


REUSED_CALL_ID = [
    HumanMessage("read both files"),
    ai_calls(call("c1", path="a.py")),
    result("c1", "contents of a.py", name="read_file"),
    ai_calls(call("c1", path="b.py")),
    result("c1", "contents of b.py", name="read_file"),
]


def function_responses(payload: Payload) -> list[Any]:
    return [
        part["functionResponse"]["response"]
        for content in payload["contents"]
        for part in content["parts"]
        if "functionResponse" in part
    ]


def test_chat_google_gives_a_reused_call_id_the_first_result(wire: WireClients) -> None:
    payload = wire.send(GEMINI, REUSED_CALL_ID)

    assert not isinstance(payload, ClientRefusal)
    assert rule_check(GEMINI, payload) == []  # the API accepts it: the error is silent
    assert function_responses(payload) == [{"output": "contents of a.py"}] * 2


def test_governed_reused_call_id_reaches_gemini_with_the_right_result(wire: WireClients) -> None:
    payload = wire.send(GEMINI, governed(GEMINI, REUSED_CALL_ID))

    assert not isinstance(payload, ClientRefusal)
    assert function_responses(payload) == [
        {"output": "contents of a.py"},
        {"output": "contents of b.py"},
    ]


USER_AFTER_TOOL = [
    SystemMessage("You are a coding agent."),
    HumanMessage("read a.py"),
    ai_calls(call("a1B2c3D4e", path="a.py")),
    result("a1B2c3D4e", "print('a')", name="read_file"),
    HumanMessage("now explain it"),
]


def test_mistral_rejects_a_user_message_right_after_tool_results(wire: WireClients) -> None:
    payload = wire.send("ChatMistralAI", USER_AFTER_TOOL)

    assert not isinstance(payload, ClientRefusal)
    assert [v.rule for v in rule_check("ChatMistralAI", payload)] == ["mistral-user-after-tool"]


def test_governed_user_after_tool_passes_mistral_on_the_wire(wire: WireClients) -> None:
    assert rejections(wire, "ChatMistralAI", governed("ChatMistralAI", USER_AFTER_TOOL)) == []


# ChatAnthropic sends an invalid call as a tool_use block only when it has a name and an id.
NAMELESS_INVALID_BESIDE_VALID_CALL = [
    HumanMessage("read a.py"),
    AIMessage(
        "",
        tool_calls=[call("c1", path="a.py")],
        invalid_tool_calls=[{"name": "", "args": "{not json", "id": "c2", "error": "bad json"}],
    ),
    result("c1", "print('a')", name="read_file"),
]


def test_governed_nameless_invalid_call_passes_anthropic_on_the_wire(
    wire: WireClients,
) -> None:
    messages = governed("ChatAnthropic", NAMELESS_INVALID_BESIDE_VALID_CALL)
    assert rejections(wire, "ChatAnthropic", messages) == []


BROKEN_TOOL_ROUND = [
    SystemMessage("You are a coding agent."),
    AIMessage("Hello! What shall I do?"),
    HumanMessage("read a.py and b.py"),
    ai_calls(call("call_" + "x" * 40, path="a.py"), call("toolu.01", path="b.py")),
    result("toolu.01", "print('b')", name="read_file"),
    result("c9", "a result from nowhere", name="read_file"),
    HumanMessage("go on"),
]


@pytest.mark.parametrize("client", ["ChatOpenAI", "ChatAnthropic"])
def test_governed_broken_tool_round_passes_on_the_wire(wire: WireClients, client: str) -> None:
    assert rejections(wire, client, BROKEN_TOOL_ROUND) != []
    assert rejections(wire, client, governed(client, BROKEN_TOOL_ROUND)) == []


# --- Each check on the smallest bodies that break it --------------------------------------


def tool_call(call_id: Any) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "f", "arguments": "{}"}}


def assistant_calls(*ids: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [tool_call(i) for i in ids]}


def tool(call_id: Any) -> dict[str, Any]:
    return {"role": "tool", "content": "r", "tool_call_id": call_id}


USER = {"role": "user", "content": "hi"}


def tool_use(use_id: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": use_id, "name": "f", "input": {}}


def tool_result(use_id: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": use_id, "content": "r"}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def call_part() -> dict[str, Any]:
    return {"functionCall": {"name": "f", "args": {}}}


def response_part() -> dict[str, Any]:
    return {"functionResponse": {"name": "f", "response": {"output": "r"}}}


def contents(*turns: tuple[str, list[dict[str, Any]]]) -> Payload:
    return {"contents": [{"role": role, "parts": parts} for role, parts in turns]}


LEGAL: dict[str, Payload] = {
    "openai": {"messages": [USER, assistant_calls("call_1"), tool("call_1"), USER]},
    "anthropic": {
        "system": "be brief",
        "messages": [
            USER,
            {"role": "assistant", "content": [text("looking"), tool_use("toolu_1")]},
            {"role": "user", "content": [tool_result("toolu_1"), text("and?")]},
        ],
    },
    "mistral": {"messages": [USER, assistant_calls("a1B2c3D4e"), tool("a1B2c3D4e")]},
    "gemini": contents(
        ("user", [{"text": "hi"}]), ("model", [call_part()]), ("user", [response_part()])
    ),
}
BROKEN: list[tuple[str, str, Payload]] = [
    ("openai", "openai-tool-without-call", {"messages": [USER, tool("call_1")]}),
    (
        "openai",
        "openai-tool-without-call",
        {"messages": [USER, assistant_calls("call_1"), tool("call_2"), tool("call_1")]},
    ),
    (
        "openai",
        "openai-unanswered-tool-call",
        {"messages": [USER, assistant_calls("call_1", "call_2"), tool("call_1"), USER]},
    ),
    ("openai", "openai-tool-call-id", {"messages": [USER, assistant_calls("c" * 41), tool("c")]}),
    ("openai", "openai-tool-call-id", {"messages": [USER, assistant_calls(None), tool(None)]}),
    (
        "anthropic",
        "anthropic-first-not-user",
        {"messages": [{"role": "assistant", "content": "a"}]},
    ),
    (
        "anthropic",
        "anthropic-tool-use-without-result",
        {"messages": [USER, {"role": "assistant", "content": [tool_use("t1")]}, USER]},
    ),
    (
        "anthropic",
        "anthropic-tool-results-not-first",
        {
            "messages": [
                USER,
                {"role": "assistant", "content": [tool_use("t1")]},
                {"role": "user", "content": [text("first"), tool_result("t1")]},
            ]
        },
    ),
    (
        "anthropic",
        "anthropic-tool-result-without-use",
        {
            "messages": [
                USER,
                {"role": "assistant", "content": "a"},
                {"role": "user", "content": [tool_result("t1")]},
            ]
        },
    ),
    (
        "anthropic",
        "anthropic-duplicate-tool-use-id",
        {
            "messages": [
                USER,
                {"role": "assistant", "content": [tool_use("t1")]},
                {"role": "user", "content": [tool_result("t1")]},
                {"role": "assistant", "content": [tool_use("t1")]},
                {"role": "user", "content": [tool_result("t1")]},
            ]
        },
    ),
    (
        "anthropic",
        "anthropic-tool-use-id-format",
        {
            "messages": [
                USER,
                {"role": "assistant", "content": [tool_use("toolu.1")]},
                {"role": "user", "content": [tool_result("toolu.1")]},
            ]
        },
    ),
    (
        "anthropic",
        "anthropic-roles-alternate",
        {
            "messages": [
                USER,
                {"role": "assistant", "content": "a"},
                {"role": "assistant", "content": "b"},
                USER,
            ]
        },
    ),
    ("anthropic", "anthropic-empty-text", {"messages": [{"role": "user", "content": ""}]}),
    ("anthropic", "anthropic-empty-text", {"messages": [{"role": "user", "content": " "}]}),
    (
        "anthropic",
        "anthropic-empty-text",
        {"messages": [{"role": "user", "content": [text(""), text("x")]}]},
    ),
    ("anthropic", "anthropic-empty-text", {"system": "  ", "messages": [USER]}),
    (
        "mistral",
        "mistral-user-after-tool",
        {"messages": [USER, assistant_calls("a1B2c3D4e"), tool("a1B2c3D4e"), USER]},
    ),
    ("mistral", "mistral-tool-after-non-call", {"messages": [USER, tool("a1B2c3D4e")]}),
    ("mistral", "mistral-last-role", {"messages": [USER, {"role": "assistant", "content": "a"}]}),
    (
        "mistral",
        "mistral-calls-results-count",
        {"messages": [USER, assistant_calls("a1B2c3D4e", "b1B2c3D4e"), tool("a1B2c3D4e")]},
    ),
    (
        "mistral",
        "mistral-tool-call-id",
        {"messages": [USER, assistant_calls("call_1"), tool("call_1")]},
    ),
    (
        "mistral",
        "mistral-empty-assistant",
        {"messages": [USER, {"role": "assistant", "content": ""}, USER]},
    ),
    ("gemini", "gemini-empty-parts", contents(("user", []))),
    (
        "gemini",
        "gemini-empty-text-part",
        contents(("user", [{"text": "hi"}]), ("model", [{"text": ""}]), ("user", [{"text": "hi"}])),
    ),
    (
        "gemini",
        "gemini-call-not-after-user",
        contents(("model", [call_part()]), ("user", [response_part()])),
    ),
    (
        "gemini",
        "gemini-response-not-after-call",
        contents(("user", [{"text": "hi"}]), ("user", [response_part()])),
    ),
    (
        "gemini",
        "gemini-responses-count",
        contents(
            ("user", [{"text": "hi"}]),
            ("model", [call_part(), call_part()]),
            ("user", [response_part()]),
        ),
    ),
    ("gemini", "gemini-role", contents(("assistant", [{"text": "hi"}]))),
]


@pytest.mark.parametrize("provider", list(WIRE_RULES))
def test_a_legal_body_passes_every_check(provider: str) -> None:
    assert wire_violations(provider, LEGAL[provider]) == []


@pytest.mark.parametrize(("provider", "rule", "payload"), BROKEN)
def test_each_check_catches_the_body_its_provider_rejects(
    provider: str, rule: str, payload: Payload
) -> None:
    assert rule in {violation.rule for violation in wire_violations(provider, payload)}


def test_every_check_is_shown_to_catch_something() -> None:
    checks = {check.__name__ for checks in WIRE_RULES.values() for check in checks}
    caught = {
        check.__name__
        for provider, _, payload in BROKEN
        for check in WIRE_RULES[provider]
        if list(check(payload))
    }
    assert caught == checks
