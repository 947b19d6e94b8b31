"""The request builders compared: LangChain's own utilities and the ContextGovernor.

A policy is a name and a factory that returns a fresh `messages -> request` callable, so every
run (and every cold timing) starts from new state. To compare another strategy, append a
`NamedPolicy` to the lists built here.
"""

from __future__ import annotations

import typing
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from copy import deepcopy
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from langchain.agents.middleware import ClearToolUsesEdit
from langchain_core.messages import (
    AnyMessage,
    BaseMessage,
    SystemMessage,
    ToolMessage,
    trim_messages,
)

from benchmarks.counters import MessageCounter, approximate_tokens, make_tiktoken_list_counter

__all__ = [
    "GOVERNOR_APPROXIMATE",
    "GOVERNOR_MAX_OUTPUT_TOKENS",
    "GOVERNOR_SAFETY_BUFFER",
    "GOVERNOR_TIKTOKEN",
    "KEEP_NEWEST_RESULTS",
    "MICROCOMPACT_PLACEHOLDER",
    "TRIM_APPROXIMATE",
    "TRIM_TIKTOKEN",
    "NamedPolicy",
    "RequestBuilder",
    "Variant",
    "clear_tool_uses_name",
    "clear_tool_uses_request",
    "constants_of",
    "governor_available",
    "governor_defaults",
    "governor_policies",
    "governor_variant_policy",
    "loop_policies",
    "microcompact_keep_newest",
    "timing_policies",
    "tool_heavy_policies",
]

RequestBuilder = Callable[[list[BaseMessage]], list[BaseMessage]]
# The tuning shares of the cache-aware policy the report names (and the trade-off varies).
POLICY_CONSTANTS = (
    "NOTE_VALUES_SHARE",
    "NOTE_VALUES_MAX_TOKENS",
    "EARLIER_USERS_SHARE",
    "COMPACTION_ENOUGH_SHARE",
    "FULL_NOTE_SHARE",
)
TrimCounter = MessageCounter | Literal["approximate"]

TRIM_APPROXIMATE = "trim_messages(approximate)"
TRIM_TIKTOKEN = "trim_messages(tiktoken)"
GOVERNOR_APPROXIMATE = "ContextGovernor(approximate)"
GOVERNOR_TIKTOKEN = "ContextGovernor(tiktoken)"

KEEP_NEWEST_RESULTS = 10
MICROCOMPACT_PLACEHOLDER = "[Old tool result content cleared]"
# The governor's own defaults; its window is sized so that its input budget equals the
# budget every peer is given.
GOVERNOR_MAX_OUTPUT_TOKENS = 4096
GOVERNOR_SAFETY_BUFFER = 1024


@dataclass(frozen=True)
class NamedPolicy:
    """A policy's display name and a factory for a fresh request builder."""

    name: str
    make: Callable[[], RequestBuilder]


def no_editing(messages: list[BaseMessage]) -> list[BaseMessage]:
    return list(messages)


def clear_tool_uses_request(
    messages: list[BaseMessage], *, edit: ClearToolUsesEdit, count_tokens: MessageCounter
) -> list[BaseMessage]:
    """What ContextEditingMiddleware.wrap_model_call does to one model request.

    create_agent keeps the system prompt outside `request.messages`, so the middleware
    deep-copies and edits only the conversation; the system prompt is sent unchanged.
    """
    system, conversation = _split_system_prompt(messages)
    edited = cast("list[AnyMessage]", deepcopy(conversation))
    edit.apply(edited, count_tokens=count_tokens)
    return [*system, *edited]


def microcompact_keep_newest(
    messages: list[BaseMessage], *, keep: int = KEEP_NEWEST_RESULTS
) -> list[BaseMessage]:
    """Clear every tool result but the newest `keep`, copying only the messages it edits."""
    result_positions = [i for i, m in enumerate(messages) if isinstance(m, ToolMessage)]
    to_clear = result_positions[:-keep] if keep else result_positions
    request = list(messages)
    for position in to_clear:
        if request[position].content != MICROCOMPACT_PLACEHOLDER:
            request[position] = request[position].model_copy(
                update={"content": MICROCOMPACT_PLACEHOLDER}
            )
    return request


def trim_last(
    messages: list[BaseMessage], *, budget: int, token_counter: TrimCounter
) -> list[BaseMessage]:
    """trim_messages set up the way LangChain's docs recommend for chat models."""
    return trim_messages(
        messages,
        max_tokens=budget,
        token_counter=token_counter,
        strategy="last",
        start_on="human",
        include_system=True,
    )


def _split_system_prompt(
    messages: Sequence[BaseMessage],
) -> tuple[list[BaseMessage], list[BaseMessage]]:
    if messages and isinstance(messages[0], SystemMessage):
        return [messages[0]], list(messages[1:])
    return [], list(messages)


def trim_policy(name: str, budget: int, make_counter: Callable[[], TrimCounter]) -> NamedPolicy:
    def make() -> RequestBuilder:
        counter = make_counter()
        return lambda messages: trim_last(messages, budget=budget, token_counter=counter)

    return NamedPolicy(name, make)


def clear_tool_uses_policy(budget: int, keep: int = KEEP_NEWEST_RESULTS) -> NamedPolicy:
    def make() -> RequestBuilder:
        edit = ClearToolUsesEdit(trigger=budget, keep=keep)
        return lambda messages: clear_tool_uses_request(
            messages, edit=edit, count_tokens=approximate_tokens
        )

    return NamedPolicy(clear_tool_uses_name(keep), make)


def clear_tool_uses_name(keep: int = KEEP_NEWEST_RESULTS) -> str:
    return f"ClearToolUsesEdit(keep={keep})"


def governor_available() -> bool:
    try:
        from langchain_context_governance import ContextGovernor  # noqa: F401
    except ImportError:
        return False
    return True


def governor_policies(budget: int, *, token_counter: str = "approximate") -> list[NamedPolicy]:
    """The ContextGovernor at its defaults and in every compaction mode it offers.

    Empty when the governor cannot be imported yet. Its window is sized so that
    `window - max_output - safety_buffer` equals `budget`.
    """
    if not governor_available():
        return []
    from langchain_context_governance import ContextGovernor

    window = budget + GOVERNOR_MAX_OUTPUT_TOKENS + GOVERNOR_SAFETY_BUFFER

    def policy(label: str, **settings: Any) -> NamedPolicy:
        def make() -> RequestBuilder:
            governor = ContextGovernor(
                context_window_tokens=window,
                max_output_tokens=GOVERNOR_MAX_OUTPUT_TOKENS,
                safety_buffer=GOVERNOR_SAFETY_BUFFER,
                token_counter=token_counter,
                **settings,
            )
            return governor.invoke

        return NamedPolicy(f"ContextGovernor({label})", make)

    # "tiktoken:cl100k_base" is reported as "tiktoken": the encoding trim_messages uses.
    policies = [policy("tiktoken" if token_counter.startswith("tiktoken") else token_counter)]
    for mode in _compaction_modes(ContextGovernor):
        policies.append(policy(f"{token_counter}, compaction={mode!r}", compaction=mode))
    return policies


@dataclass(frozen=True)
class Variant:
    """The governor at its defaults but for some settings and some tuning shares of its
    cache-aware policy (`langchain_context_governance.tuning`), for the trade-off table."""

    label: str
    settings: Mapping[str, Any] = field(default_factory=dict)
    constants: Mapping[str, Any] = field(default_factory=dict)


@contextmanager
def constants_of(variant: Variant) -> Iterator[None]:
    """The tuning shares set as `variant` has them, for the duration."""
    from langchain_context_governance import tuning

    saved = {name: getattr(tuning, name) for name in variant.constants}
    for name, value in variant.constants.items():
        setattr(tuning, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(tuning, name, value)


def governor_variant_policy(
    budget: int,
    variant: Variant,
    *,
    tools: Sequence[Any] | None = None,
    exclude_tools: frozenset[str] = frozenset(),
) -> NamedPolicy:
    """The governor as `variant` sets it (and with the tools it is sent)."""
    from langchain_context_governance import ContextGovernor

    def make() -> RequestBuilder:
        governor = ContextGovernor(
            context_window_tokens=budget + GOVERNOR_MAX_OUTPUT_TOKENS + GOVERNOR_SAFETY_BUFFER,
            max_output_tokens=GOVERNOR_MAX_OUTPUT_TOKENS,
            safety_buffer=GOVERNOR_SAFETY_BUFFER,
            tools=tools,
            exclude_tools=exclude_tools,
            **variant.settings,
        )

        def build(messages: list[BaseMessage]) -> list[BaseMessage]:
            with constants_of(variant):
                return governor.invoke(messages)

        return build

    return NamedPolicy(f"ContextGovernor({variant.label})", make)


def tool_heavy_policies(
    budget: int, *, tools: Sequence[Any], tools_tokens: int, exclude_tools: frozenset[str]
) -> list[NamedPolicy]:
    """The policies of the tool-heavy replay: the tool definitions are sent with every
    request, so trim_messages gets what they leave of the budget; the governor counts them."""
    policies = [trim_policy(TRIM_APPROXIMATE, budget - tools_tokens, lambda: "approximate")]
    if not governor_available():
        return policies
    from langchain_context_governance import ContextGovernor

    window = budget + GOVERNOR_MAX_OUTPUT_TOKENS + GOVERNOR_SAFETY_BUFFER

    def policy(label: str, **settings: Any) -> NamedPolicy:
        def make() -> RequestBuilder:
            return ContextGovernor(
                context_window_tokens=window,
                max_output_tokens=GOVERNOR_MAX_OUTPUT_TOKENS,
                safety_buffer=GOVERNOR_SAFETY_BUFFER,
                tools=list(tools),
                exclude_tools=exclude_tools,
                **settings,
            ).invoke

        return NamedPolicy(f"ContextGovernor({label})", make)

    policies.append(policy("approximate"))
    for mode in _compaction_modes(ContextGovernor):
        policies.append(policy(f"approximate, compaction={mode!r}", compaction=mode))
    return policies


def governor_defaults() -> dict[str, Any]:
    """The governor's settings at their defaults, for the report; empty when unavailable."""
    if not governor_available():
        return {}
    from langchain_context_governance import ContextGovernor

    shown = (
        "compaction",
        "keep_recent",
        "min_chars",
        "high_watermark",
        "low_watermark",
        "pin_task",
        "on_over_budget",
    )
    fields = ContextGovernor.model_fields
    defaults = {name: fields[name].default for name in shown if name in fields}
    from langchain_context_governance import tuning

    for name in POLICY_CONSTANTS:
        defaults[name] = getattr(tuning, name)
    return defaults


def _compaction_modes(governor_class: Any) -> list[str]:
    """The values of a `compaction: Literal[...]` setting, when the governor has one."""
    field = getattr(governor_class, "model_fields", {}).get("compaction")
    if field is None:
        return []
    modes = [mode for mode in typing.get_args(field.annotation) if isinstance(mode, str)]
    return [mode for mode in modes if mode != field.default]


def timing_policies(budget: int) -> list[NamedPolicy]:
    """The contenders of the timing table, all given the same input budget."""
    return [
        trim_policy(TRIM_APPROXIMATE, budget, lambda: "approximate"),
        trim_policy(TRIM_TIKTOKEN, budget, make_tiktoken_list_counter),
        clear_tool_uses_policy(budget),
        *governor_policies(budget, token_counter="approximate")[:1],
        *governor_policies(budget, token_counter="tiktoken:cl100k_base")[:1],
    ]


def loop_policies(budget: int) -> list[NamedPolicy]:
    """The policies of the loop simulation, all given the same input budget."""
    return [
        NamedPolicy("no editing", lambda: no_editing),
        clear_tool_uses_policy(budget),
        NamedPolicy(
            f"microcompact(keep newest {KEEP_NEWEST_RESULTS})", lambda: microcompact_keep_newest
        ),
        trim_policy(TRIM_APPROXIMATE, budget, lambda: "approximate"),
        *governor_policies(budget),
    ]
