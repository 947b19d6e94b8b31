"""One state per conversation: found by thread, bounded, incremental, deterministic."""

import asyncio
import gc
import threading
import tracemalloc
import weakref
from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    messages_from_dict,
    messages_to_dict,
)

from langchain_context_governance import ContextGovernor
from langchain_context_governance.state.conversation import Conversations, ConversationState
from langchain_context_governance.state.repair_stream import RepairStream
from tests.builders import ai_calls, block_texts, call, result, tool_loop


def governor(**settings) -> ContextGovernor:
    return ContextGovernor(**{"context_window_tokens": 8_000, "max_output_tokens": 500, **settings})


def damaged_loop(iterations: int) -> list[BaseMessage]:
    """A tool loop whose third call was interrupted, then a trailing assistant message."""
    history = tool_loop(iterations, size=900)
    interrupted = [ai_calls(call("lost")), HumanMessage("where was I?"), AIMessage("here")]
    return [*history[:6], *interrupted, *history[6:]]


def grow(history: list[BaseMessage], n: int) -> list[BaseMessage]:
    return [*history, ai_calls(call(f"g{n}")), result(f"g{n}", "z" * 700)]


def reloaded(history: list[BaseMessage]) -> list[BaseMessage]:
    """What a checkpointer gives back: equal messages, new objects."""
    return messages_from_dict(messages_to_dict(history))


def test_many_threads_each_keep_their_state_and_prefix_report():
    shared = governor()
    histories = {f"t{k}": tool_loop(3 + k % 5, size=600 + 37 * k) for k in range(40)}
    for step in range(6):
        for thread_id in histories:
            histories[thread_id] = grow(histories[thread_id], step)
            report = shared.govern(histories[thread_id], thread_id=thread_id).report
            if step > 0:
                assert report.unchanged_prefix_messages is not None, thread_id
    assert len(shared._conversations) == 40


def test_the_number_of_conversations_is_bounded():
    shared = governor(max_conversations=3)
    for k in range(10):
        shared.govern(tool_loop(2), thread_id=f"t{k}")
    assert len(shared._conversations) == 3


def test_bad_max_conversations_is_named():
    with pytest.raises(ValueError, match="max_conversations"):
        governor(max_conversations=0)


def test_requests_do_not_depend_on_the_path_two_workers_or_a_restart():
    """Call by call on one governor, at once on another, on a reloaded history: equal."""
    # No result is compactable here, so the window has to cut.
    settings = {"high_watermark": 0.6, "low_watermark": 0.3, "exclude_tools": {"read_file"}}
    worker = governor(**settings)
    history = damaged_loop(4)
    for n in range(40):
        history = grow(history, n)
        result = worker.govern(history, thread_id="t")
    incremental = result.messages
    fresh = governor(**settings)
    assert fresh.govern(history, thread_id="t").messages == incremental
    assert worker.govern(reloaded(history), thread_id="t").messages == incremental
    assert result.report.changes["snip_history"] > 0, "the window never cut"


def test_an_old_defect_is_repaired_once_not_on_every_call():
    groups_read: list[int] = []

    def counting_repair(group, declared_before):
        groups_read.append(len(group))
        return group, {}

    stream = RepairStream(repair_group=counting_repair, count_message=lambda m: 1)
    history = damaged_loop(30)
    stream.read(history)
    first = len(groups_read)
    for n in range(5):
        history = grow(history, n)
        groups_read.clear()
        stream.read(history)
        # the pending last group of the previous call, and the new group
        assert len(groups_read) <= 2
    assert first > 30


def test_damaged_history_repairs_are_identical_on_every_call():
    shared = governor()
    history = damaged_loop(3)
    requests = []
    for n in range(3):
        history = grow(history, n)
        requests.append(shared.govern(history, thread_id="t").messages)
    placeholders = [
        [m for m in request if isinstance(m, ToolMessage) and m.tool_call_id == "lost"]
        for request in requests
    ]
    assert all(len(found) == 1 for found in placeholders)
    assert placeholders[0][0].id and placeholders[0] == placeholders[1] == placeholders[2]


def test_a_reloaded_history_is_counted_from_the_cache():
    shared = governor()
    history = tool_loop(20, size=800)
    shared.govern(history, thread_id="t")
    misses = shared.counter.cache_stats().misses
    shared.govern(reloaded(history), thread_id="t")
    assert shared.counter.cache_stats().misses == misses


def test_no_message_of_an_idle_conversation_is_kept_alive():
    # Watermarks at which the request holds compacted copies (it does not only cut).
    shared = governor(high_watermark=0.6, low_watermark=0.3)
    history = tool_loop(30, size=900)
    result = shared.govern(history, thread_id="t")
    assert result.report.changes["microcompact"] > 0
    request = result.messages
    del result
    watched = [weakref.ref(message) for message in history]
    del history, request
    gc.collect()
    assert all(ref() is None for ref in watched)


def test_an_edited_history_starts_over_with_the_same_result_as_a_fresh_governor():
    shared = governor()
    history = tool_loop(10, size=900)
    shared.govern(history, thread_id="t")
    edited = [history[0], HumanMessage("a different task"), *history[2:]]
    assert shared.govern(edited, thread_id="t").messages == governor().govern(edited).messages


def test_without_a_thread_conversations_are_told_apart_by_their_history():
    shared = governor()
    histories = [[SystemMessage(f"agent {k}"), *tool_loop(4 + k, size=700)] for k in range(6)]
    for step in range(3):
        for k, history in enumerate(histories):
            histories[k] = grow(history, step)
            report = shared.govern(histories[k]).report
            expected = governor().govern(histories[k]).messages
            assert shared.govern(histories[k]).messages == expected
            if step > 0:
                assert report.unchanged_prefix_messages is not None


def test_threads_of_one_governor_run_side_by_side_with_the_right_results():
    shared = governor()
    histories = {f"t{k}": tool_loop(15 + k, size=500 + 50 * k) for k in range(6)}
    expected = {t: governor().govern(h).messages for t, h in histories.items()}
    outputs: dict[str, list[BaseMessage]] = {}
    errors: list[BaseException] = []

    def run(thread_id: str) -> None:
        try:
            for _ in range(5):
                outputs[thread_id] = shared.govern(
                    histories[thread_id], thread_id=thread_id
                ).messages
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)

    threads = [threading.Thread(target=run, args=(t,)) for t in histories]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert outputs == expected


async def test_async_calls_of_many_threads_and_of_one_busy_thread():
    shared = governor()
    histories = {f"t{k}": tool_loop(10 + k, size=600) for k in range(8)}
    expected = {t: governor().govern(h).messages for t, h in histories.items()}
    config = lambda t: {"configurable": {"thread_id": t}}  # noqa: E731
    results = await asyncio.gather(
        *(shared.ainvoke(histories[t], config(t)) for t in histories),
        *(shared.ainvoke(histories["t0"], config("t0")) for _ in range(3)),
    )
    assert results[: len(histories)] == list(expected.values())
    assert all(result == expected["t0"] for result in results[len(histories) :])


def test_a_busy_conversation_is_governed_from_a_fresh_state():
    shared = governor()
    history = tool_loop(5)
    state = shared._conversations.state_for("t", lambda: history)
    with state.lock:
        assert shared.govern(history, thread_id="t").messages == governor().govern(history).messages


def test_conversations_lookup_example_state_type():
    def new_state() -> ConversationState:
        stream = RepairStream(repair_group=lambda m, d: (m, {}), count_message=lambda m: 1)
        return ConversationState(stream, None)

    conversations = Conversations(new_state, max_conversations=2)
    first = conversations.state_for("a", list)
    assert conversations.state_for("a", list) is first
    conversations.state_for("b", list)
    conversations.state_for("c", list)
    assert conversations.state_for("a", list) is not first


def test_tools_alternating_per_call_keep_the_conversation_s_state(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two tool sets taking turns: each call replays what is new, never the history."""
    from langchain_context_governance.state.cache_aware import CacheAwareReplay

    replayed: list[int] = []
    add = CacheAwareReplay._add

    def counting_add(self: CacheAwareReplay, *args: Any, **kwargs: Any) -> None:
        replayed.append(1)
        add(self, *args, **kwargs)

    monkeypatch.setattr(CacheAwareReplay, "_add", counting_add)
    small = {"type": "function", "function": {"name": "grep", "description": "g", "parameters": {}}}
    large = {
        "type": "function",
        "function": {"name": "read_file", "description": "r" * 4_000, "parameters": {}},
    }
    shared = governor(context_window_tokens=64_000)
    history = tool_loop(500, size=300)
    fresh = governor(context_window_tokens=64_000)
    for n in range(40):
        history = grow(history, n)
        tools = [small] if n % 2 else [small, large]
        replayed.clear()
        result = shared.govern(history, thread_id="t", tools=tools)
        assert result.messages == fresh.govern(history, tools=tools).messages
        if n >= 2:
            # What is new since that tool set's last call, not the 1,000 messages before.
            assert len(replayed) <= 16, (n, len(replayed))
    assert len(history) > 1_000


def test_no_state_serves_another_conversation_s_message_objects() -> None:
    """Two conversations whose text is equal: each request carries its own objects.

    The mistral profile rewrites these call ids, so the repair makes the messages anew;
    the tool results differ only in what is not compared by text (artifact, status).
    """
    shared = governor(provider="mistral")

    def conversation(owner: str, status: str) -> list[BaseMessage]:
        return [
            HumanMessage("look it up"),
            AIMessage("", tool_calls=[call("call_lookup_0001")]),
            ToolMessage("found", tool_call_id="call_lookup_0001", artifact=owner, status=status),
            HumanMessage("and now?"),
        ]

    first = shared.govern(conversation("A", "error")).messages
    second = shared.govern(conversation("B", "success")).messages
    (first_result,) = [m for m in first if isinstance(m, ToolMessage)]
    (second_result,) = [m for m in second if isinstance(m, ToolMessage)]
    assert first_result.tool_call_id != "call_lookup_0001", "the profile did not rewrite the id"
    assert (first_result.artifact, first_result.status) == ("A", "error")
    assert (second_result.artifact, second_result.status) == ("B", "success")


def test_a_conversation_s_state_keeps_no_copy_of_large_messages() -> None:
    """Two 50 KB user messages merged into one turn: the state keeps a recipe, not a copy,
    so what it keeps does not grow with the size of the messages."""
    shared = governor(context_window_tokens=200_000)
    shared.govern(tool_loop(3), thread_id="warm-up")

    def play(thread_id: str, size: int) -> None:
        history = [*tool_loop(20, size=400), HumanMessage("a" * size), HumanMessage("b" * size)]
        result = shared.govern(history, thread_id=thread_id)
        assert any(len(str(m.content)) >= 2 * size for m in result.messages), "not merged"
        history = [*history, ai_calls(call("late")), result_message("late")]
        shared.govern(history, thread_id=thread_id)

    small = retained_by(lambda: play("small", 10))
    large = retained_by(lambda: play("large", 50_000))
    assert large < 24 * 1024, large
    assert large - small < 2 * 1024, (small, large)


def retained_by(play: Callable[[], None]) -> int:
    """Bytes still allocated after `play` ran and what it made was dropped (tracemalloc)."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        play()
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


def result_message(call_id: str) -> ToolMessage:
    return result(call_id, "done")


def test_a_reloaded_history_found_by_lookup_is_compared_by_key_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without a thread, the lookup compares the history with each conversation's; the
    call then reads it without comparing its keys again, and still as a reloaded history
    (nothing made of the objects read before is sent)."""
    from langchain_context_governance.state import repair_stream

    compared: list[int] = []
    message_keys_and_text = repair_stream.message_keys_and_text

    def counting(messages: Any) -> Any:
        compared.append(len(messages))
        return message_keys_and_text(messages)

    monkeypatch.setattr(repair_stream, "message_keys_and_text", counting)
    stream = RepairStream(repair_group=lambda m, d: (m, {}), count_message=lambda m: 1)
    history = tool_loop(20, size=800)
    stream.read(history)
    again = reloaded(history)
    compared.clear()
    assert stream.continued_by(again)
    read = stream.read(again)
    assert sum(count > 10 for count in compared) == 1
    assert not read.restarted and not read.history.same_objects
    assert stream.read(again).history.same_objects
    shared = governor(high_watermark=0.5, low_watermark=0.2)
    histories = [[SystemMessage(f"agent {k}"), *tool_loop(30, size=900)] for k in range(2)]
    for history in histories:
        shared.govern(history)
    for history in histories:
        copy = reloaded(history)
        assert (
            shared.govern(copy).messages
            == governor(high_watermark=0.5, low_watermark=0.2).govern(history).messages
        )


def test_after_a_cut_the_state_keeps_no_user_words_of_a_dropped_history() -> None:
    """The latest user message pinned across a cut is joined with the note (separate
    blocks); the joined turn is kept between calls only while the history lives, so what
    a conversation keeps does not grow with the size of its user messages."""
    shared = governor(context_window_tokens=60_000, max_output_tokens=1_000, keep_recent=1_000)
    shared.govern(tool_loop(3), thread_id="warm-up")

    def play(thread_id: str, size: int) -> None:
        users = [HumanMessage("a" * size), AIMessage("ok"), HumanMessage("b" * size)]
        history = [*tool_loop(2), *users, *tool_loop(80, size=3_000)[2:]]
        result = shared.govern(history, thread_id=thread_id)
        assert result.report.cut, "no cut"
        assert any("b" * size in block_texts(m) for m in result.messages), "not pinned"

    small = retained_by(lambda: play("small", 10))
    large = retained_by(lambda: play("large", 50_000))
    assert large - small < 4 * 1024, (small, large)
