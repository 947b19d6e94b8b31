"""What the model still sees of what it needs: the fidelity measures of a replay (issue 20).

- *current turn lost*: calls whose request lacks the latest user message, verbatim (as a
  message, or as a whole text block of one), counted where it fits a quarter of the budget;
- *task lost*: the same for the conversation's first user message;
- *excluded lost*: results of excluded tools (memory, receipts) that the history holds
  before the call and the request does not;
- *needed facts visible*: for each assistant tool call of the replayed history, the
  argument values (strings of 3 characters or more, numbers of 2 digits or more) that
  appear earlier in the conversation (in a message's text or an earlier call's
  arguments), and the share of them still in the request the policy sent before it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

__all__ = [
    "FidelityCounts",
    "call_values",
    "carries_verbatim",
    "message_text",
    "request_text",
]


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


@dataclass
class FidelityCounts:
    """The fidelity measures of one policy over a replay, summed over calls."""

    current_checked: int = 0
    current_lost: int = 0
    task_checked: int = 0
    task_lost: int = 0
    excluded_checked: int = 0
    excluded_lost: int = 0
    facts_needed: int = 0
    facts_visible: int = 0

    @property
    def facts_share(self) -> float | None:
        return self.facts_visible / self.facts_needed if self.facts_needed else None

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
        count: Any,
        excluded: Sequence[ToolMessage] = (),
    ) -> None:
        """Measure one call: `history` is what the policy was given, `request` what it sent,
        `next_message` the assistant message the run made next, `earlier_text` the text
        of `history` (see `request_text`), `pinnable` the most tokens a user message may
        have to be counted, `count` a message counter, `excluded` the results of excluded
        tools in `history`."""
        users = [message for message in history if isinstance(message, HumanMessage)]
        if users:
            task, latest = users[0], users[-1]
            if count(task) <= pinnable:
                self.task_checked += 1
                self.task_lost += not carries_verbatim(request, task)
            if latest is not task and count(latest) <= pinnable:
                self.current_checked += 1
                self.current_lost += not carries_verbatim(request, latest)
        sent = {id(message) for message in request}
        if excluded:
            sent_text = None
            for result in excluded:
                self.excluded_checked += 1
                if id(result) in sent:
                    continue
                if sent_text is None:
                    sent_text = request_text(request)
                self.excluded_lost += message_text(result) not in sent_text
        if isinstance(next_message, AIMessage) and next_message.tool_calls:
            needed = [value for value in call_values(next_message) if value in earlier_text]
            if needed:
                text = request_text(request)
                self.facts_needed += len(needed)
                self.facts_visible += sum(value in text for value in needed)
