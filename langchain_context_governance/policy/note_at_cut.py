"""The note at a cut: which note a cut sends, and what it lists within its room.

How many messages the note says a cut leaves out, whether it is brief, how much room a
cut reserves for the values (with offload: the handles) of what it leaves out, which of
them its data turn lists within that room, the room a summary of the cut has, and which
note the request sends at the cut. The note's text and the values are policy/note.py's;
what the note and its data turn cost is counted (and kept) by the engine, and read here
through the view (policy/view.py).

Example (a cut before position 5 sends the system message and pins the task: the note
says three messages were left out):
    >>> from dataclasses import dataclass
    >>> @dataclass
    ... class Positions:
    ...     systems: tuple[int, ...] = (0,)
    ...     added: tuple[int, ...] = ()
    >>> omitted_count(Positions(), Decisions(cut=5, task_pinned=True))
    3
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator

from langchain_core.messages import HumanMessage, ToolMessage

from langchain_context_governance import tuning
from langchain_context_governance._added import added_kind
from langchain_context_governance._messages import group_start
from langchain_context_governance.offload.kept import handle_line, is_read_call, read_call
from langchain_context_governance.policy.decisions import (
    NOTE_KEPT,
    NOTE_NONE,
    NOTE_PLAIN,
    NOTE_SUMMARY,
    NOTE_VALUES,
    Decisions,
)
from langchain_context_governance.policy.last_resort import TRUNCATED_AT_LEAST
from langchain_context_governance.policy.note import (
    dropped_values,
    grouped,
    shown_words,
    values_of,
    values_text,
)
from langchain_context_governance.policy.view import ReplayView
from langchain_context_governance.policy.watermarks import watermarks
from langchain_context_governance.tokens.counter import APPROXIMATE_CHARS_PER_TOKEN

__all__ = [
    "is_brief",
    "list_note",
    "note_variant",
    "omitted_count",
    "plain_note_tokens",
    "summary_room",
    "values_reserve",
]

# At least what a line of the note's data turn naming a kept message costs (its call).
_READ_CALL_TOKENS = 8


def omitted_count(view: ReplayView, decisions: Decisions) -> int:
    """Messages of the conversation before the cut that the request leaves out: not the
    system messages, nor the note an earlier cut added (a request governed again holds
    it), so a cut that leaves out only that is no cut."""
    systems = bisect.bisect_left(view.systems, decisions.cut)
    added = bisect.bisect_left(view.added, decisions.cut)
    pins = int(decisions.task_pinned) + int(decisions.pinned is not None)
    pins += decisions.kept_messages - int(decisions.pinned_kept)
    return decisions.cut - systems - added - pins


def is_brief(view: ReplayView, decisions: Decisions) -> bool:
    """Whether the note is brief: where the full one would take more than
    `tuning.FULL_NOTE_SHARE` of the budget less the fixed tokens and the system messages."""
    room = view.settings.max_tokens - view.fixed_tokens - decisions.system_tokens
    return view.full_note_tokens > room * tuning.FULL_NOTE_SHARE


def plain_note_tokens(view: ReplayView, decisions: Decisions, omitted: int) -> int:
    """Tokens of the plain note for `omitted` messages (without summary or values)."""
    if omitted <= 0:
        return 0
    return view.note_tokens(omitted, brief=is_brief(view, decisions))


def values_reserve(view: ReplayView, decisions: Decisions, *, room: int) -> int:
    """The tokens a cut in `room` reserves for the values the note lists: their share,
    and where the note is not brief the data turn that quotes them (its frame, the
    note's pointer to it, the continuation turn after it), which then takes no share
    of theirs; where the room is small, it comes out of their share, so that the note
    does not cut deeper (and more often) for its frame."""
    reserve = min(int(room * tuning.NOTE_VALUES_SHARE), tuning.NOTE_VALUES_MAX_TOKENS)
    if not is_brief(view, decisions):
        reserve += view.framing_tokens
    if view.offloading:
        # The handle of the cut's transcript is listed however small the room: without
        # it, what the cut leaves out could not be read back.
        reserve = max(reserve, view.transcript_line_tokens(brief=is_brief(view, decisions)))
    return reserve


def list_note(view: ReplayView, decisions: Decisions, *, end: int) -> None:
    """What the note's data turn lists for the cut just made (`note_values`), within
    the tokens reserved for it (`note_values_tokens`), which become the tokens it
    takes: with offload, handles; else values."""
    if view.offloading:
        _list_note_handles(view, decisions)
    else:
        _list_note_values(view, decisions, end=end)


def _list_note_handles(view: ReplayView, decisions: Decisions) -> None:
    """With offload, the note gives handles instead of values: the messages the cut
    leaves out are kept (each an item, and the cut's transcript of them); the note
    says which call reads the transcript, and its data turn lists those of the
    messages, newest first, one line each (`handle_line`), within the tokens reserved
    before the cut (`note_values_tokens`), which become the tokens they take."""
    reserve = decisions.note_values_tokens
    decisions.note_values, decisions.note_values_tokens = "", 0
    omitted = omitted_count(view, decisions)
    if omitted <= 0 or reserve <= 0:
        return
    sent = _sent_before_cut(view, decisions)
    kept = view.keep_cut(index for index in range(decisions.cut) if index not in sent)
    if kept is None:
        return
    transcript, listed = kept
    brief = is_brief(view, decisions)
    lines = [read_call(transcript)]
    # A line is at least a call (about 9 tokens): no more than this many can fit.
    most = reserve // _READ_CALL_TOKENS + 1
    lines += (handle_line(item, brief=brief) for item in listed[: -most - 1 : -1])

    def extra_tokens(count: int) -> int:
        return view.data_tokens(omitted, "\n".join(lines[:count]), brief=brief)

    # The transcript's call is given even where it takes a little more than reserved
    # (`values_reserve` reserved about what it costs): the lines where they fit.
    fitting, tokens = 1, extra_tokens(1)
    low, high = 2, len(lines)
    while low <= high:
        middle = (low + high) // 2
        middle_tokens = extra_tokens(middle)
        if middle_tokens <= reserve:
            fitting, tokens, low = middle, middle_tokens, middle + 1
        else:
            high = middle - 1
    decisions.note_values = "\n".join(lines[:fitting])
    decisions.note_values_tokens = tokens


def _list_note_values(view: ReplayView, decisions: Decisions, *, end: int) -> None:
    """The values the note's data turn lists for the cut just made (policy/note.py): those
    of the messages it leaves out, newest first, but values the request shows anyway
    (in the system messages, the task, the kept messages and the history from the
    cut) and tool names; within the tokens reserved for them before the cut
    (`note_values_tokens`), which become the tokens they take."""
    reserve = decisions.note_values_tokens
    decisions.note_values, decisions.note_values_tokens = "", 0
    omitted = omitted_count(view, decisions)
    if omitted <= 0 or reserve <= 0:
        return
    history = view.messages
    front = [index for index in view.systems if index < decisions.cut]
    if decisions.task_pinned and view.task is not None:
        front.append(view.task)
    if decisions.pinned is not None:
        front.append(decisions.pinned)
    kept = {i for group in decisions.kept_groups for i in range(group.start, group.stop)}
    sent = [*front, *sorted(kept), *range(decisions.cut, end)]
    shown = shown_words(history[index] for index in sent)
    kept.update(front)

    def left_out() -> Iterator[list[tuple[str, str]]]:
        for index in range(decisions.cut - 1, -1, -1):
            if index not in kept:
                yield values_of(history[index])

    tool_names = frozenset(view.tool_names)
    brief = is_brief(view, decisions)
    framing = view.data_tokens(omitted, values_text((("", ("",)),)), brief=brief)
    found = dropped_values(
        left_out(),
        max_chars=max(reserve - framing, 0) * APPROXIMATE_CHARS_PER_TOKEN,
        shown=shown,
        skip=tool_names,
    )

    def extra_tokens(count: int) -> int:
        listed = values_text(grouped(found[:count]))
        return view.data_tokens(omitted, listed, brief=brief)

    # The most values (newest first) whose note fits the reservation: the guess in
    # characters is exact for the approximate count, a counter that gives values more
    # tokens a character takes fewer.
    fitting, tokens = len(found), extra_tokens(len(found)) if found else 0
    if tokens > reserve:
        low, high = 0, len(found) - 1
        tokens = 0
        while low < high:
            middle = (low + high + 1) // 2
            middle_tokens = extra_tokens(middle)
            if middle_tokens <= reserve:
                low, tokens = middle, middle_tokens
            else:
                high = middle - 1
        fitting = low
    if fitting:
        decisions.note_values = values_text(grouped(found[:fitting]))
        decisions.note_values_tokens = tokens


def summary_room(view: ReplayView, decisions: Decisions, *, omitted: int) -> int:
    """The most tokens a summary of the cut of `omitted` messages can take with the
    note still under the high watermark (`note_variant`'s test), where the note has
    none yet."""
    high, _ = watermarks(view, decisions, end=len(view.messages))
    limit = view.calibration(decisions).limit(high)
    without = view.total(decisions, note=False)
    # The note's turns around a one-character summary: all but the summary's own text.
    frame = view.summary_frame_tokens(
        omitted, decisions.note_values, brief=is_brief(view, decisions)
    )
    return max(limit - without - frame, 0)


def note_variant(view: ReplayView, decisions: Decisions, *, end: int) -> int:
    """Which note the request of the call on the first `end` messages sends at its cut:
    with the summary where it fits under the high watermark, else with the values of
    what it leaves out (with offload: the lines naming what is kept of it, else the call
    that reads its transcript back), else plain, where each fits the budget (none on a
    tiny budget, and none where the cut leaves nothing out). Decided from the decisions'
    counts, so that every call point knows the note its request sent: a note that
    changes is an edit of the front."""
    omitted = omitted_count(view, decisions)
    if decisions.cut == 0 or omitted <= 0:
        return NOTE_NONE
    summary = view.summary(decisions.cut)
    # The watermarks matter only where a summary may go into the note.
    high = watermarks(view, decisions, end=end)[0] if summary else 0
    without = view.total(decisions, note=False)
    calibration = view.calibration(decisions)
    max_tokens = view.settings.max_tokens
    plain = plain_note_tokens(view, decisions, omitted)
    if summary:
        turns = view.note_turns_tokens(
            omitted, summary, decisions.note_values, brief=is_brief(view, decisions)
        )
        if calibration.corrected(without + turns) <= high:
            return NOTE_SUMMARY
    values = decisions.note_values
    if values and calibration.corrected(without + plain + decisions.note_values_tokens) <= (
        max_tokens
    ):
        return NOTE_VALUES
    # Governance's own words are never what the last resort shortens: where the rest of
    # the request does not fit (a current turn larger than the budget), the text the
    # last resort can cut gives way to the note (none on a tiny budget).
    if calibration.corrected(without + plain) > max_tokens:
        without -= _shortenable_tokens(view, decisions, end=end)
    kept = values.partition("\n")[0]
    if view.offloading and kept != values and is_read_call(kept):
        # Where the lines do not fit, the call that reads the transcript still does.
        line = view.transcript_line_tokens(brief=is_brief(view, decisions))
        if calibration.corrected(without + plain + line) <= max_tokens:
            return NOTE_KEPT
    if calibration.corrected(without + plain) <= max_tokens:
        return NOTE_PLAIN
    return NOTE_NONE


def _sent_before_cut(view: ReplayView, decisions: Decisions) -> set[int]:
    """The positions before the cut a request still sends: the system messages, the
    pinned task, the pinned latest user message and the kept groups."""
    kept = {i for group in decisions.kept_groups for i in range(group.start, group.stop)}
    kept.update(index for index in view.systems if index < decisions.cut)
    if decisions.task_pinned and view.task is not None:
        kept.add(view.task)
    if decisions.pinned is not None:
        kept.add(decisions.pinned)
    return kept


def _shortenable_tokens(view: ReplayView, decisions: Decisions, *, end: int) -> int:
    """About how many tokens the last resort can take off the kept part's newest group
    and the pinned user message (policy/last_resort.py cuts the text of tool results and
    user messages to a head, a marker and a tail; it never cuts an assistant message
    or what governance wrote). Only counted where the request does not fit."""
    history = view.messages
    positions = list(range(group_start(history, end), end))
    if decisions.pinned is not None:
        positions.append(decisions.pinned)
    return sum(
        max(view.tokens[index] - TRUNCATED_AT_LEAST, 0)
        for index in positions
        if isinstance(history[index], (ToolMessage, HumanMessage))
        and added_kind(history[index]) is None
    )
