"""What the cache-aware replay learned about the messages, kept between calls.

`ReplayLearning`, by position: token counts, fingerprints, the system messages, the
compactable and excluded results, the user messages and the task. The policy's decisions
made of it are policy/decisions.py's. Apart so that the replay (state/cache_aware.py) and
the codec that writes this state into a record and reads it back (state/replay_codec.py)
share it, and the codec never imports the replay.
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field

from langchain_core.messages import BaseMessage

from langchain_context_governance._messages import message_fingerprint

__all__ = ["ReplayLearning"]


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
