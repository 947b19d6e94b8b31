"""What the cache-aware policy reads of a history: a read-only view, and its settings.

The policy's functions (policy/edit_trigger.py, policy/watermarks.py,
policy/batch_compaction.py, policy/cut.py) decide from positions, token counts, message
kinds and tool names, and write only the decisions they are given (policy/decisions.py).
What keeps those numbers cheap (counting once, knowing what a compacted result costs,
sizing the note) is the engine's: the replay implements this view (state/replay_view.py),
a test a small fake of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from langchain_core.messages import BaseMessage

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
    def fixed_tokens(self) -> int:
        """The call's tokens outside the messages (request overhead, tool definitions)."""

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

    def reserve_note_values(self, decisions: Decisions, *, room: int) -> int:
        """The tokens a cut in `room` reserves for the values its note lists."""

    def list_note(self, decisions: Decisions, *, end: int) -> None:
        """Fill in what the note of the cut just made lists (`Decisions.note_values`)."""
