"""When a call edits the request, and the edit it makes: the cache-aware policy's step.

Every edit to a message throws away the provider's prompt cache from that message on.
The seed rules (keep the newest N results whole, slide the cut by one iteration per call)
edit a message near the end of the prompt on almost every call. This policy edits rarely
and in batches instead, between the watermarks (policy/watermarks.py):

- nothing is compacted while the history stays under the high watermark;
- when it crosses the high watermark, the oldest compactable results are compacted,
  oldest first, until it is under the low watermark (policy/batch_compaction.py); a
  result once compacted stays compacted;
- where that leaves history above `tuning.COMPACTION_ENOUGH_SHARE` of the way from the low
  to the high watermark, the conversation is cut too, in the same step, in whole groups,
  down to the low watermark (policy/cut.py).
- reasoning is bound to the request it was made after (docs/reasoning.md), so edits
  come where they cost the least of it: a call that starts a user turn after a reasoning
  model's answer edits already past `tuning.TURN_START_SHARE` of the way from the low to
  the high watermark (the turn's reasoning is then made after the edit), and a call inside
  a tool loop keeps the turn's decisions while the request fits the budget.

Example (a user turn after an answer that carries a thinking block starts early):
    >>> from langchain_core.messages import AIMessage, HumanMessage
    >>> thinking = {"type": "thinking", "thinking": "...", "signature": "s"}
    >>> answer = AIMessage([thinking, {"type": "text", "text": "done"}])
    >>> answer_carries_bound_reasoning([HumanMessage("go"), answer, HumanMessage("more")], 2)
    True
    >>> answer_carries_bound_reasoning([HumanMessage("go"), AIMessage("done")], 1)
    False
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from langchain_context_governance import tuning
from langchain_context_governance._added import added_kind, user_parts
from langchain_context_governance._messages import declared_tool_call_ids, results_run_start
from langchain_context_governance._reasoning import carries_bound_reasoning
from langchain_context_governance.policy.batch_compaction import compact_oldest
from langchain_context_governance.policy.cut import cut_groups
from langchain_context_governance.policy.decisions import Decisions
from langchain_context_governance.policy.view import ReplayView
from langchain_context_governance.policy.watermarks import excluded_limit, room, watermarks

__all__ = ["answer_carries_bound_reasoning", "decide_call", "edit_threshold"]


def decide_call(view: ReplayView, decisions: Decisions, *, end: int) -> None:
    """The decisions at one model call on the first `end` messages.

    Past the high watermark (or where a result of an excluded tool left out at an
    earlier cut fits again), the oldest results are compacted, down to the low
    watermark; where that is not enough, the conversation is cut too, in the same
    step, down to the low watermark: one edit of the request instead of a compaction
    now and a cut a few calls later.
    """
    high, low = watermarks(view, decisions, end=end)
    if view.corrected_total(decisions) <= edit_threshold(view, end=end, high=high, low=low) and (
        not _excluded_fits_again(view, decisions, end=end)
    ):
        return
    compact_oldest(view, decisions, end=end, low=low)
    cut_above = low + int((high - low) * tuning.COMPACTION_ENOUGH_SHARE)
    if view.corrected_total(decisions) > cut_above or decisions.readmit_tokens:
        cut_groups(view, decisions, end=end, low=low)


def edit_threshold(view: ReplayView, *, end: int, high: int, low: int) -> int:
    """Above how many tokens the call on the first `end` messages edits the request.

    The reasoning a model makes is bound to the request it was made after, and an edit
    invalidates what was made before it (docs/reasoning.md). A call that starts a user
    turn of a reasoning model (the user's message right after an answer that carries
    reasoning bound to its prefix) edits already where the history is past
    `tuning.TURN_START_SHARE` of the way from the low to the high watermark: the turn's
    reasoning is then made after the edit. A call inside the turn's tool
    loop keeps the turn's decisions while the request fits the budget, whatever the
    high watermark; other calls edit past the high watermark.
    """
    history = view.messages
    # System messages at the end do not end a turn or a loop: profiles move them.
    while end > 0 and isinstance(history[end - 1], SystemMessage):
        end -= 1
    if end == 0:
        return high
    last = history[end - 1]
    if (
        isinstance(last, HumanMessage)
        and added_kind(last) is None
        and answer_carries_bound_reasoning(history, end - 1)
    ):
        return low + int((high - low) * tuning.TURN_START_SHARE)
    if isinstance(last, ToolMessage):
        return max(high, view.settings.max_tokens)
    return high


def _excluded_fits_again(view: ReplayView, decisions: Decisions, *, end: int) -> bool:
    """Whether the newest result of an excluded tool an earlier cut left out (for want
    of room beside the higher protection classes) would fit now."""
    if not decisions.readmit_tokens:
        return False
    base, _ = room(view, decisions, end=end)
    limit = excluded_limit(view, decisions, end=end)
    return view.calibration(decisions).corrected(base + decisions.readmit_tokens) <= limit


def answer_carries_bound_reasoning(history: Sequence[BaseMessage], index: int) -> bool:
    """Whether the answer before the user turn that ends at `index` carries reasoning bound
    to its prefix and makes no call: the assistant messages between the turn before and
    this one, as the request sends them. A turn of several user messages starts where the
    first of them does (the request joins them); system messages go to the front, results
    without a call are dropped and the user turns repairs add are no user's, so none of
    them ends the answer (the alternation rules may merge its messages into one); a result
    of a call ends it, as the answer comes after the tool loop. A user turn that carries tool
    output (a chat template without a tool role writes the results there, and the calls as
    the answer's text) follows calls: no turn starts there."""
    while index >= 0 and _in_the_user_turn(history[index]):
        if any(kind == "tool-output" for _, kind in user_parts(history[index])):
            return False
        index -= 1
    bound = False
    while index >= 0:
        message = history[index]
        if isinstance(message, AIMessage):
            if declared_tool_call_ids(message):
                return False
            bound = bound or carries_bound_reasoning(message)
        elif _ends_the_answer(history, index):
            break
        index -= 1
    return bound


def _ends_the_answer(history: Sequence[BaseMessage], index: int) -> bool:
    """A user's turn before the answer, or a result of a call (the tool loop before it)."""
    message = history[index]
    if isinstance(message, HumanMessage):
        return added_kind(message) != "user-turn"
    return isinstance(message, ToolMessage) and _answers_its_group(history, index)


def _answers_its_group(history: Sequence[BaseMessage], index: int) -> bool:
    """Whether the result at `index` answers a call of the assistant message its group
    opens with (the repairs drop any other)."""
    opening = results_run_start(history, index)
    result = history[index]
    assert isinstance(result, ToolMessage)
    return opening > 0 and result.tool_call_id in declared_tool_call_ids(history[opening - 1])


def _in_the_user_turn(message: BaseMessage) -> bool:
    """A user's own message, or a system message (which goes to the front)."""
    if isinstance(message, HumanMessage):
        return added_kind(message) is None
    return isinstance(message, SystemMessage)
