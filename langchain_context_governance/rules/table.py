"""The rule table: every rule, in the order their repairs run, and the profiles as rule names.

Each rule is one `Rule` object in the module of its family (`pairing`, `ids`,
`tool_traffic`, `content`, `systems`, `turns`, `reasoning`), with its check and its repair
side by side. A profile is the names of its rules, in table order, read off the rules
themselves; `validate_messages` runs the checks of a profile and `apply_provider_rules`
its repairs, so a rule cannot be checked without being repaired or the reverse.

Rules marked for every profile hold for every provider: the tool-call pairing rules and
the turn order this package promises (user first, roles alternate, the request ends on a
user message or tool results).

Example:
    >>> PROFILES["mistral"][:3]
    ('message-types', 'tool-call-pairing', 'tool-calls-declared')
    >>> [rule.name for rule in rules_named("llama3") if rule.within_group]
    ['tool-calls-declared', 'tool-call-ids', 'one-tool-call-per-message']
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from langchain_core.messages import BaseMessage

from langchain_context_governance._added import synthetic_user_turn
from langchain_context_governance.rules import (
    content,
    ids,
    pairing,
    reasoning,
    systems,
    tool_traffic,
    turns,
)
from langchain_context_governance.rules.rule import (
    ALTERNATION_PASS_NAME,
    HOSTED_PROFILES,
    PASS_NAME,
    TEMPLATE_PROFILES,
    Rule,
    Violation,
)

__all__ = [
    "ALTERNATION_PASS_NAME",
    "HOSTED_PROFILES",
    "PASS_NAME",
    "PROFILES",
    "PROVIDERS",
    "RULES",
    "Rule",
    "Violation",
    "rules_named",
    "run_repairs",
]

RULES: tuple[Rule, ...] = (
    turns.MESSAGE_TYPES,
    # Reasoning state first: what a message can lose (an unsigned thinking block, a
    # reasoning item that led nowhere) goes before the rules that look at what is left.
    reasoning.SIGNED_THINKING_BLOCKS,
    reasoning.OPENAI_REASONING_ITEMS,
    tool_traffic.SENDABLE_INVALID_TOOL_CALLS,
    pairing.TOOL_CALL_PAIRING,
    tool_traffic.TOOL_CALLS_DECLARED,
    ids.TOOL_CALL_IDS,
    ids.UNIQUE_TOOL_CALL_IDS,
    ids.OPENAI_TOOL_CALL_ID_LENGTH,
    ids.ANTHROPIC_TOOL_CALL_ID_FORMAT,
    ids.NINE_CHARACTER_TOOL_CALL_IDS,
    ids.TOOL_NAME_FORMAT,
    reasoning.THOUGHT_SIGNATURES_WITH_THEIR_CALLS,
    tool_traffic.NO_INVALID_TOOL_CALLS,
    tool_traffic.ONE_TOOL_CALL_PER_MESSAGE,
    tool_traffic.NO_TOOL_ROLE,
    content.NON_EMPTY_CONTENT,
    systems.SYSTEM_NOT_FIRST,
    systems.SYSTEM_AFTER_ASSISTANT_OR_TOOL,
    systems.SYSTEM_THEN_ASSISTANT,
    systems.ONE_LEADING_SYSTEM_MESSAGE,
    systems.NO_SYSTEM_ROLE,
    turns.TURN_ORDER,
    # After the turn order: merging two responses can give a response's reasoning to
    # calls that follow it (a late system message moved away from between them).
    reasoning.REASONING_CONTENT_WITH_TOOL_CALLS,
    # After the turn order, which decides where the request's last user message is.
    reasoning.THINKING_OPENS_THE_TOOL_LOOP,
    turns.NO_USER_AFTER_TOOL_RESULTS,
    turns.REQUEST_HAS_A_TURN,
)
"""Every rule, in the order their repairs run."""

_RULES_BY_NAME = {rule.name: rule for rule in RULES}

PROFILES: dict[str, tuple[str, ...]] = {
    profile: tuple(rule.name for rule in RULES if profile in rule.profiles)
    for profile in (*HOSTED_PROFILES, *TEMPLATE_PROFILES, "strict")
}
"""Each profile as the names of its rules, in table order."""

PROVIDERS: tuple[str, ...] = tuple(PROFILES)
"""Profile names `validate_messages` and `apply_provider_rules` accept (see the README)."""


def rules_named(provider: str, extra_rules: Collection[str] = ()) -> tuple[Rule, ...]:
    """The rules of profile `provider` and the rules named in `extra_rules`, in table order."""
    if provider not in PROFILES:
        known = ", ".join(repr(name) for name in PROVIDERS)
        raise ValueError(f"provider must be one of {known}; got {provider!r}")
    unknown = [name for name in extra_rules if name not in _RULES_BY_NAME]
    if unknown:
        raise ValueError(f"unknown rule names {unknown!r}; known: {sorted(_RULES_BY_NAME)}")
    wanted = {*PROFILES[provider], *extra_rules}
    return tuple(rule for rule in RULES if rule.name in wanted)


def run_repairs(
    rules: Sequence[Rule], messages: list[BaseMessage]
) -> tuple[list[BaseMessage], dict[str, int]]:
    """Run the repair of each of `rules`, in order; the request and the changes by pass.

    Role alternation is reported as "enforce_role_alternation", the other repairs as
    "apply_provider_rules". Returns the very same list when the request already suits
    the rules.
    """
    output = messages
    changes = {PASS_NAME: 0, ALTERNATION_PASS_NAME: 0}
    for rule in rules:
        output, count = rule.repair(output)
        changes[rule.reported_as] += count
    if messages and not output:
        # Only blank system messages were left; a request needs something to answer.
        changes[PASS_NAME] += 1
        return [synthetic_user_turn()], changes
    return output, changes
