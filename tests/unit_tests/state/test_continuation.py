"""A worker that takes a thread up gives the request the thread's own worker gives.

Three ways to govern each call of a growing history must give the same request: one
worker that served every call (warm, given the very objects of the call before plus what
is new), a new worker for every call given the history as new objects and the record of
the call before (the record path, as a fleet whose turns land on a new worker each time),
and a new worker without the record (first contact, a fresh replay). The record path must
also write the warm worker's record. The histories are a tool-calling agent's: cuts (with
and without a summary), results excluded from compaction, malformed stretches.
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    messages_from_dict,
    messages_to_dict,
)

from langchain_context_governance import ContextGovernor
from langchain_context_governance import governor as governor_module
from langchain_context_governance._packing import pack_ints, unpack_ints
from langchain_context_governance.state.cache_aware import CacheAwareReplay
from langchain_context_governance.state.repair_stream import RepairStream, _groups
from langchain_context_governance.state.request_assembly import RequestAssembly
from langchain_context_governance.testing import ScriptedChatModel
from tests.builders import ai_calls, call, result
from tests.strategies import histories, without_content

PROVIDERS = ("openai", "anthropic", "mistral", "strict")


def reloaded(history: Sequence[BaseMessage]) -> list[BaseMessage]:
    """What a checkpointer gives back: equal messages, new objects."""
    return messages_from_dict(messages_to_dict(list(history)))


def dumps(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    return [message.model_dump() for message in messages]


@st.composite
def agent_histories(draw: st.DrawFn) -> list[BaseMessage]:
    """A tool-calling agent's history: results of every size (some excluded from
    compaction), follow-up questions, interrupted calls, answers between turns, ids on
    every message as LangGraph gives them, and now and then something malformed."""
    messages: list[BaseMessage] = [SystemMessage("You are an agent."), HumanMessage("fix it")]
    for step in range(draw(st.integers(3, 40))):
        kind = draw(
            st.sampled_from(("call", "call", "call", "calls", "follow-up", "interrupted", "noise"))
        )
        size = draw(st.sampled_from((40, 300, 900, 2_500)))
        tool = draw(st.sampled_from(("read_file", "grep", "exec")))
        if kind == "call":
            messages += [ai_calls(call(f"c{step}", tool)), result(f"c{step}", "x" * size, tool)]
        elif kind == "calls":
            calls = [call(f"c{step}a", tool), call(f"c{step}b", "grep")]
            results = [result(f"c{step}a", f"id-{step} " * (size // 8)), result(f"c{step}b", "z")]
            messages += [ai_calls(*calls), *results]
        elif kind == "follow-up":
            messages += [AIMessage(f"done {step}"), HumanMessage(f"now step {step}")]
        elif kind == "interrupted":
            messages += [ai_calls(call(f"c{step}", tool)), HumanMessage(f"stop, {step}")]
        else:
            messages += draw(histories(max_size=3))
    return [
        message if message.id else message.model_copy(update={"id": f"m{index}"})
        for index, message in enumerate(messages)
    ]


def governor_maker(
    provider: str, window: int, *, exclude: bool, summary: bool
) -> Callable[[], ContextGovernor]:
    def make() -> ContextGovernor:
        summarizer = ScriptedChatModel(lambda request: AIMessage(f"S{len(request[2].text)}"))
        return ContextGovernor(
            provider=provider,
            context_window_tokens=window,
            max_output_tokens=200,
            safety_buffer=0,
            keep_recent=2,
            min_chars=100,
            exclude_tools={"grep"} if exclude else frozenset(),
            summary_model=summarizer if summary else None,
        )

    return make


@settings(max_examples=25, deadline=None)
@given(
    history=agent_histories(),
    provider=st.sampled_from(PROVIDERS),
    window=st.integers(1_200, 6_000),
    exclude=st.booleans(),
    summary=st.booleans(),
    steps=st.integers(3, 8),
)
def test_the_record_path_a_fresh_replay_and_the_warm_state_give_the_same_request(
    history: list[BaseMessage], provider: str, window: int, exclude: bool, summary: bool, steps: int
) -> None:
    make = governor_maker(provider, window, exclude=exclude, summary=summary)
    warm = make()
    warm_record = chain_record = None
    for step in range(1, steps + 1):
        now = history[: len(history) * step // steps]
        served = warm.govern(now, thread_id="t", record=warm_record)
        continued = make().govern(reloaded(now), thread_id="t", record=chain_record)
        assert dumps(continued.messages) == dumps(served.messages), step
        assert continued.record == served.record, step
        assert continued.report.cut == served.report.cut
        assert continued.report.unchanged_prefix_messages == served.report.unchanged_prefix_messages
        if not summary:
            # A summary is made incrementally, cut after cut: a first contact makes it anew.
            first_contact = make().govern(reloaded(now), thread_id="t")
            assert dumps(first_contact.messages) == dumps(served.messages), step
        warm_record, chain_record = served.record, continued.record


def test_a_history_edited_in_place_is_governed_as_a_fresh_replay_governs_it() -> None:
    """LangGraph's add_messages replaces a message with the same id in place: a result
    compacted to its placeholder (as `replace` mode stores it) must not be taken for the
    result a record was written after."""
    make = governor_maker("openai", 8_000, exclude=False, summary=False)
    history: list[BaseMessage] = [SystemMessage("agent", id="s"), HumanMessage("fix it", id="u")]
    for n in range(60):
        history += [
            ai_calls(call(f"c{n}", "read_file")).model_copy(update={"id": f"a{n}"}),
            result(f"c{n}", f"line {n}\n" * 120, "read_file").model_copy(update={"id": f"t{n}"}),
        ]
    outcome = make().govern(history, thread_id="t")
    edited = list(history)
    edited[5] = edited[5].model_copy(update={"content": "[compacted]"})
    continued = make().govern(reloaded(edited), thread_id="t", record=outcome.record)
    assert outcome.report.tokens_after < outcome.report.tokens_before
    assert dumps(continued.messages) == dumps(make().govern(reloaded(edited)).messages)


def agent_run(iterations: int) -> list[BaseMessage]:
    history: list[BaseMessage] = [SystemMessage("agent", id="s"), HumanMessage("fix it", id="u")]
    for n in range(iterations):
        history += [
            ai_calls(call(f"c{n}", "read_file")).model_copy(update={"id": f"a{n}"}),
            result(f"c{n}", f"line {n}\n" * 120, "read_file").model_copy(update={"id": f"t{n}"}),
        ]
    return history


def test_a_worker_given_the_record_reads_only_what_is_new(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The record carries the repairs' and the replay's decisions: a worker that never saw
    the thread repairs and replays the messages added since, not the history; without
    the record it reads the whole history."""
    make = governor_maker("openai", 8_000, exclude=False, summary=False)
    history = agent_run(200)
    outcome = make().govern(history, thread_id="t")
    assert outcome.report.cut
    history = [*history, *agent_run(203)[-6:]]
    repaired, replayed = count_calls(monkeypatch)

    continued = make().govern(reloaded(history), thread_id="t", record=outcome.record)
    # The three new groups, and the one the previous call left pending (the next message
    # could still have joined it), with their messages.
    assert (len(repaired), len(replayed)) == (4, 8)
    repaired.clear()
    replayed.clear()
    first_contact = make().govern(reloaded(history), thread_id="t")
    assert len(replayed) == len(history) and len(repaired) > 200
    assert dumps(continued.messages) == dumps(first_contact.messages)


def test_a_record_that_cannot_be_read_is_rebuilt_from_the_history() -> None:
    make = governor_maker("openai", 8_000, exclude=False, summary=False)
    history = agent_run(120)
    outcome = make().govern(history, thread_id="t")
    assert outcome.record is not None
    expected = dumps(make().govern(reloaded(history), thread_id="t").messages)
    resume = outcome.record["resume"]
    carried = resume["replay"]["compacted_tokens"][0]
    negative = pack_ints([-1] * len(unpack_ints(carried)), "i")
    not_compacted, one = pack_ints([len(history) - 1], "i"), pack_ints([1], "i")
    for damaged in (
        {**resume, "stream": {**resume["stream"], "run_positions": "q:not base64!"}},
        {**resume, "stream": {**resume["stream"], "final": 10**6}},
        {**resume, "stream": {**resume["stream"], "recipes": [[0, [9, 0, 1, 0]]]}},
        {**resume, "replay": {**resume["replay"], "tokens": "i:AAAA"}},
        {**resume, "replay": {**resume["replay"], "decisions": {"cut": "x"}}},
        {**resume, "replay": {**resume["replay"], "compacted_tokens": ["i:", "i:AAAAAA=="]}},
        {**resume, "replay": {**resume["replay"], "compacted_tokens": [carried, negative]}},
        {**resume, "replay": {**resume["replay"], "compacted_tokens": [not_compacted, one]}},
        {"stream": "nonsense"},
    ):
        record = {**outcome.record, "resume": damaged}
        governed = make().govern(reloaded(history), thread_id="t", record=record)
        assert dumps(governed.messages) == expected


def test_a_record_carries_what_the_compacted_results_sent_cost(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The worker that takes the thread up neither counts the placeholders of the
    compacted results the previous request sent nor copies one twice, and sends what a
    rebuild sends."""
    make = governor_maker("openai", 8_000, exclude=False, summary=False)
    history = agent_run(200)
    outcome = make().govern(history, thread_id="t")
    assert outcome.record is not None
    assert unpack_ints(outcome.record["resume"]["replay"]["compacted_tokens"][0])
    history = [*history, *agent_run(203)[-6:]]
    copied: list[int] = []
    compacted_copy = RequestAssembly._compacted_copy

    def counted_copy(assembly: RequestAssembly, history: Any, index: int, *rest: Any) -> Any:
        copied.append(index)
        return compacted_copy(assembly, history, index, *rest)

    monkeypatch.setattr(RequestAssembly, "_compacted_copy", counted_copy)
    continued = make().govern(reloaded(history), thread_id="t", record=outcome.record)
    assert copied and len(copied) == len(set(copied))
    monkeypatch.undo()
    first_contact = make().govern(reloaded(history), thread_id="t")
    assert dumps(continued.messages) == dumps(first_contact.messages)


def test_a_worker_taking_a_thread_up_checks_each_content_once_and_names_a_bad_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The pass that checks the record against the history also finds its contents all
    text: only the new messages are looked at again. A content emptied to None is read
    as "" (the record is still used, the request is a rebuild's); a content that cannot
    be read is a ValueError naming its index."""
    make = governor_maker("openai", 8_000, exclude=False, summary=False)
    history = agent_run(120)
    outcome = make().govern(history, thread_id="t")
    history = [*history, *agent_run(123)[-6:]]
    looked_at: list[int] = []
    readable = governor_module.readable_contents

    def counted(messages: list[BaseMessage], *, start: int = 0) -> list[BaseMessage]:
        looked_at.append(len(messages) - start)
        return readable(messages, start=start)

    monkeypatch.setattr(governor_module, "readable_contents", counted)
    make().govern(reloaded(history), thread_id="t", record=outcome.record)
    assert looked_at == [len(history) - outcome.record["resume"]["stream"]["read"]]
    monkeypatch.undo()

    emptied = reloaded(history)
    empty = next(index for index, message in enumerate(emptied) if message.content == "")
    emptied[empty] = without_content(emptied[empty])
    _, replayed = count_calls(monkeypatch)
    governed = make().govern(emptied, thread_id="t", record=outcome.record)
    assert len(replayed) < len(history) / 4
    monkeypatch.undo()
    assert dumps(governed.messages) == dumps(make().govern(emptied, thread_id="t").messages)

    unreadable = reloaded(history)
    unreadable[5] = unreadable[5].model_copy()
    unreadable[5].content = 42  # type: ignore[assignment]
    with pytest.raises(ValueError, match="message 5"):
        make().govern(unreadable, thread_id="t", record=outcome.record)


def count_calls(monkeypatch: pytest.MonkeyPatch) -> tuple[list[int], list[int]]:
    """The groups the repair stream repairs and the positions the replay reads, as calls go."""
    repaired: list[int] = []
    replayed: list[int] = []
    read_groups = RepairStream._read_groups
    add = CacheAwareReplay._add

    def counted_groups(stream: RepairStream, messages: Sequence[BaseMessage]) -> Any:
        repaired.extend(range(len(list(_groups(messages, stream._read)))))
        return read_groups(stream, messages)

    def counted_add(replay: CacheAwareReplay, history: Any, index: int, decisions: Any) -> None:
        replayed.append(index)
        add(replay, history, index, decisions)

    monkeypatch.setattr(RepairStream, "_read_groups", counted_groups)
    monkeypatch.setattr(CacheAwareReplay, "_add", counted_add)
    return repaired, replayed


def test_the_stream_lets_the_messages_go_once_the_newest_message_read_is_freed() -> None:
    """An idle conversation (its run ended, its history freed) holds no message and no
    reference per message; a later call with the history reloaded gives the same repaired
    history, and the stream then knows the new objects."""
    stream = RepairStream(repair_group=lambda group, declared: (group, {}), count_message=len_one)
    history = agent_run(4)
    first = dumps(stream.read(history).history)
    watched = [weakref.ref(message) for message in history]
    again = reloaded(history)
    del history
    gc.collect()
    assert [ref() for ref in watched] == [None] * len(watched), "the stream held a message"
    assert dumps(stream.read(again).history) == first
    pending = 2  # the last group, a call and its result, is read again with what follows
    assert stream.objects_read_in([*again, HumanMessage("next")]) == len(again) - pending


def len_one(message: BaseMessage) -> int:
    return 1
