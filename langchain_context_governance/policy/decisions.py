"""The decisions of the cache-aware policy so far, which its functions write.

Where the request starts (the cut), how far compaction got, what is pinned and which
groups before the cut are kept for their protection class (`KeptGroup`, named as in
policy/protection.py), kept as running sums so that a decision costs O(1); which
positions' bound reasoning the edits left out (policy/left_out.py), and the note variants
a decision names. The replay (state/cache_aware.py) copies them for each call and writes
them into a record (state/replay_codec.py).

Example:
    >>> from langchain_context_governance.policy.protection import EARLIER_USER
    >>> decisions = Decisions()
    >>> decisions.keep(KeptGroup(start=2, stop=4, tokens=30, why=EXCLUDED_TOOL))
    >>> decisions.keep(KeptGroup(start=6, stop=7, tokens=5, why=EARLIER_USER))
    >>> decisions.kept_tokens, decisions.kept_excluded_tokens, decisions.kept_messages
    (35, 30, 3)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from langchain_context_governance.policy.left_out import LeftOut
from langchain_context_governance.policy.protection import EXCLUDED_TOOL
from langchain_context_governance.tokens.calibration import UNCALIBRATED, Calibration

__all__ = [
    "NOTE_KEPT",
    "NOTE_NONE",
    "NOTE_PLAIN",
    "NOTE_SUMMARY",
    "NOTE_VALUES",
    "Decisions",
    "KeptGroup",
]

# The note a cut's request sends (policy/note_at_cut.py's `note_variant`): with the
# summary, with the values (with offload: the lines naming what is kept), with offload the
# call that reads the transcript back alone, plain, or none (a tiny budget).
NOTE_SUMMARY, NOTE_VALUES, NOTE_KEPT, NOTE_PLAIN, NOTE_NONE = range(5)


@dataclass(frozen=True)
class KeptGroup:
    """A group before the cut kept for its protection class (a user message, or a call
    with a result of an excluded tool), and what it costs."""

    start: int
    stop: int
    tokens: int
    why: str


@dataclass
class Decisions:
    """The decisions so far: where the request starts and how far compaction got."""

    cut: int = 0
    compacted_count: int = 0
    # Tokens of the non-system messages from the cut on, and of the system messages.
    history_tokens: int = 0
    system_tokens: int = 0
    raw_tokens: int = 0
    pinned: int | None = None
    last_user_before_cut: int | None = None
    task_pinned: bool = False
    kept_groups: tuple[KeptGroup, ...] = ()
    # Their tokens and messages, kept as sums so that a decision costs O(1); and whether
    # the pinned latest user message is one of them (it is then counted once, as the pin).
    kept_tokens: int = 0
    kept_excluded_tokens: int = 0
    kept_messages: int = 0
    # What the newest result of an excluded tool left out for want of room costs (with
    # its call): where it fits again, a step takes it back.
    readmit_tokens: int = 0
    # What the provider rules that need the whole request add to it, where a first plan
    # of the current call found it over budget for them (0 at every earlier call point).
    rules_tokens: int = 0
    pinned_kept: bool = False
    # Learned from the sizes the provider reported for the replies so far.
    calibration: Calibration = UNCALIBRATED
    # The values of the omitted messages the note's data turn lists (policy/note.py), and
    # the tokens that turn (with its frame and the note's pointer to it) adds: made at
    # each cut, kept until the next. As listed (`note.values_text`): one text.
    note_values: str = ""
    note_values_tokens: int = 0
    # The history positions whose bound reasoning lost the prefix it was made after
    # (policy/left_out.py), by the edits of the call points so far.
    left_out: LeftOut = field(default_factory=LeftOut)
    # Which note the request of the latest call point sent (`NOTE_*`): a note that changes
    # changes the front, and so the prefix of every message after it.
    note_variant: int = NOTE_NONE

    def keep(self, group: KeptGroup) -> None:
        self.kept_groups = (*self.kept_groups, group)
        self.kept_tokens += group.tokens
        if group.why == EXCLUDED_TOOL:
            self.kept_excluded_tokens += group.tokens
        self.kept_messages += group.stop - group.start

    def give_up(self, group: KeptGroup) -> None:
        self.kept_groups = tuple(kept for kept in self.kept_groups if kept is not group)
        self.kept_tokens -= group.tokens
        if group.why == EXCLUDED_TOOL:
            self.kept_excluded_tokens -= group.tokens
        self.kept_messages -= group.stop - group.start
