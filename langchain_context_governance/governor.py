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

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.messages.utils import MessageLikeRepresentation
from langchain_core.prompt_values import PromptValue
from langchain_core.runnables import Runnable, RunnableConfig, RunnableSerializable
from pydantic import ConfigDict, PrivateAttr, model_validator

from langchain_context_governance._added import (
    synthetic_user_turn,
)
from langchain_context_governance._messages import messages_to_govern
from langchain_context_governance._settings import reject_unknown_settings
from langchain_context_governance.errors import ContextBudgetExceeded
from langchain_context_governance.model_settings import (
    chat_model_from_string,
    model_label,
    settings_for_model,
)
from langchain_context_governance.passes._budget import task_pin_limit
from langchain_context_governance.passes.alternation import (
    enforce_role_alternation_with_count,
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
from langchain_context_governance.passes.truncate import fit_to_budget
from langchain_context_governance.rules.profile import Profile, resolve_profile
from langchain_context_governance.rules.templates import render_chat_template
from langchain_context_governance.rules.validate import PROVIDERS
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
)
from langchain_context_governance.state.repair_stream import RepairStream
from langchain_context_governance.state.summary import (
    DEFAULT_SUMMARY_PROMPT,
    SummaryJob,
    aask_within,
    ask_within,
    summary_job,
    summary_kept,
    summary_of_reply,
    summary_request,
)
from langchain_context_governance.state.window import (
    DEFAULT_HIGH_WATERMARK,
    DEFAULT_KEEP_RECENT,
    DEFAULT_LOW_WATERMARK,
    BatchedWindow,
    WindowPlan,
    validate_watermarks,
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
    """What one governance run did.

    `changes` maps each pass name to how many messages it changed, removed or added
    (repairs of the history count every repair the history needs, also those decided on
    earlier calls); `budget` is None when no context window is set (no snipping).
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


def ensure_user_message(messages: list[BaseMessage]) -> tuple[list[BaseMessage], int]:
    """Add a synthetic user turn to a non-empty request that has none."""
    if not messages or any(isinstance(message, HumanMessage) for message in messages):
        return messages, 0
    leading_systems = 0
    while leading_systems < len(messages) and isinstance(messages[leading_systems], SystemMessage):
        leading_systems += 1
    synthetic = synthetic_user_turn()
    return [*messages[:leading_systems], synthetic, *messages[leading_systems:]], 1


class ContextGovernor(RunnableSerializable[GovernorInput, list[BaseMessage]]):
    """Turn a conversation into a request that is legal for the provider and fits the window.

    Runs before every chat-model call, on a copy: the stored history is never touched.
    The order is in `_run_pipeline`: repair the history (pairs, alternation), compact and
    cut it to the budget (the task pinned, a note at the cut), repair the request (pairs,
    alternation, provider rules), since cutting can break both, and as a last resort
    shorten the largest messages where the request is still too large. Input budget =
    `context_window_tokens - max_output_tokens - safety_buffer`; no cutting when
    `context_window_tokens` is None.

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
        new_window = None
        if self.compaction == "cache_aware" and self._budget is not None:
            new_window = self._new_window
        return ConversationState(
            repairs, new_window=new_window, count_message=self._counter.count_message
        )

    def _new_window(self, tools_tokens: int) -> BatchedWindow:
        assert self._budget is not None
        return BatchedWindow(
            max_tokens=self._budget,
            counter=self._counter,
            tools_tokens=tools_tokens,
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
        original = _to_message_list(messages)
        if record is None:
            record = self._stored_record(thread_id)
        with self._conversation(thread_id, original, record) as state:
            tools_tokens = self._tools_tokens(tools)
            result, job, previous = self._govern_with(state, original, tools_tokens, overflows)
            if job is not None:
                state.summary = summary_kept(state.summary, job, self._summarize(job))
                state.previous_request = previous
                result = self._govern_with(state, original, tools_tokens, overflows)[0]
            result = self._with_record(state, result, original)
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
        original = _to_message_list(messages)
        if record is None:
            record = await self._astored_record(thread_id)
        with self._conversation(thread_id, original, record) as state:
            tools_tokens = self._tools_tokens(tools)
            result, job, previous = self._govern_with(state, original, tools_tokens, overflows)
            if job is not None:
                state.summary = summary_kept(state.summary, job, await self._asummarize(job))
                state.previous_request = previous
                result = self._govern_with(state, original, tools_tokens, overflows)[0]
            result = self._with_record(state, result, original)
        await self._astore_record(thread_id, result.record)
        return result

    @contextmanager
    def _conversation(
        self,
        thread_id: str | None,
        messages: list[BaseMessage],
        record: Mapping[str, Any] | None,
    ) -> Iterator[ConversationState]:
        """The conversation's state, held by this call; a fresh one where another holds it.

        Rather than wait for the other call, govern from a fresh state, which gives the
        same request: governance never blocks a thread or an event loop on a lock. A
        record written elsewhere since this state's last call is taken up
        (`_continue_from_record`).
        """
        state = self._conversations.state_for(thread_id, messages)
        if not state.lock.acquire(blocking=False):
            state = self._new_conversation()
            self._continue_from_record(state, record, messages)
            yield state
            return
        try:
            self._continue_from_record(state, record, messages)
            yield state
        finally:
            state.lock.release()

    def _continue_from_record(
        self,
        state: ConversationState,
        data: Mapping[str, Any] | None,
        messages: list[BaseMessage],
    ) -> None:
        """Continue `state` from the record in `data`, where there is one this governor can use.

        A record of another version or written under other settings means another worker
        served the thread since, in a way this one cannot read: the state is rebuilt from
        the history. A record written for another history (another agent's messages
        under the same key, a history shortened in `replace` mode) says nothing about this
        one and is left aside.
        """
        if data is None:
            return
        try:
            record = GovernanceRecord.from_dict(data, settings=self._settings_digest)
        except UnusableRecord as reason:
            logger.debug("context governance: the record is not used (%s); rebuilding", reason)
            state.start_over()
            state.previous_request = state.calibration = state.serial = None
            state.over_budget_warned = False
            return
        if record.history.continued_by(messages):
            state.continue_from(record, messages)
        else:
            logger.debug("context governance: the record was written for another history")

    def _with_record(
        self, state: ConversationState, result: GovernanceResult, messages: list[BaseMessage]
    ) -> GovernanceResult:
        record = state.to_record(settings=self._settings_digest, history=messages)
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
        plan: WindowPlan | None = None
        job: SummaryJob | None = None
        fell_back = False
        previous = state.previous_request
        try:
            governed, changes, plan, job, raw_tokens = self._run_pipeline(
                state, original, tools_tokens, overflows
            )
        except Exception:
            logger.exception("context governance failed; sending the minimal repair instead")
            state.start_over()
            governed, changes = self._run_minimal_repair(original)
            raw_tokens = None
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
            calibration_factor=self._calibration_for(plan, overflows).factor,
            profile=self._profile.name,
            **self._measure(original, raw_tokens, governed, plan, tools_tokens),
        )
        logger.debug("context governance report: %s", report)
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

    def _summary_job(
        self, state: ConversationState, history: Sequence[BaseMessage], plan: WindowPlan
    ) -> SummaryJob | None:
        """What the summary of this call's cut is made of, where one is wanted and missing."""
        if self._summary_model is None or plan.cut == 0 or plan.omitted == 0:
            return None
        assert self._budget is not None
        return summary_job(
            state.summary,
            history,
            cut=plan.cut,
            max_tokens=max(_MIN_SUMMARY_TOKENS, self._budget // 10),
        )

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
        self, plan: WindowPlan | None, overflows: Sequence[Overflow]
    ) -> Calibration:
        """The calibration this call compares with thresholds: the window's (learned from
        the history), else what this call's refusals for length taught."""
        if plan is not None:
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
        tools_tokens: int,
        overflows: Sequence[Overflow] = (),
    ) -> tuple[list[BaseMessage], dict[str, int], WindowPlan | None, SummaryJob | None, int]:
        """The passes in their order, on the conversation's state.

        1. Repair the history: pairs and alternation, each group decided once (what the
           repairs add counts against the budget before cutting).
        2. Compact and cut to the budget: the cache-aware window, replayed incrementally,
           or the keep-recent microcompact and snip.
        3. Repair the request: cutting can break pairs and alternation; the provider
           profile runs on the request alone.
        4. The last resort, where the request is still too large: compact the newest
           results, then shorten the largest messages (`on_over_budget="truncate"`).

        `tools_tokens` are what this call's tool definitions take of the budget. Returns
        the request, the changes by pass, the window's plan, the summary the cut needs
        and the tokens of `messages` as they came.

        Thresholds compare counts corrected by the calibration (tokens/calibration.py):
        the window's, learned from the sizes the history reports, and `overflows`.
        """
        read = state.read(messages)
        history = read.history
        changes = dict(read.changes)
        plan = state.plan(history, tools_tokens=tools_tokens, overflows=overflows)
        job: SummaryJob | None = None
        if plan is not None:
            job = self._summary_job(state, history, plan)
            request = plan.messages
            changes["microcompact"] = plan.compacted
            changes["snip_history"] = plan.removed
        else:
            steps: list[tuple[str, PassFunction]] = [("microcompact", self._microcompact)]
            if self._budget is not None:
                snip = functools.partial(
                    self._snip,
                    tools_tokens=tools_tokens,
                    calibration=self._calibration_for(None, overflows),
                )
                steps.append(("snip_history", snip))
            request, changes = _run_steps(history.to_list(), steps, changes)
        request, changes = _run_steps(request, self._request_repairs(), changes)
        if self._budget is not None and self.on_over_budget != "warn":
            # The window measured its request; a request the repairs left alone is not
            # counted again.
            measured = plan.tokens_after if plan is not None and request is plan.messages else None
            fit = functools.partial(
                self._fit_to_budget,
                measured=measured,
                tools_tokens=tools_tokens,
                calibration=self._calibration_for(plan, overflows),
            )
            request, changes = _run_steps(request, [("truncate", fit)], changes)
        if not request and any(not isinstance(m, ToolMessage) for m in messages):
            # Only blank messages were left; a request needs something to answer.
            request = [synthetic_user_turn()]
            changes["apply_provider_rules"] = changes.get("apply_provider_rules", 0) + 1
        return request, changes, plan, job, read.raw_tokens

    def _request_repairs(self) -> list[tuple[str, PassFunction]]:
        return [
            *_PAIR_REPAIRS,
            ("enforce_role_alternation", enforce_role_alternation_with_count),
            ("apply_provider_rules", self._profile.repair),
        ]

    def _measure(
        self,
        original: list[BaseMessage],
        raw_tokens: int | None,
        governed: list[BaseMessage],
        plan: WindowPlan | None,
        tools_tokens: int,
    ) -> dict[str, Any]:
        """Token figures for the report, from what this call measured where it did."""
        figures: dict[str, Any] = {}
        if raw_tokens is None:
            figures["tokens_before"] = self._counter.count_messages(original) + tools_tokens
        else:
            fixed = self._counter.request_overhead + tools_tokens
            figures["tokens_before"] = fixed + raw_tokens
        if plan is not None and plan.messages is governed:
            figures["tokens_after"] = plan.tokens_after
        else:
            figures["tokens_after"] = self._counter.count_messages(governed) + tools_tokens
        if plan is not None:
            figures["unchanged_prefix_messages"] = plan.unchanged_prefix_messages
            figures["unchanged_prefix_tokens"] = plan.unchanged_prefix_tokens
        return figures

    def _fit_to_budget(
        self,
        messages: list[BaseMessage],
        *,
        measured: int | None = None,
        tools_tokens: int = 0,
        calibration: Calibration,
    ) -> tuple[list[BaseMessage], Mapping[str, int]]:
        """The last resort where the request is still too large: see passes/truncate.py.

        With `compaction="cache_aware"` it acts above the high watermark, not only above
        the budget, and aims under it, so that governing the governed request again
        changes nothing (the window acts only above the high watermark); it aims under
        the budget where that is not possible. Counts are corrected by `calibration`.
        """
        assert self._budget is not None
        targets = [self._budget]
        if self.compaction == "cache_aware":
            targets.insert(0, max(int(self._budget * self.high_watermark), 1))
        if measured is None:
            tokens = self._counter.count_messages(messages) + tools_tokens
        else:
            tokens = measured
        if calibration.corrected(tokens) <= targets[0]:
            return messages, {"truncate": 0}
        fit = None
        for target in targets:
            fit = fit_to_budget(
                messages,
                max_tokens=max(calibration.limit(target), 1),
                counter=self._counter,
                tools_tokens=tools_tokens,
                min_chars=self.min_chars,
                compaction=self._compaction,
                task_tokens=task_pin_limit(self._budget) if self.pin_task else 0,
            )
            if fit.within_budget:
                break
        assert fit is not None
        return fit.messages, {"microcompact": fit.compacted, "truncate": fit.truncated}

    def _microcompact(self, messages: list[BaseMessage]) -> tuple[list[BaseMessage], int]:
        return microcompact_with_count(
            messages,
            keep_recent=self.keep_recent,
            min_chars=self.min_chars,
            compaction=self._compaction,
        )

    def _snip(
        self, messages: list[BaseMessage], *, tools_tokens: int, calibration: Calibration
    ) -> tuple[list[BaseMessage], int]:
        assert self._budget is not None
        return snip_history_with_count(
            messages,
            max_tokens=max(calibration.limit(self._budget), 1),
            counter=self._counter,
            tools_tokens=tools_tokens,
            pin_task=self.pin_task,
        )

    def _run_minimal_repair(
        self, messages: list[BaseMessage]
    ) -> tuple[list[BaseMessage], dict[str, int]]:
        """The request repairs alone; where even they fail, the messages as they came."""
        try:
            return _run_steps(messages, self._request_repairs())
        except Exception:
            logger.exception("the minimal repair failed too; sending the messages unchanged")
            return list(messages), {}

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
    ("drop_orphan_tool_results", drop_orphan_tool_results_with_count),
    ("backfill_missing_tool_results", backfill_missing_tool_results_with_count),
]


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
    return messages_to_govern(messages)


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
