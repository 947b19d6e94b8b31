"""The task: the conversation's first user message, pinned after a cut in every policy.

A cut would otherwise leave out what the agent was asked to do. Where the user's words
fit their share of the budget (`tuning.TASK_SHARE_OF_BUDGET`) they are pinned verbatim;
where not, a copy cut to a head and a tail (the last resort's cut) is pinned instead.

Example:
    >>> from langchain_core.messages import AIMessage, HumanMessage
    >>> from langchain_context_governance.tokens.counter import get_token_counter
    >>> history = [AIMessage("hello"), HumanMessage("fix the parser"), HumanMessage("and docs")]
    >>> first_task_index(history)
    1
    >>> pinned_task_copy(history[1], 1_000, get_token_counter("approximate")) is history[1]
    True
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import BaseMessage, HumanMessage

from langchain_context_governance._added import added_kind
from langchain_context_governance.policy.budget import task_pin_limit
from langchain_context_governance.policy.last_resort import truncate_message
from langchain_context_governance.tokens.counter import MessageTokenCounter


def is_task_candidate(message: BaseMessage) -> bool:
    """A user message that can be the task: not a turn the alternation repair made up."""
    return isinstance(message, HumanMessage) and added_kind(message) is None


def first_task_index(messages: Sequence[BaseMessage]) -> int | None:
    """The position of the task in `messages` (None where no user wrote one)."""
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
