"""Compact the oldest results in one batch, down to the low watermark.

Past the high watermark, the oldest compactable results are compacted, oldest first,
until history is under the low watermark; a result once compacted stays compacted
(`Decisions.compacted_count` only grows). What may be compacted at all, and which newest
results stay whole, is policy/compaction.py's (`ResultCompaction.compactable_count`).
"""

from __future__ import annotations

import bisect

from langchain_context_governance.policy.decisions import Decisions
from langchain_context_governance.policy.view import ReplayView

__all__ = ["compact_oldest", "compaction_limit"]


def compaction_limit(view: ReplayView, *, end: int) -> int:
    """How many of the compactable results before `end` may be compacted."""
    available = bisect.bisect_left(view.compactable, end)
    return view.settings.compaction.compactable_count(available)


def compact_oldest(view: ReplayView, decisions: Decisions, *, end: int, low: int) -> None:
    """Compact the oldest results not compacted yet, oldest first, while the request is
    over `low` and compaction may take more of those before `end`."""
    limit = compaction_limit(view, end=end)
    while decisions.compacted_count < limit and view.corrected_total(decisions) > low:
        index = view.compactable[decisions.compacted_count]
        decisions.compacted_count += 1
        compacted = view.compacted_tokens(index)
        saved = view.tokens[index] - compacted
        if index >= decisions.cut:
            decisions.history_tokens -= saved
        # A kept group keeps the cost it had when the cut kept it: an estimate on the
        # safe side, which spares a scan of the kept groups per compacted result.
