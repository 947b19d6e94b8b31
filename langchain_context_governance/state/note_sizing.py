"""What the note at a cut of the cache-aware replay costs (state/cache_aware.py).

The tokens of the plain note, of its data turn listing values (with offload: handle
lines), of its turns with a summary, and the few counts that do not change within a
replay (the full note, the data turn's frame, the call that reads a cut's transcript,
the continuation turn), each counted once and kept. Which note a cut sends and what it
lists are policy/note_at_cut.py's decisions, which read these counts through the
policy's view (state/replay_view.py); the note's text is policy/note.py's.
"""

from __future__ import annotations

from langchain_core.messages import HumanMessage

from langchain_context_governance._added import synthetic_user_turn
from langchain_context_governance.offload.items import HANDLE_CHARACTERS
from langchain_context_governance.offload.kept import read_call
from langchain_context_governance.policy.note import cut_note, cut_turns, values_text
from langchain_context_governance.state.replay_state import ReplayLearning
from langchain_context_governance.state.request_assembly import RequestAssembly, note_listing
from langchain_context_governance.tokens.counter import MessageTokenCounter

# The plain note's count is kept for a few numbers of messages left out (a cut's search
# tries several).
_NOTE_COUNTS_KEPT = 8


class NoteSizing:
    """The note's sizes for one replay: `fixed` (the calls' fixed tokens: a small room
    after them makes the note brief) and `offloading` (the note lists handles instead of
    values) are the replay's, set where it changes them."""

    def __init__(self, *, counter: MessageTokenCounter, assembly: RequestAssembly) -> None:
        self._counter = counter
        self._assembly = assembly
        self.fixed = 0
        self.offloading = False
        self._full_note_tokens: int | None = None
        self._transcript_line_cost: dict[bool, int] = {}
        self._continuation_cost: int | None = None
        self._framing_cost: int | None = None

    def note_tokens(self, replay: ReplayLearning, omitted: int, *, brief: bool) -> int:
        """Tokens of the plain note for `omitted` messages (without summary or values)."""
        note_tokens = replay.note_tokens
        known = note_tokens.get((omitted, brief))
        if known is None:
            known = self._counter.count_message(HumanMessage(cut_note(omitted, brief=brief)))
            if len(note_tokens) >= _NOTE_COUNTS_KEPT:
                note_tokens.clear()
            note_tokens[(omitted, brief)] = known
        return known

    def data_tokens(self, replay: ReplayLearning, omitted: int, values: str, *, brief: bool) -> int:
        """What listing `values` (with offload, handle lines) adds to the plain note of
        `omitted` messages: the data turn, the note's pointer to it, and the continuation
        turn after it (counted always: an estimate on the safe side where a user turn
        follows anyway)."""
        listing = note_listing(values, offloading=self.offloading)
        turns = cut_turns(omitted, **listing, brief=brief, user_turn_follows=False)
        plain = self.note_tokens(replay, omitted, brief=brief)
        return sum(map(self._counter.count_message, turns)) - plain

    def full_note_tokens(self) -> int:
        """What the full (not brief) plain note of a large cut costs."""
        if self._full_note_tokens is None:
            self._full_note_tokens = self._counter.count_message(HumanMessage(cut_note(1_000)))
        return self._full_note_tokens

    def framing_tokens(self, replay: ReplayLearning) -> int:
        """What the full note's data turn adds beside the values it lists (for a cut of a
        hundred messages: the count's digits barely matter)."""
        if self._framing_cost is None:
            empty = values_text((("", ("",)),))
            self._framing_cost = self.data_tokens(replay, 100, empty, brief=False)
        return self._framing_cost

    def transcript_line_tokens(self, replay: ReplayLearning, *, brief: bool) -> int:
        """What the call that reads a cut's transcript adds to the note."""
        known = self._transcript_line_cost.get(brief)
        if known is None:
            line = read_call("a" * HANDLE_CHARACTERS)
            known = self.data_tokens(replay, 100, line, brief=brief)
            self._transcript_line_cost[brief] = known
        return known

    def summary_frame_tokens(self, omitted: int, values: str, *, brief: bool) -> int:
        """The note's turns around a one-character summary: all but the summary's own text
        (counted, not kept: no request sends them), with the continuation turn after them."""
        turns = cut_turns(
            omitted,
            summary=".",
            **note_listing(values, offloading=self.offloading),
            brief=brief,
        )
        return sum(map(self._counter.count_message, turns)) + self._continuation_tokens()

    def turns_tokens(self, omitted: int, summary: str, values: str, *, brief: bool) -> int:
        """Tokens of the note's turns with `summary` and `values` (with the continuation
        turn after a data turn: on the safe side where a user turn follows anyway). The
        turns counted are those a request sends (a user turn follows them): no second copy
        of them is kept for the count."""
        turns = self._assembly.note_turns(
            omitted,
            summary,
            values,
            brief=brief,
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
