"""The state the cache-aware replay keeps between calls, and its snapshot carries.

What the replay learned about the messages (`ReplayLearning`), the groups a cut kept for
their protection class (`KeptGroup`, named as in policy/protection.py) and the decisions
so far (`Decisions`), with the note variants a decision names. Apart so that the
replay that decides (state/cache_aware.py) and the codec that writes this state into a
record and reads it back (state/replay_codec.py) share it, and the codec never imports
the replay.
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field

from langchain_core.messages import BaseMessage

from langchain_context_governance._messages import message_fingerprint
from langchain_context_governance.policy.protection import EXCLUDED_TOOL
from langchain_context_governance.state.binding import LeftOut
from langchain_context_governance.tokens.calibration import UNCALIBRATED, Calibration

__all__ = [
    "NOTE_KEPT",
    "NOTE_NONE",
    "NOTE_PLAIN",
    "NOTE_SUMMARY",
    "NOTE_VALUES",
    "Decisions",
    "KeptGroup",
    "ReplayLearning",
]

# The note a cut's request sends (`CacheAwareReplay._note_variant`): with the summary, with
# the values (with offload: the lines naming what is kept), with offload the call that
# reads the transcript back alone, plain, or none (a tiny budget).
NOTE_SUMMARY, NOTE_VALUES, NOTE_KEPT, NOTE_PLAIN, NOTE_NONE = range(5)


@dataclass
class ReplayLearning:
    """What the replay learned about the messages so far (append-only, by position)."""

    tokens: array[int] = field(default_factory=lambda: array("q"))
    prints: array[int] = field(default_factory=lambda: array("q"))
    system_indices: list[int] = field(default_factory=list)
    compactable: list[int] = field(default_factory=list)
    compactable_names: dict[int, str] = field(default_factory=dict)
    compacted_tokens: dict[int, int] = field(default_factory=dict)
    # Positions of results of `exclude_tools`: their groups are kept across cuts.
    excluded: list[int] = field(default_factory=list)
    # Positions of the user's own messages (the current turn is the latest of them).
    users: list[int] = field(default_factory=list)
    # Positions of what an earlier cut added (cache_aware's `_OUTSIDE_THE_CONVERSATION`):
    # a request governed again holds them, and they are no messages a note counts.
    added: list[int] = field(default_factory=list)
    # The tools called so far, in the order they were first called (a result's own tool
    # is read from its call, right before it).
    tool_names: dict[str, None] = field(default_factory=dict)
    # The conversation's first user message (the task), whether it is pinned as a copy
    # (cut to its share, or a stored note taken out of it: made again from the history's
    # message, never kept), and what pinning it costs.
    task: int | None = None
    task_fits: bool = False
    task_cut: bool = False
    task_copied: bool = False
    task_tokens: int = 0
    # Tokens of the plain note, by the messages it counts and whether it is brief (a
    # few: note_sizing's `_NOTE_COUNTS_KEPT`).
    note_tokens: dict[tuple[int, bool], int] = field(default_factory=dict)
    # Fingerprints are salted per process, so a replay restored from a record knows none
    # of those before this position: each is found (and kept) when first read.
    prints_unknown_below: int = 0

    def prints_between(self, history: Sequence[BaseMessage], start: int, stop: int) -> list[int]:
        """The fingerprints of positions `start` to `stop`."""
        prints = self.prints[start:stop].tolist()
        unknown = min(stop, self.prints_unknown_below) - start
        if unknown > 0 and 0 in prints[:unknown]:
            # Several are sliced at once: a slice of the history costs a few slices of the
            # caller's list, not a look-up a position.
            found = [history[start]] if unknown == 1 else history[start : start + unknown]
            for offset, message in enumerate(found):
                if prints[offset] == 0:
                    prints[offset] = self.prints[start + offset] = message_fingerprint(message)
        return prints

    def is_compacted(self, index: int, compacted_count: int) -> bool:
        """Whether the position `index` is a result among the first `compacted_count`
        compactable ones (those the decisions compacted)."""
        if index not in self.compactable_names:
            return False
        return bisect.bisect_left(self.compactable, index) < compacted_count

    def forget_from(self, index: int, tool_names: int) -> None:
        """Drop what was learned from position `index` on, and tool names past the first ones."""
        self.prints_unknown_below = min(self.prints_unknown_below, index)
        del self.tokens[index:]
        del self.prints[index:]
        # Only compactable positions have a name and a compacted count: a call forgets
        # what it learned of its new positions, not the whole history.
        for position in self.compactable[bisect.bisect_left(self.compactable, index) :]:
            self.compactable_names.pop(position, None)
            self.compacted_tokens.pop(position, None)
        for positions in (
            self.system_indices,
            self.compactable,
            self.excluded,
            self.users,
            self.added,
        ):
            del positions[bisect.bisect_left(positions, index) :]
        # The tool names learned last were inserted last.
        for _ in range(len(self.tool_names) - tool_names):
            self.tool_names.popitem()
        if self.task is not None and self.task >= index:
            self.task, self.task_fits, self.task_tokens = None, False, 0
            self.task_cut = self.task_copied = False


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
    # (state/binding.py), by the edits of the call points so far.
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
