"""ContextGovernor: the passes in their order, the budget, the report and the fallback."""

from __future__ import annotations

import dataclasses
import functools
import importlib.metadata
import logging
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

from langchain_core.messages import BaseMessage, ToolMessage
from langchain_core.messages.utils import MessageLikeRepresentation
from langchain_core.prompt_values import PromptValue
from langchain_core.runnables import Runnable, RunnableConfig, RunnableSerializable
from pydantic import ConfigDict, PrivateAttr, model_validator

from langchain_context_governance._messages import (
    calls_encoded_once,
    messages_to_govern,
    nested_too_deep,
    readable_contents,
)
from langchain_context_governance._settings import reject_unknown_settings
from langchain_context_governance.errors import ContextBudgetExceeded
from langchain_context_governance.model_settings import (
    chat_model_from_string,
    model_label,
    settings_for_model,
)
from langchain_context_governance.passes._names import (
    ALTERNATION,
    BACKFILL,
    DROP_ORPHANS,
    MICROCOMPACT,
    PASS_NAMES,
    PROVIDER_RULES,
    SNIP,
    TRUNCATE,
)
from langchain_context_governance.passes.alternation import (
    enforce_role_alternation_with_count,
    guarantee_user_turn,
)
from langchain_context_governance.passes.backfill import backfill_missing_tool_results_with_count
from langchain_context_governance.passes.microcompact import (
    DEFAULT_PLACEHOLDER,
    ResultCompaction,
    microcompact_with_count,
    validate_microcompact_settings,
)
from langchain_context_governance.passes.orphans import drop_orphan_tool_results_with_count
from langchain_context_governance.passes.snip import snip_history_with_count
from langchain_context_governance.passes.truncate import BudgetFit, fit_to_budget
from langchain_context_governance.rules.continued import ContinuedRepair
from langchain_context_governance.rules.profile import Profile, resolve_profile
from langchain_context_governance.rules.templates import render_chat_template
from langchain_context_governance.rules.validate import PROVIDERS
from langchain_context_governance.state.cache_aware import (
    DEFAULT_HIGH_WATERMARK,
    DEFAULT_KEEP_RECENT,
    DEFAULT_LOW_WATERMARK,
    CacheAwareReplay,
    CompactionPlan,
    validate_watermarks,
)
from langchain_context_governance.state.conversation import (
    DEFAULT_MAX_CONVERSATIONS,
    Conversations,
    ConversationState,
)
from langchain_context_governance.state.record import (
    RECORD_KEY,
    GovernanceRecord,
    PreviousRequest,
    UnusableRecord,
    settings_digest,
    thread_digest,
)
from langchain_context_governance.state.repair_stream import (
    RepairedHistory,
    RepairStream,
    StreamRead,
)
from langchain_context_governance.state.summary import (
    DEFAULT_SUMMARY_PROMPT,
    SummaryJob,
    aask_within,
    ask_within,
    max_summary_chars,
    summary_job,
    summary_kept,
    summary_of_reply,
    summary_request,
)
from langchain_context_governance.tokens.calibration import (
    Calibration,
    Overflow,
    shared_calibration,
)
from langchain_context_governance.tokens.counter import MessageTokenCounter, get_token_counter
from langchain_context_governance.tracing import agovern_in_run, govern_in_run

logger = logging.getLogger(__name__)

# The smallest summary worth asking for, in tokens (a tenth of the budget otherwise).
_MIN_SUMMARY_TOKENS = 64
# A message with more text than this many budgets' worth of characters (4 a token) cannot be
# sent whole: it is counted approximately, since the last resort cuts it anyway, and exact
# tokenizers spend seconds and gigabytes on megabytes of text without whitespace.
_COUNTED_APPROXIMATELY_ABOVE_BUDGETS = 8
_CHARS_PER_TOKEN = 4

# What the governor calls on a `store`: LangGraph's BaseStore.
_STORE_VERBS = ("get", "put", "aget", "aput")
# Seconds the summary model gets before the cut keeps its plain note.
DEFAULT_SUMMARY_TIMEOUT = 60.0
# Settings that do not change what a request looks like: a record written under other
# values of these is still read.
_SETTINGS_NOT_SHAPING_REQUESTS = frozenset(
    {
        "name",
        "max_conversations",
        "summary_model",
        "summary_timeout",
        "store",
        "tools",
        "overflow_retries",
    }
)

# A LangGraph state (a mapping with a "messages" key) is governed as its message list.
GovernorInput = Sequence[MessageLikeRepresentation] | PromptValue | Mapping[str, Any]

# A step returns the messages and how many it changed, or such counts per pass name.
PassFunction = Callable[[list[BaseMessage]], tuple[list[BaseMessage], int | Mapping[str, int]]]


@dataclass(frozen=True)
class GovernanceReport:
    """What one governance run did, and to which messages.

    `changes` maps each pass name to how many messages it changed, removed or added
    (repairs of the history count every repair the history needs, also those decided on
    earlier calls); `budget` is None when no context window is set (repairs only).

    Which messages, by their index in the input list, to answer "why did the model not
    see X?": `compacted` (results sent as the placeholder), `cut` (half-open ranges of
    indices left out of the request; messages inside a range that are listed in `kept`
    were sent anyway), `truncated` (messages whose text was cut to a head and a tail), and
    `kept` (index and protection class of each message before the cut that was still
    sent: "system", "task", "current-turn", "latest-user", "excluded-tool",
    "earlier-user"). `fate(index)` reads them for one message.
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
    compacted: tuple[int, ...] = ()
    cut: tuple[tuple[int, int], ...] = ()
    truncated: tuple[int, ...] = ()
    kept: tuple[tuple[int, str], ...] = ()
    # How far the counter is from the provider's own counts in this conversation
    # (tokens/calibration.py); the token figures above are the counter's estimates.
    calibration_factor: float = 1.0
    # The provider profile the request was repaired for (see `ContextGovernor.profile`).
    profile: str = ""

    @property
    def corrected_tokens_after(self) -> int:
        """`tokens_after` as the provider counts it, by the calibration factor."""
        return Calibration(factor=self.calibration_factor).corrected(self.tokens_after)

    @property
    def within_budget(self) -> bool:
        return self.budget is None or self.corrected_tokens_after <= self.budget

    def fate(self, index: int) -> str:
        """What happened to the input message at `index`: "truncated" where its text was
        cut to fit (wherever it is sent), "cut", "compacted", "kept (<class>)" for a
        protected message before the cut, or "sent".

        Example:
            >>> report = GovernanceReport(10, 5, 8, cut=((1, 4),), kept=((2, "task"),))
            >>> [report.fate(index) for index in range(5)]
            ['sent', 'cut', 'kept (task)', 'cut', 'sent']
        """
        if index in self.truncated:
            return "truncated"
        for position, why in self.kept:
            if position == index:
                return f"kept ({why})"
        if any(start <= index < stop for start, stop in self.cut):
            return "cut"
        if index in self.compacted:
            return "compacted"
        return "sent"

    def __str__(self) -> str:
        budget = "no budget" if self.budget is None else f"budget {self.budget:,}"
        verdict = "" if self.within_budget else " OVER BUDGET"
        changed = ", ".join(f"{name}={count}" for name, count in self.changes.items() if count)
        fallback = ", fell back" if self.fell_back else ""
        profile = f"; profile {self.profile}" if self.profile else ""
        corrected = ""
        if self.calibration_factor != 1.0:
            corrected = f" x {self.calibration_factor:.3g} = {self.corrected_tokens_after:,}"
        tokens = f"tokens {self.tokens_before:,} -> {self.tokens_after:,}{corrected}"
        return (
            f"{tokens} ({budget}{verdict}), "
            f"messages {self.messages_before} -> {self.messages_after}"
            f"{'; ' + changed if changed else ''}{fallback}{profile}"
        )


@dataclass(frozen=True)
class _PipelineResult:
    """What one run of the pipeline produced, step by step."""

    request: list[BaseMessage]
    changes: dict[str, int]
    history: RepairedHistory
    # The tokens of the caller's messages as they came.
    raw_tokens: int
    plan: CompactionPlan | None
    # The request the last resort was given, and what it did (None where it did not run).
    before_last_resort: list[BaseMessage]
    fit: BudgetFit | None
    summary_job: SummaryJob | None


@dataclass(frozen=True)
class GovernanceResult:
    """The governed messages (what `invoke` returns) and the report of the run.

    `record` is the conversation's governance record after this call, as plain data
    (state/record.py): pass it back as `govern(..., record=...)` on the next call, on any
    worker, to continue where this call left off. The LangGraph node and the middleware
    keep it in the graph state under `RECORD_KEY`.
    """

    messages: list[BaseMessage]
    report: GovernanceReport
    record: dict[str, Any] | None = None


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
    if governor.summary_model is not None:
        if not isinstance(governor.summary_model, (Runnable, str)):
            raise ValueError(
                "summary_model must be a chat model (a Runnable) or a 'provider:model' "
                f"string, got {type(governor.summary_model).__name__}"
            )
        if governor.context_window_tokens is None or governor.compaction != "cache_aware":
            raise ValueError(
                "summary_model summarizes what a cut drops: it needs context_window_tokens "
                "and compaction='cache_aware'"
            )
    if not governor.summary_prompt.strip():
        raise ValueError("summary_prompt must not be empty")
    timeout = governor.summary_timeout
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0
    ):
        raise ValueError(
            f"summary_timeout must be a number of seconds > 0 or None, got {timeout!r}"
        )
    store = governor.store
    if store is not None and not all(hasattr(store, verb) for verb in _STORE_VERBS):
        raise ValueError(
            f"store must be a LangGraph BaseStore ({', '.join(_STORE_VERBS)}), "
            f"got {type(store).__name__}"
        )
    if governor.max_conversations < 1:
        raise ValueError(f"max_conversations must be >= 1, got {governor.max_conversations}")
    if governor.overflow_retries < 0:
        raise ValueError(f"overflow_retries must be >= 0, got {governor.overflow_retries}")
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


class ContextGovernor(RunnableSerializable[GovernorInput, list[BaseMessage]]):
    """Turn a conversation into a request that is legal for the provider and fits the window.

    Runs before every chat-model call, on a copy: the stored history is never touched.
    The order is in `_run_pipeline`: repair the history (pairs, alternation), compact and
    cut it to the budget by protection class (the task pinned, a note at the cut as a turn
    of its own, earlier user messages and excluded tools' calls kept while they fit),
    guarantee the user turn, apply the provider rules, and as a last resort, only over
    budget, shorten text by protection class (the current turn last). Input budget =
    `context_window_tokens - max_output_tokens - safety_buffer`. With
    `context_window_tokens=None` only the repairs run: no compaction, no cut, no
    truncation (to compact without a budget, pipe the `microcompact` pass in front).

    One governor serves many conversations: each has its own state (see
    `state/conversation.py`), found by the LangGraph thread (`config["configurable"]
    ["thread_id"]`, or `govern(..., thread_id=...)`), at most `max_conversations` of
    them, least recently used dropped. A call costs what is new in its history; the
    same history gives the same request on any governor with the same settings.

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

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

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
    chat_template: str | None = None
    compaction: Literal["cache_aware", "keep_recent"] = "cache_aware"
    high_watermark: float = DEFAULT_HIGH_WATERMARK
    low_watermark: float = DEFAULT_LOW_WATERMARK
    max_conversations: int = DEFAULT_MAX_CONVERSATIONS
    summary_model: Any = None
    summary_prompt: str = DEFAULT_SUMMARY_PROMPT
    summary_timeout: float | None = DEFAULT_SUMMARY_TIMEOUT
    store: Any = None
    overflow_retries: int = 1
    name: str | None = "ContextGovernor"

    _counter: MessageTokenCounter = PrivateAttr()
    _compaction: ResultCompaction = PrivateAttr()
    _budget: int | None = PrivateAttr(default=None)
    # The provider profile with the rules the chat template needs, resolved once.
    _profile: Profile = PrivateAttr()
    _conversations: Conversations = PrivateAttr()
    # The model the governor was sized for (`from_model`): its calibration default.
    _model_label: str | None = PrivateAttr(default=None)
    # The summary model itself, built once where `summary_model` is a "provider:model".
    _summary_model: Runnable[Any, Any] | None = PrivateAttr(default=None)
    # Records written under other request-shaping settings are never read.
    _settings_digest: str = PrivateAttr(default="")

    @model_validator(mode="before")
    @classmethod
    def _reject_unknown_settings(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            reject_unknown_settings(data, cls.model_fields, where=cls.__name__)
        return data

    def model_post_init(self, context: Any, /) -> None:
        _validate_settings(self)
        self._budget = _input_budget(
            self.context_window_tokens, self.max_output_tokens, self.safety_buffer
        )
        self._counter = get_token_counter(
            self.token_counter,
            exact_up_to_chars=(
                None
                if self._budget is None
                else self._budget * _CHARS_PER_TOKEN * _COUNTED_APPROXIMATELY_ABOVE_BUDGETS
            ),
            render_chat_template=(
                None
                if self.chat_template is None
                else functools.partial(render_chat_template, self.chat_template)
            ),
        )
        self._compaction = ResultCompaction(
            compactable_tools=self.compactable_tools,
            exclude_tools=self.exclude_tools,
            placeholder=self.placeholder,
        )
        self._profile = resolve_profile(self.provider, chat_template=self.chat_template)
        self._conversations = Conversations(
            self._new_conversation, max_conversations=self.max_conversations
        )
        if isinstance(self.summary_model, str):
            self._summary_model = chat_model_from_string(self.summary_model)
        else:
            self._summary_model = self.summary_model
        self._settings_digest = settings_digest(self._request_shaping_settings())

    def _request_shaping_settings(self) -> dict[str, Any]:
        settings: dict[str, Any] = {
            name: getattr(self, name)
            for name in type(self).model_fields
            if name not in _SETTINGS_NOT_SHAPING_REQUESTS
        }
        settings["token_counter"] = self._counter.name
        settings["package"] = _PACKAGE_VERSION
        for name in ("compactable_tools", "exclude_tools"):
            if settings[name] is not None:
                settings[name] = sorted(settings[name])
        return settings

    def _new_conversation(self) -> ConversationState:
        repairs = RepairStream(
            repair_group=self._profile.repair_group,
            count_message=self._counter.count_message,
            bridge=self._profile.between,
        )
        new_replay = None
        if self.compaction == "cache_aware" and self._budget is not None:
            new_replay = self._new_replay
        return ConversationState(
            repairs,
            new_replay=new_replay,
            count_message=self._counter.count_message,
            request_repairs=ContinuedRepair(self._profile),
        )

    def _new_replay(self) -> CacheAwareReplay:
        assert self._budget is not None
        return CacheAwareReplay(
            max_tokens=self._budget,
            counter=self._counter,
            high_watermark=self.high_watermark,
            low_watermark=self.low_watermark,
            keep_recent=self.keep_recent,
            min_chars=self.min_chars,
            compaction=self._compaction,
            pin_task=self.pin_task,
            shared_calibration=shared_calibration(self.calibration_key),
        )

    def model_copy(
        self, *, update: Mapping[str, Any] | None = None, deep: bool = False
    ) -> ContextGovernor:
        """A copy with `update` applied, set up anew: budget, counter and conversations."""
        copied = super().model_copy(update=update, deep=deep)
        copied.model_post_init(None)
        return copied

    @classmethod
    def from_model(cls, chat_model: Runnable[Any, Any] | str, **overrides: Any) -> ContextGovernor:
        """A governor sized for `chat_model`: its context window and output reservation.

        `chat_model` is a chat model (`bind_tools` bindings are unwrapped) or a
        "provider:model" string, built with langchain's `init_chat_model` only to be read.
        The window is `profile["max_input_tokens"]`; the output reservation is the model's
        own `max_tokens` setting where set, else `profile["max_output_tokens"]` (a quarter
        of the window where that is not below the window). OpenAI models count with their
        bundled tiktoken encoding, other models with their own counter where it needs no
        network, else approximately; the tokenizer's chat template is probed where the
        model has one. The provider profile comes from the model's package and class
        (`model_settings.provider_for_model`: ChatAnthropic is "anthropic", ChatOpenAI on
        OpenAI's API "openai", an unknown class "strict"). `overrides` win (`provider=`
        always); an unknown one raises. When no window is found, ValueError asks for
        `context_window_tokens`; an explicit `context_window_tokens=None` warns instead
        (repairs only, no trimming).
        """
        reject_unknown_settings(overrides, cls.model_fields, where=f"{cls.__name__}.from_model")
        if isinstance(chat_model, str):
            chat_model = chat_model_from_string(chat_model)
        settings = settings_for_model(chat_model, chat_template=overrides.get("chat_template"))
        if "context_window_tokens" not in settings and "context_window_tokens" not in overrides:
            raise ValueError(
                f"from_model: {model_label(chat_model)} has no context window in its profile "
                "(profile['max_input_tokens']); pass context_window_tokens=N, or "
                "context_window_tokens=None to repair without ever trimming"
            )
        if "context_window_tokens" in overrides and overrides["context_window_tokens"] is None:
            warnings.warn(
                "from_model: context_window_tokens=None: the governor repairs requests but "
                "never trims them to a window",
                UserWarning,
                stacklevel=2,
            )
        settings.update(overrides)
        governor = cls(**settings)
        governor._model_label = model_label(chat_model)
        return governor

    def __repr__(self) -> str:
        """The provider profile and the settings that differ from the defaults, each short:
        a model by its class and name, tools by their names, long text by its length.

        Example:
            >>> ContextGovernor(context_window_tokens=8_000, tools=[{"name": "grep"}])
            ContextGovernor(provider='openai', context_window_tokens=8000, tools=<1 tool: grep>)
        """
        settings = ", ".join(f"{name}={shown}" for name, shown in self._repr_settings())
        return f"{type(self).__name__}({settings})"

    def _repr_settings(self) -> Iterator[tuple[str, str]]:
        # The profile first and always: it decides which rules the requests satisfy.
        yield "provider", repr(self.provider)
        for name, field_info in type(self).model_fields.items():
            value = getattr(self, name)
            if name in ("provider", "name") or value == field_info.default:
                continue
            yield name, short_setting(value)

    @property
    def profile(self) -> Profile:
        """The provider profile (with its chat-template rules) every request is repaired for."""
        return self._profile

    @property
    def budget(self) -> int | None:
        """Tokens the request may take, or None when no context window is set."""
        return self._budget

    @property
    def calibration_key(self) -> str:
        """What the model's default calibration is kept under: the model and the counter."""
        return f"{self._model_label or 'any model'} counted by {self._counter.name}"

    @property
    def counter(self) -> MessageTokenCounter:
        """The cached per-message token counter this governor uses."""
        return self._counter

    def count_tokens(
        self, messages: Sequence[BaseMessage], *, tools: Sequence[Any] | None = None
    ) -> int:
        """Tokens of a request made of `messages` and its tool definitions: `tools`, or
        this governor's `tools` setting where None."""
        return self._counter.count_messages(messages) + self._tools_tokens(tools)

    def _tools_tokens(self, tools: Sequence[Any] | None) -> int:
        return self._counter.count_tools(self.tools if tools is None else tools)

    def govern(
        self,
        messages: GovernorInput,
        *,
        thread_id: str | None = None,
        tools: Sequence[Any] | None = None,
        record: Mapping[str, Any] | None = None,
        overflows: Sequence[Overflow] = (),
    ) -> GovernanceResult:
        """Govern `messages`; return the governed copy and a report of what changed.

        `messages` is a list of messages, a `PromptValue`, or a LangGraph state, whose
        "messages" list is governed; a `RemoveMessage` in it is applied, never sent (see
        `_messages.messages_to_govern`). A message that cannot be read is a ValueError
        naming its index. `thread_id` names the conversation (LangGraph's thread);
        without it the conversation is recognised by its history. `tools` are the tool
        definitions sent with this call (they count against its budget; the governor's
        `tools` setting where None). `record` is the conversation's record from the
        previous call (the result's `record`, kept with the thread); without it the
        conversation's state is this process's, or the `store`'s. Where a cut needs a
        summary, the `summary_model` is asked here, once for that cut, for at most
        `summary_timeout` seconds. `overflows`: the provider refused this call's request
        for its length (see overflow.py); the retry's request is governed with a
        calibration raised to fit.
        """
        given = _to_message_list(messages)
        if record is None:
            record = self._stored_record(thread_id)
        with (
            _nesting_named(given),
            self._conversation(thread_id, given, record) as (
                state,
                original,
            ),
        ):
            tools_tokens = self._tools_tokens(tools)
            result, job, previous = self._govern_with(state, original, tools_tokens, overflows)
            if job is not None:
                state.summary = summary_kept(state.summary, job, self._summarize(job))
                state.previous_request = previous
                result = self._govern_with(state, original, tools_tokens, overflows)[0]
            result = self._with_record(state, result, original, thread_id)
        self._store_record(thread_id, result.record)
        return result

    async def agovern(
        self,
        messages: GovernorInput,
        *,
        thread_id: str | None = None,
        tools: Sequence[Any] | None = None,
        record: Mapping[str, Any] | None = None,
        overflows: Sequence[Overflow] = (),
    ) -> GovernanceResult:
        """`govern` for async callers: the summary model and the store are awaited."""
        if self._summary_model is None and self.store is None:
            # Nothing to await: governance is computation on a copy.
            return self.govern(
                messages, thread_id=thread_id, tools=tools, record=record, overflows=overflows
            )
        given = _to_message_list(messages)
        if record is None:
            record = await self._astored_record(thread_id)
        with (
            _nesting_named(given),
            self._conversation(thread_id, given, record) as (
                state,
                original,
            ),
        ):
            tools_tokens = self._tools_tokens(tools)
            result, job, previous = self._govern_with(state, original, tools_tokens, overflows)
            if job is not None:
                state.summary = summary_kept(state.summary, job, await self._asummarize(job))
                state.previous_request = previous
                result = self._govern_with(state, original, tools_tokens, overflows)[0]
            result = self._with_record(state, result, original, thread_id)
        await self._astore_record(thread_id, result.record)
        return result

    @contextmanager
    def _conversation(
        self,
        thread_id: str | None,
        given: list[BaseMessage],
        record: Mapping[str, Any] | None,
    ) -> Iterator[tuple[ConversationState, list[BaseMessage]]]:
        """The conversation's state, held by this call (a fresh one where another holds
        it), and the messages `given` with their contents checked.

        Rather than wait for the other call, govern from a fresh state, which gives the
        same request: governance never blocks a thread or an event loop on a lock. A
        record written elsewhere since this state's last call is taken up
        (`_continue_from_record`). Only the contents of messages the conversation has
        not read before (as these very objects, or as equal messages of text) are
        checked (`readable_contents`). Tool calls are encoded once for the call
        (`calls_encoded_once`).
        """
        with calls_encoded_once():
            state = self._conversations.state_for(thread_id, given)
            if not state.lock.acquire(blocking=False):
                state = self._new_conversation()
                yield state, self._checked_after_record(state, record, given, thread_id)
                return
            try:
                yield state, self._checked_after_record(state, record, given, thread_id)
            finally:
                state.lock.release()

    def _checked_after_record(
        self,
        state: ConversationState,
        record: Mapping[str, Any] | None,
        given: list[BaseMessage],
        thread_id: str | None,
    ) -> list[BaseMessage]:
        """`given` with their contents checked (`readable_contents`), once `state` took
        up `record`: the messages a record's decisions were taken up for were read by
        that pass, which found whether their contents need a look (`checked_before`).

        The record is read before the check, as a history is compared before its
        contents are checked (a `None` content read as ""); a content that cannot be
        read is then a ValueError naming its index.
        """
        self._continue_from_record(state, record, given, thread_id)
        return readable_contents(given, start=state.repairs.checked_before(given))

    def _continue_from_record(
        self,
        state: ConversationState,
        data: Mapping[str, Any] | None,
        messages: list[BaseMessage],
        thread_id: str | None = None,
    ) -> None:
        """Continue `state` from the record in `data`, where there is one this governor can use.

        A record of another version, written under other settings or for another thread
        means another worker served the thread since, in a way this one cannot read (or
        the record was never this thread's): the state is rebuilt from the history. A
        record written for another history (another agent's messages under the same key,
        a history shortened in `replace` mode, a message changed in place since) says
        nothing about this one and is left aside.
        """
        if data is None:
            return
        try:
            record = GovernanceRecord.from_dict(
                data,
                settings=self._settings_digest,
                thread=thread_digest(thread_id),
                max_summary_chars=max_summary_chars(self._summary_tokens()),
            )
        except UnusableRecord as reason:
            logger.debug("context governance: the record is not used (%s); rebuilding", reason)
            state.forget_record()
            return
        if self._summary_model is None and record.summary is not None:
            # Only a summary this governor's summary model writes is ever sent.
            record = dataclasses.replace(record, summary=None)
        if not state.continue_from(record, messages):
            logger.debug("context governance: the record was written for another history")

    def _with_record(
        self,
        state: ConversationState,
        result: GovernanceResult,
        messages: list[BaseMessage],
        thread_id: str | None,
    ) -> GovernanceResult:
        record = state.to_record(
            settings=self._settings_digest, history=messages, thread=thread_digest(thread_id)
        )
        return dataclasses.replace(result, record=record.to_dict())

    def _stored_record(self, thread_id: str | None) -> Mapping[str, Any] | None:
        if self.store is None or thread_id is None:
            return None
        item = self.store.get(_STORE_NAMESPACE, thread_id)
        return None if item is None else item.value

    async def _astored_record(self, thread_id: str | None) -> Mapping[str, Any] | None:
        if self.store is None or thread_id is None:
            return None
        item = await self.store.aget(_STORE_NAMESPACE, thread_id)
        return None if item is None else item.value

    def _store_record(self, thread_id: str | None, record: dict[str, Any] | None) -> None:
        if self.store is not None and thread_id is not None and record is not None:
            self.store.put(_STORE_NAMESPACE, thread_id, record)

    async def _astore_record(self, thread_id: str | None, record: dict[str, Any] | None) -> None:
        if self.store is not None and thread_id is not None and record is not None:
            await self.store.aput(_STORE_NAMESPACE, thread_id, record)

    def _govern_with(
        self,
        state: ConversationState,
        original: list[BaseMessage],
        tools_tokens: int,
        overflows: Sequence[Overflow] = (),
    ) -> tuple[GovernanceResult, SummaryJob | None, PreviousRequest | None]:
        """One run of the pipeline; the summary the cut needs, if any, is not made here.

        Returns the result, the summary job, and the conversation's previous request as
        it was before this run, so that a second run (with the summary) reports the
        prefix against the same request.
        """
        previous = state.previous_request
        fixed_tokens = self._counter.request_overhead + tools_tokens
        try:
            run: _PipelineResult | None = self._run_pipeline(
                state, original, fixed_tokens=fixed_tokens, overflows=overflows
            )
            assert run is not None
            governed, changes = run.request, run.changes
        except Exception as error:
            named = nested_too_deep(original) if isinstance(error, RecursionError) else None
            if named is not None:
                raise named from error
            logger.exception("context governance failed; sending the minimal repair instead")
            state.start_over()
            governed, changes = self._run_minimal_repair(original)
            run = None
        calibration = self._calibration_for(run.plan if run is not None else None, overflows)
        report = self._report(
            original, governed, changes, run, fixed_tokens=fixed_tokens, calibration=calibration
        )
        logger.debug("context governance report: %s", report)
        job = run.summary_job if run is not None else None
        fit = run.fit if run is not None else None
        if job is None and fit is not None and fit.current_turn_truncated and fit.within_budget:
            self._warn_truncated_once(state, report, len(original))
        if job is None and not report.within_budget:
            assert report.budget is not None
            if self.on_over_budget == "raise":
                raise ContextBudgetExceeded(
                    budget=report.budget, tokens=report.corrected_tokens_after
                )
            if not state.over_budget_warned:
                state.over_budget_warned = True
                _warn_over_budget(report)
        return GovernanceResult(messages=list(governed), report=report), job, previous

    @staticmethod
    def _warn_truncated_once(
        state: ConversationState, report: GovernanceReport, history_length: int
    ) -> None:
        """Log the cut of the current turn once per turn: again only where the cut reaches
        a message newer than the last one warned about (a new turn, new tool results), or
        where the history was shortened below it."""
        newest = max(report.truncated, default=0)
        warned = state.truncation_warned
        if warned is not None and newest <= warned < history_length:
            return
        state.truncation_warned = newest
        _warn_current_turn_truncated(report)

    def _summary_job(
        self, state: ConversationState, history: Sequence[BaseMessage], plan: CompactionPlan
    ) -> SummaryJob | None:
        """What the summary of this call's cut is made of, where one is wanted and missing."""
        if self._summary_model is None or plan.cut == 0 or plan.omitted == 0:
            return None
        return summary_job(state.summary, history, cut=plan.cut, max_tokens=self._summary_tokens())

    def _summary_tokens(self) -> int:
        """The tokens a summary may take: a tenth of the budget, at least a few dozen."""
        return max(_MIN_SUMMARY_TOKENS, (self._budget or 0) // 10)

    def _summarize(self, job: SummaryJob) -> str | None:
        assert self._summary_model is not None
        request = summary_request(job, prompt=self.summary_prompt)
        try:
            reply = ask_within(self._summary_model, request, timeout=self.summary_timeout)
        except Exception as error:
            _log_summary_failure(error)
            return None
        return summary_of_reply(reply, job)

    async def _asummarize(self, job: SummaryJob) -> str | None:
        assert self._summary_model is not None
        request = summary_request(job, prompt=self.summary_prompt)
        try:
            reply = await aask_within(self._summary_model, request, timeout=self.summary_timeout)
        except Exception as error:
            _log_summary_failure(error)
            return None
        return summary_of_reply(reply, job)

    def _calibration_for(
        self, plan: CompactionPlan | None, overflows: Sequence[Overflow]
    ) -> Calibration:
        """The calibration this call compares with thresholds: the replay's (learned from
        the history), else what this call's refusals for length taught."""
        if plan is not None and self.compaction == "cache_aware":
            return plan.calibration
        calibration = Calibration()
        for overflow in overflows:
            budget = self._budget if self._budget is not None else overflow.estimate_tokens
            calibration = calibration.observe_overflow(overflow, budget=budget)
        return calibration

    def _run_pipeline(
        self,
        state: ConversationState,
        messages: list[BaseMessage],
        *,
        fixed_tokens: int,
        overflows: Sequence[Overflow] = (),
    ) -> _PipelineResult:
        """The steps, in their order; each returns what it made.

        1. Repair the history: pairs, the provider rules of each group, and alternation
           between groups, each group decided once (what the repairs add counts against
           the budget before cutting).
        2. Compact and cut to the budget by protection class (only with a budget): the
           cache-aware replay, or the keep-recent microcompact and snip. A cut leaves a
           note, its own user turn, joined with the user turns it meets as separate blocks.
        3. Guarantee the request's user turn (the one place that does).
        4. The provider rules that need the whole request.
        4b. Where steps 3 and 4 took a request the replay made within budget over it (a
           tool loop written as text where its opening thinking was cut), the replay
           plans this call again with what they added counted, then steps 3 and 4 run on
           that plan: the request fits, and governing it again changes nothing.
        5. The last resort, only where the request is still over budget: compact the
           newest results, then cut text by protection class, the current turn last.
        Pairing and alternation run once, in step 1: compaction and cuts keep whole
        groups and join the user turns they bring together. The rules run before the last
        resort, which measures what is sent and only shortens text. Thresholds compare
        counts corrected by the calibration (tokens/calibration.py): the replay's, learned
        from the sizes the history reports, and `overflows`.
        """
        read = self._repair_history(state, messages)
        history = read.history
        previous_request = state.previous_request
        plan = self._compact_and_cut(state, read, fixed_tokens=fixed_tokens, overflows=overflows)
        request, made = self._user_turn_and_rules(state, plan, history, messages)
        rules_tokens = self._added_by_rules(
            plan, request, fixed_tokens=fixed_tokens, overflows=overflows
        )
        if rules_tokens:
            state.previous_request = previous_request
            plan = self._compact_and_cut(
                state,
                read,
                fixed_tokens=fixed_tokens,
                overflows=overflows,
                rules_tokens=rules_tokens,
            )
            request, made = self._user_turn_and_rules(state, plan, history, messages)
        changes = dict(read.changes)
        if plan is not None:
            changes[MICROCOMPACT] = plan.compacted
            changes[SNIP] = plan.removed
        for name, count in made.items():
            changes[name] = changes.get(name, 0) + count
        measured = plan.tokens_after if plan is not None and request is plan.messages else None
        before_last_resort = request
        fit = self._last_resort(
            request,
            fixed_tokens=fixed_tokens,
            measured=measured,
            calibration=self._calibration_for(plan, overflows),
        )
        if fit is not None:
            request = fit.messages
            changes[MICROCOMPACT] = changes.get(MICROCOMPACT, 0) + len(fit.compacted)
            changes[TRUNCATE] = len(fit.truncated)
        job = None if plan is None else self._summary_job(state, history, plan)
        return _PipelineResult(
            request, changes, history, read.raw_tokens, plan, before_last_resort, fit, job
        )

    def _user_turn_and_rules(
        self,
        state: ConversationState,
        plan: CompactionPlan | None,
        history: RepairedHistory,
        messages: list[BaseMessage],
    ) -> tuple[list[BaseMessage], dict[str, int]]:
        """Steps 3 and 4: the request's user turn guaranteed, then the provider rules that
        need the whole request; the request and the changes they made."""
        request = history.to_list() if plan is None else plan.messages
        has_conversation = any(not isinstance(message, ToolMessage) for message in messages)
        request, added = guarantee_user_turn(request, has_conversation=has_conversation)
        request, rules = self._request_rules(state, request, plan)
        rules[ALTERNATION] = rules.get(ALTERNATION, 0) + added
        return request, rules

    def _added_by_rules(
        self,
        plan: CompactionPlan | None,
        request: list[BaseMessage],
        *,
        fixed_tokens: int,
        overflows: Sequence[Overflow],
    ) -> int:
        """Step 4b: what steps 3 and 4 added to a request the cache-aware replay made within
        budget, where that takes it over (a tool loop written as text where its opening
        thinking was cut, a user turn added): the replay then plans this call again with
        those tokens counted, and cuts what they need. 0 where nothing is to be done."""
        if plan is None or self.compaction != "cache_aware" or request is plan.messages:
            return 0
        assert self._budget is not None
        calibration = self._calibration_for(plan, overflows)
        if calibration.corrected(plan.tokens_after) > self._budget:
            return 0
        tokens = self._request_tokens(request, fixed_tokens)
        if calibration.corrected(tokens) <= self._budget:
            return 0
        return tokens - plan.tokens_after

    def _request_rules(
        self, state: ConversationState, request: list[BaseMessage], plan: CompactionPlan | None
    ) -> tuple[list[BaseMessage], dict[str, int]]:
        """Step 4: `Profile.repair` of the request, deciding only what is new where the
        conversation's previous request needed no repair (rules/continued.py)."""
        continued = state.request_repairs
        if continued is None:
            return self._profile.repair(request)
        if plan is None or request is not plan.messages:
            return continued.repair(request, prints=None)
        return continued.repair(
            request, prints=plan.fingerprints, unchanged=plan.unchanged_prefix_messages
        )

    def _repair_history(self, state: ConversationState, messages: list[BaseMessage]) -> StreamRead:
        """Step 1: the history repaired group by group (see state/repair_stream.py)."""
        return state.read(messages)

    def _compact_and_cut(
        self,
        state: ConversationState,
        read: StreamRead,
        *,
        fixed_tokens: int,
        overflows: Sequence[Overflow],
        rules_tokens: int = 0,
    ) -> CompactionPlan | None:
        """Step 2: compaction and cuts; None without a budget (repairs only).
        `rules_tokens`: what steps 3 and 4 add to this call's request (step 4b)."""
        if self._budget is None:
            return None
        history = read.history
        plan = state.plan(
            history, fixed_tokens=fixed_tokens, overflows=overflows, rules_tokens=rules_tokens
        )
        if plan is not None:
            return plan
        messages = history.to_list()
        compacted, compacted_count = self._microcompact(messages)
        snipped, removed = self._snip(
            compacted,
            fixed_tokens=fixed_tokens,
            calibration=self._calibration_for(None, overflows),
        )
        return CompactionPlan(
            messages=snipped,
            compacted=compacted_count,
            removed=removed,
            tokens_before=fixed_tokens + read.raw_tokens,
            tokens_after=self._counter.count_messages(snipped)
            - self._counter.request_overhead
            + fixed_tokens,
        )

    def _last_resort(
        self,
        request: list[BaseMessage],
        *,
        fixed_tokens: int,
        measured: int | None,
        calibration: Calibration,
    ) -> BudgetFit | None:
        """Step 5: where the request is over budget, compact and cut text (passes/truncate.py).

        It aims at the budget, and acts only above it: a request within budget is sent as
        it is. Governing the governed request again changes nothing: it is within budget,
        so this step leaves it alone, and the replay finds nothing left to cut in it (what
        was left before the cut is protected, and a cut that would leave nothing out is
        no cut), nor to compact (the last resort compacted all it could). Counts are
        corrected by `calibration`.
        """
        if self._budget is None or self.on_over_budget == "warn":
            return None
        tokens = self._request_tokens(request, fixed_tokens) if measured is None else measured
        if calibration.corrected(tokens) <= self._budget:
            return None
        return fit_to_budget(
            request,
            max_tokens=max(calibration.limit(self._budget), 1),
            counter=self._counter,
            tools_tokens=fixed_tokens - self._counter.request_overhead,
            min_chars=self.min_chars,
            compaction=self._compaction,
            pin_task=self.pin_task,
        )

    def _report(
        self,
        original: list[BaseMessage],
        governed: list[BaseMessage],
        changes: dict[str, int],
        run: _PipelineResult | None,
        *,
        fixed_tokens: int,
        calibration: Calibration,
    ) -> GovernanceReport:
        """The report: token figures from what this call measured where it did, and which
        messages (by input index) were compacted, cut, truncated or kept by protection."""
        plan = run.plan if run is not None else None
        if run is None:
            tokens_before = self._request_tokens(original, fixed_tokens)
        else:
            tokens_before = fixed_tokens + run.raw_tokens
        if plan is not None and plan.messages is governed:
            tokens_after = plan.tokens_after
        else:
            tokens_after = self._request_tokens(governed, fixed_tokens)
        details: dict[str, Any] = {}
        if run is not None:
            details = _fates(original, run)
        return GovernanceReport(
            tokens_before=tokens_before,
            tokens_after=tokens_after,
            budget=self._budget,
            changes=self._changes_by_pass(changes),
            messages_before=len(original),
            messages_after=len(governed),
            fell_back=run is None,
            unchanged_prefix_messages=plan.unchanged_prefix_messages if plan else None,
            unchanged_prefix_tokens=plan.unchanged_prefix_tokens if plan else None,
            calibration_factor=calibration.factor,
            profile=self._profile.name,
            **details,
        )

    def _request_tokens(self, messages: Sequence[BaseMessage], fixed_tokens: int) -> int:
        """Tokens of a request of `messages` whose overhead and tools take `fixed_tokens`."""
        overhead = self._counter.request_overhead
        return self._counter.count_messages(messages) - overhead + fixed_tokens

    def _microcompact(self, messages: list[BaseMessage]) -> tuple[list[BaseMessage], int]:
        return microcompact_with_count(
            messages,
            keep_recent=self.keep_recent,
            min_chars=self.min_chars,
            compaction=self._compaction,
        )

    def _changes_by_pass(self, changes: Mapping[str, int]) -> dict[str, int]:
        """Every pass that ran, in pipeline order, with its count (0 where it changed nothing);
        without a budget nothing compacts, cuts or truncates (repairs only)."""
        budget_passes = (MICROCOMPACT, SNIP, TRUNCATE)
        return {
            name: changes.get(name, 0)
            for name in PASS_NAMES
            if self._budget is not None or name not in budget_passes or changes.get(name)
        }

    def _snip(
        self, messages: list[BaseMessage], *, fixed_tokens: int, calibration: Calibration
    ) -> tuple[list[BaseMessage], int]:
        assert self._budget is not None
        return snip_history_with_count(
            messages,
            max_tokens=max(calibration.limit(self._budget), 1),
            counter=self._counter,
            tools_tokens=fixed_tokens - self._counter.request_overhead,
            pin_task=self.pin_task,
        )

    def _request_repairs(self) -> list[tuple[str, PassFunction]]:
        """The repairs of a whole request with no state, for the fallback."""
        return [
            *_PAIR_REPAIRS,
            (ALTERNATION, enforce_role_alternation_with_count),
            (PROVIDER_RULES, self._profile.repair),
        ]

    def _run_minimal_repair(
        self, messages: list[BaseMessage]
    ) -> tuple[list[BaseMessage], dict[str, int]]:
        """Pairs, alternation and the provider rules of the whole list, with no state:
        what is sent where the pipeline failed on input nobody foresaw."""
        try:
            repaired, changes = _run_steps(messages, self._request_repairs())
        except Exception:
            logger.exception("the minimal repair failed too; sending the messages unchanged")
            return list(messages), {}
        has_conversation = any(not isinstance(message, ToolMessage) for message in messages)
        repaired, added = guarantee_user_turn(repaired, has_conversation=has_conversation)
        changes[ALTERNATION] = changes.get(ALTERNATION, 0) + added
        return repaired, changes

    def as_pre_model_hook(
        self,
        mode: Literal["llm_input", "replace"] = "llm_input",
        *,
        report_key: str | None = None,
    ) -> Runnable[Any, dict[str, Any]]:
        """A LangGraph pre-model node that governs `state["messages"]` before each model call.

        `mode="llm_input"` returns `{"llm_input_messages": governed}`: the model sees the
        governed copy while the stored history stays whole. `mode="replace"` rewrites the
        stored history with the governed list. The node finds the conversation by the
        run's thread id. With `report_key`, the update also puts the report, as a plain
        dict, under that state key.
        """
        from langchain_context_governance.langgraph import build_pre_model_hook

        return build_pre_model_hook(self, mode=mode, report_key=report_key)

    def invoke(
        self, input: GovernorInput, config: RunnableConfig | None = None, **kwargs: Any
    ) -> list[BaseMessage]:
        return govern_in_run(self, input, config).messages

    async def ainvoke(
        self, input: GovernorInput, config: RunnableConfig | None = None, **kwargs: Any
    ) -> list[BaseMessage]:
        return (await agovern_in_run(self, input, config)).messages


_PACKAGE_NAME = "langchain-context-governance"
try:
    _PACKAGE_VERSION = importlib.metadata.version(_PACKAGE_NAME)
except importlib.metadata.PackageNotFoundError:  # pragma: no cover - run from a source tree
    _PACKAGE_VERSION = "unknown"
# Where a `store` keeps the records, by thread id.
_STORE_NAMESPACE = (RECORD_KEY,)

_PAIR_REPAIRS: list[tuple[str, PassFunction]] = [
    (DROP_ORPHANS, drop_orphan_tool_results_with_count),
    (BACKFILL, backfill_missing_tool_results_with_count),
]


@contextmanager
def _nesting_named(messages: list[BaseMessage]) -> Iterator[None]:
    """A recursion error in reading `messages` (JSON and `repr` recurse) said as a
    ValueError naming the message nested too deep; any other is raised as it came."""
    try:
        yield
    except RecursionError as error:
        named = nested_too_deep(messages)
        if named is None:
            raise
        raise named from error


def _log_summary_failure(error: Exception) -> None:
    if isinstance(error, TimeoutError):
        logger.warning("context governance: %s; the cut keeps its note without one", error)
    else:
        logger.error(
            "context governance: the summary model failed; the cut keeps its note without one",
            exc_info=error,
        )


# Text settings longer than this show their length in `repr` (a chat template, a prompt).
_REPR_TEXT_CHARACTERS = 60


def short_setting(value: Any) -> str:
    """A setting's value for `repr`, a few dozen characters at most.

    Example:
        >>> short_setting("{% for m in messages %}{{ m.content }}{% endfor %}" * 3)
        '<text of 150 characters>'
    """
    if isinstance(value, str):
        return (
            repr(value)
            if len(value) <= _REPR_TEXT_CHARACTERS
            else f"<text of {len(value):,} characters>"
        )
    if isinstance(value, (int, float, bool, frozenset)) or value is None:
        return repr(sorted(value)) if isinstance(value, frozenset) else repr(value)
    if isinstance(value, Sequence):
        names = [str(_tool_name(tool)) for tool in value]
        noun = "tool" if len(names) == 1 else "tools"
        listed = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
        return f"<{len(names)} {noun}: {listed}>"
    if isinstance(value, Runnable):
        return f"<{model_label(value)}>"
    return f"<{getattr(value, '__name__', type(value).__name__)}>"


def _tool_name(tool: Any) -> Any:
    if isinstance(tool, Mapping):
        function = tool.get("function")
        return (function if isinstance(function, Mapping) else tool).get("name", "?")
    return getattr(tool, "name", getattr(tool, "__name__", type(tool).__name__))


def _fates(original: list[BaseMessage], run: _PipelineResult) -> dict[str, Any]:
    """Which input messages the run compacted, cut, truncated or kept by protection.

    Positions of the repaired history are mapped to the caller's indices; the work is
    bounded by what the request holds and what was kept, not by what was cut.
    """
    history, plan, fit = run.history, run.plan, run.fit
    figures: dict[str, Any] = {}
    compacted: set[int] = set()
    if plan is not None:
        compacted = {
            index
            for index in map(history.source_index, plan.compacted_positions)
            if index is not None
        }
        figures["kept"] = tuple(
            (index, why)
            for position, why in plan.kept
            for index in _covered(history, position, len(original))
        )
        if plan.omitted > 0:
            figures["cut"] = _cut_ranges(history, plan, len(original))
    if fit is not None and (fit.compacted or fit.truncated):
        sent = run.before_last_resort
        if plan is not None and sent is plan.messages and plan.origins:
            # Through the plan: a message it joined counts for every turn it holds.
            def indices(positions: tuple[int, ...]) -> set[int]:
                return {
                    index
                    for position in positions
                    for origin in plan.origins[position]
                    for index in _covered(history, origin, len(original))
                }
        else:

            def indices(positions: tuple[int, ...]) -> set[int]:
                found = (_input_index(original, sent[position]) for position in positions)
                return {index for index in found if index is not None}

        compacted.update(indices(fit.compacted))
        figures["truncated"] = tuple(sorted(indices(fit.truncated)))
    if compacted:
        figures["compacted"] = tuple(sorted(compacted))
    return figures


def _covered(history: RepairedHistory, position: int, total: int) -> range:
    """The input indices the repaired message at `position` stands for: its own, or, for
    a message the repairs made (user turns joined, a placeholder result), those between
    the nearest messages that came from the input."""
    own = history.source_index(position)
    if own is not None:
        return range(own, own + 1)
    before = next(
        (
            index
            for index in map(history.source_index, range(position - 1, -1, -1))
            if index is not None
        ),
        -1,
    )
    after = next(
        (
            index
            for index in map(history.source_index, range(position + 1, len(history)))
            if index is not None
        ),
        total,
    )
    return range(before + 1, after)


def _cut_ranges(
    history: RepairedHistory, plan: CompactionPlan, total: int
) -> tuple[tuple[int, int], ...]:
    """The input ranges a cut left out: before the cut point, between what it kept."""
    kept = sorted(position for position, _ in plan.kept)
    ranges: list[tuple[int, int]] = []
    start = 0
    for stop in [*kept, plan.cut]:
        if stop > start:
            first = _covered(history, start, total).start
            last = _covered(history, stop - 1, total).stop
            if last > first:
                ranges.append((first, last))
        start = stop + 1
    return tuple(ranges)


def _input_index(original: list[BaseMessage], message: BaseMessage) -> int | None:
    """The input index of `message`: the same object, or the input message with its id
    (a message the repairs joined keeps the id of its first turn). Only run for what the
    last resort changed, which is rare."""
    for index, candidate in enumerate(original):
        if candidate is message:
            return index
    if message.id is not None:
        for index, candidate in enumerate(original):
            if candidate.id == message.id:
                return index
    return None


def _warn_current_turn_truncated(report: GovernanceReport) -> None:
    """The current turn alone does not fit: it was cut last, and never silently (once per
    turn, see `ContextGovernor._warn_truncated_once`)."""
    logger.warning(
        "context governance: the current turn (the latest user message or the newest tool "
        "results) alone does not fit the budget of %d tokens; its text was cut to a head "
        "and a tail around a marker (messages %s).",
        report.budget or 0,
        ", ".join(str(index) for index in report.truncated) or "?",
    )


def _warn_over_budget(report: GovernanceReport) -> None:
    """Over budget is never silent: one WARNING per conversation."""
    assert report.budget is not None
    logger.warning(
        "context governance: the request is over budget: %d tokens for a budget of %d "
        "(%d over); the model may reject it as too long. Raise the window or shrink what "
        "governance cannot cut (the system message, the last turn, tool definitions).",
        report.corrected_tokens_after,
        report.budget,
        report.corrected_tokens_after - report.budget,
    )


def _to_message_list(messages: GovernorInput) -> list[BaseMessage]:
    """The messages given, their contents left to `_conversation` to check."""
    return messages_to_govern(messages, check_contents=False)


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
