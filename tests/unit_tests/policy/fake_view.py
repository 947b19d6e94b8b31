"""A small hand-made `policy.view.ReplayView`: the policy driven without the replay.

Each message costs what the test says (`tokens`), a compacted result `COMPACTED_TOKENS`;
the note costs nothing and lists nothing, so that a test's arithmetic is the policy's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage, ToolMessage

from langchain_context_governance._added import added_kind
from langchain_context_governance.policy.decisions import Decisions
from langchain_context_governance.policy.view import CacheAwareSettings
from langchain_context_governance.tokens.calibration import Calibration

COMPACTED_TOKENS = 10


@dataclass
class FakeView:
    """`ReplayView` over `messages`, each costing `tokens[i]`."""

    messages: Sequence[BaseMessage]
    tokens: Sequence[int]
    settings: CacheAwareSettings
    fixed_tokens: int = 0
    notes_listed: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        assert len(self.tokens) == len(self.messages)

    @property
    def users(self) -> list[int]:
        return [
            i
            for i, m in enumerate(self.messages)
            if isinstance(m, HumanMessage) and added_kind(m) is None
        ]

    def _results(self) -> list[tuple[int, ToolMessage]]:
        return [(i, m) for i, m in enumerate(self.messages) if isinstance(m, ToolMessage)]

    @property
    def excluded(self) -> list[int]:
        compaction = self.settings.compaction
        return [i for i, m in self._results() if compaction.is_excluded(m.name or "")]

    @property
    def compactable(self) -> list[int]:
        compaction = self.settings.compaction
        return [i for i, m in self._results() if compaction.may_compact(m, m.name or "")]

    @property
    def task(self) -> int | None:
        return self.users[0] if self.users else None

    @property
    def task_fits(self) -> bool:
        return self.task is not None

    @property
    def task_cut(self) -> bool:
        return False

    @property
    def task_tokens(self) -> int:
        return 0 if self.task is None else self.tokens[self.task]

    def cost(self, decisions: Decisions, index: int) -> int:
        if index in self.compactable[: decisions.compacted_count]:
            return COMPACTED_TOKENS
        return self.tokens[index]

    def compacted_tokens(self, index: int) -> int:
        return COMPACTED_TOKENS

    def total(self, decisions: Decisions, *, note: bool = True) -> int:
        pinned = 0 if decisions.pinned is None else self.tokens[decisions.pinned]
        if decisions.task_pinned:
            pinned += self.task_tokens
        pinned += decisions.kept_tokens
        if decisions.pinned_kept and decisions.pinned is not None:
            pinned -= self.tokens[decisions.pinned]
        fixed = self.fixed_tokens + decisions.rules_tokens
        return fixed + decisions.system_tokens + pinned + decisions.history_tokens

    def calibration(self, decisions: Decisions) -> Calibration:
        return decisions.calibration

    def corrected_total(self, decisions: Decisions, *, note: bool = True) -> int:
        return self.calibration(decisions).corrected(self.total(decisions, note=note))

    def reserve_note_values(self, decisions: Decisions, *, room: int) -> int:
        return 0

    def list_note(self, decisions: Decisions, *, end: int) -> None:
        self.notes_listed.append(end)

    def fresh_decisions(self) -> Decisions:
        """The decisions before any edit: every message sent whole."""
        systems = sum(
            t
            for m, t in zip(self.messages, self.tokens, strict=True)
            if isinstance(m, SystemMessage)
        )
        everything = sum(self.tokens)
        return Decisions(
            system_tokens=systems, history_tokens=everything - systems, raw_tokens=everything
        )
