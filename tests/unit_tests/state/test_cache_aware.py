import pytest
from langchain_core.messages import HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import Runnable

from langchain_context_governance import ContextGovernor, get_token_counter
from langchain_context_governance._added import added_kind, user_parts
from langchain_context_governance.policy.compaction import (
    DEFAULT_KEEP_RECENT,
    ResultCompaction,
    compacted_placeholder,
)
from langchain_context_governance.policy.note import cut_note
from langchain_context_governance.state.cache_aware import CacheAwareReplay, compact_in_batches
from tests.builders import ai_calls, block_texts, call, result, tool_loop

COUNTER = get_token_counter("approximate")


def replay(max_tokens=6_000, keep_recent=DEFAULT_KEEP_RECENT, **settings):
    compaction = ResultCompaction(keep_recent=keep_recent)
    return CacheAwareReplay(
        max_tokens=max_tokens, counter=COUNTER, compaction=compaction, **settings
    )


def is_placeholder(message):
    return isinstance(message, ToolMessage) and message.content == compacted_placeholder(
        message.name or "read_file"
    )


def leading_identical(previous, current):
    count = 0
    for old, new in zip(previous, current, strict=False):
        if old is not new and old != new:  # the provider compares content
            break
        count += 1
    return count


def test_nothing_changes_while_under_the_high_watermark(mutation_guard):
    history = mutation_guard.watch(tool_loop(4, size=800))
    request = compact_in_batches(history, max_tokens=50_000)
    assert all(new is old for new, old in zip(request, history, strict=True))


def test_crossing_the_high_watermark_compacts_oldest_first_down_to_the_low_watermark():
    history = tool_loop(20, size=2_000)
    plan = replay(high_watermark=0.9, low_watermark=0.5, keep_recent=2).plan(history)
    compacted = [index for index, m in enumerate(plan.messages) if is_placeholder(m)]
    assert compacted, "expected a batch of compactions"
    tool_positions = [i for i, m in enumerate(plan.messages) if isinstance(m, ToolMessage)]
    assert compacted == tool_positions[: len(compacted)], "compaction must go oldest first"
    assert plan.tokens_after <= 0.9 * 6_000
    assert COUNTER.count_messages(plan.messages) == plan.tokens_after


def test_a_batch_goes_down_to_the_low_watermark():
    history = [*tool_loop(12, size=2_000), HumanMessage("and now? " + "z" * 9_500)]
    before = replay(high_watermark=0.9, low_watermark=0.55, keep_recent=0).plan(history[:-1])
    plan = replay(high_watermark=0.9, low_watermark=0.55, keep_recent=0).plan(history)
    assert (
        before.tokens_after <= 0.9 * 6_000 < COUNTER.count_messages([*before.messages, history[-1]])
    )
    assert plan.compacted > before.compacted
    # The watermarks are shares of the room left by the system message and the protected
    # messages (the task and the current turn: here the long new request).
    protected = COUNTER.count_messages([history[0], history[1], history[-1]])
    assert plan.tokens_after - protected <= 0.55 * (6_000 - protected)


def test_newest_keep_recent_results_are_never_compacted():
    plan = replay(keep_recent=3).plan(tool_loop(30, size=2_000))
    tools = [m for m in plan.messages if isinstance(m, ToolMessage)]
    assert not any(is_placeholder(m) for m in tools[-3:])


def test_incremental_replay_equals_a_fresh_replay_at_every_call():
    history = tool_loop(0)
    incremental = replay(max_tokens=4_000, keep_recent=2)
    for n in range(60):
        history = [
            *history,
            ai_calls(call(f"c{n}")),
            result(f"c{n}", "line\n" * (50 + 40 * n % 400)),
        ]
        if n % 7 == 3:
            history.append(HumanMessage(f"follow-up {n}"))
        resumed = incremental.plan(history)
        fresh = replay(max_tokens=4_000, keep_recent=2).plan(history)
        assert [m.content for m in resumed.messages] == [m.content for m in fresh.messages]
        assert resumed.tokens_after == fresh.tokens_after


def test_compacted_results_stay_compacted_and_edits_come_in_batches():
    replayed = replay(max_tokens=8_000, keep_recent=2, high_watermark=1.0, low_watermark=0.3)
    history = tool_loop(0)
    previous: list = []
    breaks = 0
    compacted_ids: set[str] = set()
    for n in range(120):
        history = [*history, ai_calls(call(f"c{n}")), result(f"c{n}", "x" * 1_600)]
        request = replayed.plan(history).messages
        now_compacted = {m.tool_call_id for m in request if is_placeholder(m)}
        still_present = {m.tool_call_id for m in request if isinstance(m, ToolMessage)}
        assert compacted_ids & still_present <= now_compacted, "a compacted result came back"
        compacted_ids |= now_compacted
        if previous and leading_identical(previous, request) < len(previous):
            breaks += 1
        previous = request
        assert COUNTER.count_messages(request) <= 8_000
    assert 0 < breaks < 20


def test_cut_keeps_the_user_request_pinned_and_whole_groups():
    replayed = replay(max_tokens=3_000, keep_recent=1)
    history = tool_loop(200, size=600)
    request = replayed.plan(history).messages
    assert isinstance(request[0], SystemMessage)
    task = request[1]
    # The note, the data turn quoting the values of what it leaves out, a user turn.
    omitted = len(history) - 1 - (len(request) - 3)
    words, note = block_texts(task)
    assert words == history[1].content
    assert note == cut_note(omitted, data=True)
    assert [kind for _, kind in user_parts(task)] == ["user", "cut-note"]
    assert added_kind(request[2]) == "cut-data"
    assert "\n[Values from them, newest first: " in request[2].text
    assert added_kind(request[3]) == "user-turn"
    assert len(request) < len(history)
    assert not isinstance(request[4], ToolMessage)
    assert COUNTER.count_messages(request) <= 3_000


def test_cache_aware_policy_keeps_more_of_the_prefix_than_keep_recent():
    def cached_share(compaction):
        governor = ContextGovernor(
            context_window_tokens=12_000, max_output_tokens=1_000, compaction=compaction
        )
        history = tool_loop(0)
        previous: list = []
        sent = cached = 0
        for n in range(150):
            size = 300 + (n * 7919) % 3_000
            history = [*history, ai_calls(call(f"c{n}")), result(f"c{n}", "y" * size)]
            request = governor.invoke(history)
            sent += governor.count_tokens(request)
            cached += governor.count_tokens(request[: leading_identical(previous, request)])
            previous = request
        return cached / sent

    assert cached_share("cache_aware") > cached_share("keep_recent") + 0.1


@pytest.mark.parametrize(
    ("settings", "name"),
    [
        ({"high_watermark": 0}, "high_watermark"),
        ({"high_watermark": 0.5, "low_watermark": 0.5}, "low_watermark"),
        ({"keep_recent": -1}, "keep_recent"),
    ],
)
def test_bad_settings_name_the_setting(settings, name):
    with pytest.raises(ValueError, match=name):
        compact_in_batches(tool_loop(2), max_tokens=1_000, **settings)


def test_runnable_form_and_input_untouched(mutation_guard):
    history = mutation_guard.watch(tool_loop(30, size=2_000))
    runnable = compact_in_batches(max_tokens=5_000, keep_recent=1)
    assert isinstance(runnable, Runnable)
    assert any(is_placeholder(m) for m in runnable.invoke(history))


def test_plan_reports_the_prefix_unchanged_since_the_previous_call():
    replayed = replay(max_tokens=50_000)
    history = tool_loop(3, size=300)
    first = replayed.plan(history)
    assert first.unchanged_prefix_messages is None
    history = [*history, ai_calls(call("next")), result("next", "more")]
    second = replayed.plan(history)
    assert second.unchanged_prefix_messages == len(first.messages)
    assert second.unchanged_prefix_tokens == first.tokens_after


def test_governor_report_shows_cache_breaks_in_an_agent_loop():
    governor = ContextGovernor(context_window_tokens=6_000, max_output_tokens=500, keep_recent=1)
    history = tool_loop(0)
    reports = []
    for n in range(40):
        history = [*history, ai_calls(call(f"c{n}")), result(f"c{n}", "z" * 1_500)]
        reports.append(governor.govern(history).report)
    assert reports[0].unchanged_prefix_messages is None
    prefixes = [r.unchanged_prefix_messages for r in reports[1:]]
    full_hits = [p == r.messages_after - 2 for p, r in zip(prefixes, reports[1:], strict=True)]
    assert sum(full_hits) > len(full_hits) / 2, "most calls only append to the previous request"
    assert not all(full_hits), "a batch must show up as a shorter unchanged prefix"
    assert all(r.unchanged_prefix_tokens <= r.tokens_after for r in reports[1:])
