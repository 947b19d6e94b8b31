"""Repair what one provider rejects and the core passes leave: ids, names, blanks, systems.

The core passes make a request legal in the ways every provider shares. Providers then
differ: Mistral wants tool-call ids of exactly 9 letters or digits, Anthropic unique ids
and no empty text, Zhipu/GLM no system message followed by an assistant message, Llama 3
templates one tool call per message, and no provider lets a request end on a system
message. The rules, each with its repair, are the table in `rules/table.py`;
`validate_messages` (rules/validate.py) runs their checks.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from langchain_core.messages import BaseMessage
from langchain_core.messages.utils import MessageLikeRepresentation

from langchain_context_governance._added import (
    synthetic_user_turn,
)
from langchain_context_governance._messages import as_message_list
from langchain_context_governance.passes._dual_use import runnable_when_called_without_messages
from langchain_context_governance.rules.repairs import (
    UNNAMED_TOOL,
    legal_tool_name,
    stable_tool_call_id,
)
from langchain_context_governance.rules.table import ALTERNATION_PASS_NAME, PASS_NAME, rules_named

__all__ = [
    "UNNAMED_TOOL",
    "apply_group_rules_with_count",
    "apply_provider_rules",
    "apply_provider_rules_with_count",
    "apply_provider_rules_with_counts",
    "legal_tool_name",
    "messages_between",
    "requires_unique_call_ids",
    "stable_tool_call_id",
]


def requires_unique_call_ids(provider: str, *, extra_rules: Collection[str] = ()) -> bool:
    """Whether `provider` (with `extra_rules`) wants every call id once in a request."""
    return any(rule.name == "unique-tool-call-ids" for rule in rules_named(provider, extra_rules))


def messages_between(
    previous: BaseMessage,
    message: BaseMessage,
    *,
    provider: str,
    extra_rules: Collection[str] = (),
) -> list[BaseMessage]:
    """Messages the rules of `provider` insert between `previous` and `message`.

    E.g. Mistral's assistant turn between tool results and a user message. For a history
    repaired group by group: the repair runs on the two messages alone, and only what it
    puts between them, keeping both, is taken.
    """
    for rule in rules_named(provider, extra_rules):
        if rule.within_group or rule.breaks_at is None or not rule.breaks_at(previous, message):
            continue
        repaired, _ = rule.repair([previous, message])
        if len(repaired) > 2 and repaired[0] is previous and repaired[-1] is message:
            return repaired[1:-1]
    return []


def apply_group_rules_with_count(
    messages: list[BaseMessage], *, provider: str, extra_rules: Collection[str] = ()
) -> tuple[list[BaseMessage], int]:
    """Only the repairs of `provider` (and `extra_rules`) that need one tool-call group.

    For a part of a history: call ids and names, blank text, split parallel calls. The
    rules that look at the order of messages (system messages in front, turn order)
    need the whole request.
    """
    output, changed = messages, 0
    for rule in rules_named(provider, extra_rules):
        if rule.within_group:
            output, count = rule.repair(output)
            changed += count
    return output, changed


def apply_provider_rules_with_counts(
    messages: list[BaseMessage], *, provider: str, extra_rules: Collection[str] = ()
) -> tuple[list[BaseMessage], dict[str, int]]:
    """Apply the repairs of `provider` and `extra_rules`; return the list and the changes.

    The role alternation this runs is reported as "enforce_role_alternation", the rest
    as "apply_provider_rules". Returns the very same list when the request already
    suits the provider.
    """
    output = messages
    changes = {PASS_NAME: 0, ALTERNATION_PASS_NAME: 0}
    for rule in rules_named(provider, extra_rules):
        output, count = rule.repair(output)
        changes[rule.reported_as] += count
    if messages and not output:
        # Only blank system messages were left; a request needs something to answer.
        changes[PASS_NAME] += 1
        return [synthetic_user_turn()], changes
    return output, changes


def apply_provider_rules_with_count(
    messages: list[BaseMessage], *, provider: str, extra_rules: Collection[str] = ()
) -> tuple[list[BaseMessage], int]:
    """Apply `provider`'s repairs; return the list and how many messages changed.

    Returns the very same list when the request already suits the provider.
    """
    output, changes = apply_provider_rules_with_counts(
        messages, provider=provider, extra_rules=extra_rules
    )
    return output, sum(changes.values())


@runnable_when_called_without_messages
def apply_provider_rules(
    messages: Sequence[MessageLikeRepresentation], *, provider: str = "openai"
) -> list[BaseMessage]:
    """Repair what `provider` rejects and the core passes leave; `provider` is in `PROVIDERS`.

    Runs the repair of every rule of the profile, in the order of
    `langchain_context_governance.rules.RULES` (the README lists them by profile). Every
    profile pairs tool results with their calls, gives a call without an id (or with an
    id repeated inside its message) a fresh id and a placeholder result, moves system
    messages at the end of the request up to the leading ones and runs role alternation
    again; signed thinking blocks are never merged or edited, and `reasoning_content`
    stays with its response. A rewritten id is a stable 9-character id
    (`stable_tool_call_id`), the same in the call and in its result and the same on every
    call. No user text is lost; image and file blocks are left as they are.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
        >>> history = [
        ...     HumanMessage("read it"),
        ...     AIMessage("", tool_calls=[{"name": "read_file", "args": {}, "id": "call_0"}]),
        ...     ToolMessage("done", tool_call_id="call_0"),
        ... ]
        >>> governed = apply_provider_rules(history, provider="mistral")
        >>> governed[1].tool_calls[0]["id"] == governed[2].tool_call_id
        True
        >>> len(governed[2].tool_call_id)
        9
    """
    repaired, _ = apply_provider_rules_with_count(as_message_list(messages), provider=provider)
    return list(repaired)
