"""The last resort against an oversized request: clear every compactable result, then cut
the text of the largest tool results and user messages down to a head and a tail.

Compaction and cutting work in whole messages and whole groups, so one message larger
than the budget (a 100,000-character file read, a task pasted with a long log) leaves
the request over budget on every call, and the provider rejects it every time. This
pass runs on the finished request and only where it is still over budget:

1. results of compactable tools become the placeholder, oldest first, even the newest
   ones, until the request fits; the results of the newest call stay (the model has not
   seen them yet, and their head and tail tell it more than a placeholder);
2. the text of tool results and user messages larger than a cap is cut to a head and a
   tail around a marker that says how much was cut and how to get it. The cap is the
   largest step of a fixed ladder (80% of the budget, 64%, ...) that makes the request
   fit, so the same oversized message is cut the same way on every call while the rest
   of the request leaves room for it, and the provider's prompt cache keeps it.

Only text is cut: images and other blocks, tool-call ids and the pairing of calls and
results stay as they are. The result is a pure function of the request and the settings.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.messages.utils import MessageLikeRepresentation

from langchain_context_governance._messages import (
    as_message_list,
    content_text_length,
    tool_names_by_call_id,
)
from langchain_context_governance.passes._budget import task_pin_limit, validate_max_tokens
from langchain_context_governance.passes._dual_use import runnable_when_called_without_messages
from langchain_context_governance.passes.cut_note import cut_note_position
from langchain_context_governance.passes.microcompact import (
    DEFAULT_PLACEHOLDER,
    ResultCompaction,
    compact_tool_result,
    validate_microcompact_settings,
)
from langchain_context_governance.tokens.counter import (
    MessageTokenCounter,
    TokenCounterSpec,
    get_token_counter,
)

# Each step of the cap ladder is 80% of the one before: at most a fifth of the room a
# message could have had is given away, and a message's cut stays the same over the
# many calls in which the rest of the request grows within one step.
CAP_LADDER_RATIO = 0.8
# The last step of the ladder: about the marker alone, the most a message can be cut.
MIN_CAP_TOKENS = 16
# Share of the kept text shown before the marker (the rest is the tail): the start of a
# file or log says what it is, its end holds the latest lines and error messages.
HEAD_SHARE = 0.6

TOOL_RESULT_MARKER = (
    "\n\n[... {cut:,} of {total:,} characters of this {tool_name} result were cut here to "
    "fit the context window. To see them, call the tool again narrowed to the part you "
    "need (a line range, a path, a filter or a query) ...]\n\n"
)
USER_MESSAGE_MARKER = (
    "\n\n[... {cut:,} of {total:,} characters of this message were cut here to fit the "
    "context window; ask the user for the part you need ...]\n\n"
)


@dataclass(frozen=True)
class BudgetFit:
    """What `fit_to_budget` did to a request."""

    messages: list[BaseMessage]
    tokens: int
    compacted: int
    truncated: int
    within_budget: bool


def truncation_marker(message: BaseMessage, *, cut: int, total: int, tool_name: str) -> str:
    """The marker that stands where the middle of `message`'s text was cut."""
    if isinstance(message, ToolMessage):
        return TOOL_RESULT_MARKER.format(cut=cut, total=total, tool_name=tool_name or "tool")
    return USER_MESSAGE_MARKER.format(cut=cut, total=total)


def _cut_text(text: str, keep: int, marker_for: Callable[[int], str]) -> str:
    if keep >= len(text):
        return text
    head = int(keep * HEAD_SHARE)
    tail = keep - head
    middle = marker_for(len(text) - keep)
    return text[:head] + middle + (text[len(text) - tail :] if tail else "")


def _cut_content(
    message: BaseMessage, keep: int, *, tool_name: str
) -> str | list[str | dict[str, Any]]:
    """The content of `message` with its text cut to about `keep` characters."""
    content = message.content
    total = content_text_length(content)

    def marker_for(cut: int) -> str:
        return truncation_marker(message, cut=cut, total=total, tool_name=tool_name)

    if isinstance(content, str):
        return _cut_text(content, keep, marker_for)
    # Every text block keeps its share of `keep`; other blocks (images, files) stay whole.
    blocks: list[str | dict[str, Any]] = []
    for block in content:
        if isinstance(block, str):
            blocks.append(_cut_text(block, len(block) * keep // total, marker_for))
        elif isinstance(block, dict) and block.get("type") == "text":
            text = block.get("text")
            if isinstance(text, str) and text:
                cut = _cut_text(text, len(text) * keep // total, marker_for)
                blocks.append({**block, "text": cut})
            else:
                blocks.append(block)
        else:
            blocks.append(block)
    return blocks


def truncate_message(
    message: BaseMessage,
    max_tokens: int,
    counter: MessageTokenCounter,
    *,
    tool_name: str = "",
) -> BaseMessage:
    """A copy of `message` whose text is cut so that it counts at most `max_tokens`.

    Returns `message` itself when it already fits, and the most cut copy (a marker and
    no text) where even that does not fit.
    """
    tokens = counter.count_message(message)
    if tokens <= max_tokens:
        return message
    total = content_text_length(message.content)
    if total == 0:
        return message
    keep = total * max_tokens // tokens
    while True:
        content = _cut_content(message, keep, tool_name=tool_name)
        copy = message.model_copy(update={"content": content})
        if keep == 0 or counter.count_message(copy) <= max_tokens:
            return copy
        keep = int(keep * CAP_LADDER_RATIO)


def _is_truncatable(message: BaseMessage) -> bool:
    return (
        isinstance(message, (ToolMessage, HumanMessage))
        and content_text_length(message.content) > 0
    )


def _newest_call_results(messages: list[BaseMessage]) -> set[int]:
    """Indexes of the results that answer the newest assistant message."""
    newest: set[int] = set()
    index = len(messages) - 1
    while index >= 0 and isinstance(messages[index], ToolMessage):
        newest.add(index)
        index -= 1
    if index >= 0 and isinstance(messages[index], AIMessage):
        return newest
    return set()


def _compact_until_within(
    messages: list[BaseMessage],
    tokens: list[int],
    *,
    budget: int,
    fixed: int,
    counter: MessageTokenCounter,
    min_chars: int,
    compaction: ResultCompaction,
    names: dict[str, str],
) -> int:
    """Compact results oldest first, in place on the copied list and counts, until it fits."""
    spared = _newest_call_results(messages)
    total = fixed + sum(tokens)
    compacted = 0
    for index, message in enumerate(messages):
        if total <= budget:
            break
        if not isinstance(message, ToolMessage) or index in spared:
            continue
        name = message.name or names.get(message.tool_call_id, "")
        if not compaction.applies_to(name):
            continue
        copy = compact_tool_result(message, name, min_chars=min_chars, compaction=compaction)
        if copy is message:
            continue
        copy_tokens = counter.count_message(copy)
        if copy_tokens < tokens[index]:
            messages[index] = copy
            total -= tokens[index] - copy_tokens
            tokens[index] = copy_tokens
            compacted += 1
    return compacted


def _cap_ladder(budget: int) -> list[int]:
    caps: list[int] = []
    cap = int(budget * CAP_LADDER_RATIO)
    while cap >= MIN_CAP_TOKENS:
        caps.append(cap)
        cap = int(cap * CAP_LADDER_RATIO)
    return caps or [max(budget, 1)]


def fit_to_budget(
    messages: list[BaseMessage],
    *,
    max_tokens: int,
    counter: MessageTokenCounter,
    tools_tokens: int = 0,
    min_chars: int = 500,
    compaction: ResultCompaction | None = None,
    task_tokens: int = 0,
) -> BudgetFit:
    """Bring a request within `max_tokens`: compaction first, then head-and-tail cuts.

    The first user message after the system messages (the task) is cut no further
    than `task_tokens` where that can fit. Returns the very same list when the request
    already fits, and also where even the smallest cut of every message leaves it over
    (`within_budget` is False then).
    """
    fixed = counter.request_overhead + tools_tokens
    tokens = [counter.count_message(message) for message in messages]
    if fixed + sum(tokens) <= max_tokens:
        return BudgetFit(messages, fixed + sum(tokens), 0, 0, True)
    rules = compaction if compaction is not None else ResultCompaction()
    names = tool_names_by_call_id(messages)
    output = list(messages)
    compacted = _compact_until_within(
        output,
        tokens,
        budget=max_tokens,
        fixed=fixed,
        counter=counter,
        min_chars=min_chars,
        compaction=rules,
        names=names,
    )
    if fixed + sum(tokens) <= max_tokens:
        return BudgetFit(output, fixed + sum(tokens), compacted, 0, True)
    floors = {index: 0 for index, message in enumerate(output) if _is_truncatable(message)}
    task = _task_position(output)
    if task is not None and task in floors and task_tokens > 0:
        # The task keeps its share where that can fit, and is cut like the rest where not.
        kept = {**floors, task: min(tokens[task], task_tokens)}
        fit = _cut_to_ladder(output, tokens, kept, max_tokens, counter, tools_tokens, names)
        if fit.within_budget:
            return replace(fit, compacted=compacted)
    fit = _cut_to_ladder(output, tokens, floors, max_tokens, counter, tools_tokens, names)
    if not fit.within_budget:
        # Cutting would lose content and still not fit: the request goes out whole, so
        # that governing it again gives it back unchanged.
        total = counter.count_messages(messages) + tools_tokens
        return BudgetFit(messages, total, 0, 0, False)
    return replace(fit, compacted=compacted)


def _cut_to_ladder(
    output: list[BaseMessage],
    tokens: list[int],
    floors: dict[int, int],
    max_tokens: int,
    counter: MessageTokenCounter,
    tools_tokens: int,
    names: dict[str, str],
) -> BudgetFit:
    """Cut every message above the largest cap of the ladder that makes the request fit."""
    fixed = counter.request_overhead + tools_tokens
    ladder = _cap_ladder(max_tokens)
    cut = output
    caps: dict[int, int] = {}
    for cap in ladder:
        caps = {index: max(cap, floor) for index, floor in floors.items()}
        caps = {index: limit for index, limit in caps.items() if tokens[index] > limit}
        saved = sum(tokens[index] - limit for index, limit in caps.items())
        if fixed + sum(tokens) - saved > max_tokens and cap != ladder[-1]:
            continue
        cut = list(output)
        for index, limit in caps.items():
            cut[index] = truncate_message(
                output[index], limit, counter, tool_name=_tool_name(output[index], names)
            )
        total = counter.count_messages(cut) + tools_tokens
        if total <= max_tokens:
            return BudgetFit(cut, total, 0, len(caps), True)
    total = counter.count_messages(cut) + tools_tokens
    return BudgetFit(cut, total, 0, len(caps), False)


def _task_position(messages: list[BaseMessage]) -> int | None:
    position = cut_note_position(messages)
    if position < len(messages) and isinstance(messages[position], HumanMessage):
        return position
    return None


def _tool_name(message: BaseMessage, names: dict[str, str]) -> str:
    if isinstance(message, ToolMessage):
        return message.name or names.get(message.tool_call_id, "")
    return ""


@runnable_when_called_without_messages
def truncate_oversized_messages(
    messages: Sequence[MessageLikeRepresentation],
    *,
    max_tokens: int,
    token_counter: TokenCounterSpec = "approximate",
    tools: Sequence[Any] | None = None,
    min_chars: int = 500,
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
    marker that says how many characters were cut and how to see them; with
    `pin_task`, the first user message after the system messages (the task) is cut
    no further than a quarter of `max_tokens`. Images, tool
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
    validate_microcompact_settings(keep_recent=0, min_chars=min_chars)
    counter = get_token_counter(token_counter)
    fit = fit_to_budget(
        as_message_list(messages),
        max_tokens=max_tokens,
        counter=counter,
        tools_tokens=counter.count_tools(tools),
        min_chars=min_chars,
        compaction=ResultCompaction(
            compactable_tools=compactable_tools,
            exclude_tools=exclude_tools,
            placeholder=placeholder,
        ),
        task_tokens=task_pin_limit(max_tokens) if pin_task else 0,
    )
    return list(fit.messages)
