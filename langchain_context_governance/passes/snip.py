"""Keep the newest messages that fit the input budget, in whole tool-call groups."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.messages.utils import MessageLikeRepresentation

from langchain_context_governance._added import added_kind, cut_note_turn, without_added_parts
from langchain_context_governance._messages import as_message_list, group_end, group_start
from langchain_context_governance._reasoning import thinking_tool_loop_start
from langchain_context_governance.passes._dual_use import runnable_when_called_without_messages
from langchain_context_governance.passes.alternation import merge_leading_user_turns
from langchain_context_governance.policy.budget import task_pin_limit, validate_max_tokens
from langchain_context_governance.policy.last_resort import truncate_message
from langchain_context_governance.policy.note import cut_note
from langchain_context_governance.tokens.counter import (
    MessageTokenCounter,
    TokenCounterSpec,
    get_token_counter,
)
from langchain_context_governance.tuning import (
    KEEP_WITHOUT_USER_MESSAGE,
)


@functools.lru_cache(maxsize=8)
def _named_counter(name: str) -> MessageTokenCounter:
    """One shared counter per counter name, so repeated calls reuse its per-message cache."""
    return get_token_counter(name)


def newest_groups_within(
    messages: list[BaseMessage],
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


def snip_history_with_count(
    messages: list[BaseMessage],
    *,
    max_tokens: int,
    counter: MessageTokenCounter,
    tools_tokens: int = 0,
    pin_task: bool = True,
) -> tuple[list[BaseMessage], int]:
    """Snip to `max_tokens`; return the list and how many messages were removed.

    Returns the very same list when everything fits. Where messages are left out, a
    note at the cut says how many.
    """
    if counter.count_messages(messages) + tools_tokens <= max_tokens:
        return messages, 0
    systems = [message for message in messages if isinstance(message, SystemMessage)]
    rest = [message for message in messages if not isinstance(message, SystemMessage)]
    if not rest:
        return messages, 0
    fixed = counter.request_overhead + tools_tokens
    remaining = max_tokens - fixed - sum(counter.count_message(message) for message in systems)
    # Room for the note, whatever the number of messages it ends up naming.
    remaining -= counter.count_message(HumanMessage(cut_note(len(rest))))
    task = _task_index(rest) if pin_task else None
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
    snipped = [*systems, *kept]
    omitted = len(rest) - len(kept)
    if omitted > 0:
        noted = attach_cut_note(snipped, cut_note(omitted), after_task=task_kept)
        # Where the note takes the request over budget, the last resort shortens the kept
        # part's text to make room for it; left out only where that cannot (a tiny budget).
        over = counter.count_messages(noted) + tools_tokens - max_tokens
        if over <= 0 or over <= _shortenable_tokens(kept, counter):
            return noted, omitted
    return merge_leading_user_turns(snipped), omitted


# What a message cut by the last resort still costs at least: a head and a tail, and the
# marker between them (policy/last_resort.py), with room to spare.
TRUNCATED_AT_LEAST = 128


def _shortenable_tokens(messages: list[BaseMessage], counter: MessageTokenCounter) -> int:
    """About how many tokens the last resort can take off `messages`: it cuts the text of
    tool results and user messages to a head, a marker and a tail, never an assistant
    message or what governance wrote."""
    return sum(
        max(counter.count_message(message) - TRUNCATED_AT_LEAST, 0)
        for message in messages
        if isinstance(message, (ToolMessage, HumanMessage)) and added_kind(message) is None
    )


def is_task_candidate(message: BaseMessage) -> bool:
    """A user message that can be the task: not a turn the alternation repair made up."""
    return isinstance(message, HumanMessage) and added_kind(message) is None


def _task_index(messages: list[BaseMessage]) -> int | None:
    return next(
        (index for index, message in enumerate(messages) if is_task_candidate(message)), None
    )


def pinned_task_copy(
    task: BaseMessage, max_tokens: int, counter: MessageTokenCounter
) -> BaseMessage | None:
    """The task as pinned: itself where it fits its share of `max_tokens`, else cut to it;
    None where not even its head and tail fit."""
    limit = task_pin_limit(max_tokens)
    copy = truncate_message(task, limit, counter)
    return copy if counter.count_message(copy) <= limit else None


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


@runnable_when_called_without_messages
def snip_history(
    messages: Sequence[MessageLikeRepresentation],
    *,
    max_tokens: int,
    token_counter: TokenCounterSpec = "approximate",
    tools: Sequence[Any] | None = None,
    pin_task: bool = True,
) -> list[BaseMessage]:
    """Keep every system message and the newest other messages that fit in `max_tokens`.

    Tool definitions in `tools` count against the budget. With `pin_task`, the
    conversation's first user message (the task) stays right after the system
    messages, cut to a head and a tail where it is larger than a quarter of
    `max_tokens`, followed by the newest messages after it that fit; where those hold
    no user message, the latest one before them is pinned after the task. Without it
    (or where the task cannot fit its quarter), the kept part starts with a user
    message: it is cut forward to its first user message, or, where it holds
    none, the nearest earlier user message is pinned in front of it and the messages
    in between are dropped in whole groups (an assistant message with all its tool
    results) so that the request still fits. A note at the cut, a user turn of its own
    right after the task, says how many messages were left out; the user turns that meet
    there (the task, the note, the kept part's first) are joined into one message whose
    blocks hold each turn intact.
    Only where the system messages, that user message and the newest complete group
    cannot fit together does the result go over budget: an oversized request beats an
    invalid one (the governor's last resort, `truncate_oversized_messages`, then cuts
    text). With no user message at all, the last 4 messages are kept. A tool call and
    its results are kept or dropped together, so the kept part never begins with
    results whose call was cut away.

    Example:
        >>> from langchain_core.messages import HumanMessage, SystemMessage
        >>> history = [
        ...     SystemMessage("rules"),
        ...     HumanMessage("fix the bug"),
        ...     HumanMessage("old " * 200),
        ...     HumanMessage("new"),
        ... ]
        >>> request = snip_history(history, max_tokens=120)
        >>> [m.type for m in request]
        ['system', 'human']
        >>> [block["text"][:18] for block in request[1].content]
        ['fix the bug', '[Context note: 1 e', 'new']
    """
    validate_max_tokens(max_tokens)
    counter = (
        _named_counter(token_counter)
        if isinstance(token_counter, str)
        else get_token_counter(token_counter)
    )
    snipped, _ = snip_history_with_count(
        as_message_list(messages),
        max_tokens=max_tokens,
        counter=counter,
        tools_tokens=counter.count_tools(tools),
        pin_task=pin_task,
    )
    return list(snipped)


def cut_note_position(messages: list[BaseMessage], *, after_task: bool) -> int:
    """Where the note goes: after the leading system messages and, with `after_task`,
    after the user message that opens the request (the pinned task)."""
    position = 0
    while position < len(messages) and isinstance(messages[position], SystemMessage):
        position += 1
    if after_task and position < len(messages) and isinstance(messages[position], HumanMessage):
        position += 1
    return position


def attach_cut_note(
    messages: list[BaseMessage], note: str, *, after_task: bool
) -> list[BaseMessage]:
    """A copy of `messages` with `note` (a `cut_note`) as its own turn at the cut, joined
    to the user turns it meets (see the module doc).

    Example:
        >>> from langchain_core.messages import AIMessage
        >>> request = [SystemMessage("rules"), HumanMessage("fix a.py"), AIMessage("ok")]
        >>> noted = attach_cut_note(request, "[Note]", after_task=True)
        >>> [m.type for m in noted], noted[1].content[0]["text"], noted[1].content[1]["text"]
        (['system', 'human', 'ai'], 'fix a.py', '[Note]')
    """
    position = cut_note_position(messages, after_task=after_task)
    noted = [*messages[:position], cut_note_turn(note), *messages[position:]]
    return merge_leading_user_turns(noted)
