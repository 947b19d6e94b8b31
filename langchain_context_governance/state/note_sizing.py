"""The size of the note at a cut of the cache-aware replay (state/cache_aware.py).

How many messages the note says a cut leaves out, what the note and its data turn
cost, whether it is brief, how many of the values (with offload: the handles) of what
the cut leaves out its data turn lists within the room reserved for them, the room a
summary of the cut has, and which note the request sends at the cut. The note's text
and the values are policy/note.py's; the replay keeps the decisions and the counts
these are made of (`ReplayLearning`, `Decisions`), and hands them in.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence

from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage

from langchain_context_governance import tuning
from langchain_context_governance._added import added_kind, synthetic_user_turn
from langchain_context_governance._messages import group_start
from langchain_context_governance.offload.items import HANDLE_CHARACTERS, OffloadItem, cut_item
from langchain_context_governance.offload.kept import (
    Offload,
    handle_line,
    is_read_call,
    read_call,
)
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
    cut_note,
    cut_turns,
    dropped_values,
    grouped,
    shown_words,
    values_of,
    values_text,
)
from langchain_context_governance.state.replay_state import ReplayLearning
from langchain_context_governance.state.request_assembly import RequestAssembly, note_listing
from langchain_context_governance.tokens.calibration import Calibration
from langchain_context_governance.tokens.counter import (
    APPROXIMATE_CHARS_PER_TOKEN,
    MessageTokenCounter,
)

# The plain note's count is kept for a few numbers of messages left out (a cut's search
# tries several).
_NOTE_COUNTS_KEPT = 8
# At least what a line of the note's data turn naming a kept message costs (its call).
_READ_CALL_TOKENS = 8


class NoteSizing:
    """The note's sizes for one replay: `fixed` (the calls' fixed tokens: a small room
    after them makes the note brief) and `offloading` (the note lists handles instead of
    values) are the replay's, set where it changes them."""

    def __init__(
        self, *, counter: MessageTokenCounter, max_tokens: int, assembly: RequestAssembly
    ) -> None:
        self._counter = counter
        self._max_tokens = max_tokens
        self._assembly = assembly
        self.fixed = 0
        self.offloading = False
        self._full_note_tokens: int | None = None
        self._transcript_line_cost: dict[bool, int] = {}
        self._continuation_cost: int | None = None
        self._framing_cost: int | None = None

    @staticmethod
    def omitted(replay: ReplayLearning, decisions: Decisions) -> int:
        """Messages of the conversation before the cut that the request leaves out: not the
        system messages, nor the note an earlier cut added (a request governed again holds
        it), so a cut that leaves out only that is no cut."""
        systems = bisect.bisect_left(replay.system_indices, decisions.cut)
        added = bisect.bisect_left(replay.added, decisions.cut)
        pins = int(decisions.task_pinned) + int(decisions.pinned is not None)
        pins += decisions.kept_messages - int(decisions.pinned_kept)
        return decisions.cut - systems - added - pins

    def note_tokens(self, replay: ReplayLearning, decisions: Decisions, omitted: int) -> int:
        """Tokens of the plain note for `omitted` messages (without summary or values)."""
        if omitted <= 0:
            return 0
        brief = self.brief(decisions)
        note_tokens = replay.note_tokens
        known = note_tokens.get((omitted, brief))
        if known is None:
            known = self._counter.count_message(HumanMessage(cut_note(omitted, brief=brief)))
            if len(note_tokens) >= _NOTE_COUNTS_KEPT:
                note_tokens.clear()
            note_tokens[(omitted, brief)] = known
        return known

    def data_tokens(
        self, replay: ReplayLearning, decisions: Decisions, omitted: int, values: str
    ) -> int:
        """What listing `values` (with offload, handle lines) adds to the plain note of
        `omitted` messages: the data turn, the note's pointer to it, and the continuation
        turn after it (counted always: an estimate on the safe side where a user turn
        follows anyway)."""
        brief = self.brief(decisions)
        listing = note_listing(values, offloading=self.offloading)
        turns = cut_turns(omitted, **listing, brief=brief, user_turn_follows=False)
        plain = self.note_tokens(replay, decisions, omitted)
        return sum(map(self._counter.count_message, turns)) - plain

    def brief(self, decisions: Decisions) -> bool:
        """Whether the note is brief: where the full one would take more than
        `tuning.FULL_NOTE_SHARE` of the budget less the fixed tokens and the system messages."""
        if self._full_note_tokens is None:
            self._full_note_tokens = self._counter.count_message(HumanMessage(cut_note(1_000)))
        room = self._max_tokens - self.fixed - decisions.system_tokens
        return self._full_note_tokens > room * tuning.FULL_NOTE_SHARE

    def reserve(self, replay: ReplayLearning, decisions: Decisions, room: int) -> int:
        """The tokens a cut in `room` reserves for the values the note lists: their share,
        and where the note is not brief the data turn that quotes them (its frame, the
        note's pointer to it, the continuation turn after it), which then takes no share
        of theirs; where the room is small, it comes out of their share, so that the note
        does not cut deeper (and more often) for its frame."""
        reserve = min(int(room * tuning.NOTE_VALUES_SHARE), tuning.NOTE_VALUES_MAX_TOKENS)
        if not self.brief(decisions):
            reserve += self._framing_tokens(replay, decisions)
        if self.offloading:
            # The handle of the cut's transcript is listed however small the room: without
            # it, what the cut leaves out could not be read back.
            reserve = max(reserve, self._transcript_line_tokens(replay, decisions))
        return reserve

    def list_note(
        self,
        history: Sequence[BaseMessage],
        replay: ReplayLearning,
        decisions: Decisions,
        *,
        end: int,
        offload: Offload | None,
    ) -> None:
        """What the note's data turn lists for the cut just made (`note_values`), within
        the tokens reserved for it (`note_values_tokens`), which become the tokens it
        takes: with offload, handles; else values."""
        if self.offloading:
            self._list_note_handles(history, replay, decisions, offload=offload)
        else:
            self._list_note_values(history, replay, decisions, end=end)

    def _list_note_handles(
        self,
        history: Sequence[BaseMessage],
        replay: ReplayLearning,
        decisions: Decisions,
        *,
        offload: Offload | None,
    ) -> None:
        """With offload, the note gives handles instead of values: the messages the cut
        leaves out are kept (each an item, and the cut's transcript of them); the note
        says which call reads the transcript, and its data turn lists those of the
        messages, newest first, one line each (`handle_line`), within the tokens reserved
        before the cut (`note_values_tokens`), which become the tokens they take."""
        reserve = decisions.note_values_tokens
        decisions.note_values, decisions.note_values_tokens = "", 0
        omitted = self.omitted(replay, decisions)
        if omitted <= 0 or reserve <= 0 or offload is None:
            return
        sent = _sent_before_cut(replay, decisions)
        parts: list[OffloadItem] = []
        listed: list[OffloadItem] = []
        for index in range(decisions.cut):
            if index in sent:
                continue
            item, named = self._assembly.cut_part(history, index, offload)
            if item is not None:
                parts.append(item)
                if named:
                    listed.append(item)
        if not parts:
            return
        transcript = cut_item(parts)
        offload.keep(transcript)
        brief = self.brief(decisions)
        lines = [read_call(transcript.handle)]
        # A line is at least a call (about 9 tokens): no more than this many can fit.
        most = reserve // _READ_CALL_TOKENS + 1
        lines += (handle_line(item, brief=brief) for item in listed[: -most - 1 : -1])

        def extra_tokens(count: int) -> int:
            return self.data_tokens(replay, decisions, omitted, "\n".join(lines[:count]))

        # The transcript's call is given even where it takes a little more than reserved
        # (`_transcript_line_tokens` reserved about what it costs): the lines where they fit.
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

    def _framing_tokens(self, replay: ReplayLearning, decisions: Decisions) -> int:
        """What the full note's data turn adds beside the values it lists (for a cut of a
        hundred messages: the count's digits barely matter)."""
        if self._framing_cost is None:
            empty = values_text((("", ("",)),))
            self._framing_cost = self.data_tokens(replay, decisions, 100, empty)
        return self._framing_cost

    def _transcript_line_tokens(self, replay: ReplayLearning, decisions: Decisions) -> int:
        """What the call that reads a cut's transcript adds to the note."""
        brief = self.brief(decisions)
        known = self._transcript_line_cost.get(brief)
        if known is None:
            line = read_call("a" * HANDLE_CHARACTERS)
            known = self.data_tokens(replay, decisions, 100, line)
            self._transcript_line_cost[brief] = known
        return known

    def _list_note_values(
        self,
        history: Sequence[BaseMessage],
        replay: ReplayLearning,
        decisions: Decisions,
        *,
        end: int,
    ) -> None:
        """The values the note's data turn lists for the cut just made (policy/note.py): those
        of the messages it leaves out, newest first, but values the request shows anyway
        (in the system messages, the task, the kept messages and the history from the
        cut) and tool names; within the tokens reserved for them before the cut
        (`note_values_tokens`), which become the tokens they take."""
        reserve = decisions.note_values_tokens
        decisions.note_values, decisions.note_values_tokens = "", 0
        omitted = self.omitted(replay, decisions)
        if omitted <= 0 or reserve <= 0:
            return
        front = [index for index in replay.system_indices if index < decisions.cut]
        if decisions.task_pinned and replay.task is not None:
            front.append(replay.task)
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

        tool_names = frozenset(replay.tool_names)
        framing = self.data_tokens(replay, decisions, omitted, values_text((("", ("",)),)))
        found = dropped_values(
            left_out(),
            max_chars=max(reserve - framing, 0) * APPROXIMATE_CHARS_PER_TOKEN,
            shown=shown,
            skip=tool_names,
        )

        def extra_tokens(count: int) -> int:
            listed = values_text(grouped(found[:count]))
            return self.data_tokens(replay, decisions, omitted, listed)

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

    def summary_room(self, decisions: Decisions, omitted: int, *, limit: int, without: int) -> int:
        """The most tokens a summary of the cut can take with the request, `without` the
        note, still within `limit` (the high watermark, corrected), where the note has
        none yet."""
        # The note's turns around a one-character summary: all but the summary's own text
        # (counted, not kept: no request sends them).
        turns = cut_turns(
            omitted,
            summary=".",
            **note_listing(decisions.note_values, offloading=self.offloading),
            brief=self.brief(decisions),
        )
        frame = sum(map(self._counter.count_message, turns)) + self._continuation_tokens()
        return max(limit - without - frame, 0)

    def variant(
        self,
        history: Sequence[BaseMessage],
        replay: ReplayLearning,
        decisions: Decisions,
        *,
        end: int,
        omitted: int,
        summary: str | None,
        without: int,
        high: int,
        calibration: Calibration,
    ) -> int:
        """Which note the request of the call on the first `end` messages sends at a cut of
        `omitted` messages (more than none), the rest of it taking `without`: with the
        summary where it fits under the `high` watermark, else with the values of what it
        leaves out (with offload: the lines naming what is kept of it, else the call that
        reads its transcript back), else plain, where each fits the budget (none on a tiny
        budget)."""
        plain = self.note_tokens(replay, decisions, omitted)
        if summary:
            turns = self._turns_tokens(decisions, omitted, summary, decisions.note_values)
            if calibration.corrected(without + turns) <= high:
                return NOTE_SUMMARY
        values = decisions.note_values
        if values and calibration.corrected(without + plain + decisions.note_values_tokens) <= (
            self._max_tokens
        ):
            return NOTE_VALUES
        # Governance's own words are never what the last resort shortens: where the rest of
        # the request does not fit (a current turn larger than the budget), the text the
        # last resort can cut gives way to the note (none on a tiny budget).
        if calibration.corrected(without + plain) > self._max_tokens:
            without -= _shortenable_tokens(history, replay, decisions, end=end)
        kept = values.partition("\n")[0]
        if self.offloading and kept != values and is_read_call(kept):
            # Where the lines do not fit, the call that reads the transcript still does.
            line = self._transcript_line_tokens(replay, decisions)
            if calibration.corrected(without + plain + line) <= self._max_tokens:
                return NOTE_KEPT
        if calibration.corrected(without + plain) <= self._max_tokens:
            return NOTE_PLAIN
        return NOTE_NONE

    def _turns_tokens(self, decisions: Decisions, omitted: int, summary: str, values: str) -> int:
        """Tokens of the note's turns with `summary` and `values` (with the continuation
        turn after a data turn: on the safe side where a user turn follows anyway). The
        turns counted are those a request sends (a user turn follows them): no second copy
        of them is kept for the count."""
        turns = self._assembly.note_turns(
            omitted,
            summary,
            values,
            brief=self.brief(decisions),
            follows=True,
            offloading=self.offloading,
        )
        tokens = sum(cost for _, cost, _ in turns)
        if len(turns) > 1:
            tokens += self._continuation_tokens()
        return tokens

    def _continuation_tokens(self) -> int:
        """What the synthetic continuation turn after a data turn costs."""
        if self._continuation_cost is None:
            self._continuation_cost = self._counter.count_message(synthetic_user_turn())
        return self._continuation_cost


def _sent_before_cut(replay: ReplayLearning, decisions: Decisions) -> set[int]:
    """The positions before the cut a request still sends: the system messages, the
    pinned task, the pinned latest user message and the kept groups."""
    kept = {i for group in decisions.kept_groups for i in range(group.start, group.stop)}
    kept.update(index for index in replay.system_indices if index < decisions.cut)
    if decisions.task_pinned and replay.task is not None:
        kept.add(replay.task)
    if decisions.pinned is not None:
        kept.add(decisions.pinned)
    return kept


def _shortenable_tokens(
    history: Sequence[BaseMessage], replay: ReplayLearning, decisions: Decisions, *, end: int
) -> int:
    """About how many tokens the last resort can take off the kept part's newest group
    and the pinned user message (policy/last_resort.py cuts the text of tool results and
    user messages to a head, a marker and a tail; it never cuts an assistant message
    or what governance wrote). Only counted where the request does not fit."""
    positions = list(range(group_start(history, end), end))
    if decisions.pinned is not None:
        positions.append(decisions.pinned)
    return sum(
        max(replay.tokens[index] - TRUNCATED_AT_LEAST, 0)
        for index in positions
        if isinstance(history[index], (ToolMessage, HumanMessage))
        and added_kind(history[index]) is None
    )
