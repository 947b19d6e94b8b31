"""The note at a cut, decided directly through a small hand-made view (no replay)."""

from __future__ import annotations

from dataclasses import replace

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage, ToolMessage

from langchain_context_governance import tuning
from langchain_context_governance._added import cut_data_turn, cut_note_turn
from langchain_context_governance.offload.items import message_item
from langchain_context_governance.offload.kept import handle_line, is_read_call, read_call
from langchain_context_governance.policy.compaction import ResultCompaction
from langchain_context_governance.policy.cut import cut_groups
from langchain_context_governance.policy.decisions import (
    NOTE_KEPT,
    NOTE_NONE,
    NOTE_PLAIN,
    NOTE_SUMMARY,
    NOTE_VALUES,
    Decisions,
    KeptGroup,
)
from langchain_context_governance.policy.front_edits import front_key
from langchain_context_governance.policy.last_resort import TRUNCATED_AT_LEAST
from langchain_context_governance.policy.note_at_cut import (
    is_brief,
    list_note,
    note_variant,
    omitted_count,
    summary_room,
    values_reserve,
)
from langchain_context_governance.policy.protection import EARLIER_USER, EXCLUDED_TOOL
from langchain_context_governance.policy.view import CacheAwareSettings
from langchain_context_governance.policy.watermarks import watermarks
from tests.builders import ai_calls, call, result
from tests.unit_tests.policy.fake_view import (
    CHARS_PER_TOKEN,
    TRANSCRIPT_LINE_TOKENS,
    FakeView,
)

SYSTEM, TASK, CALL, RESULT = 50, 20, 10, 90
SETTINGS = CacheAwareSettings(
    max_tokens=1_000, high_share=0.8, low_share=0.5, compaction=ResultCompaction(min_chars=0)
)


def loop_view(calls: int = 12, *, note: int = 0, data_frame: int = 0) -> FakeView:
    """The system message, the task and `calls` calls, result `n` naming `ORD-000n`; the
    plain note costs `note`, the data turn's frame `data_frame`."""
    messages: list[BaseMessage] = [SystemMessage("rules"), HumanMessage("the task")]
    tokens = [SYSTEM, TASK]
    for n in range(calls):
        messages += [ai_calls(call(f"c{n}", "lookup")), result(f"c{n}", f"ORD-{n:04d} shipped")]
        tokens += [CALL, RESULT]
    return FakeView(messages, tokens, SETTINGS, note=note, data_frame=data_frame)


def cut_view(*, note: int = 0, data_frame: int = 0) -> tuple[FakeView, Decisions, int]:
    """A loop view cut down to the low watermark, and the call's end."""
    view = loop_view(note=note, data_frame=data_frame)
    decisions = view.fresh_decisions()
    end = len(view.messages)
    _, low = watermarks(view, decisions, end=end)
    cut_groups(view, decisions, end=end, low=low)
    assert decisions.cut > 2 and decisions.task_pinned
    return view, decisions, end


def test_the_note_counts_what_the_cut_leaves_out_but_systems_pins_kept_groups_and_notes() -> None:
    view = loop_view()
    decisions = Decisions(cut=10, task_pinned=True)
    assert omitted_count(view, decisions) == 10 - 1 - 1

    decisions.keep(KeptGroup(start=4, stop=6, tokens=100, why=EXCLUDED_TOOL))
    decisions.keep(KeptGroup(start=7, stop=8, tokens=10, why=EARLIER_USER))
    decisions.pinned, decisions.pinned_kept = 7, True
    # The pinned message is one of the kept groups: counted once.
    assert omitted_count(view, decisions) == 10 - 1 - 1 - 3


def test_the_note_of_an_earlier_cut_is_no_message_the_note_counts() -> None:
    view = loop_view()
    governed_again = [
        *view.messages[:2],
        cut_note_turn("[20 earlier messages were left out]"),
        cut_data_turn("[Values from them: ORD-9999]"),
        *view.messages[2:],
    ]
    again = FakeView(governed_again, [SYSTEM, TASK, 15, 20, *view.tokens[2:]], SETTINGS)
    decisions = Decisions(cut=12, task_pinned=True)
    assert omitted_count(again, decisions) == 12 - 1 - 2 - 1


def test_no_note_where_the_cut_leaves_nothing_out() -> None:
    view = loop_view()
    assert note_variant(view, view.fresh_decisions(), end=len(view.messages)) == NOTE_NONE
    # Everything before the cut is sent anyway (the system message, the pinned task); the
    # request fits, so a note would.
    view = loop_view(calls=3)
    protected = replace(view.fresh_decisions(), cut=2, task_pinned=True)
    assert view.total(protected) < SETTINGS.max_tokens
    assert omitted_count(view, protected) == 0
    assert note_variant(view, protected, end=len(view.messages)) == NOTE_NONE
    assert front_key(view, protected) == ()


def summary_fitting(view: FakeView, decisions: Decisions, end: int, *, spare: int) -> str:
    """A summary whose note leaves `spare` tokens under the high watermark."""
    high, _ = watermarks(view, decisions, end=end)
    without = view.total(decisions, note=False)
    tokens = high - without - view.note - view.data_frame - spare
    chars = tokens * CHARS_PER_TOKEN - len(decisions.note_values)
    assert chars > 0
    return "s" * chars


def test_the_note_sends_the_summary_only_where_it_fits_under_the_high_watermark() -> None:
    view, decisions, end = cut_view(note=15, data_frame=20)
    view.summaries = {decisions.cut: summary_fitting(view, decisions, end, spare=0)}
    assert note_variant(view, decisions, end=end) == NOTE_SUMMARY

    view.summaries = {decisions.cut: summary_fitting(view, decisions, end, spare=-1)}
    assert note_variant(view, decisions, end=end) == NOTE_VALUES
    decisions.note_values, decisions.note_values_tokens = "", 0
    view.summaries = {decisions.cut: summary_fitting(view, decisions, end, spare=-1)}
    assert note_variant(view, decisions, end=end) == NOTE_PLAIN


def test_the_summary_room_is_what_the_high_watermark_leaves_beside_the_note() -> None:
    view, decisions, end = cut_view(note=15, data_frame=20)
    omitted = omitted_count(view, decisions)
    room = summary_room(view, decisions, omitted=omitted)

    high, _ = watermarks(view, decisions, end=end)
    frame = view.note + view.data_frame + len(decisions.note_values) // CHARS_PER_TOKEN
    assert room == high - view.total(decisions, note=False) - frame > 0
    # A summary of that size is sent, one larger is not.
    view.summaries = {decisions.cut: "s" * (room * CHARS_PER_TOKEN)}
    assert note_variant(view, decisions, end=end) == NOTE_SUMMARY
    view.summaries = {decisions.cut: "s" * ((room + 1) * CHARS_PER_TOKEN)}
    assert note_variant(view, decisions, end=end) != NOTE_SUMMARY
    assert summary_room(replace(view, note=10_000), decisions, omitted=omitted) == 0


def test_the_note_lists_the_values_of_what_the_cut_leaves_out_newest_first() -> None:
    view, decisions, end = cut_view()
    sent = {f"ORD-{n:04d}" for n in range((decisions.cut - 2) // 2, (end - 2) // 2)}
    listed = [f"ORD-{n:04d}" for n in range((decisions.cut - 2) // 2 - 1, -1, -1)]

    assert [value for value in listed if value in decisions.note_values] == listed
    positions = [decisions.note_values.index(value) for value in listed]
    assert positions == sorted(positions)  # newest first
    assert not any(value in decisions.note_values for value in sent)
    assert decisions.note_values_tokens == len(decisions.note_values) // CHARS_PER_TOKEN
    assert note_variant(view, decisions, end=end) == NOTE_VALUES


def test_the_values_listed_take_at_most_the_room_reserved_for_them() -> None:
    view, decisions, end = cut_view()
    everything, listed = decisions.note_values_tokens, decisions.note_values
    reserve = everything // 2
    decisions.note_values_tokens = reserve

    list_note(view, decisions, end=end)

    assert 0 < decisions.note_values_tokens <= reserve
    assert len(decisions.note_values) // CHARS_PER_TOKEN == decisions.note_values_tokens
    # Where values cost more than their characters promise, fewer of them fit the same
    # room: as many as do, newest first.
    costly = replace(view, chars_per_token=2)
    decisions.note_values_tokens = everything
    list_note(costly, decisions, end=end)
    fewer = decisions.note_values
    assert 0 < decisions.note_values_tokens == len(fewer) // 2 <= everything
    assert fewer.endswith("ORD-0004")
    assert listed.startswith(fewer) and len(fewer) < len(listed)
    one_more = listed[: len(fewer) + len(", ORD-0003")]
    assert len(one_more) // 2 > everything
    decisions.note_values_tokens = 0
    list_note(view, decisions, end=end)
    assert (decisions.note_values, decisions.note_values_tokens) == ("", 0)


def test_values_that_do_not_fit_the_budget_leave_the_plain_note() -> None:
    view, decisions, end = cut_view(note=15)
    without = view.total(decisions, note=False)
    decisions.note_values_tokens = SETTINGS.max_tokens - without - view.note
    assert note_variant(view, decisions, end=end) == NOTE_VALUES
    decisions.note_values_tokens += 1
    assert note_variant(view, decisions, end=end) == NOTE_PLAIN


def test_the_note_gives_way_where_the_budget_has_no_room_for_it() -> None:
    view, decisions, end = cut_view(note=15)
    decisions.note_values, decisions.note_values_tokens = "", 0
    spare = SETTINGS.max_tokens - view.total(decisions, note=False)
    assert note_variant(replace(view, note=spare), decisions, end=end) == NOTE_PLAIN
    assert note_variant(replace(view, note=spare + 1), decisions, end=end) == NOTE_NONE


def test_the_text_the_last_resort_can_cut_gives_way_to_the_note() -> None:
    view, decisions, end = cut_view(note=15)
    decisions.note_values, decisions.note_values_tokens = "", 0
    # The newest result grows past the budget: the last resort would cut its text.
    tokens = list(view.tokens)
    over = SETTINGS.max_tokens - view.total(decisions, note=False) + 1
    tokens[end - 1] += over
    decisions.history_tokens += over
    grown = replace(view, tokens=tokens)
    assert tokens[end - 1] > TRUNCATED_AT_LEAST
    assert note_variant(grown, decisions, end=end) == NOTE_PLAIN


def test_with_offload_the_call_that_reads_the_transcript_stays_where_the_lines_do_not_fit() -> None:
    view, decisions, end = cut_view(note=15, data_frame=20)
    view.offloading = True
    decisions.note_values = read_call("a" * 10) + "\nread_context(...): a result"
    without = view.total(decisions, note=False)
    decisions.note_values_tokens = SETTINGS.max_tokens  # the lines do not fit
    line = view.transcript_line_tokens(brief=False)
    assert without + view.note + line <= SETTINGS.max_tokens
    assert note_variant(view, decisions, end=end) == NOTE_KEPT
    assert note_variant(replace(view, offloading=False), decisions, end=end) == NOTE_PLAIN


def test_with_offload_the_note_lists_the_transcript_then_what_it_keeps_newest_first() -> None:
    view, decisions, end = cut_view(data_frame=20)
    view.offloading = True
    decisions.note_values_tokens = values_reserve(view, decisions, room=800)

    list_note(view, decisions, end=end)

    kept = view.kept_cuts[-1]
    assert 0 not in kept and 1 not in kept  # the system message and the pinned task
    assert kept == list(range(2, decisions.cut))
    lines = decisions.note_values.splitlines()
    assert is_read_call(lines[0])
    # Each result the cut leaves out is named by a line (its call is not), newest first.
    results = [index for index in reversed(kept) if isinstance(view.messages[index], ToolMessage)]
    named = [handle_line(message_item(view.messages[index])) for index in results]
    assert len(lines) > 2
    assert lines[1:] == named[: len(lines) - 1]
    assert decisions.note_values_tokens == view.data_tokens(
        omitted_count(view, decisions), decisions.note_values, brief=False
    )


def test_the_values_reserve_is_their_share_of_the_room_at_most_the_cap() -> None:
    view = loop_view(data_frame=30)
    decisions = view.fresh_decisions()
    for room in (100, 2_000, 50_000):
        share = min(int(room * tuning.NOTE_VALUES_SHARE), tuning.NOTE_VALUES_MAX_TOKENS)
        assert values_reserve(view, decisions, room=room) == share + view.data_frame
    huge = values_reserve(view, decisions, room=10**7) - view.data_frame
    assert huge == tuning.NOTE_VALUES_MAX_TOKENS
    # A brief note's frame comes out of the values' share.
    brief = replace(view, full_note=10**6)
    assert is_brief(brief, decisions)
    assert values_reserve(brief, decisions, room=2_000) == int(2_000 * tuning.NOTE_VALUES_SHARE)
    # With offload, the transcript's call is reserved however small the room.
    offloading = replace(brief, offloading=True)
    assert values_reserve(offloading, decisions, room=0) == 30 + TRANSCRIPT_LINE_TOKENS


def test_the_note_is_brief_where_the_full_one_takes_more_than_its_share_of_the_room() -> None:
    view = replace(loop_view(), fixed_tokens=50)
    decisions = view.fresh_decisions()
    room = SETTINGS.max_tokens - view.fixed_tokens - decisions.system_tokens
    at_share = int(room * tuning.FULL_NOTE_SHARE)
    assert at_share == room * tuning.FULL_NOTE_SHARE  # exactly at the share: not brief
    assert not is_brief(replace(view, full_note=at_share), decisions)
    assert is_brief(replace(view, full_note=at_share + 1), decisions)
    # The fixed tokens leave less room.
    assert is_brief(replace(view, full_note=at_share, fixed_tokens=150), decisions)
