"""Which edits of a call change the request before its newest messages, and where.

Reasoning is bound to the prefix it was made after (docs/reasoning.md): where a call's
edits change what the request sends before the kept part (the cut, the pins, the kept
groups, the note), or compact a result it sends, the reasoning made after that point is
left out from then on (`Decisions.left_out`). The replay (state/cache_aware.py) takes
these before and after the decisions of each call point, and compares them.
"""

from __future__ import annotations

from typing import Any

from langchain_context_governance.policy.decisions import Decisions
from langchain_context_governance.policy.note_at_cut import is_brief, omitted_count
from langchain_context_governance.policy.view import ReplayView

__all__ = ["first_compacted_edit", "front_key"]


def front_key(view: ReplayView, decisions: Decisions) -> tuple[Any, ...]:
    """What the request sends before the kept part, where it has a front: the cut, the
    pins, the kept groups and the note's contents (`RequestAssembly.build`)."""
    omitted = omitted_count(view, decisions)
    if decisions.cut == 0 or omitted <= 0:
        return ()
    return (
        decisions.cut,
        decisions.task_pinned,
        decisions.pinned,
        decisions.kept_groups,
        omitted,
        decisions.note_values,
        is_brief(view, decisions),
    )


def first_compacted_edit(view: ReplayView, decisions: Decisions, *, before: int) -> int | None:
    """The first position the results compacted since `before` changed in the request:
    a result sent from the cut on, or -1 for one sent in the front (a kept group)."""
    start = decisions.cut if omitted_count(view, decisions) > 0 else 0
    edited = None
    for index in view.compactable[before : decisions.compacted_count]:
        if index >= start:
            edited = index if edited is None else min(edited, index)
        elif any(group.start <= index < group.stop for group in decisions.kept_groups):
            return -1
    return edited
