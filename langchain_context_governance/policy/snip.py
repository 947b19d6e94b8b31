"""The `keep_recent` mode's cut: keep the newest whole groups that fit, on every call.

The default policy cuts rarely and in large steps (policy/cut.py and the replay that feeds
it); this one slides with the conversation: each call keeps the system messages and the
newest messages that fit the budget, in whole tool-call groups (an assistant message with
all its results), so that the kept part never opens with results whose call was cut away.

What it keeps, in order:

- with `pin_task`, the task (policy/task.py: the first user message, cut to its share of
  the budget where larger) right after the system messages, then the newest groups after
  it that fit; where those hold no user message, the latest one before them is pinned
  after the task. The task is left out only where it is what keeps the request over
  budget;
- otherwise the kept part starts with a user message: it is cut forward to its first
  one, or, where it holds none, the nearest earlier user message is pinned in front of it
  and whole groups between them are dropped;
- a tool loop that opens with a thinking block counts as one group (Anthropic wants its
  opening message with the rest of it); where not even the newest group fits beside the
  pins, it is kept all the same: an oversized request beats an invalid one;
- with no user message at all, the last `tuning.KEEP_WITHOUT_USER_MESSAGE` messages.

The room it keeps for the note at the cut is that of a note naming every message; the
note itself is the pass's (passes/snip.py), as is joining the user turns that meet.

Example:
    >>> from langchain_core.messages import HumanMessage, SystemMessage
    >>> from langchain_context_governance.tokens.counter import get_token_counter
    >>> history = [SystemMessage("rules"), HumanMessage("fix it"), HumanMessage("x " * 400)]
    >>> history.append(HumanMessage("and now?"))
    >>> snip = snip_to_budget(history, max_tokens=150, counter=get_token_counter("approximate"))
    >>> [m.content for m in snip.kept], snip.omitted, snip.task_kept
    (['rules', 'fix it', 'and now?'], 1, True)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage, ToolMessage

from langchain_context_governance._added import added_kind, without_added_parts
from langchain_context_governance._messages import group_end, group_start
from langchain_context_governance._reasoning import thinking_tool_loop_start
from langchain_context_governance.policy.last_resort import shortenable_tokens
from langchain_context_governance.policy.note import cut_note
from langchain_context_governance.policy.task import first_task_index, pinned_task_copy
from langchain_context_governance.tokens.counter import MessageTokenCounter
from langchain_context_governance.tuning import KEEP_WITHOUT_USER_MESSAGE


@dataclass(frozen=True)
class Snip:
    """What the cut keeps of a request over budget.

    `kept`: the system messages, then the kept part (the pinned task first where
    `task_kept`); `omitted`: how many other messages it leaves out (the note names them);
    `shortenable`: about how many tokens the last resort could take off the kept part,
    to make room for the note where it does not fit.
    """

    kept: list[BaseMessage]
    omitted: int
    task_kept: bool
    shortenable: int


def snip_to_budget(
    messages: list[BaseMessage],
    *,
    max_tokens: int,
    counter: MessageTokenCounter,
    tools_tokens: int = 0,
    pin_task: bool = True,
) -> Snip | None:
    """What the cut keeps of `messages` in `max_tokens`; None where they fit as they are."""
    if counter.count_messages(messages) + tools_tokens <= max_tokens:
        return None
    systems = [message for message in messages if isinstance(message, SystemMessage)]
    rest = [message for message in messages if not isinstance(message, SystemMessage)]
    if not rest:
        return None
    fixed = counter.request_overhead + tools_tokens
    remaining = max_tokens - fixed - sum(counter.count_message(message) for message in systems)
    # Room for the note, whatever the number of messages it ends up naming.
    remaining -= counter.count_message(HumanMessage(cut_note(len(rest))))
    task = first_task_index(rest) if pin_task else None
    words = None if task is None else without_added_parts(rest[task])  # type: ignore[arg-type]
    task_copy = None if words is None else pinned_task_copy(words, max_tokens, counter)
    kept = _kept_part(rest, counter, remaining)
    task_kept = False
    if task is not None and task_copy is not None:
        with_task = _kept_after_task(rest, task, task_copy, counter, remaining)
        # The task is left out only where it is what keeps the request over budget.
        if counter.count_messages(with_task) <= remaining or (
            counter.count_messages(kept) > remaining
        ):
            kept, task_kept = with_task, True
    return Snip(
        kept=[*systems, *kept],
        omitted=len(rest) - len(kept),
        task_kept=task_kept,
        shortenable=shortenable_tokens(kept, counter),
    )


def newest_groups_within(
    messages: Sequence[BaseMessage],
    counter: MessageTokenCounter,
    budget: int,
    *,
    stop: int = 0,
) -> int:
    """Index where the newest whole groups (after `stop`) that fit in `budget` begin.

    A tool loop that opens with a thinking block counts as one group: Anthropic wants its
    opening message with the rest of it.
    """
    start = len(messages)
    used = 0
    loop = thinking_tool_loop_start(messages)
    while start > stop:
        begin = max(group_start(messages, start), stop)
        if loop is not None and begin > loop:
            begin = max(loop, stop)
        cost = sum(counter.count_message(message) for message in messages[begin:start])
        if used + cost > budget:
            break
        used += cost
        start = begin
    return start


def _newest_group_start(messages: list[BaseMessage]) -> int:
    """Where the newest group begins; a tool loop that opens with thinking is one group."""
    newest = group_start(messages, len(messages))
    loop = thinking_tool_loop_start(messages)
    return newest if loop is None else min(newest, loop)


def _extend_to_group_start(messages: list[BaseMessage], start: int) -> int:
    """Move `start` back so that it does not split an assistant message from its results."""
    if start >= len(messages) or not isinstance(messages[start], ToolMessage):
        return start
    return group_start(messages, group_end(messages, start, len(messages)))


def _last_user_before(messages: list[BaseMessage], end: int) -> int | None:
    """The latest user turn before `end`; a note an earlier cut stored (LangGraph's replace
    mode) is never pinned, a turn the repairs made to open the conversation may be."""
    for index in range(end - 1, -1, -1):
        message = messages[index]
        if isinstance(message, HumanMessage) and added_kind(message) != "cut-note":
            return index
    return None


def _first_user_from(messages: list[BaseMessage], start: int) -> int | None:
    for index in range(start, len(messages)):
        if isinstance(messages[index], HumanMessage):
            return index
    return None


def _kept_after_task(
    rest: list[BaseMessage],
    task: int,
    task_copy: BaseMessage,
    counter: MessageTokenCounter,
    remaining: int,
) -> list[BaseMessage]:
    """The pinned task, then the newest messages after it that fit.

    After the task the kept part may open with an assistant message; where it holds no
    user message, the latest one before it is pinned too.
    """
    budget = remaining - counter.count_message(task_copy)
    after = rest[task + 1 :]
    if not after:
        return [task_copy]
    start = newest_groups_within(after, counter, budget)
    pinned = None if _first_user_from(after, start) is not None else _last_user_before(after, start)
    stop = 0
    if pinned is not None:
        budget -= counter.count_message(after[pinned])
        stop = pinned + 1
        start = newest_groups_within(after, counter, budget, stop=stop)
    if start == len(after) and stop < len(after):
        # An oversized request beats an invalid one: keep the newest whole group.
        start = max(_newest_group_start(after), stop)
    pins = [task_copy] if pinned is None else [task_copy, after[pinned]]
    return [*pins, *after[start:]]


def _kept_part(
    rest: list[BaseMessage], counter: MessageTokenCounter, remaining: int
) -> list[BaseMessage]:
    """The newest non-system messages that fit, starting with a user message."""
    start = newest_groups_within(rest, counter, remaining)
    first_user = _first_user_from(rest, start)
    if first_user is not None:
        return rest[first_user:]
    pinned = _last_user_before(rest, start)
    if pinned is None:
        return rest[_extend_to_group_start(rest, max(len(rest) - KEEP_WITHOUT_USER_MESSAGE, 0)) :]
    after_pin = pinned + 1
    budget = remaining - counter.count_message(rest[pinned])
    start = newest_groups_within(rest, counter, budget, stop=after_pin)
    if start == len(rest) and after_pin < len(rest):
        # An oversized request beats an invalid one: keep the newest whole group.
        start = max(_newest_group_start(rest), after_pin)
    return [rest[pinned], *rest[start:]]
