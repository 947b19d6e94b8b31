"""The cut: whole groups from the front, down to the low watermark, kept by protection class.

Where compacting the oldest results is not enough, the conversation is cut too, in the
same step, in whole groups, down to the low watermark (one edit of the request, not a
compaction now and another a few calls later), and that cut point is kept until the high
watermark is crossed again.

What a cut keeps, by protection class (policy/protection.py): the system messages; the
current user turn (the newest group is never cut, and the latest user message before the
cut is pinned); the task (the conversation's first user message, pinned after the system
messages, cut to a quarter of the budget where larger); the groups holding results of
`exclude_tools` (whole: an assistant message stays with all its results), newest first,
while they fit the budget beside those (their tokens count in the watermarks' base; one
left out comes back where it fits again); the earlier user messages, newest first, within
`tuning.EARLIER_USERS_SHARE` of the room; then the note at the cut, which names how many
messages it leaves out, and the data turn after it, which lists the values they held (ids,
codes, dates, names, paths: `policy/note.py`) within `tuning.NOTE_VALUES_SHARE` of the
room. The rest goes by age. Nothing governance adds is written into a message: the note
is a user turn of its own, joined to the user turns it meets as a separate run of content
blocks (see `_added.py`); what it quotes from the omitted messages is an assistant turn
framed as data, never user text.

Example (the groups of excluded results that fit, newest first):
    >>> from langchain_context_governance.policy.protection import EXCLUDED_TOOL
    >>> from langchain_context_governance.tokens.calibration import UNCALIBRATED
    >>> groups = [KeptGroup(8, 10, 300, EXCLUDED_TOOL), KeptGroup(4, 6, 500, EXCLUDED_TOOL)]
    >>> kept, left_out = fitting(groups, base=1_000, limit=1_500, calibration=UNCALIBRATED)
    >>> [group.start for group in kept], left_out.start
    ([8], 4)
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from dataclasses import replace

from langchain_core.messages import HumanMessage, SystemMessage

from langchain_context_governance import tuning
from langchain_context_governance._added import added_kind
from langchain_context_governance._messages import group_end, group_start, results_run_start
from langchain_context_governance._reasoning import thinking_tool_loop_start
from langchain_context_governance.policy.decisions import Decisions, KeptGroup
from langchain_context_governance.policy.note_at_cut import list_note, values_reserve
from langchain_context_governance.policy.protection import EARLIER_USER, EXCLUDED_TOOL
from langchain_context_governance.policy.view import ReplayView
from langchain_context_governance.policy.watermarks import excluded_limit, room, watermarks
from langchain_context_governance.tokens.calibration import Calibration

__all__ = ["cut_groups", "excluded_groups_newest_first", "fitting", "pin_for"]


def cut_groups(view: ReplayView, decisions: Decisions, *, end: int, low: int) -> None:
    """Cut whole groups from the front, down to the low watermark, newest group kept.

    What goes before the cut is kept or not by protection class: the results of
    excluded tools (with their calls), newest first, while they fit beside the
    higher classes (`_keep_excluded_that_fit`); the earlier user messages, newest
    first, within `tuning.EARLIER_USERS_SHARE` of the room history has, and giving way
    where they take history over the high watermark; then the task, where it is
    what keeps the request over budget. The note lists the values of what the cut
    leaves out (policy/note_at_cut.py's `list_note`), in room reserved for them before
    cutting.
    """
    history = view.messages
    newest = group_start(history, end)
    # A tool loop that opens with a thinking block is cut whole or not at all (where
    # an earlier call point cut its opening already, nothing is left to keep whole).
    loop = thinking_tool_loop_start(history, end)
    if loop is not None and loop >= decisions.cut:
        newest = min(newest, loop)
    _, space = room(view, decisions, end=end)
    decisions.note_values_tokens = values_reserve(view, decisions, room=space)
    # Results of excluded tools kept again (or left out) move the watermarks: the
    # front is cut again to the low watermark they leave, once.
    for _ in range(2):
        _cut_front(view, decisions, newest=newest, end=end, low=low)
        _keep_excluded_that_fit(view, decisions, end=end)
        _, low = watermarks(view, decisions, end=end)
        if decisions.cut >= newest or view.corrected_total(decisions) <= low:
            break
    _earlier_users_give_way(view, decisions, end=end, low=low)
    max_tokens = view.settings.max_tokens
    if decisions.task_pinned and view.corrected_total(decisions, note=False) > max_tokens:
        # The task is left out where it is what keeps the request over budget (the
        # note too: it is left out of a request it does not fit).
        without_task = replace(decisions)
        pin_for(view, without_task, end=end, pin_task=False)
        if view.corrected_total(without_task, note=False) <= max_tokens:
            decisions.task_pinned, decisions.pinned = False, without_task.pinned
    list_note(view, decisions, end=end)


def _cut_front(view: ReplayView, decisions: Decisions, *, newest: int, end: int, low: int) -> None:
    """Move the cut over whole groups until history is under `low` or only the newest
    group is left; earlier user messages are kept as they are passed."""
    history = view.messages
    while decisions.cut < newest and view.corrected_total(decisions) > low:
        start = decisions.cut
        stop = group_end(history, start, end)
        cost = sum(
            view.cost(decisions, index)
            for index in range(start, stop)
            if not isinstance(history[index], SystemMessage)
        )
        decisions.history_tokens -= cost
        if _is_earlier_user(view, start):
            decisions.keep(KeptGroup(start, stop, cost, EARLIER_USER))
        for index in range(start, stop):
            message = history[index]
            if isinstance(message, HumanMessage) and added_kind(message) is None:
                decisions.last_user_before_cut = index
        decisions.cut = stop
        pin_for(view, decisions, end=end)


def _is_earlier_user(view: ReplayView, index: int) -> bool:
    """Whether a cut keeps the message at `index` as an earlier user message: a user's
    own message, but the task where it is pinned on its own."""
    message = view.messages[index]
    if not isinstance(message, HumanMessage) or added_kind(message) is not None:
        return False
    return not (index == view.task and view.settings.pin_task and view.task_fits)


def _keep_excluded_that_fit(view: ReplayView, decisions: Decisions, *, end: int) -> None:
    """Keep the groups before the cut that hold results of excluded tools, newest
    first, while they fit the budget beside the higher protection classes (the system
    messages, the task, the current turn).

    Where one kept so far no longer fits, they give way in one step, down to what
    leaves the history the room between the watermarks (`excluded_limit`), so that the
    next calls do not each give up one (a history of excluded results only would be cut
    on every call). The cost of the newest one left out is kept (`readmit_tokens`): a
    later call where it fits that way (the current turn moved on) takes it back, within
    the same limit (taken back up to the budget, the next call would give way again).
    """
    before = {g.start for g in decisions.kept_groups if g.why == EXCLUDED_TOOL}
    gave_way_before = decisions.readmit_tokens > 0
    for group in [g for g in decisions.kept_groups if g.why == EXCLUDED_TOOL]:
        decisions.give_up(group)
    base, _ = room(view, decisions, end=end)
    calibration = view.calibration(decisions)
    groups = list(excluded_groups_newest_first(view, decisions))
    kept, left_out = fitting(
        groups, base=base, limit=view.settings.max_tokens, calibration=calibration
    )
    if gave_way_before or not before.issubset(group.start for group in kept):
        limit = excluded_limit(view, decisions, end=end)
        kept, left_out = fitting(groups, base=base, limit=limit, calibration=calibration)
    decisions.readmit_tokens = 0 if left_out is None else left_out.tokens
    for group in reversed(kept):
        decisions.keep(group)
    decisions.kept_groups = tuple(sorted(decisions.kept_groups, key=lambda g: g.start))


def excluded_groups_newest_first(view: ReplayView, decisions: Decisions) -> Iterator[KeptGroup]:
    """The groups before the cut that hold results of excluded tools, newest first."""
    history = view.messages
    excluded = view.excluded
    position = bisect.bisect_left(excluded, decisions.cut) - 1
    while position >= 0:
        # The group opens with the message its results follow (their calls').
        start = max(results_run_start(history, excluded[position]) - 1, 0)
        stop = group_end(history, start, decisions.cut)
        position = bisect.bisect_left(excluded, start) - 1
        cost = sum(view.cost(decisions, index) for index in range(start, stop))
        yield KeptGroup(start, stop, cost, EXCLUDED_TOOL)


def fitting(
    groups: Iterator[KeptGroup] | Sequence[KeptGroup],
    *,
    base: int,
    limit: int,
    calibration: Calibration,
) -> tuple[list[KeptGroup], KeptGroup | None]:
    """The leading `groups` that fit `limit` on top of `base`, and the first that does not."""
    kept: list[KeptGroup] = []
    total = base
    for group in groups:
        if calibration.corrected(total + group.tokens) > limit:
            return kept, group
        total += group.tokens
        kept.append(group)
    return kept, None


def _earlier_users_give_way(view: ReplayView, decisions: Decisions, *, end: int, low: int) -> None:
    """The earlier user messages kept across the cut give way, oldest first: beyond
    `tuning.EARLIER_USERS_SHARE` of the room history has; and where history is still over the
    high watermark, in one step, so that the next calls do not each move the cut by
    one group: down to the low watermark, or to half the room the rest leaves under
    the high one; where the rest alone is over it, only as far as the budget needs."""
    _, space = room(view, decisions, end=end)
    users = decisions.kept_tokens - decisions.kept_excluded_tokens
    share = int(space * tuning.EARLIER_USERS_SHARE)
    high, _ = watermarks(view, decisions, end=end)
    total = view.corrected_total(decisions)
    rest = total - users
    target = view.settings.max_tokens if rest >= high else max(low, (rest + high) // 2)
    target = target if total > high else total
    while users > share or view.corrected_total(decisions) > target:
        oldest = next((g for g in decisions.kept_groups if g.why == EARLIER_USER), None)
        if oldest is None:
            break
        decisions.give_up(oldest)
        users -= oldest.tokens
        if oldest.start == decisions.pinned:
            decisions.pinned_kept = False


def pin_for(view: ReplayView, decisions: Decisions, *, end: int, pin_task: bool = True) -> None:
    """The user messages to pin in front of the cut.

    The task, verbatim where it fits its share of the budget and cut to it where
    not; and the latest user message before the cut, whole, unless the kept part
    opens with a user message. Where that latest one is an oversized task, it is
    pinned whole as before (the last resort cuts it where the request is too large),
    so that governing the request again pins it the same way.
    """
    history = view.messages
    latest = decisions.last_user_before_cut
    for index in range(decisions.cut, end):
        if isinstance(history[index], SystemMessage):
            continue
        if isinstance(history[index], HumanMessage):
            latest = None
        break
    task = view.task
    pinnable = pin_task and view.settings.pin_task and view.task_fits
    pinnable = pinnable and task is not None and task < decisions.cut
    if pinnable and latest is not None and latest == task and view.task_cut:
        # An oversized task that is also the latest user message is pinned whole.
        pinnable = False
    decisions.task_pinned = pinnable
    decisions.pinned = None if pinnable and latest == task else latest
    decisions.pinned_kept = decisions.pinned is not None and _is_kept(decisions, decisions.pinned)


def _is_kept(decisions: Decisions, start: int) -> bool:
    """Whether a kept group starts at `start`. The newest kept group is looked at first:
    the latest user message before the cut usually is it, and a cut that moves over many
    groups asks once per group (a scan of every kept group each time made first contact
    grow faster than the history)."""
    groups = decisions.kept_groups
    if groups and groups[-1].start == start:
        return True
    return any(group.start == start for group in groups)
