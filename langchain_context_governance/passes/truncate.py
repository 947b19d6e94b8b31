"""The last resort against an oversized request, as a pass over a message list.

A thin wrapper over the last-resort policy (`policy/last_resort.py`), which holds the
decision: what is cleared and cut, in which order of protection.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.messages.utils import MessageLikeRepresentation

from langchain_context_governance._messages import as_message_list
from langchain_context_governance.passes._dual_use import runnable_when_called_without_messages
from langchain_context_governance.policy.budget import validate_max_tokens
from langchain_context_governance.policy.compaction import (
    DEFAULT_MIN_CHARS,
    DEFAULT_PLACEHOLDER,
    ResultCompaction,
)
from langchain_context_governance.policy.last_resort import fit_to_budget
from langchain_context_governance.tokens.counter import TokenCounterSpec, get_token_counter


@runnable_when_called_without_messages
def truncate_oversized_messages(
    messages: Sequence[MessageLikeRepresentation],
    *,
    max_tokens: int,
    token_counter: TokenCounterSpec = "approximate",
    tools: Sequence[Any] | None = None,
    min_chars: int = DEFAULT_MIN_CHARS,
    compactable_tools: Collection[str] | None = None,
    exclude_tools: Collection[str] = (),
    placeholder: str = DEFAULT_PLACEHOLDER,
    pin_task: bool = True,
) -> list[BaseMessage]:
    """Bring an oversized request within `max_tokens` by clearing and cutting text.

    Nothing changes when the request fits. Otherwise results of compactable tools
    (every tool but `exclude_tools`, or only `compactable_tools`; at least `min_chars`
    long) become `placeholder`, oldest first, all but the newest call's; then the text
    of the largest tool results and user messages is cut to a head and a tail around a
    marker that says how many characters were cut and how to see them, lowest protection
    class first: older results, then earlier user messages, then results of
    `exclude_tools`, then
    the task (with `pin_task`, the first user message after the system messages), then
    the newest call's results, and the latest user message last. Images, tool
    calls and their pairing stay as they are. Where even that cannot fit (the system
    messages alone are too large), the request is returned unchanged.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
        >>> history = [
        ...     HumanMessage("summarise the log"),
        ...     AIMessage("", tool_calls=[{"name": "read_file", "args": {}, "id": "c1"}]),
        ...     ToolMessage("line\\n" * 20_000, tool_call_id="c1"),
        ... ]
        >>> request = truncate_oversized_messages(history, max_tokens=2_000)
        >>> "characters of this read_file result were cut" in request[-1].content
        True
    """
    validate_max_tokens(max_tokens)
    compaction = ResultCompaction(
        min_chars=min_chars,
        compactable_tools=compactable_tools,
        exclude_tools=exclude_tools,
        placeholder=placeholder,
    )
    counter = get_token_counter(token_counter)
    fit = fit_to_budget(
        as_message_list(messages),
        max_tokens=max_tokens,
        counter=counter,
        tools_tokens=counter.count_tools(tools),
        compaction=compaction,
        pin_task=pin_task,
    )
    return list(fit.messages)
