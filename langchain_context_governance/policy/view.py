"""What the cache-aware policy reads of a history: a read-only view, and its settings.

The policy's functions (policy/edit_trigger.py, policy/watermarks.py,
policy/batch_compaction.py, policy/cut.py, policy/note_at_cut.py, policy/front_edits.py)
decide from positions, token counts, message kinds and tool names, and write only the
decisions they are given (policy/decisions.py). What keeps those numbers cheap (counting
once, knowing what a compacted result costs, counting the note's turns) is the engine's:
the replay implements this view (state/replay_view.py), a test a small fake of it.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from langchain_core.messages import BaseMessage

from langchain_context_governance.offload.items import OffloadItem
from langchain_context_governance.policy.compaction import ResultCompaction
from langchain_context_governance.policy.decisions import Decisions
from langchain_context_governance.tokens.calibration import Calibration

__all__ = ["CacheAwareSettings", "ReplayView"]


@dataclass(frozen=True)
class CacheAwareSettings:
    """The settings the cache-aware policy decides with (validated by the replay)."""

    max_tokens: int
    """The budget of a request, in tokens."""
    high_share: float
    """Past this share of the room history has, a call edits the request."""
    low_share: float
    """An edit takes history down to this share of the room."""
    pin_task: bool = True
    """Whether a cut pins the conversation's first user message (the task)."""
    compaction: ResultCompaction = field(default_factory=ResultCompaction)
    """Which results may be compacted, and which are excluded (kept whole across cuts)."""


class ReplayView(Protocol):
    """A history as the policy reads it, with what is known of it so far.

    Positions are history positions; the lists of positions are sorted. The costs and
    totals are under the decisions given: a compacted result costs its placeholder.
    """

    @property
    def settings(self) -> CacheAwareSettings:
        """The budget, the watermarks' shares, pinning and compaction."""

    @property
    def messages(self) -> Sequence[BaseMessage]:
        """The history, by position: the policy reads kinds and tool calls of it."""

    @property
    def tokens(self) -> Sequence[int]:
        """The tokens of each position read so far, as it is sent whole."""

    @property
    def users(self) -> Sequence[int]:
        """Positions of the user's own messages."""

    @property
    def systems(self) -> Sequence[int]:
        """Positions of the system messages."""

    @property
    def added(self) -> Sequence[int]:
        """Positions of what an earlier cut added (its note and data turn): a request
        governed again holds them, and they are no messages a note counts."""

    @property
    def excluded(self) -> Sequence[int]:
        """Positions of the results of excluded tools."""

    @property
    def compactable(self) -> Sequence[int]:
        """Positions of the results compaction may clear, oldest first."""

    @property
    def task(self) -> int | None:
        """Position of the conversation's first user message (the task), if any."""

    @property
    def task_fits(self) -> bool:
        """Whether the task can be pinned (within its share of the budget, cut to it)."""

    @property
    def task_cut(self) -> bool:
        """Whether the pinned task is cut to its share."""

    @property
    def task_tokens(self) -> int:
        """What pinning the task costs."""

    @property
    def tool_names(self) -> Collection[str]:
        """The tools called so far (a note lists no tool name as a value)."""

    @property
    def fixed_tokens(self) -> int:
        """The call's tokens outside the messages (request overhead, tool definitions)."""

    @property
    def offloading(self) -> bool:
        """Whether what leaves the request is kept: the note then lists handles."""

    def summary(self, cut: int) -> str | None:
        """The summary of the messages before `cut`, where one was made (none for 0)."""

    def cost(self, decisions: Decisions, index: int) -> int:
        """What position `index` costs in the request under `decisions`."""

    def compacted_tokens(self, index: int) -> int:
        """What the result at `index` costs compacted."""

    def total(self, decisions: Decisions, *, note: bool = True) -> int:
        """The request's tokens under `decisions` (with the note at the cut, where `note`)."""

    def calibration(self, decisions: Decisions) -> Calibration:
        """The factor from estimated to provider-counted tokens."""

    def corrected_total(self, decisions: Decisions, *, note: bool = True) -> int:
        """The request's tokens as the provider counts them: what thresholds compare."""

    # What the note at a cut costs (policy/note_at_cut.py decides which note, and what
    # it lists): counted where the engine keeps the counts.

    @property
    def full_note_tokens(self) -> int:
        """What the full (not brief) plain note of a large cut costs."""

    @property
    def framing_tokens(self) -> int:
        """What the full note's data turn adds beside the values it lists (its frame, the
        note's pointer to it, the continuation turn after it)."""

    def transcript_line_tokens(self, *, brief: bool) -> int:
        """What the call that reads a cut's transcript adds to the note."""

    def note_tokens(self, omitted: int, *, brief: bool) -> int:
        """Tokens of the plain note for `omitted` messages (without summary or values)."""

    def data_tokens(self, omitted: int, values: str, *, brief: bool) -> int:
        """What listing `values` (with offload, handle lines) adds to the plain note of
        `omitted` messages: the data turn, the note's pointer to it, and the continuation
        turn after it."""

    def note_turns_tokens(self, omitted: int, summary: str, values: str, *, brief: bool) -> int:
        """Tokens of the note's turns with `summary` and `values` (with the continuation
        turn after a data turn)."""

    def summary_frame_tokens(self, omitted: int, values: str, *, brief: bool) -> int:
        """Tokens of the note's turns with `values` and a summary, but the summary's own
        text (with the continuation turn after them)."""

    def keep_cut(self, positions: Iterable[int]) -> tuple[str, list[OffloadItem]] | None:
        """Keep the messages at `positions` (a cut leaves them out) and the cut's
        transcript of them: the transcript's handle, and the items of those a line of the
        note names, oldest first; None where nothing is kept."""
