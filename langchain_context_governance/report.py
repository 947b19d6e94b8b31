"""The result of one governance call and its report: the types every integration reads.

They live apart from the governor so that the governor, the LangGraph node, the
middleware, the overflow recovery and the tracing all import them from here, and none of
those modules imports another through them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.messages.utils import MessageLikeRepresentation
from langchain_core.prompt_values import PromptValue

from langchain_context_governance.tokens.calibration import Calibration

__all__ = ["GovernanceReport", "GovernanceResult", "GovernorInput"]

GovernorInput = Sequence[MessageLikeRepresentation] | PromptValue | Mapping[str, Any]
"""What a governor governs: messages, a prompt value, or a LangGraph state (a mapping
whose "messages" list is governed)."""


@dataclass(frozen=True)
class GovernanceReport:
    """What one governance run did, and to which messages.

    `changes` maps each pass name to how many messages it changed, removed or added
    (repairs of the history count every repair the history needs, also those decided on
    earlier calls); `budget` is None when no context window is set (repairs only).

    Which messages, by their index in the input list, to answer "why did the model not
    see X?": `compacted` (results sent as the placeholder), `cut` (half-open ranges of
    indices left out of the request; messages inside a range that are listed in `kept`
    were sent anyway), `truncated` (messages whose text was cut to a head and a tail), and
    `kept` (index and protection class of each message before the cut that was still
    sent: "system", "task", "current-turn", "latest-user", "excluded-tool",
    "earlier-user"). `fate(index)` reads them for one message.
    """

    tokens_before: int
    tokens_after: int
    budget: int | None
    changes: dict[str, int] = field(default_factory=dict)
    messages_before: int = 0
    messages_after: int = 0
    fell_back: bool = False
    # Leading messages and tokens identical to the previous request of the same
    # conversation (a provider's prompt cache serves them); None where unknown.
    unchanged_prefix_messages: int | None = None
    unchanged_prefix_tokens: int | None = None
    compacted: tuple[int, ...] = ()
    cut: tuple[tuple[int, int], ...] = ()
    truncated: tuple[int, ...] = ()
    kept: tuple[tuple[int, str], ...] = ()
    # How far the counter is from the provider's own counts in this conversation
    # (tokens/calibration.py); the token figures above are the counter's estimates.
    calibration_factor: float = 1.0
    # The provider profile the request was repaired for (see `ContextGovernor.profile`).
    profile: str = ""
    # Input indices of the messages sent without their bound reasoning (thinking blocks,
    # reasoning items): an edit changed the prefix it was made after (docs/reasoning.md).
    reasoning_dropped: tuple[int, ...] = ()

    @property
    def corrected_tokens_after(self) -> int:
        """`tokens_after` as the provider counts it, by the calibration factor."""
        return Calibration(factor=self.calibration_factor).corrected(self.tokens_after)

    @property
    def within_budget(self) -> bool:
        return self.budget is None or self.corrected_tokens_after <= self.budget

    def fate(self, index: int) -> str:
        """What happened to the input message at `index`: "truncated" where its text was
        cut to fit (wherever it is sent), "cut", "compacted", "kept (<class>)" for a
        protected message before the cut, or "sent".

        Example:
            >>> report = GovernanceReport(10, 5, 8, cut=((1, 4),), kept=((2, "task"),))
            >>> [report.fate(index) for index in range(5)]
            ['sent', 'cut', 'kept (task)', 'cut', 'sent']
        """
        if index in self.truncated:
            return "truncated"
        for position, why in self.kept:
            if position == index:
                return f"kept ({why})"
        if any(start <= index < stop for start, stop in self.cut):
            return "cut"
        if index in self.compacted:
            return "compacted"
        return "sent"

    def __str__(self) -> str:
        budget = "no budget" if self.budget is None else f"budget {self.budget:,}"
        verdict = "" if self.within_budget else " OVER BUDGET"
        changed = ", ".join(f"{name}={count}" for name, count in self.changes.items() if count)
        fallback = ", fell back" if self.fell_back else ""
        profile = f"; profile {self.profile}" if self.profile else ""
        corrected = ""
        if self.calibration_factor != 1.0:
            corrected = f" x {self.calibration_factor:.3g} = {self.corrected_tokens_after:,}"
        tokens = f"tokens {self.tokens_before:,} -> {self.tokens_after:,}{corrected}"
        return (
            f"{tokens} ({budget}{verdict}), "
            f"messages {self.messages_before} -> {self.messages_after}"
            f"{'; ' + changed if changed else ''}{fallback}{profile}"
        )


@dataclass(frozen=True)
class GovernanceResult:
    """The governed messages (what `invoke` returns) and the report of the run.

    `record` is the conversation's governance record after this call, as plain data
    (state/record.py): pass it back as `govern(..., record=...)` on the next call, on any
    worker, to continue where this call left off. The LangGraph node and the middleware
    keep it in the graph state under `RECORD_KEY`.
    """

    messages: list[BaseMessage]
    report: GovernanceReport
    record: dict[str, Any] | None = None
