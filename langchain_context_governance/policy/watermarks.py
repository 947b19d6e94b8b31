"""The watermarks: shares of the room history has, in request tokens.

Every edit to a message throws away the provider's prompt cache from that message on, so
the cache-aware policy edits rarely and in batches, between two watermarks. They are
shares of the room history has: the budget less the fixed tokens of the call (request
overhead and tool definitions), the system messages and the protected messages (the task,
the current turn, the results of excluded tools kept), so tool definitions filling most of
a small budget do not make every call a cut; never above the budget, so that protected
messages that do not fit are cut too, the task first.
"""

from __future__ import annotations

import bisect

from langchain_context_governance._messages import group_start
from langchain_context_governance.policy.decisions import Decisions
from langchain_context_governance.policy.view import ReplayView

__all__ = ["excluded_limit", "room", "validate_watermarks", "watermarks"]


def validate_watermarks(*, high_watermark: float, low_watermark: float) -> None:
    """A ValueError naming the setting where the shares are not 0 < low < high <= 1."""
    if not 0 < high_watermark <= 1:
        raise ValueError(f"high_watermark must be in (0, 1], got {high_watermark}")
    if not 0 < low_watermark < high_watermark:
        raise ValueError(
            f"low_watermark must be in (0, high_watermark={high_watermark}), got {low_watermark}"
        )


def watermarks(view: ReplayView, decisions: Decisions, *, end: int) -> tuple[int, int]:
    """The high and low watermarks in request tokens, at the call on the first `end`
    messages: shares of the room history has, after the fixed tokens, the system
    messages and the protected messages (the task, the current turn) are counted; never
    above the budget, so that protected messages over it are cut too (the task first)."""
    settings = view.settings
    base, space = room(view, decisions, end=end)
    high = min(base + int(space * settings.high_share), settings.max_tokens)
    return high, min(base + int(space * settings.low_share), settings.max_tokens)


def room(view: ReplayView, decisions: Decisions, *, end: int) -> tuple[int, int]:
    """What the request takes whatever history holds, and the room history has."""
    base = view.fixed_tokens + decisions.rules_tokens + decisions.system_tokens
    base += _protected_tokens(view, end) + decisions.kept_excluded_tokens
    return base, max(view.settings.max_tokens - base, 0)


def _protected_tokens(view: ReplayView, end: int) -> int:
    """Tokens of the task and the current turn (the latest user message and the newest
    group) at the call on the first `end` messages."""
    tokens = view.task_tokens if view.task_fits else 0
    if end == 0:
        return tokens
    newest = group_start(view.messages, end)
    tokens += sum(view.tokens[newest:end])
    users = view.users
    latest = bisect.bisect_left(users, end) - 1
    if latest >= 0 and users[latest] < newest and users[latest] != view.task:
        tokens += view.tokens[users[latest]]
    return tokens


def excluded_limit(view: ReplayView, decisions: Decisions, *, end: int) -> int:
    """What the request may take with the results of excluded tools, where they give
    way or come back: the budget less the share of the room the higher classes leave
    that lies between the watermarks, so that the history has the room a cut leaves to
    grow in (kept up to the budget, they would give way again on the next call: a cut
    on every call of a tool loop whose results are all excluded)."""
    settings = view.settings
    _, space = room(view, decisions, end=end)
    space += decisions.kept_excluded_tokens
    return settings.max_tokens - int(space * (settings.high_share - settings.low_share))
