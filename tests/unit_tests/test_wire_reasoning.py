"""Reasoning state as the real clients build it and send it back, through governance.

The recording server (tests/wire.py) answers one call with a reasoning model's response:
Anthropic thinking with a tool call, an OpenAI Responses reasoning item with its function
call, a Gemini function call with its thought signature. The client turns it into an
`AIMessage`; the governed history (with renamed call ids, parallel turns, tight budgets)
goes back through the same client, and the body it sends must carry the reasoning state
byte for byte, with the call it belongs to.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_openai import ChatOpenAI

from langchain_context_governance import ContextGovernor, validate_messages
from tests.wire import LoopbackTransport, RecordingServer, WireClients

THINKING = {
    "type": "thinking",
    "thinking": "a.py first, then its test.",
    "signature": "EqQBCkYIBRgCKkD",
}
ENCRYPTED = "gAAAAABo-encrypted-reasoning"
SIGNATURE = "c2lnbmF0dXJlIG9mIHRoZSBjYWxs"


@pytest.fixture(scope="module")
def wire() -> Iterator[WireClients]:
    with RecordingServer() as server:
        yield WireClients(server)


def reply_of(wire: WireClients, client: Any, prefix: str, response: dict[str, Any]) -> AIMessage:
    """The AIMessage `client` builds from the provider's `response`."""
    wire.server.reply_next(prefix, response)
    message = client.invoke([HumanMessage("read a.py")])
    wire.server.take()
    assert isinstance(message, AIMessage)
    return message


def sent(wire: WireClients, client: Any, messages: list[BaseMessage]) -> dict[str, Any]:
    wire.server.take()
    client.invoke(messages)
    [captured] = wire.server.take()
    return captured.body


# --- Anthropic ------------------------------------------------------------------------------


def anthropic_turn(wire: WireClients, call_id: str) -> AIMessage:
    return reply_of(
        wire,
        wire.clients["ChatAnthropic"],
        "anthropic",
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "wire",
            "content": [
                THINKING,
                {"type": "tool_use", "id": call_id, "name": "read_file", "input": {"path": "a.py"}},
            ],
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        },
    )


@pytest.mark.parametrize("budget", [None, 600, 120])
def test_anthropic_thinking_opens_the_loop_byte_for_byte(
    wire: WireClients, budget: int | None
) -> None:
    """The loop reuses an id, so the second call is renamed; the thinking block stays first."""
    first, second = anthropic_turn(wire, "toolu_01A"), anthropic_turn(wire, "toolu_01A")
    history: list[BaseMessage] = [
        HumanMessage("read a.py, then its test"),
        first,
        ToolMessage("print(1)\n" * 40, tool_call_id="toolu_01A"),
        second,
        ToolMessage("def test(): ...", tool_call_id="toolu_01A"),
    ]
    client = wire.clients["ChatAnthropic"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "never trims", for budget None
        governor = ContextGovernor.from_model(
            client, context_window_tokens=budget, max_output_tokens=0, safety_buffer=0
        )
    result = governor.govern(history)
    governed = result.messages
    assert validate_messages(governed, provider="anthropic") == []
    body = sent(wire, client, governed)
    assistants = [m for m in body["messages"] if m["role"] == "assistant"]
    assert assistants, body
    # Where compaction changed what came before a response, its thinking is left out
    # whole (its prefix changed); wherever it is sent, it opens the message unchanged.
    left_out = len(result.report.reasoning_dropped)
    assert [a["content"][0] == THINKING for a in assistants].count(False) == left_out
    assert all(b != THINKING for a in assistants for b in a["content"][1:])
    if budget is None:
        assert left_out == 0
    uses = [b["id"] for m in assistants for b in m["content"] if b["type"] == "tool_use"]
    assert len(uses) == len(set(uses))


@pytest.mark.parametrize("compaction", ["cache_aware", "keep_recent"])
@pytest.mark.parametrize("budget", [2_000, 600])
def test_anthropic_loop_is_never_cut_away_from_its_thinking(
    wire: WireClients, budget: int, compaction: str
) -> None:
    """Without interleaved thinking only the loop's first response has a thinking block.
    A cut inside the loop (what SummarizationMiddleware does, langchain#34794) would send
    the second response first, and Anthropic answers "Expected `thinking` or
    `redacted_thinking`, but found `tool_use`": the loop stays whole, its results shrink."""
    first, second = anthropic_turn(wire, "toolu_01A"), anthropic_turn(wire, "toolu_01B")
    second = second.model_copy(update={"content": second.content[1:]})
    history: list[BaseMessage] = [
        HumanMessage("read a.py, then its test"),
        first,
        ToolMessage("print(1)\n" * 800, tool_call_id="toolu_01A"),
        second,
        ToolMessage("def test(): ...\n" * 300, tool_call_id="toolu_01B"),
    ]
    client = wire.clients["ChatAnthropic"]
    governor = ContextGovernor.from_model(
        client,
        context_window_tokens=budget,
        max_output_tokens=0,
        safety_buffer=0,
        compaction=compaction,
    )
    result = governor.govern(history)
    assert result.report.within_budget
    body = sent(wire, client, result.messages)
    assistants = [m for m in body["messages"] if m["role"] == "assistant"]
    assert assistants[0]["content"][0] == THINKING
    assert [b["id"] for m in assistants for b in m["content"] if b["type"] == "tool_use"] == [
        "toolu_01A",
        "toolu_01B",
    ]


# --- OpenAI Responses -----------------------------------------------------------------------


def responses_client(wire: WireClients) -> ChatOpenAI:
    transport = LoopbackTransport(wire.server.base_url, "openai")
    return ChatOpenAI(
        model="o4-mini",
        api_key="sk-wire",
        max_retries=0,
        use_responses_api=True,
        http_client=httpx.Client(transport=transport),
    )


def openai_turn(wire: WireClients, client: ChatOpenAI, call_id: str) -> AIMessage:
    return reply_of(
        wire,
        client,
        "openai",
        {
            "id": "resp_1",
            "object": "response",
            "created_at": 0,
            "status": "completed",
            "model": "wire",
            "output": [
                {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": ENCRYPTED},
                {
                    "type": "function_call",
                    "id": "fc_1",
                    "call_id": call_id,
                    "name": "read_file",
                    "arguments": '{"path": "a.py"}',
                    "status": "completed",
                },
            ],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "usage": {
                "input_tokens": 1,
                "output_tokens": 1,
                "total_tokens": 2,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens_details": {"reasoning_tokens": 0},
            },
        },
    )


@pytest.mark.parametrize("provider", ["openai", "strict", "mistral"])
def test_openai_reasoning_item_stays_with_its_function_call(
    wire: WireClients, provider: str
) -> None:
    """Under "strict" and "mistral" the call id becomes 9 characters: the function_call item
    follows it, so the request holds one call, answered, right after its reasoning item."""
    client = responses_client(wire)
    turn = openai_turn(wire, client, "call_q8TfXpL2")
    history = [
        HumanMessage("read a.py"),
        turn,
        ToolMessage("print(1)", tool_call_id="call_q8TfXpL2"),
    ]
    governed = ContextGovernor(provider=provider).invoke(history)
    assert validate_messages(governed, provider=provider) == []
    items = sent(wire, client, governed)["input"]
    kinds = [item.get("type") for item in items]
    assert kinds == ["message", "reasoning", "function_call", "function_call_output"]
    reasoning, call, output = items[1], items[2], items[3]
    assert (reasoning["id"], reasoning["encrypted_content"]) == ("rs_1", ENCRYPTED)
    assert call["id"] == "fc_1" and call["call_id"] == output["call_id"]


# --- Gemini ---------------------------------------------------------------------------------


def gemini_turn(wire: WireClients) -> AIMessage:
    return reply_of(
        wire,
        wire.clients["ChatGoogleGenerativeAI"],
        "gemini",
        {
            "candidates": [
                {
                    "content": {
                        "role": "model",
                        "parts": [
                            {
                                "functionCall": {"name": "read_file", "args": {"path": "a.py"}},
                                "thoughtSignature": SIGNATURE,
                            }
                        ],
                    },
                    "finishReason": "STOP",
                    "index": 0,
                }
            ],
            "usageMetadata": {
                "promptTokenCount": 1,
                "candidatesTokenCount": 1,
                "totalTokenCount": 2,
            },
            "modelVersion": "wire",
        },
    )


@pytest.mark.parametrize("provider", ["gemini", "strict"])
def test_gemini_thought_signature_stays_with_its_call(wire: WireClients, provider: str) -> None:
    """The client's call ids are uuids: "strict" renames them to 9 characters, and the two
    turns here reuse one id, which "gemini" renames; the signatures follow."""
    turn = gemini_turn(wire)
    call_id = turn.tool_calls[0]["id"]
    assert turn.additional_kwargs["__gemini_function_call_thought_signatures__"] == {
        call_id: SIGNATURE
    }
    history = [
        HumanMessage("read a.py twice"),
        turn,
        ToolMessage("print(1)", tool_call_id=call_id),
        turn,
        ToolMessage("print(1) again", tool_call_id=call_id),
    ]
    governed = ContextGovernor(provider=provider).invoke(history)
    assert validate_messages(governed, provider=provider) == []
    contents = sent(wire, wire.clients["ChatGoogleGenerativeAI"], governed)["contents"]
    calls = [part for c in contents for part in c["parts"] if "functionCall" in part]
    assert [part.get("thoughtSignature") for part in calls] == [SIGNATURE, SIGNATURE]
    responses = [
        part["functionResponse"]["response"]
        for c in contents
        for part in c["parts"]
        if "functionResponse" in part
    ]
    assert responses == [{"output": "print(1)"}, {"output": "print(1) again"}]


# --- the shapes the clients build and send, kept as fixtures ---------------------------------

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "reasoning"
_USAGE = {"input_tokens": 1, "output_tokens": 1}
_RESPONSES_USAGE = {
    "input_tokens": 1,
    "output_tokens": 1,
    "total_tokens": 2,
    "input_tokens_details": {"cached_tokens": 0},
    "output_tokens_details": {"reasoning_tokens": 0},
}


def _anthropic(content: list[dict[str, Any]], stop: str) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-fable-5-1",
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": _USAGE,
    }


def _responses(output: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 0,
        "status": "completed",
        "model": "gpt-5.5",
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": _RESPONSES_USAGE,
    }


_FUNCTION_CALL = {
    "type": "function_call",
    "id": "fc_1",
    "call_id": "call_1",
    "name": "read_file",
    "arguments": '{"path": "a.py"}',
    "status": "completed",
}
# Each case: the client, its settings, the provider's response, and how the client is
# called for it.
CLIENT_CASES: dict[str, tuple[str, dict[str, Any], dict[str, Any], dict[str, Any]]] = {
    "anthropic_thinking": (
        "anthropic",
        {"thinking": {"type": "adaptive"}},
        _anthropic(
            [
                {"type": "thinking", "thinking": "", "signature": "EqQBsig1"},
                {"type": "redacted_thinking", "data": "EmwKAhred"},
                {"type": "text", "text": "Reading it."},
                {
                    "type": "tool_use",
                    "id": "toolu_01A",
                    "name": "read_file",
                    "input": {"path": "a.py"},
                },
            ],
            "tool_use",
        ),
        {},
    ),
    "anthropic_compaction": (
        "anthropic",
        {"thinking": {"type": "adaptive"}},
        _anthropic(
            [
                {
                    "type": "compaction",
                    "content": "Summary: the user asked...",
                    "signature": "EuYBcmp",
                }
            ],
            "compaction",
        ),
        {"compaction": {"type": "summarize"}, "betas": ["compact-2026-09-04"]},
    ),
    "openai_reasoning": (
        "openai",
        {"reasoning": {"effort": "high"}},
        _responses(
            [
                {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAenc"},
                _FUNCTION_CALL,
            ]
        ),
        {},
    ),
    "openai_reasoning_v1": (
        "openai",
        {"reasoning": {"effort": "high"}, "output_version": "v1"},
        _responses(
            [
                {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAenc"},
                _FUNCTION_CALL,
            ]
        ),
        {},
    ),
    "openai_compaction": (
        "openai",
        {},
        _responses(
            [
                {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAcmp"},
                {
                    "type": "message",
                    "id": "msg_1",
                    "status": "completed",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": "ok", "annotations": []}],
                },
            ]
        ),
        {},
    ),
}


def _client(wire: WireClients, prefix: str, settings: dict[str, Any]) -> Any:
    if prefix == "anthropic":
        return ChatAnthropic(
            model_name="claude-fable-5-1",
            api_key="sk-wire",
            base_url=f"{wire.server.base_url}/anthropic",
            max_retries=0,
            timeout=10,
            stop=None,
            **settings,
        )
    transport = LoopbackTransport(wire.server.base_url, "openai")
    return ChatOpenAI(
        model="gpt-5.5",
        api_key="sk-wire",
        max_retries=0,
        use_responses_api=True,
        http_client=httpx.Client(transport=transport),
        **settings,
    )


def recorded_case(wire: WireClients, name: str) -> dict[str, Any]:
    """What the client builds of the case's response, and what it sends of that message."""
    prefix, settings, response, call = CLIENT_CASES[name]
    client = _client(wire, prefix, settings)
    wire.server.take()
    wire.server.reply_next(prefix, response)
    message = client.invoke([HumanMessage("read a.py")], **call)
    wire.server.take()
    assert isinstance(message, AIMessage)
    later = [HumanMessage("read a.py"), message, HumanMessage("go on")]
    body = sent(wire, client, later)
    return {
        "response": response,
        "message": {"content": message.content, "tool_calls": message.tool_calls},
        "sent": body.get("messages", body.get("input")),
    }


@pytest.mark.parametrize("name", list(CLIENT_CASES))
def test_the_clients_build_and_send_reasoning_as_the_fixtures_say(
    wire: WireClients, name: str
) -> None:
    """langchain-anthropic and langchain-openai, offline: a thinking response, an Anthropic
    compaction block, an OpenAI reasoning item (both output formats) and compaction item.
    The fixtures are what the tests and the benchmark build their histories from."""
    fixture = json.loads((FIXTURES / f"{name}.json").read_text())
    assert json.loads(json.dumps(recorded_case(wire, name), default=str)) == fixture


def test_the_benchmark_builds_responses_as_the_clients_do() -> None:
    """benchmarks/thinking.py's responses have the blocks, keys and order of the fixtures."""
    from benchmarks.thinking import build_thinking_history

    def shape(content: list[Any]) -> list[tuple[str, list[str]]]:
        return [(block["type"], sorted(block)) for block in content]

    anthropic = json.loads((FIXTURES / "anthropic_thinking.json").read_text())["message"]
    openai = json.loads((FIXTURES / "openai_reasoning.json").read_text())["message"]
    made = build_thinking_history(seed=3, turns=1)[2]
    made_openai = build_thinking_history(seed=3, turns=1, shape="openai")[2]
    assert isinstance(made, AIMessage) and isinstance(made_openai, AIMessage)
    assert shape(made.content)[0] == shape(anthropic["content"])[0]
    assert shape(made.content)[-1] == shape(anthropic["content"])[-1]
    assert shape(made_openai.content)[0] == shape(openai["content"])[0]
    assert shape(made_openai.content)[-1] == shape(openai["content"])[-1]
