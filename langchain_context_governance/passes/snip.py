"""Keep the newest messages that fit the input budget, in whole tool-call groups.

The public pass of the `keep_recent` mode's cut: what it keeps is the policy's
(policy/snip.py); this pass adds the note at the cut and joins the user turns that meet.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langchain_core.messages.utils import MessageLikeRepresentation

from langchain_context_governance._added import cut_note_turn
from langchain_context_governance._messages import as_message_list
from langchain_context_governance.passes._dual_use import runnable_when_called_without_messages
from langchain_context_governance.passes.alternation import merge_leading_user_turns
from langchain_context_governance.policy.budget import validate_max_tokens
from langchain_context_governance.policy.note import cut_note
from langchain_context_governance.policy.snip import snip_to_budget
from langchain_context_governance.tokens.counter import (
    MessageTokenCounter,
    TokenCounterSpec,
    get_token_counter,
)


@functools.lru_cache(maxsize=8)
def _named_counter(name: str) -> MessageTokenCounter:
    """One shared counter per counter name, so repeated calls reuse its per-message cache."""
    return get_token_counter(name)


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
    snip = snip_to_budget(
        messages,
        max_tokens=max_tokens,
        counter=counter,
        tools_tokens=tools_tokens,
        pin_task=pin_task,
    )
    if snip is None:
        return messages, 0
    if snip.omitted > 0:
        noted = attach_cut_note(snip.kept, cut_note(snip.omitted), after_task=snip.task_kept)
        # Where the note takes the request over budget, the last resort shortens the kept
        # part's text to make room for it; left out only where that cannot (a tiny budget).
        over = counter.count_messages(noted) + tools_tokens - max_tokens
        if over <= 0 or over <= snip.shortenable:
            return noted, snip.omitted
    return merge_leading_user_turns(snip.kept), snip.omitted


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
