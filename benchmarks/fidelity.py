"""What the model still sees of what it needs: the fidelity measures of a replay (issue 20).

Every measure is a function of the history, the request a policy sent and the budget, and
is applied the same way to every policy.

- *current turn lost*: calls whose request lacks the current user turn: the latest user
  message, verbatim (as a message, or as a run of whole text blocks of one), and, where
  the turn is a tool loop (tool calls follow that message), its latest tool-call group
  (the assistant message and its results, as sent in the history); counted where the
  user message fits a quarter of the budget and the group too;
- *task lost*: the same for the conversation's first user message;
- *excluded lost*: results of excluded tools (memory, receipts) that the history holds
  before the call and the request does not, though they would have fit: with the system
  messages, the current turn, the task (cut to a quarter of the budget where larger) and
  the newer excluded results' groups (the oldest give way first), the result's own group
  (its call and all the call's results) is within the budget. Those that cannot fit beside
  the higher protection classes are counted apart (*excluded that could not fit*, and how
  many of them were sent anyway);
- *needed facts visible*: for each assistant tool call of the replayed history, the
  argument values (strings of 3 characters or more, numbers of 2 digits or more) that
  appear earlier in the conversation (in a message's text or an earlier call's
  arguments), and the share of them still in the request the policy sent before it.
  Counted apart: the values the request shows only in text governance added (the
  governor's note at a cut), not in any message or block of the history;
- *needed facts retrievable* (offload, issue 30): the needed values the request shows,
  or that the text behind a handle it shows holds (what `read_context` reads back).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

__all__ = [
    "FidelityCounts",
    "call_values",
    "carries_verbatim",
    "excluded_that_fit",
    "message_text",
    "original_text",
    "request_text",
]

# Where governance marks what it added (the package's `_added.ADDED_KEY`): a message it
# made, or the parts of a user message it joined, each the user's words or its own text.
ADDED_KEY = "context_governance"
USER_PART = "user"


def message_text(message: BaseMessage) -> str:
    """The text a model reads in a message: its text blocks, and its tool calls' arguments."""
    content = message.content
    if isinstance(content, str):
        parts = [content]
    else:
        parts = [
            block if isinstance(block, str) else str(block.get("text", ""))
            for block in content
            if isinstance(block, str) or block.get("type") == "text"
        ]
    if isinstance(message, AIMessage):
        parts += [json.dumps(call["args"], default=str) for call in message.tool_calls]
    return "\n".join(parts)


def request_text(messages: Sequence[BaseMessage]) -> str:
    return "\n".join(message_text(message) for message in messages)


def _own_blocks(message: BaseMessage) -> list[Any] | None:
    """The blocks of `message` that are not governance's text, or None where all are."""
    mark = message.response_metadata.get(ADDED_KEY)
    if not isinstance(mark, dict):
        return _blocks(message)
    if "added" in mark:
        return None
    parts = mark.get("parts")
    content = message.content
    if not isinstance(parts, list) or not isinstance(content, list):
        return _blocks(message)
    own: list[Any] = []
    start = 0
    for count, kind in parts:
        if kind == USER_PART:
            own += content[start : start + count]
        start += count
    return own


def original_text(messages: Sequence[BaseMessage]) -> str:
    """`request_text` without what governance added (marked messages and parts)."""
    texts = []
    for message in messages:
        blocks = _own_blocks(message)
        if blocks is None:
            continue
        if blocks == _blocks(message):
            texts.append(message_text(message))
        else:
            texts.append(message_text(message.model_copy(update={"content": blocks})))
    return "\n".join(texts)


def _values(value: Any) -> Iterator[str]:
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, dict):
        for item in value.values():
            yield from _values(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _values(item)
    elif isinstance(value, (int, float)):
        text = str(value)
        if sum(character.isdigit() for character in text) >= 2:
            yield text
    else:
        text = str(value).strip()
        if len(text) >= 3:
            yield text


def call_values(message: AIMessage) -> list[str]:
    """The argument values of a message's tool calls that can be looked for in text."""
    return [value for call in message.tool_calls for value in _values(call["args"])]


def _blocks(message: BaseMessage) -> list[Any]:
    content = message.content
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


def carries_verbatim(request: Sequence[BaseMessage], message: BaseMessage) -> bool:
    """Whether `message` is in `request` whole: as a message, or as a run of whole blocks
    of one message of its type (user turns joined for alternation)."""
    wanted = _blocks(message)
    for sent in request:
        if type(sent) is not type(message):
            continue
        if sent.content == message.content:
            return True
        blocks = _blocks(sent)
        for start in range(len(blocks) - len(wanted) + 1):
            if blocks[start : start + len(wanted)] == wanted:
                return True
    return False


def _sent_as_is(request: Sequence[BaseMessage], message: BaseMessage) -> bool:
    """Whether `message` (a call or a result) is in `request` as in the history."""
    for sent in request:
        if sent is message:
            return True
        if type(sent) is not type(message) or sent.content != message.content:
            continue
        if isinstance(message, ToolMessage):
            assert isinstance(sent, ToolMessage)
            if sent.tool_call_id == message.tool_call_id:
                return True
        elif isinstance(message, AIMessage):
            assert isinstance(sent, AIMessage)
            if sent.tool_calls == message.tool_calls:
                return True
    return False


def _group_of(history: Sequence[BaseMessage], index: int) -> tuple[int, int]:
    """The group holding `history[index]`: an assistant message and the results after it."""
    start = index
    while start > 0 and isinstance(history[start], ToolMessage):
        start -= 1
    stop = start + 1
    if isinstance(history[start], (AIMessage, ToolMessage)):
        while stop < len(history) and isinstance(history[stop], ToolMessage):
            stop += 1
    return start, stop


def _current_tool_group(history: Sequence[BaseMessage], latest_user: int) -> tuple[int, int] | None:
    """The latest tool-call group after the latest user message, where the turn is a loop."""
    for index in range(len(history) - 1, latest_user, -1):
        message = history[index]
        if isinstance(message, AIMessage) and message.tool_calls:
            return _group_of(history, index)
    return None


def excluded_that_fit(
    history: Sequence[BaseMessage],
    excluded: Sequence[int],
    *,
    budget: int,
    pinnable: int,
    count: Callable[[BaseMessage], int],
) -> set[int]:
    """The positions in `excluded` (results of excluded tools) whose groups fit the budget
    beside the higher protection classes: the system messages, the current turn (the latest
    user message and the newest group), the task (at most `pinnable` tokens), and the newer
    excluded groups, newest first (the oldest give way first)."""
    users = [i for i, message in enumerate(history) if isinstance(message, HumanMessage)]
    taken: set[int] = set()
    total = 0
    for index, message in enumerate(history):
        if isinstance(message, SystemMessage):
            taken.add(index)
            total += count(message)
    if users:
        taken.add(users[0])
        total += min(count(history[users[0]]), pinnable)
        if users[-1] not in taken:
            taken.add(users[-1])
            total += count(history[users[-1]])
    if history:
        start, stop = _group_of(history, len(history) - 1)
        for index in range(start, stop):
            if index not in taken:
                taken.add(index)
                total += count(history[index])
    fitting: set[int] = set()
    for position in sorted(excluded, reverse=True):
        start, stop = _group_of(history, position)
        total += sum(count(history[i]) for i in range(start, stop) if i not in taken)
        taken.update(range(start, stop))
        if total > budget:
            break
        fitting.add(position)
    return fitting


@dataclass
class FidelityCounts:
    """The fidelity measures of one policy over a replay, summed over calls."""

    current_checked: int = 0
    current_lost: int = 0
    task_checked: int = 0
    task_lost: int = 0
    excluded_checked: int = 0
    excluded_lost: int = 0
    # Results of excluded tools that could not fit beside the higher classes, and how
    # many of those the request carried anyway (a policy over budget).
    excluded_unfittable: int = 0
    excluded_unfittable_sent: int = 0
    facts_needed: int = 0
    facts_visible: int = 0
    # Of the visible ones, those only in governance's own text (the note at a cut).
    facts_in_note_only: int = 0
    # Visible, or behind a handle the request shows (offload).
    facts_retrievable: int = 0

    @property
    def facts_share(self) -> float | None:
        return self.facts_visible / self.facts_needed if self.facts_needed else None

    @property
    def retrievable_share(self) -> float | None:
        return self.facts_retrievable / self.facts_needed if self.facts_needed else None

    @property
    def facts_share_in_original(self) -> float | None:
        visible = self.facts_visible - self.facts_in_note_only
        return visible / self.facts_needed if self.facts_needed else None

    def add(self, other: FidelityCounts) -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def measure_call(
        self,
        history: Sequence[BaseMessage],
        request: Sequence[BaseMessage],
        *,
        next_message: BaseMessage | None,
        earlier_text: str,
        pinnable: int,
        budget: int,
        count: Callable[[BaseMessage], int],
        excluded_tools: frozenset[str] = frozenset(),
        behind_handles: Callable[[], str] | None = None,
    ) -> None:
        """Measure one call: `history` is what the policy was given, `request` what it sent,
        `next_message` the assistant message the run made next, `earlier_text` the text
        of `history` (see `request_text`), `pinnable` the most tokens a user message (and
        the current turn's tool-call group) may have to be counted, `budget` what the
        messages may take, `count` a message counter, `excluded_tools` the tools whose
        results must survive, `behind_handles` the text the handles the request shows
        read back (offload; None: a policy without handles)."""
        users = [i for i, message in enumerate(history) if isinstance(message, HumanMessage)]
        if users:
            task, latest = history[users[0]], history[users[-1]]
            if count(task) <= pinnable:
                self.task_checked += 1
                self.task_lost += not carries_verbatim(request, task)
            group = _current_tool_group(history, users[-1])
            group_messages = [] if group is None else list(history[group[0] : group[1]])
            group_tokens = sum(count(message) for message in group_messages)
            if (latest is not task or group_messages) and max(
                count(latest), group_tokens
            ) <= pinnable:
                self.current_checked += 1
                self.current_lost += not (
                    carries_verbatim(request, latest)
                    and all(_sent_as_is(request, message) for message in group_messages)
                )
        excluded = [
            index
            for index, message in enumerate(history)
            if isinstance(message, ToolMessage) and message.name in excluded_tools
        ]
        if excluded:
            fitting = excluded_that_fit(
                history, excluded, budget=budget, pinnable=pinnable, count=count
            )
            sent = {id(message) for message in request}
            sent_text: str | None = None
            for index in excluded:
                result = history[index]
                carried = id(result) in sent
                if not carried:
                    if sent_text is None:
                        sent_text = request_text(request)
                    carried = message_text(result) in sent_text
                if index in fitting:
                    self.excluded_checked += 1
                    self.excluded_lost += not carried
                else:
                    self.excluded_unfittable += 1
                    self.excluded_unfittable_sent += carried
        if isinstance(next_message, AIMessage) and next_message.tool_calls:
            needed = [value for value in call_values(next_message) if value in earlier_text]
            if needed:
                text = request_text(request)
                visible = [value for value in needed if value in text]
                self.facts_needed += len(needed)
                self.facts_visible += len(visible)
                self.facts_retrievable += len(visible)
                hidden = [value for value in needed if value not in text]
                if hidden and behind_handles is not None:
                    kept = behind_handles()
                    self.facts_retrievable += sum(value in kept for value in hidden)
                if visible:
                    original = original_text(request)
                    self.facts_in_note_only += sum(value not in original for value in visible)
