"""The replay's side of the policy's view: one history and what the replay learned of it.

The cache-aware policy (policy/edit_trigger.py and the modules it calls) reads a history
through `policy.view.ReplayView`; `HistoryView` is that view over the replay's
bookkeeping (`ReplayLearning`), its request assembly (what a compacted result costs, the
items of what a cut leaves out) and its note sizing (what the note's turns cost). The
replay makes one for the history it plans, and feeds the policy through it.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Sequence

from langchain_core.messages import BaseMessage

from langchain_context_governance.offload.items import OffloadItem, cut_item
from langchain_context_governance.offload.kept import Offload
from langchain_context_governance.policy.decisions import Decisions
from langchain_context_governance.policy.note_at_cut import omitted_count, plain_note_tokens
from langchain_context_governance.policy.view import CacheAwareSettings
from langchain_context_governance.state.note_sizing import NoteSizing
from langchain_context_governance.state.replay_state import ReplayLearning
from langchain_context_governance.state.request_assembly import RequestAssembly
from langchain_context_governance.tokens.calibration import Calibration, SharedCalibration

__all__ = ["HistoryView"]


class HistoryView:
    """`policy.view.ReplayView` over a history and the replay's state of it."""

    __slots__ = (
        "_assembly",
        "_learning",
        "_offload",
        "_shared",
        "_sizing",
        "_summary_for",
        "messages",
        "settings",
    )

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
        summary_for: Callable[[int], str | None] | None,
    ) -> None:
        """`offload`: where the plan keeps what leaves its request (placeholders and the
        note then show handles, and cost more); `shared_calibration`: the model's default,
        used until the conversation has its own; `summary_for(cut)`: the caller's summary
        of a cut, where it has one."""
        self.messages = messages
        self.settings = settings
        self._learning = learning
        self._sizing = sizing
        self._assembly = assembly
        self._offload = offload
        self._shared = shared_calibration
        self._summary_for = summary_for

    @property
    def tokens(self) -> array[int]:
        return self._learning.tokens

    @property
    def users(self) -> list[int]:
        return self._learning.users

    @property
    def systems(self) -> list[int]:
        return self._learning.system_indices

    @property
    def added(self) -> list[int]:
        return self._learning.added

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
    def tool_names(self) -> dict[str, None]:
        return self._learning.tool_names

    @property
    def fixed_tokens(self) -> int:
        return self._sizing.fixed

    @property
    def offloading(self) -> bool:
        return self._sizing.offloading

    def summary(self, cut: int) -> str | None:
        if self._summary_for is None or not cut:
            return None
        return self._summary_for(cut)

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
            omitted = omitted_count(self, decisions)
            if omitted > 0:
                pinned += plain_note_tokens(self, decisions, omitted)
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

    @property
    def full_note_tokens(self) -> int:
        return self._sizing.full_note_tokens()

    @property
    def framing_tokens(self) -> int:
        return self._sizing.framing_tokens(self._learning)

    def transcript_line_tokens(self, *, brief: bool) -> int:
        return self._sizing.transcript_line_tokens(self._learning, brief=brief)

    def note_tokens(self, omitted: int, *, brief: bool) -> int:
        return self._sizing.note_tokens(self._learning, omitted, brief=brief)

    def data_tokens(self, omitted: int, values: str, *, brief: bool) -> int:
        return self._sizing.data_tokens(self._learning, omitted, values, brief=brief)

    def note_turns_tokens(self, omitted: int, summary: str, values: str, *, brief: bool) -> int:
        return self._sizing.turns_tokens(omitted, summary, values, brief=brief)

    def summary_frame_tokens(self, omitted: int, values: str, *, brief: bool) -> int:
        return self._sizing.summary_frame_tokens(omitted, values, brief=brief)

    def keep_cut(self, positions: Iterable[int]) -> tuple[str, list[OffloadItem]] | None:
        offload = self._offload
        if offload is None:
            return None
        parts: list[OffloadItem] = []
        listed: list[OffloadItem] = []
        for index in positions:
            item, named = self._assembly.cut_part(self.messages, index, offload)
            if item is not None:
                parts.append(item)
                if named:
                    listed.append(item)
        if not parts:
            return None
        transcript = cut_item(parts)
        offload.keep(transcript)
        return transcript.handle, listed
