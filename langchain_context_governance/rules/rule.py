"""What a provider rule is: its name, the provider's wording and source, its check and repair.

A `Rule` carries everything about one rule in one object, the way ruff's rule registry
does: the `Violation.rule` codes its check reports, the provider error it prevents and
where that wording comes from, the `check` that lists its violations in a request, the
`repair` that removes them, and the profiles it belongs to. The rules themselves live in
one module per family (pairing, ids and names, tool traffic, content, systems, turns,
reasoning); `rules/table.py` lists them in the order their repairs run.

The helpers here build the common shapes of check and repair.

Example:
    >>> from langchain_core.messages import AIMessage, HumanMessage
    >>> check = neighbours(
    ...     "assistant-after-assistant",
    ...     lambda previous, message: previous.type == message.type == "ai",
    ...     "Message {index} repeats the role of message {previous_index}.",
    ... )
    >>> [(v.index, v.rule) for v in check([HumanMessage("hi"), AIMessage("a"), AIMessage("b")])]
    [(2, 'assistant-after-assistant')]
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from langchain_core.messages import AIMessage, BaseMessage

from langchain_context_governance._messages import is_assistant, is_system, is_tool_result, is_user
from langchain_context_governance.passes._names import ALTERNATION, PROVIDER_RULES

__all__ = [
    "ALTERNATION_PASS_NAME",
    "EVERY_PROFILE",
    "HOSTED_PROFILES",
    "PASS_NAME",
    "TEMPLATE_PROFILES",
    "Bridge",
    "Check",
    "Repair",
    "Rule",
    "Violation",
    "insert_between",
    "map_messages",
    "neighbours",
    "per_assistant",
    "profiles",
    "role_phrase",
]

# The report names: the provider-rules pass, and the core pass whose repair some rules run.
PASS_NAME = PROVIDER_RULES
ALTERNATION_PASS_NAME = ALTERNATION

# The profiles: hosted APIs, models served with their chat template, and "strict", which
# holds every hosted API's rules and the common template rules.
HOSTED_PROFILES = ("openai", "anthropic", "gemini", "glm", "mistral")
TEMPLATE_PROFILES = ("llama3", "qwen", "mistral_template", "gemma")
EVERY_PROFILE = frozenset((*HOSTED_PROFILES, *TEMPLATE_PROFILES, "strict"))


def profiles(*names: str) -> frozenset[str]:
    """The profiles a rule belongs to."""
    unknown = set(names) - EVERY_PROFILE
    if unknown:
        raise ValueError(f"unknown profiles {sorted(unknown)}")
    return frozenset(names)


@dataclass(frozen=True)
class Violation:
    """One broken rule: where (`index` of the message, -1 for the whole request), which, why."""

    index: int
    rule: str
    message: str


Check = Callable[[list[BaseMessage]], list[Violation]]
"""A rule's check: every violation of the rule in a request, in message order."""
Repair = Callable[[list[BaseMessage]], tuple[list[BaseMessage], int]]
"""A rule's repair: the request without the violations, and how many messages changed;
the very same list when nothing needs changing. Never mutates its input."""
Bridge = Callable[[BaseMessage, BaseMessage], list[BaseMessage]]
"""What a rule puts between two messages where the second may not follow the first."""


@dataclass(frozen=True)
class Rule:
    """One provider rule: what it prevents, how it is checked, how it is repaired.

    `name` is the rule's name in the profiles; `codes` are the `Violation.rule` values its
    check reports. `prevents` quotes the provider and `source` says where the quote is
    from. `repair` is reported under `reported_as`. A `within_group` rule needs only one
    tool-call group (an assistant message and its results), so the governor decides its
    repair once per group of the history, before cutting (a repair that adds tokens must
    count against the budget); the others need the whole request. `between`, where set,
    gives the messages the rule wants between two messages of a history repaired group
    by group (Mistral's assistant turn between tool results and a user message).
    """

    name: str
    codes: tuple[str, ...]
    prevents: str
    source: str
    check: Check
    repair: Repair
    profiles: frozenset[str]
    reported_as: str = PASS_NAME
    within_group: bool = False
    between: Bridge | None = None


def role_phrase(message: BaseMessage) -> str:
    """'an assistant', 'a user', 'a tool', 'a system' or the message type, for error texts."""
    if is_assistant(message):
        return "an assistant"
    if is_user(message):
        return "a user"
    if is_tool_result(message):
        return "a tool"
    if is_system(message):
        return "a system"
    return f"a {message.type!r}"


def per_assistant(
    code: str, broken: Callable[[AIMessage], bool], text: Callable[[int, AIMessage], str]
) -> Check:
    """A check that reports each assistant message `broken` says breaks the rule."""

    def check(request: list[BaseMessage]) -> list[Violation]:
        return [
            Violation(index, code, text(index, message))
            for index, message in enumerate(request)
            if isinstance(message, AIMessage) and broken(message)
        ]

    return check


def neighbours(code: str, breaks: Callable[[BaseMessage, BaseMessage], bool], text: str) -> Check:
    """A check on each message and the one before it; `text` is formatted with both."""

    def check(request: list[BaseMessage]) -> list[Violation]:
        return [
            Violation(
                index,
                code,
                text.format(
                    index=index,
                    previous_index=index - 1,
                    type=message.type,
                    previous_type=request[index - 1].type,
                ),
            )
            for index, message in enumerate(request)
            if index and breaks(request[index - 1], message)
        ]

    return check


def map_messages(
    messages: list[BaseMessage], edit: Callable[[BaseMessage], BaseMessage]
) -> tuple[list[BaseMessage], int]:
    """`edit` applied to each message; the very same list where it changed none."""
    output = [edit(message) for message in messages]
    changed = sum(new is not old for new, old in zip(output, messages, strict=True))
    return (output, changed) if changed else (messages, 0)


def insert_between(
    messages: list[BaseMessage],
    needs_turn: Callable[[BaseMessage, BaseMessage], bool],
    make_turn: Callable[[], BaseMessage],
) -> tuple[list[BaseMessage], int]:
    """`messages` with a made turn wherever `needs_turn(previous, message)`; the count."""
    output: list[BaseMessage] = []
    inserted = 0
    for message in messages:
        if output and needs_turn(output[-1], message):
            output.append(make_turn())
            inserted += 1
        output.append(message)
    return (output, inserted) if inserted else (messages, 0)
