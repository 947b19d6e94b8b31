"""A provider profile resolved once: its rules, and what the validator, governor and stream ask.

`resolve_profile(provider, chat_template=...)` looks the profile's rules up (and probes the
chat template, once per template) and returns a `Profile`. The validator calls its
`check`, the governor its `repair` (on the request) and `repair_group` (on each tool-call
group of a history), the repair stream its `between` (what goes between two groups);
none of them looks a rule up again.

Example:
    >>> from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    >>> profile = resolve_profile("mistral")
    >>> profile
    Profile('mistral')
    >>> request = [
    ...     HumanMessage("go"),
    ...     AIMessage("", tool_calls=[{"name": "grep", "args": {}, "id": "call_0"}]),
    ...     ToolMessage("hit", tool_call_id="call_0"),
    ...     HumanMessage("thanks"),
    ... ]
    >>> [v.rule for v in profile.check(request)]
    ['tool-call-id-format', 'tool-call-id-format', 'user-after-tool']
    >>> repaired, changes = profile.repair(request)
    >>> profile.check(repaired), changes
    ([], {'apply_provider_rules': 3, 'enforce_role_alternation': 0})
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage

from langchain_context_governance._messages import is_system
from langchain_context_governance._reasoning import carries_provider_compaction
from langchain_context_governance.passes._names import BACKFILL, DROP_ORPHANS
from langchain_context_governance.passes.backfill import backfill_missing_tool_results_with_count
from langchain_context_governance.passes.orphans import drop_orphan_tool_results_with_count
from langchain_context_governance.rules.ids import (
    UNIQUE_TOOL_CALL_IDS,
    give_reused_call_ids_fresh_ids,
)
from langchain_context_governance.rules.reasoning import (
    PROVIDER_COMPACTIONS,
    PrefixBinding,
    ProviderCompaction,
    check_against_history,
    prefix_bindings,
)
from langchain_context_governance.rules.rule import PASS_NAME, Rule, Violation
from langchain_context_governance.rules.table import rules_named, run_repairs
from langchain_context_governance.rules.templates import (
    chat_template_violation,
    rules_for_chat_template,
)
from langchain_context_governance.rules.turns import REQUEST_HAS_A_TURN

__all__ = ["Profile", "resolve_profile"]

_ORPHANS_PASS_NAME = DROP_ORPHANS
# The turn order's codes for a request whose first message is not a user's, and for an
# assistant turn right after another.
_FIRST_NOT_USER = "first-not-user"
_CONSECUTIVE_ASSISTANT = "consecutive-assistant"
_BACKFILL_PASS_NAME = BACKFILL


@dataclass(frozen=True)
class Profile:
    """A provider profile with the rules it needs, resolved once.

    `provider` is the profile name; `template_rules` the rules a chat template needs on
    top of it (probed from `chat_template`, when there is one); `rules` all of them, in
    the order their repairs run.
    """

    provider: str
    rules: tuple[Rule, ...]
    template_rules: tuple[str, ...] = ()
    chat_template: str | None = field(default=None, repr=False)

    @property
    def name(self) -> str:
        """The profile as the report and `repr` name it: the provider, plus a chat template."""
        return f"{self.provider}+chat_template" if self.chat_template is not None else self.provider

    def __repr__(self) -> str:
        return f"Profile({self.name!r})"

    @functools.cached_property
    def _group_rules(self) -> tuple[Rule, ...]:
        return tuple(rule for rule in self.rules if rule.within_group)

    @functools.cached_property
    def _bridges(self) -> tuple[Callable[[BaseMessage, BaseMessage], list[BaseMessage]], ...]:
        return tuple(rule.between for rule in self.rules if rule.between is not None)

    @functools.cached_property
    def bindings(self) -> tuple[PrefixBinding, ...]:
        """The provider's bindings of reasoning to its prefix (rules/reasoning.py)."""
        return prefix_bindings(self.provider)

    @functools.cached_property
    def compactions(self) -> tuple[ProviderCompaction, ...]:
        """Where the provider takes its own compaction block back (rules/reasoning.py)."""
        return tuple(c for c in PROVIDER_COMPACTIONS if self.provider in c.profiles)

    @functools.cached_property
    def unique_call_ids(self) -> bool:
        """Whether the profile wants every call id once in a request (Anthropic, Gemini)."""
        return UNIQUE_TOOL_CALL_IDS in self.rules

    def check(
        self,
        messages: list[BaseMessage],
        *,
        tools: Sequence[Any] | None = None,
        history: Sequence[BaseMessage] | None = None,
    ) -> list[Violation]:
        """Every rule of the profile that the request `messages` breaks, in message order.

        With a chat template, its own error on the request (rendered with `tools`, the
        request's tool definitions, or stand-ins) comes first, at index -1. An empty
        request (or one of system messages only) reports only that. With `history` (the
        conversation the request was made from), reasoning the provider binds to its
        prefix is checked against it too (`rules.reasoning.check_against_history`). Where
        the provider takes its compaction block first, that block may open the request.
        """
        template_violations: list[Violation] = []
        if self.chat_template is not None:
            violation = chat_template_violation(self.chat_template, messages, tools=tools)
            template_violations = [] if violation is None else [violation]
        empty = REQUEST_HAS_A_TURN.check(messages)
        if empty:
            return [*template_violations, *empty]
        violations = [violation for rule in self.rules for violation in rule.check(messages)]
        for compaction in self.compactions:
            violations = [
                *self._compaction_may_open(violations, messages),
                *compaction.check(messages),
            ]
        if history is not None and self.bindings:
            violations += check_against_history(messages, history, provider=self.provider)
        violations.sort(key=lambda violation: violation.index)
        return [*template_violations, *violations]

    @staticmethod
    def _compaction_may_open(
        violations: list[Violation], messages: list[BaseMessage]
    ) -> list[Violation]:
        """`violations` without the turn order's "a user message first" where the request
        opens with the provider's compaction block, which goes first, nor its "no two
        assistant turns in a row" for a turn kept after the block, which follows it."""
        first = next((i for i, m in enumerate(messages) if not is_system(m)), None)
        if first is None or not carries_provider_compaction(messages[first]):
            return violations
        allowed = {(_FIRST_NOT_USER, first), (_CONSECUTIVE_ASSISTANT, first + 1)}
        return [v for v in violations if (v.rule, v.index) not in allowed]

    def repair(self, messages: list[BaseMessage]) -> tuple[list[BaseMessage], dict[str, int]]:
        """Run the repair of every rule, in order; the request and the changes by pass.

        Role alternation is reported as "enforce_role_alternation", the other repairs as
        "apply_provider_rules". Returns the very same list when the request already suits
        the profile.
        """
        return run_repairs(self.rules, messages)

    def repair_group(
        self, group: list[BaseMessage], declared_before: Callable[[str], bool]
    ) -> tuple[list[BaseMessage], dict[str, int]]:
        """One tool-call group of a history: its pairs, and the rules that need only it.

        A rewritten call id or tool name, blank text removed, a parallel call split or tool
        traffic written as text changes the token count, so these run on the history,
        before cutting. Pairs are repaired again after the rules: a rule can remove a call
        (one the client would not send) or add one (a call without an id gets an id of its
        own). Where the profile wants ids unique in the request, a call id declared before
        the group (`declared_before`) gets a fresh one here, so every request cut from the
        history has unique ids.
        """
        changes: dict[str, int] = {}

        def count(name: str, changed: int) -> None:
            changes[name] = changes.get(name, 0) + changed

        output = group
        for round_ in range(2):
            output, dropped = drop_orphan_tool_results_with_count(output)
            count(_ORPHANS_PASS_NAME, dropped)
            output, added = backfill_missing_tool_results_with_count(output)
            count(_BACKFILL_PASS_NAME, added)
            if round_ == 0:
                for rule in self._group_rules:
                    output, changed = rule.repair(output)
                    count(PASS_NAME, changed)
        if self.unique_call_ids:
            output, renamed = give_reused_call_ids_fresh_ids(output, taken=declared_before)
            count(PASS_NAME, renamed)
        return output, changes

    def between(self, previous: BaseMessage, message: BaseMessage) -> list[BaseMessage]:
        """Messages the profile wants between `previous` and `message` (the end of one group
        of a history and the start of the next), e.g. Mistral's assistant turn between tool
        results and a user message."""
        for bridge in self._bridges:
            inserted = bridge(previous, message)
            if inserted:
                return inserted
        return []


@functools.lru_cache(maxsize=64)
def _resolve(provider: str, chat_template: str | None, extra_rules: tuple[str, ...]) -> Profile:
    template_rules: tuple[str, ...] = ()
    if chat_template is not None:
        template_rules = rules_for_chat_template(chat_template)
    names = (*template_rules, *(name for name in extra_rules if name not in template_rules))
    return Profile(
        provider=provider,
        rules=rules_named(provider, names),
        template_rules=names,
        chat_template=chat_template,
    )


def resolve_profile(
    provider: str = "openai",
    *,
    chat_template: str | None = None,
    extra_rules: Collection[str] = (),
) -> Profile:
    """The profile `provider` (one of `PROVIDERS`), with the rules `chat_template` needs.

    Resolved once per (provider, template): a template is probed the first time it is
    seen (needs jinja2). `extra_rules` adds rules by name. Raises ValueError for an
    unknown provider or rule, and for a template that is not Jinja or rejects even a
    plain conversation.
    """
    return _resolve(provider, chat_template, tuple(extra_rules))
