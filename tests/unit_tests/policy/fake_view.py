"""A small hand-made `policy.view.ReplayView`: the policy driven without the replay.

Each message costs what the test says (`tokens`), a compacted result `COMPACTED_TOKENS`;
the note's turns cost what the test says (nothing by default: `note`, `full_note`,
`data_frame`, and a token per `chars_per_token` characters of what the data turn quotes),
and `total` leaves the note out, so that a test's arithmetic is the policy's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from langchain_context_governance._added import added_kind
from langchain_context_governance._messages import iter_declared_tool_calls
from langchain_context_governance.offload.items import OffloadItem, cut_item, message_item
from langchain_context_governance.policy.decisions import Decisions
from langchain_context_governance.policy.view import CacheAwareSettings
from langchain_context_governance.tokens.calibration import Calibration

COMPACTED_TOKENS = 10
CHARS_PER_TOKEN = 4
# What the call that reads a cut's transcript adds to the data turn's frame.
TRANSCRIPT_LINE_TOKENS = 12


@dataclass
class FakeView:
    """`ReplayView` over `messages`, each costing `tokens[i]`."""

    messages: Sequence[BaseMessage]
    tokens: Sequence[int]
    settings: CacheAwareSettings
    fixed_tokens: int = 0
    # The plain note (brief or not), the full note of a large cut (which makes the note
    # brief where the room is small), the data turn's frame beside what it quotes.
    note: int = 0
    full_note: int = 0
    data_frame: int = 0
    # The policy guesses a token per `CHARS_PER_TOKEN` characters of values: fewer here
    # make values cost more than the guess.
    chars_per_token: int = CHARS_PER_TOKEN
    offloading: bool = False
    summaries: Mapping[int, str] = field(default_factory=dict)
    # The positions each `keep_cut` kept, in order.
    kept_cuts: list[list[int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        assert len(self.tokens) == len(self.messages)

    @property
    def users(self) -> list[int]:
        return [
            i
            for i, m in enumerate(self.messages)
            if isinstance(m, HumanMessage) and added_kind(m) is None
        ]

    @property
    def systems(self) -> list[int]:
        return [i for i, m in enumerate(self.messages) if isinstance(m, SystemMessage)]

    @property
    def added(self) -> list[int]:
        return [i for i, m in enumerate(self.messages) if added_kind(m) in {"cut-note", "cut-data"}]

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
    def tool_names(self) -> list[str]:
        return [
            name
            for m in self.messages
            if isinstance(m, AIMessage)
            for _, name in iter_declared_tool_calls(m)
        ]

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

    def summary(self, cut: int) -> str | None:
        return self.summaries.get(cut) if cut else None

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

    @property
    def full_note_tokens(self) -> int:
        return self.full_note

    @property
    def framing_tokens(self) -> int:
        return self.data_frame

    def transcript_line_tokens(self, *, brief: bool) -> int:
        return self.data_frame + TRANSCRIPT_LINE_TOKENS

    def note_tokens(self, omitted: int, *, brief: bool) -> int:
        return self.note

    def data_tokens(self, omitted: int, values: str, *, brief: bool) -> int:
        return self.data_frame + len(values) // self.chars_per_token

    def note_turns_tokens(self, omitted: int, summary: str, values: str, *, brief: bool) -> int:
        return self.note + self.data_frame + (len(summary) + len(values)) // self.chars_per_token

    def summary_frame_tokens(self, omitted: int, values: str, *, brief: bool) -> int:
        return self.note + self.data_frame + len(values) // self.chars_per_token

    def keep_cut(self, positions: Iterable[int]) -> tuple[str, list[OffloadItem]] | None:
        kept = list(positions)
        self.kept_cuts.append(kept)
        parts = [message_item(self.messages[index]) for index in kept]
        if not self.offloading or not parts:
            return None
        named = [
            item
            for index, item in zip(kept, parts, strict=True)
            if not isinstance(self.messages[index], AIMessage)
        ]
        return cut_item(parts).handle, named

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
