"""The replay's side of the policy's view: one history and what the replay learned of it.

The cache-aware policy (policy/edit_trigger.py and the modules it calls) reads a history
through `policy.view.ReplayView`; `HistoryView` is that view over the replay's
bookkeeping (`ReplayLearning`), its request assembly (what a compacted result costs) and
its note sizing. The replay makes one for the history it plans, and feeds the policy
through it.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence

from langchain_core.messages import BaseMessage

from langchain_context_governance.offload.kept import Offload
from langchain_context_governance.policy.decisions import Decisions
from langchain_context_governance.policy.view import CacheAwareSettings
from langchain_context_governance.state.note_sizing import NoteSizing
from langchain_context_governance.state.replay_state import ReplayLearning
from langchain_context_governance.state.request_assembly import RequestAssembly
from langchain_context_governance.tokens.calibration import Calibration, SharedCalibration

__all__ = ["HistoryView"]


class HistoryView:
    """`policy.view.ReplayView` over a history and the replay's state of it."""

    __slots__ = ("_assembly", "_learning", "_offload", "_shared", "_sizing", "messages", "settings")

    def __init__(
        self,
        messages: Sequence[BaseMessage],
        *,
        settings: CacheAwareSettings,
        learning: ReplayLearning,
        sizing: NoteSizing,
        assembly: RequestAssembly,
        offload: Offload | None,
        shared_calibration: SharedCalibration | None,
    ) -> None:
        """`offload`: where the plan keeps what leaves its request (placeholders and the
        note then show handles, and cost more); `shared_calibration`: the model's default,
        used until the conversation has its own."""
        self.messages = messages
        self.settings = settings
        self._learning = learning
        self._sizing = sizing
        self._assembly = assembly
        self._offload = offload
        self._shared = shared_calibration

    @property
    def tokens(self) -> array[int]:
        return self._learning.tokens

    @property
    def users(self) -> list[int]:
        return self._learning.users

    @property
    def excluded(self) -> list[int]:
        return self._learning.excluded

    @property
    def compactable(self) -> list[int]:
        return self._learning.compactable

    @property
    def task(self) -> int | None:
        return self._learning.task

    @property
    def task_fits(self) -> bool:
        return self._learning.task_fits

    @property
    def task_cut(self) -> bool:
        return self._learning.task_cut

    @property
    def task_tokens(self) -> int:
        return self._learning.task_tokens

    @property
    def fixed_tokens(self) -> int:
        return self._sizing.fixed

    def cost(self, decisions: Decisions, index: int) -> int:
        if self._learning.is_compacted(index, decisions.compacted_count):
            return self.compacted_tokens(index)
        return self._learning.tokens[index]

    def compacted_tokens(self, index: int) -> int:
        return self._assembly.compacted_tokens(self.messages, index, self._learning, self._offload)

    def total(self, decisions: Decisions, *, note: bool = True) -> int:
        learning = self._learning
        pinned = 0 if decisions.pinned is None else learning.tokens[decisions.pinned]
        if decisions.task_pinned:
            pinned += learning.task_tokens
        pinned += decisions.kept_tokens
        if decisions.pinned_kept and decisions.pinned is not None:
            pinned -= learning.tokens[decisions.pinned]
        if note:
            omitted = self._sizing.omitted(learning, decisions)
            if omitted > 0:
                pinned += self._sizing.note_tokens(learning, decisions, omitted)
                pinned += decisions.note_values_tokens
        fixed = self._sizing.fixed + decisions.rules_tokens
        return fixed + decisions.system_tokens + pinned + decisions.history_tokens

    def calibration(self, decisions: Decisions) -> Calibration:
        """The conversation's own calibration, or the model's default before its first."""
        if decisions.calibration.observations or self._shared is None:
            return decisions.calibration
        return self._shared.value

    def corrected_total(self, decisions: Decisions, *, note: bool = True) -> int:
        return self.calibration(decisions).corrected(self.total(decisions, note=note))

    def reserve_note_values(self, decisions: Decisions, *, room: int) -> int:
        return self._sizing.reserve(self._learning, decisions, room)

    def list_note(self, decisions: Decisions, *, end: int) -> None:
        self._sizing.list_note(
            self.messages, self._learning, decisions, end=end, offload=self._offload
        )
