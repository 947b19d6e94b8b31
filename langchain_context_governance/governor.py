"""ContextGovernor: the passes in their order, the budget, the report and the fallback."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from langchain_core.language_models import BaseLanguageModel
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langchain_core.messages.utils import MessageLikeRepresentation
from langchain_core.prompt_values import PromptValue
from langchain_core.runnables import Runnable, RunnableBinding, RunnableConfig, RunnableSerializable
from pydantic import ConfigDict, PrivateAttr

from langchain_context_governance._messages import as_message_list
from langchain_context_governance.errors import ContextBudgetExceeded
from langchain_context_governance.passes._budget import task_pin_limit
from langchain_context_governance.passes._replay_pool import ReplayPool
from langchain_context_governance.passes.alternation import (
    SYNTHETIC_USER_CONTENT,
    enforce_role_alternation_with_count,
)
from langchain_context_governance.passes.backfill import backfill_missing_tool_results_with_count
from langchain_context_governance.passes.batched import (
    DEFAULT_HIGH_WATERMARK,
    DEFAULT_KEEP_RECENT,
    DEFAULT_LOW_WATERMARK,
    BatchedWindow,
    WindowPlan,
    validate_watermarks,
)
from langchain_context_governance.passes.microcompact import (
    DEFAULT_PLACEHOLDER,
    ResultCompaction,
    microcompact_with_count,
    validate_microcompact_settings,
)
from langchain_context_governance.passes.orphans import drop_orphan_tool_results_with_count
from langchain_context_governance.passes.pairing import RepairCheck
from langchain_context_governance.passes.provider_rules import (
    accepts_tool_call,
    apply_provider_rules_with_counts,
)
from langchain_context_governance.passes.snip import snip_history_with_count
from langchain_context_governance.passes.truncate import fit_to_budget
from langchain_context_governance.providers import PROVIDERS
from langchain_context_governance.tokens import MessageTokenCounter, get_token_counter

logger = logging.getLogger(__name__)

_NO_REPAIRS: Mapping[str, int] = {"drop_orphan_tool_results": 0, "backfill_missing_tool_results": 0}

GovernorInput = Sequence[MessageLikeRepresentation] | PromptValue

# A step returns the messages and how many it changed, or such counts per pass name.
PassFunction = Callable[[list[BaseMessage]], tuple[list[BaseMessage], int | Mapping[str, int]]]


@dataclass(frozen=True)
class GovernanceReport:
    """What one governance run did.

    `changes` maps each pass name to how many messages it changed, removed or added;
    `budget` is None when no context window is set (no snipping).
    """

    tokens_before: int
    tokens_after: int
    budget: int | None
    changes: dict[str, int] = field(default_factory=dict)
    messages_before: int = 0
    messages_after: int = 0
    fell_back: bool = False
    # Leading messages and tokens identical to the previous request of the same
    # conversation (a provider's prompt cache serves them); None where unknown.
    unchanged_prefix_messages: int | None = None
    unchanged_prefix_tokens: int | None = None

    @property
    def within_budget(self) -> bool:
        return self.budget is None or self.tokens_after <= self.budget


@dataclass(frozen=True)
class GovernanceResult:
    """The governed messages (what `invoke` returns) and the report of the run."""

    messages: list[BaseMessage]
    report: GovernanceReport


def _input_budget(context_window: int | None, max_output: int, safety_buffer: int) -> int | None:
    if context_window is None:
        return None
    budget = context_window - max_output - safety_buffer
    if budget <= 0:
        raise ValueError(
            "input budget = context_window_tokens - max_output_tokens - safety_buffer must be "
            f"> 0, got {context_window} - {max_output} - {safety_buffer} = {budget}"
        )
    return budget


def _validate_settings(governor: ContextGovernor) -> None:
    if governor.context_window_tokens is not None and governor.context_window_tokens <= 0:
        raise ValueError(
            f"context_window_tokens must be > 0 or None, got {governor.context_window_tokens}"
        )
    if governor.max_output_tokens < 0:
        raise ValueError(f"max_output_tokens must be >= 0, got {governor.max_output_tokens}")
    if governor.safety_buffer < 0:
        raise ValueError(f"safety_buffer must be >= 0, got {governor.safety_buffer}")
    if governor.compaction not in ("cache_aware", "keep_recent"):
        raise ValueError(
            f"compaction must be 'cache_aware' or 'keep_recent', got {governor.compaction!r}"
        )
    validate_watermarks(
        high_watermark=governor.high_watermark, low_watermark=governor.low_watermark
    )
    validate_microcompact_settings(keep_recent=governor.keep_recent, min_chars=governor.min_chars)
    if governor.on_over_budget not in ("truncate", "warn", "raise"):
        raise ValueError(
            f"on_over_budget must be 'truncate', 'warn' or 'raise', got {governor.on_over_budget!r}"
        )
    both = set(governor.compactable_tools or ()) & set(governor.exclude_tools)
    if both:
        raise ValueError(f"tools both in compactable_tools and in exclude_tools: {sorted(both)}")
    if governor.provider not in PROVIDERS:
        known = ", ".join(repr(name) for name in PROVIDERS)
        raise ValueError(f"provider must be one of {known}, got {governor.provider!r}")


def _unwrap_model(model: Runnable[Any, Any]) -> Runnable[Any, Any]:
    """The chat model behind `bind_tools` / `with_config` bindings."""
    while isinstance(model, RunnableBinding):
        model = model.bound
    return model


def _bound_tools(model: Runnable[Any, Any]) -> list[Any]:
    """Tool definitions that `bind_tools` bound to the model; they are sent with each request."""
    while isinstance(model, RunnableBinding):
        tools = model.kwargs.get("tools")
        if tools:
            return list(tools)
        model = model.bound
    return []


def ensure_user_message(messages: list[BaseMessage]) -> tuple[list[BaseMessage], int]:
    """Add a synthetic user turn to a non-empty request that has none."""
    if not messages or any(isinstance(message, HumanMessage) for message in messages):
        return messages, 0
    leading_systems = 0
    while leading_systems < len(messages) and isinstance(messages[leading_systems], SystemMessage):
        leading_systems += 1
    synthetic = HumanMessage(SYNTHETIC_USER_CONTENT)
    return [*messages[:leading_systems], synthetic, *messages[leading_systems:]], 1


class ContextGovernor(RunnableSerializable[GovernorInput, list[BaseMessage]]):
    """Turn a conversation into a request that is legal for the provider and fits the window.

    Runs before every chat-model call, on a copy: the stored history is never touched.
    Order on every call: drop orphans -> backfill -> microcompact -> snip (the task
    pinned, a note at the cut) -> drop orphans -> backfill -> enforce role alternation
    -> provider rules -> truncate oversized messages, where the request is still too
    large. Snipping can break pairs and alternation, so the repairs run again after it.
    Input budget = `context_window_tokens - max_output_tokens - safety_buffer`; no
    snipping when `context_window_tokens` is None.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
        >>> governor = ContextGovernor(context_window_tokens=8_000)
        >>> history = [
        ...     HumanMessage("list the files"),
        ...     AIMessage("", tool_calls=[{"name": "list_dir", "args": {}, "id": "c1"}]),
        ...     HumanMessage("sorry, I restarted"),
        ... ]
        >>> [m.type for m in governor.invoke(history)]
        ['human', 'ai', 'tool', 'human']

    It is a Runnable, so `governor | chat_model` sends the governed copy to the model.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    context_window_tokens: int | None = None
    max_output_tokens: int = 4096
    safety_buffer: int = 1024
    keep_recent: int = DEFAULT_KEEP_RECENT
    min_chars: int = 500
    # None: every tool's results, but those of `exclude_tools`; a set is an allow-list.
    compactable_tools: frozenset[str] | None = None
    exclude_tools: frozenset[str] = frozenset()
    placeholder: str = DEFAULT_PLACEHOLDER
    pin_task: bool = True
    on_over_budget: Literal["truncate", "warn", "raise"] = "truncate"
    token_counter: Any = "approximate"
    tools: Sequence[Any] | None = None
    provider: str = "openai"
    compaction: Literal["cache_aware", "keep_recent"] = "cache_aware"
    high_watermark: float = DEFAULT_HIGH_WATERMARK
    low_watermark: float = DEFAULT_LOW_WATERMARK
    name: str | None = "ContextGovernor"

    _counter: MessageTokenCounter = PrivateAttr()
    _compaction: ResultCompaction = PrivateAttr()
    _budget: int | None = PrivateAttr(default=None)
    _windows: ReplayPool[BatchedWindow] | None = PrivateAttr(default=None)
    _input_checks: ReplayPool[RepairCheck] = PrivateAttr()
    _request_checks: ReplayPool[RepairCheck] = PrivateAttr(
        default_factory=lambda: ReplayPool(RepairCheck)
    )
    # The plan of the current call on this thread, so the report can reuse its counts.
    _calls: threading.local = PrivateAttr(default_factory=threading.local)

    def model_post_init(self, context: Any, /) -> None:
        _validate_settings(self)
        self._budget = _input_budget(
            self.context_window_tokens, self.max_output_tokens, self.safety_buffer
        )
        self._counter = get_token_counter(self.token_counter)
        self._compaction = ResultCompaction(
            compactable_tools=self.compactable_tools,
            exclude_tools=self.exclude_tools,
            placeholder=self.placeholder,
        )
        # A call id or tool name the profile would rewrite changes the token count, so it
        # must be repaired before snipping.
        accepts_call = accepts_tool_call(self.provider)
        self._input_checks = ReplayPool(lambda: RepairCheck(accepts_call=accepts_call))
        if self.compaction == "cache_aware" and self._budget is not None:
            self._windows = ReplayPool(self._new_window)

    def _new_window(self) -> BatchedWindow:
        assert self._budget is not None
        return BatchedWindow(
            max_tokens=self._budget,
            counter=self._counter,
            tools_tokens=self._counter.count_tools(self.tools),
            high_watermark=self.high_watermark,
            low_watermark=self.low_watermark,
            keep_recent=self.keep_recent,
            min_chars=self.min_chars,
            compaction=self._compaction,
            pin_task=self.pin_task,
        )

    def model_copy(
        self, *, update: Mapping[str, Any] | None = None, deep: bool = False
    ) -> ContextGovernor:
        """A copy with `update` applied, set up anew: budget, counter and replay states."""
        copied = super().model_copy(update=update, deep=deep)
        copied.model_post_init(None)
        return copied

    def with_tools(self, tools: Sequence[Any] | None) -> ContextGovernor:
        """The same governor, counting `tools` (the tool definitions sent) against the budget."""
        return self.model_copy(update={"tools": list(tools) if tools else None})

    @classmethod
    def from_model(cls, chat_model: Runnable[Any, Any], **overrides: Any) -> ContextGovernor:
        """A governor sized for `chat_model`: its context window and output reservation.

        The window is `chat_model.profile["max_input_tokens"]`; the output reservation
        is the model's own `max_tokens` setting where set, else
        `profile["max_output_tokens"]`. Tokens are counted with the model where it
        supports counting. `bind_tools` bindings are unwrapped. `overrides` win.
        """
        model = _unwrap_model(chat_model)
        profile = getattr(model, "profile", None) or {}
        settings: dict[str, Any] = {}
        bound_tools = _bound_tools(chat_model)
        if bound_tools:
            settings["tools"] = bound_tools
        if profile.get("max_input_tokens"):
            settings["context_window_tokens"] = int(profile["max_input_tokens"])
        max_tokens = getattr(model, "max_tokens", None)
        if isinstance(max_tokens, int) and max_tokens > 0:
            settings["max_output_tokens"] = max_tokens
        elif profile.get("max_output_tokens"):
            settings["max_output_tokens"] = int(profile["max_output_tokens"])
        if isinstance(model, BaseLanguageModel):
            settings["token_counter"] = model
        settings.update(overrides)
        return cls(**settings)

    @property
    def budget(self) -> int | None:
        """Tokens the request may take, or None when no context window is set."""
        return self._budget

    @property
    def counter(self) -> MessageTokenCounter:
        """The cached per-message token counter this governor uses."""
        return self._counter

    def count_tokens(self, messages: Sequence[BaseMessage]) -> int:
        """Tokens of a request made of `messages` and this governor's tool definitions."""
        return self._counter.count_messages(messages) + self._counter.count_tools(self.tools)

    def govern(self, messages: GovernorInput) -> GovernanceResult:
        """Govern `messages`; return the governed copy and a report of what changed."""
        original = _to_message_list(messages)
        self._calls.plan = None
        fell_back = False
        try:
            governed, changes = self._run_passes(original)
        except Exception:
            logger.exception("context governance failed; sending the minimal repair instead")
            governed, changes = self._run_minimal_repair(original)
            fell_back = True
        governed, added = ensure_user_message(governed)
        if added:
            changes["enforce_role_alternation"] = changes.get("enforce_role_alternation", 0) + 1
        report = GovernanceReport(
            budget=self._budget,
            changes=changes,
            messages_before=len(original),
            messages_after=len(governed),
            fell_back=fell_back,
            **self._measure(original, governed),
        )
        logger.debug("context governance report: %s", report)
        if not report.within_budget:
            assert report.budget is not None
            if self.on_over_budget == "raise":
                raise ContextBudgetExceeded(budget=report.budget, tokens=report.tokens_after)
            logger.warning(
                "context governance: sending a request of %d tokens over the input budget of %d",
                report.tokens_after,
                report.budget,
            )
        return GovernanceResult(messages=list(governed), report=report)

    def _measure(self, original: list[BaseMessage], governed: list[BaseMessage]) -> dict[str, Any]:
        """Token figures for the report, taken from this call's plan where it measured them."""
        plan: WindowPlan | None = self._calls.plan
        figures: dict[str, Any] = {}
        if plan is not None and plan.source is original:
            figures["tokens_before"] = plan.tokens_before
        else:
            figures["tokens_before"] = self.count_tokens(original)
        if plan is not None and plan.messages is governed:
            figures["tokens_after"] = plan.tokens_after
            figures["unchanged_prefix_messages"] = plan.unchanged_prefix_messages
            figures["unchanged_prefix_tokens"] = plan.unchanged_prefix_tokens
        else:
            figures["tokens_after"] = self.count_tokens(governed)
        return figures

    def _repair_history(
        self, messages: list[BaseMessage]
    ) -> tuple[list[BaseMessage], Mapping[str, int]]:
        """All repairs on the whole history, before compaction, when it needs any.

        What alternation and the provider profile add (a synthetic user turn, a
        placeholder result) must count against the budget before snipping: added after
        it, the request could go over budget and governing it again would change it.
        A clean growing history is recognised from its new messages alone.
        """
        if not self._input_checks.run(messages, lambda check: check.needs_repair(messages)):
            return messages, _NO_REPAIRS
        repaired, changes = _run_steps(messages, self._repair_passes())
        return _run_steps(
            repaired,
            [
                ("apply_provider_rules", self._apply_provider_rules),
                ("enforce_role_alternation", enforce_role_alternation_with_count),
            ],
            changes,
        )

    def _repair_request_pairs(
        self, messages: list[BaseMessage]
    ) -> tuple[list[BaseMessage], Mapping[str, int]]:
        """Orphans and backfill on the request, skipped when its pairs are in order."""
        if not self._request_checks.run(messages, lambda check: check.needs_repair(messages)):
            return messages, _NO_REPAIRS
        return _run_steps(messages, self._repair_passes())

    def _repair_passes(self) -> list[tuple[str, PassFunction]]:
        return [
            ("drop_orphan_tool_results", drop_orphan_tool_results_with_count),
            ("backfill_missing_tool_results", backfill_missing_tool_results_with_count),
        ]

    def _pipeline(self) -> list[tuple[str, PassFunction]]:
        # The history is repaired first, where it needs it, so that what the repairs add
        # counts against the budget. After compaction and snipping only the request is
        # touched: snipping can break pairs and alternation, and the provider profile runs
        # last, on the request alone (on the whole history its cost would grow with the
        # history on every call).
        steps: list[tuple[str, PassFunction]] = [("repairs", self._repair_history)]
        if self._windows is not None:
            steps.append(("microcompact", self._compact_in_batches))
            steps.append(("pairing", self._repair_request_pairs))
        else:
            steps.append(("microcompact", self._microcompact))
            if self._budget is not None:
                steps.append(("snip_history", self._snip))
            steps.extend(self._repair_passes())
        steps.append(("enforce_role_alternation", enforce_role_alternation_with_count))
        steps.append(("apply_provider_rules", self._apply_provider_rules))
        if self._budget is not None and self.on_over_budget != "warn":
            steps.append(("truncate", self._fit_to_budget))
        return steps

    def _fit_to_budget(
        self, messages: list[BaseMessage]
    ) -> tuple[list[BaseMessage], Mapping[str, int]]:
        """The last resort where the request is still too large: see passes/truncate.py.

        With `compaction="cache_aware"` it acts above the high watermark, not only above
        the budget, and aims under it, so that governing the governed request again
        changes nothing (the window acts only above the high watermark); it aims under
        the budget where that is not possible.
        """
        assert self._budget is not None
        targets = [self._budget]
        if self.compaction == "cache_aware":
            targets.insert(0, max(int(self._budget * self.high_watermark), 1))
        if self.count_tokens(messages) <= targets[0]:
            return messages, {"truncate": 0}
        fit = None
        for target in targets:
            fit = fit_to_budget(
                messages,
                max_tokens=target,
                counter=self._counter,
                tools_tokens=self._counter.count_tools(self.tools),
                min_chars=self.min_chars,
                compaction=self._compaction,
                task_tokens=task_pin_limit(self._budget) if self.pin_task else 0,
            )
            if fit.within_budget:
                break
        assert fit is not None
        return fit.messages, {"microcompact": fit.compacted, "truncate": fit.truncated}

    def _apply_provider_rules(
        self, messages: list[BaseMessage]
    ) -> tuple[list[BaseMessage], Mapping[str, int]]:
        return apply_provider_rules_with_counts(messages, provider=self.provider)

    def _microcompact(self, messages: list[BaseMessage]) -> tuple[list[BaseMessage], int]:
        return microcompact_with_count(
            messages,
            keep_recent=self.keep_recent,
            min_chars=self.min_chars,
            compaction=self._compaction,
        )

    def _snip(self, messages: list[BaseMessage]) -> tuple[list[BaseMessage], int]:
        assert self._budget is not None
        return snip_history_with_count(
            messages,
            max_tokens=self._budget,
            counter=self._counter,
            tools_tokens=self._counter.count_tools(self.tools),
            pin_task=self.pin_task,
        )

    def _compact_in_batches(
        self, messages: list[BaseMessage]
    ) -> tuple[list[BaseMessage], Mapping[str, int]]:
        assert self._windows is not None
        plan = self._windows.run(messages, lambda window: window.plan(messages))
        self._calls.plan = plan
        return plan.messages, {"microcompact": plan.compacted, "snip_history": plan.removed}

    def _run_passes(self, messages: list[BaseMessage]) -> tuple[list[BaseMessage], dict[str, int]]:
        return _run_steps(messages, self._pipeline())

    def _run_minimal_repair(
        self, messages: list[BaseMessage]
    ) -> tuple[list[BaseMessage], dict[str, int]]:
        steps = self._repair_passes()
        steps.append(("enforce_role_alternation", enforce_role_alternation_with_count))
        steps.append(("apply_provider_rules", self._apply_provider_rules))
        return _run_steps(messages, steps)

    def as_pre_model_hook(
        self, mode: Literal["llm_input", "replace"] = "llm_input"
    ) -> Runnable[Any, dict[str, Any]]:
        """A LangGraph pre-model node that governs `state["messages"]` before each model call.

        `mode="llm_input"` returns `{"llm_input_messages": governed}`: the model sees the
        governed copy while the stored history stays whole. `mode="replace"` rewrites the
        stored history with the governed list.
        """
        from langchain_context_governance.langgraph import build_pre_model_hook

        return build_pre_model_hook(self, mode=mode)

    def invoke(
        self, input: GovernorInput, config: RunnableConfig | None = None, **kwargs: Any
    ) -> list[BaseMessage]:
        return self._call_with_config(self._govern_messages, input, config, run_type="chain")

    async def ainvoke(
        self, input: GovernorInput, config: RunnableConfig | None = None, **kwargs: Any
    ) -> list[BaseMessage]:
        return await self._acall_with_config(
            self._agovern_messages, input, config, run_type="chain"
        )

    def _govern_messages(self, messages: GovernorInput) -> list[BaseMessage]:
        return self.govern(messages).messages

    async def _agovern_messages(self, messages: GovernorInput) -> list[BaseMessage]:
        return self.govern(messages).messages


def _to_message_list(messages: GovernorInput) -> list[BaseMessage]:
    if isinstance(messages, PromptValue):
        return messages.to_messages()
    return as_message_list(messages)


def _run_steps(
    messages: list[BaseMessage],
    steps: list[tuple[str, PassFunction]],
    changes: Mapping[str, int] | None = None,
) -> tuple[list[BaseMessage], dict[str, int]]:
    changes = dict(changes or {})
    for name, run_pass in steps:
        messages, changed = run_pass(messages)
        counts = changed if isinstance(changed, Mapping) else {name: changed}
        for pass_name, count in counts.items():
            changes[pass_name] = changes.get(pass_name, 0) + count
    return messages, changes
