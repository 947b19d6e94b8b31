"""Thinking agents replayed call by call: no governed request sends reasoning behind a
prefix that changed since the request it was made from.

The histories are thinking agents' (benchmarks/thinking.py: every response opens with a
signed thinking block, or an OpenAI reasoning item, as the real clients build them; see
the fixtures of test_wire_reasoning.py). The governor builds the request before every
assistant message, the history's message is the model's answer to it, and the prefix
oracle (tests/prefix_oracle.py) judges every later request on what langchain-anthropic
and langchain-openai put on the wire, under budgets that force compaction, cuts and the
last resort.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    messages_to_dict,
)
from langchain_openai import ChatOpenAI

from benchmarks.thinking import build_thinking_history
from langchain_context_governance import ContextGovernor, validate_messages
from langchain_context_governance._reasoning import reasoning_left_out
from langchain_context_governance.policy.left_out import MAX_RANGES
from langchain_context_governance.rules.validate import PROVIDERS
from tests.prefix_oracle import PrefixOracle
from tests.wire import LoopbackTransport, RecordingServer

Request = Callable[[list[BaseMessage]], tuple[list[BaseMessage], Any]]


def history_tokens(history: list[BaseMessage]) -> int:
    return ContextGovernor().count_tokens(history)


def thinking_history(seed: int, shape: str = "anthropic") -> list[BaseMessage]:
    return build_thinking_history(seed=seed, turns=3, iterations=(2, 6), shape=shape)


def governor_for(history: list[BaseMessage], share: float, **settings: Any) -> ContextGovernor:
    budget = max(int(history_tokens(history) * share), 1)
    return ContextGovernor(
        context_window_tokens=budget, max_output_tokens=0, safety_buffer=0, **settings
    )


def calls(history: list[BaseMessage]) -> list[int]:
    """Where the agent called the model: before each assistant message, and at the end."""
    return [i for i, m in enumerate(history) if isinstance(m, AIMessage)] + [len(history)]


def replay(
    history: list[BaseMessage], request: Request, oracle: PrefixOracle
) -> Iterator[tuple[int, list[BaseMessage], Any]]:
    """Each call's request and report, the oracle told what every answer was made from."""
    for call in calls(history):
        sent, report = request(history[:call])
        yield call, sent, report
        if call < len(history):
            answer = history[call]
            assert isinstance(answer, AIMessage)
            oracle.made_from(sent, answer)


def one_governor(governor: ContextGovernor) -> Request:
    def request(messages: list[BaseMessage]) -> tuple[list[BaseMessage], Any]:
        result = governor.govern(messages, thread_id="agent")
        return result.messages, result.report

    return request


@pytest.fixture(autouse=True)
def quiet_warnings(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, logger="langchain_context_governance")


# --- the prefix check, on every budget that edits -----------------------------------------


@pytest.mark.parametrize("compaction", ["cache_aware", "keep_recent"])
@pytest.mark.parametrize("share", [0.4, 0.15, 0.1])
def test_no_request_sends_thinking_behind_a_changed_prefix(compaction: str, share: float) -> None:
    """At 40% the history is compacted and cut, at 15% and 10% the last resort cuts text
    too; every request is legal and every thinking block it sends is valid."""
    sent_valid = left_out = truncated = 0
    for seed in (1, 2):
        history = thinking_history(seed)
        governor = governor_for(history, share, provider="anthropic", compaction=compaction)
        oracle = PrefixOracle()
        for call, request, report in replay(history, one_governor(governor), oracle):
            assert validate_messages(request, provider="anthropic") == [], call
            verdict = oracle.check(request)
            assert verdict.invalid == () and verdict.unknown == (), (call, verdict)
            sent_valid += len(verdict.valid)
            left_out += len(report.reasoning_dropped)
            truncated += bool(report.truncated)
            for index in report.reasoning_dropped:
                assert isinstance(history[index], AIMessage)
    assert sent_valid and left_out, "the budget edits, and the newest thinking is sent"
    if share < 0.2:
        assert truncated, "the last resort ran"


def test_each_left_out_message_is_sent_without_its_thinking_and_listed() -> None:
    history = thinking_history(3)
    governor = governor_for(history, 0.3, provider="anthropic")
    result = governor.govern(history)
    sent_ids = {m.id: m for m in result.messages if isinstance(m, AIMessage)}
    without = sorted(
        index
        for index, message in enumerate(history)
        if message.id in sent_ids and reasoning_left_out(sent_ids[message.id])
    )
    assert without and list(result.report.reasoning_dropped) == without
    for index in without:
        content = sent_ids[history[index].id].content
        assert all(block["type"] != "thinking" for block in content)  # type: ignore[index]


def test_the_warning_is_logged_once_per_conversation(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="langchain_context_governance")
    history = thinking_history(4)
    governor = governor_for(history, 0.3, provider="anthropic")
    dropped = 0
    for call in calls(history):
        dropped += bool(governor.govern(history[:call], thread_id="t").report.reasoning_dropped)
    warnings = [r for r in caplog.records if "reasoning (thinking blocks" in r.getMessage()]
    assert dropped > 1 and len(warnings) == 1
    assert "left out" in warnings[0].getMessage()


# --- the same requests on every worker ----------------------------------------------------


def test_every_worker_sends_the_same_requests() -> None:
    """One governor, a new one each call given the previous record (another worker), and a
    new one each call with no record (a restart) send identical requests; the record's
    left-out ranges stay bounded."""
    history = thinking_history(5)
    budget_of = governor_for(history, 0.3, provider="anthropic").context_window_tokens

    def make() -> ContextGovernor:
        return ContextGovernor(
            context_window_tokens=budget_of,
            max_output_tokens=0,
            safety_buffer=0,
            provider="anthropic",
        )

    same = make()
    record: dict[str, Any] | None = None
    for call in calls(history):
        prefix = history[:call]
        warm = same.govern(prefix, thread_id="t")
        moved = make().govern(prefix, thread_id="t", record=record)
        cold = make().govern(prefix, thread_id="t")
        record = moved.record
        expected = messages_to_dict(warm.messages)
        assert messages_to_dict(moved.messages) == expected, call
        assert messages_to_dict(cold.messages) == expected, call
        assert moved.report.reasoning_dropped == warm.report.reasoning_dropped
        assert record is not None
        left_out = record["resume"]["replay"]["decisions"]["left_out"]
        assert len(left_out) <= MAX_RANGES
        assert all(0 <= low < high <= call + 1 for low, high in left_out)


def test_an_unusable_left_out_record_is_rebuilt_to_the_same_request() -> None:
    history = thinking_history(6)
    governor = governor_for(history, 0.3, provider="anthropic")
    result = governor.govern(history, thread_id="t")
    assert result.record is not None
    tampered = json.loads(json.dumps(result.record))
    tampered["resume"]["replay"]["decisions"]["left_out"] = [[0, 10**9]]
    other = governor_for(history, 0.3, provider="anthropic")
    again = other.govern(history, thread_id="t", record=tampered)
    assert messages_to_dict(again.messages) == messages_to_dict(result.messages)


# --- every profile ----------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_every_profile_stays_legal(provider: str) -> None:
    history = thinking_history(7)
    governor = governor_for(history, 0.2, provider=provider)
    oracle = PrefixOracle()
    binds = provider in ("anthropic", "strict")
    for call, request, _ in replay(history, one_governor(governor), oracle):
        assert validate_messages(request, provider=provider) == [], (provider, call)
        if binds:
            verdict = oracle.check(request)
            assert verdict.invalid == () and verdict.unknown == (), (call, verdict)


# --- the real clients' payloads ---------------------------------------------------------


def sent_body(server: RecordingServer, client: Any, messages: list[BaseMessage]) -> Any:
    server.take()
    client.invoke(messages)
    [captured] = server.take()
    return captured.body


def test_what_langchain_anthropic_sends_passes_the_prefix_check() -> None:
    history = thinking_history(8)
    governor = governor_for(history, 0.15, provider="anthropic")
    oracle = PrefixOracle()
    with RecordingServer() as server:
        client = ChatAnthropic(
            model_name="claude-fable-5-1",
            api_key="sk-wire",
            base_url=f"{server.base_url}/anthropic",
            max_retries=0,
            timeout=10,
            stop=None,
        )
        checked = 0
        for call in calls(history):
            body = sent_body(server, client, governor.invoke(history[:call]))
            verdict = oracle.check_body(body)
            assert verdict.invalid == () and verdict.unknown == (), (call, verdict)
            checked += len(verdict.valid)
            if call < len(history):
                answer = history[call]
                assert isinstance(answer, AIMessage)
                oracle.made_from_body(body, answer)
    assert checked


def test_what_langchain_openai_sends_keeps_reasoning_items_behind_their_prefix() -> None:
    """OpenAI drops a reasoning item after a prefix change; the governor leaves it out
    itself, with the ids of its response's items (else: "function_call was provided
    without its required reasoning item")."""
    history = thinking_history(9, shape="openai")
    governor = governor_for(history, 0.2, provider="openai")
    oracle = PrefixOracle(openai=True)
    with RecordingServer() as server:
        client = ChatOpenAI(
            model="gpt-5.5",
            api_key="sk-wire",
            max_retries=0,
            use_responses_api=True,
            http_client=httpx.Client(transport=LoopbackTransport(server.base_url, "openai")),
        )
        left_out = 0
        for call in calls(history):
            result = governor.govern(history[:call])
            left_out += len(result.report.reasoning_dropped)
            body = sent_body(server, client, result.messages)
            verdict = oracle.check_body(body)
            assert verdict.invalid == () and verdict.unknown == (), (call, verdict)
            items = body["input"]
            reasoning = {i for i, item in enumerate(items) if item.get("type") == "reasoning"}
            for index, item in enumerate(items):
                if item.get("type") == "function_call" and "id" in item:
                    before = index - 1
                    while before >= 0 and items[before].get("type") == "function_call":
                        before -= 1
                    assert before in reasoning or items[before].get("role") == "assistant"
            if call < len(history):
                answer = history[call]
                assert isinstance(answer, AIMessage)
                oracle.made_from_body(body, answer)
    assert left_out


# --- the providers' compaction ----------------------------------------------------------


def with_server_compaction(
    history: list[BaseMessage], at: int, block: dict[str, Any]
) -> list[BaseMessage]:
    """`history` where the response at `at` came back from a compaction: the block first."""
    message = history[at]
    assert isinstance(message, AIMessage) and isinstance(message.content, list)
    compacted = message.model_copy(update={"content": [block, *message.content]})
    return [*history[:at], compacted, *history[at + 1 :]]


ANTHROPIC_BLOCK = {"type": "compaction", "content": "Summary: fixed two bugs.", "signature": "EuYB"}
OPENAI_ITEM = {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAcmp"}


@pytest.mark.parametrize(
    ("provider", "shape", "block"),
    [("anthropic", "anthropic", ANTHROPIC_BLOCK), ("openai", "openai", OPENAI_ITEM)],
)
def test_a_provider_compaction_stands_for_everything_before_it(
    provider: str, shape: str, block: dict[str, Any]
) -> None:
    history = thinking_history(10, shape=shape)
    at = calls(history)[len(calls(history)) // 2]
    history = with_server_compaction(history, at, block)
    governor = governor_for(history[at:], 0.6, provider=provider)
    oracle = PrefixOracle(openai=provider == "openai")
    for call, request, report in replay(history, one_governor(governor), oracle):
        assert validate_messages(request, provider=provider) == [], call
        verdict = oracle.check(request)
        assert verdict.invalid == () and verdict.unknown == (), (call, verdict)
        if call <= at:
            continue
        sent_ids = {m.id for m in request}
        assert not sent_ids & {m.id for m in history[1:at]}, "the summarized part was sent"
        assert report.cut[0] == (1, at) and report.messages_before == call
        compactions = [m for m in request if m.id == history[at].id]
        if compactions:
            assert compactions[0].content[0] == block  # type: ignore[index]
            first = next(m for m in request if not isinstance(m, SystemMessage))
            if provider == "anthropic":
                assert first is compactions[0]


def test_thinking_kept_after_an_on_demand_compaction_follows_the_block_directly() -> None:
    """Compaction in the background: the summary replaced the turns sent to it, and a turn
    the model took meanwhile (with its thinking) follows the block; Anthropic keeps that
    thinking valid only where nothing comes between them."""
    history = thinking_history(11)
    at = calls(history)[3]
    kept = history[at]
    assert isinstance(kept, AIMessage)
    summary = AIMessage([ANTHROPIC_BLOCK], id="summary")
    compacted = [history[0], summary, *history[at:]]
    governor = governor_for(compacted, 1.5, provider="anthropic")
    oracle = PrefixOracle()
    # The check accepts the swap: the kept turn counts as made right after the block.
    oracle.made_from([history[0], summary], kept)
    for call in calls(compacted)[2:]:
        result = governor.govern(compacted[:call], thread_id="t")
        request = result.messages
        assert validate_messages(request, provider="anthropic") == [], call
        verdict = oracle.check(request)
        assert verdict.invalid == () and verdict.unknown == (), (call, verdict)
        assert result.report.reasoning_dropped == ()
        assert [m.id for m in request[1:3]] == ["summary", kept.id]
        if call < len(compacted):
            answer = compacted[call]
            assert isinstance(answer, AIMessage)
            oracle.made_from(request, answer)


def test_a_compaction_block_is_counted_as_what_it_costs() -> None:
    summary = "the user asked for a fix; " * 400
    block = {"type": "compaction", "content": summary, "signature": "EuYB"}
    governor = ContextGovernor()
    plain = governor.count_tokens([AIMessage(summary)])
    assert governor.count_tokens([AIMessage([block])]) >= plain
    tiktoken = ContextGovernor(token_counter="tiktoken")
    assert tiktoken.count_tokens([AIMessage([block])]) >= tiktoken.count_tokens(
        [AIMessage(summary)]
    )


def test_a_compaction_block_stays_first_and_unedited() -> None:
    """An answer that came while the summary was written follows the block: where the turn
    order joins the two assistant turns (as the API would), the block still opens them."""
    history = [
        SystemMessage("sys"),
        AIMessage([ANTHROPIC_BLOCK], id="c"),
        AIMessage("the answer that came while it was written", id="a"),
        HumanMessage("go on"),
    ]
    governed = ContextGovernor(provider="anthropic").invoke(history)
    assert validate_messages(governed, provider="anthropic") == []
    assert governed[1].content[0] == ANTHROPIC_BLOCK  # type: ignore[index]
    assert "the answer that came" in str([m.content for m in governed])


# --- when edits come ----------------------------------------------------------------------


def test_a_turn_start_edits_before_the_turn_s_reasoning_is_made() -> None:
    """Past half the way from the low to the high watermark, a call that starts a user turn
    after a thinking model's answer compacts; a call inside a tool loop at the same size
    does not (its turn's thinking stays valid), nor does one after an answer without
    reasoning (an agent that does not think keeps the high watermark)."""
    from langchain_context_governance.state.cache_aware import CacheAwareReplay
    from langchain_context_governance.tokens.counter import get_token_counter

    def loop(n: int) -> list[BaseMessage]:
        call = {"name": "read_file", "args": {}, "id": f"toolu_{n}"}
        thinking = {"type": "thinking", "thinking": "", "signature": f"s{n}"}
        return [
            AIMessage([thinking], tool_calls=[call]),
            ToolMessage("x" * 2_000, tool_call_id=f"toolu_{n}"),
        ]

    done = AIMessage([{"type": "thinking", "thinking": "", "signature": "s-done"}, "done"])
    earlier = [HumanMessage("task"), *[m for n in range(8) for m in loop(n)], done]
    counter = get_token_counter("approximate")
    size = counter.count_messages(earlier)

    def compacted(history: list[BaseMessage]) -> int:
        replay = CacheAwareReplay(max_tokens=int(size / 0.8), counter=counter)
        return replay.plan(history).compacted

    assert compacted([*earlier, HumanMessage("next task")]) > 0
    plain = [*earlier[:-1], AIMessage("done")]
    assert compacted([*plain, HumanMessage("next task")]) == 0
    in_loop = [*earlier[:-1], *loop(99)]
    assert counter.count_messages(in_loop) >= size
    assert compacted(in_loop) == 0


# --- the middleware's opt-in: Anthropic's prefix_mismatch_behavior -----------------------


@pytest.mark.parametrize("behavior", [None, "drop_block"])
def test_the_middleware_asks_anthropic_to_drop_only_where_told(
    behavior: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    from langchain.agents import create_agent

    from langchain_context_governance.middleware import (
        BINDING_CONTROLS_BETA,
        ContextGovernanceMiddleware,
    )

    caplog.set_level(logging.WARNING, logger="langchain_context_governance")
    with RecordingServer() as server:
        model = ChatAnthropic(
            model_name="claude-fable-5-1",
            api_key="sk-wire",
            base_url=f"{server.base_url}/anthropic",
            max_retries=0,
            timeout=10,
            stop=None,
        )
        server.reply_next(
            "anthropic",
            {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "claude-fable-5-1",
                "content": [{"type": "text", "text": "done"}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": 1, "output_tokens": 1},
                "input_transformations": [
                    {
                        "type": "thinking_dropped",
                        "path": "messages.1.content.0",
                        "reason": "prefix_binding_mismatch",
                    }
                ],
            },
        )
        middleware = ContextGovernanceMiddleware(
            context_window_tokens=100_000, prefix_mismatch_behavior=behavior
        )
        agent = create_agent(model, [], middleware=[middleware])
        agent.invoke({"messages": [HumanMessage("hi")]})
        [captured] = server.take()
    thinking = captured.body.get("thinking") or {}
    beta = captured.headers.get("anthropic-beta", "")
    dropped = [r for r in caplog.records if "dropped 1 thinking block" in r.getMessage()]
    if behavior is None:
        assert "block_binding" not in thinking and BINDING_CONTROLS_BETA not in beta
        assert not dropped
    else:
        assert thinking["block_binding"] == {"prefix_mismatch_behavior": behavior}
        assert BINDING_CONTROLS_BETA in beta
        assert len(dropped) == 1
    assert model.thinking is None and not model.betas  # the user's model is untouched


def test_the_middleware_refuses_an_unknown_behavior() -> None:
    from langchain_context_governance.middleware import ContextGovernanceMiddleware

    with pytest.raises(ValueError, match="prefix_mismatch_behavior"):
        ContextGovernanceMiddleware(prefix_mismatch_behavior="ignore")  # type: ignore[arg-type]
