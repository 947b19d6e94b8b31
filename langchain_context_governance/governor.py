"""ContextGovernor: the settings, the conversation's state and record, the pipeline's run.

The governor holds no policy: the steps and their order are in pipeline.py, every
setting in settings.py, the decisions in policy/ and state/. Here a call finds its
conversation's state (by thread, or by its history), takes up the record another worker
wrote, runs the steps (or the fallback where they fail on input nobody foresaw), asks
for the cut's summary once, writes the record back, and logs what must not be silent.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.metadata
import logging
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Literal

from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable, RunnableConfig, RunnableSerializable
from langchain_core.tools import BaseTool
from pydantic import ConfigDict, PrivateAttr

from langchain_context_governance._messages import (
    calls_encoded_once,
    given_items,
    messages_from,
    nested_too_deep,
    readable_contents,
)
from langchain_context_governance.errors import ContextBudgetExceeded
from langchain_context_governance.model_settings import (
    chat_model_from_string,
    model_label,
    settings_for_model,
)
from langchain_context_governance.offload import (
    Offload,
    read_context_tool,
)
from langchain_context_governance.offload.tool import page_characters_for
from langchain_context_governance.pipeline import Call, Pipeline, report_of
from langchain_context_governance.policy.summary_job import SummaryJob, summary_kept, summary_tokens
from langchain_context_governance.report import GovernanceReport, GovernanceResult, GovernorInput
from langchain_context_governance.rules.continued import ContinuedRepair
from langchain_context_governance.rules.profile import Profile, resolve_profile
from langchain_context_governance.rules.templates import render_chat_template
from langchain_context_governance.settings import GovernorSettings, reject_unknown_settings
from langchain_context_governance.state.binding import leave_out_stale_reasoning
from langchain_context_governance.state.cache_aware import CacheAwareReplay
from langchain_context_governance.state.conversation import Conversations, ConversationState
from langchain_context_governance.state.record import (
    GovernanceRecord,
    PreviousRequest,
    UnusableRecord,
    settings_digest,
    thread_digest,
)
from langchain_context_governance.state.repair_stream import RepairStream
from langchain_context_governance.state.summary import SummaryWriter, max_summary_chars
from langchain_context_governance.state.thread_store import ThreadStore
from langchain_context_governance.tokens.calibration import Overflow, shared_calibration
from langchain_context_governance.tokens.counter import (
    APPROXIMATE_CHARS_PER_TOKEN,
    MessageTokenCounter,
    get_token_counter,
)
from langchain_context_governance.tracing import agovern_in_run, govern_in_run

__all__ = ["ContextGovernor", "GovernanceReport", "GovernanceResult", "GovernorInput"]

logger = logging.getLogger(__name__)

# A message with more text than this many budgets' worth of characters (4 a token) cannot be
# sent whole: it is counted approximately, since the last resort cuts it anyway, and exact
# tokenizers spend seconds and gigabytes on megabytes of text without whitespace.
_COUNTED_APPROXIMATELY_ABOVE_BUDGETS = 8

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


class ContextGovernor(GovernorSettings, RunnableSerializable[GovernorInput, list[BaseMessage]]):
    """Turn a conversation into a request that is legal for the provider and fits the window.

    Runs before every chat-model call, on a copy: the stored history is never touched.
    The order is in pipeline.py: repair the history (pairs, alternation), compact and
    cut it to the budget by protection class (the task pinned, a note at the cut as a turn
    of its own, earlier user messages and excluded tools' calls kept while they fit),
    guarantee the user turn, apply the provider rules, and as a last resort, only over
    budget, shorten text by protection class (the current turn last). The settings and
    the input budget are documented in settings.py. Without a budget only the repairs
    run: no compaction, no cut, no truncation (to compact without a budget, pipe the
    `microcompact` pass in front).

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

    # The steps with the budget, the counter and the profile, resolved once.
    _pipeline: Pipeline = PrivateAttr()
    _conversations: Conversations = PrivateAttr()
    # The model the governor was sized for (`from_model`): its calibration default.
    _model_label: str | None = PrivateAttr(default=None)
    # How the summary model is asked (built once, also where `summary_model` is a
    # "provider:model" string); None without one.
    _summary_writer: SummaryWriter | None = PrivateAttr(default=None)
    # Records written under other request-shaping settings are never read.
    _settings_digest: str = PrivateAttr(default="")

    def model_post_init(self, context: Any, /) -> None:
        super().model_post_init(context)
        budget = self.input_budget()
        counter = get_token_counter(
            self.token_counter,
            exact_up_to_chars=(
                None
                if budget is None
                else budget * APPROXIMATE_CHARS_PER_TOKEN * _COUNTED_APPROXIMATELY_ABOVE_BUDGETS
            ),
            render_chat_template=(
                None
                if self.chat_template is None
                else functools.partial(render_chat_template, self.chat_template)
            ),
        )
        self._pipeline = Pipeline(
            budget=budget,
            counter=counter,
            profile=resolve_profile(self.provider, chat_template=self.chat_template),
            compaction=self.result_compaction(),
            compaction_mode=self.compaction,
            pin_task=self.pin_task,
            on_over_budget=self.on_over_budget,
            summarizes=self.summary_model is not None,
        )
        self._conversations = Conversations(
            self._new_conversation, max_conversations=self.max_conversations
        )
        model = self.summary_model
        if isinstance(model, str):
            model = chat_model_from_string(model)
        self._summary_writer = (
            None
            if model is None
            else SummaryWriter(model, prompt=self.summary_prompt, timeout=self.summary_timeout)
        )
        self._settings_digest = settings_digest(self._request_shaping_settings())

    def _request_shaping_settings(self) -> dict[str, Any]:
        settings: dict[str, Any] = {
            name: getattr(self, name)
            for name in type(self).model_fields
            if name not in _SETTINGS_NOT_SHAPING_REQUESTS
        }
        settings["token_counter"] = self._pipeline.counter.name
        settings["package"] = _PACKAGE_VERSION
        for name in ("compactable_tools", "exclude_tools"):
            if settings[name] is not None:
                settings[name] = sorted(settings[name])
        return settings

    def _new_conversation(self) -> ConversationState:
        pipeline = self._pipeline
        repairs = RepairStream(
            repair_group=pipeline.profile.repair_group,
            count_message=pipeline.counter.count_message,
            bridge=pipeline.profile.between,
        )
        new_replay = None
        if self.compaction == "cache_aware" and pipeline.budget is not None:
            new_replay = self._new_replay
        return ConversationState(
            repairs,
            new_replay=new_replay,
            count_message=pipeline.counter.count_message,
            request_repairs=ContinuedRepair(pipeline.profile),
        )

    def _new_replay(self) -> CacheAwareReplay:
        pipeline = self._pipeline
        assert pipeline.budget is not None
        return CacheAwareReplay(
            max_tokens=pipeline.budget,
            counter=pipeline.counter,
            high_watermark=self.high_watermark,
            low_watermark=self.low_watermark,
            compaction=pipeline.compaction,
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
        always); an unknown one raises. `max_input_tokens=N` gives the input budget
        directly (with the model's window too, the smaller budget holds). When no window
        is found and no `max_input_tokens` given, ValueError asks for one; an explicit
        `context_window_tokens=None` warns instead (repairs only, no trimming).
        """
        reject_unknown_settings(overrides, cls.model_fields, where=f"{cls.__name__}.from_model")
        if isinstance(chat_model, str):
            chat_model = chat_model_from_string(chat_model)
        settings = settings_for_model(
            chat_model,
            chat_template=overrides.get("chat_template"),
            provider=overrides.get("provider"),
        )
        budget_given = "context_window_tokens" in overrides or "max_input_tokens" in overrides
        if "context_window_tokens" not in settings and not budget_given:
            raise ValueError(
                f"from_model: {model_label(chat_model)} has no context window in its profile "
                "(profile['max_input_tokens']); pass context_window_tokens=N or "
                "max_input_tokens=N (the input budget), or context_window_tokens=None to "
                "repair without ever trimming"
            )
        settings.update(overrides)
        if settings.get("context_window_tokens") is None:
            # Without a window, the model's output reservation reserves nothing.
            for reserve in ("max_output_tokens", "safety_buffer"):
                if reserve not in overrides:
                    settings.pop(reserve, None)
            if settings.get("max_input_tokens") is None:
                warnings.warn(
                    "from_model: context_window_tokens=None: the governor repairs requests but "
                    "never trims them to a window",
                    UserWarning,
                    stacklevel=2,
                )
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
        return self._pipeline.profile

    @property
    def budget(self) -> int | None:
        """Tokens the request may take, or None when no context window is set."""
        return self._pipeline.budget

    @property
    def calibration_key(self) -> str:
        """What the model's default calibration is kept under: the model and the counter."""
        return f"{self._model_label or 'any model'} counted by {self._pipeline.counter.name}"

    @property
    def counter(self) -> MessageTokenCounter:
        """The cached per-message token counter this governor uses."""
        return self._pipeline.counter

    def count_tokens(
        self, messages: Sequence[BaseMessage], *, tools: Sequence[Any] | None = None
    ) -> int:
        """Tokens of a request made of `messages` and its tool definitions: `tools`, or
        this governor's `tools` setting where None."""
        return self._pipeline.counter.count_messages(messages) + self._tools_tokens(tools)

    def _tools_tokens(self, tools: Sequence[Any] | None) -> int:
        return self._pipeline.counter.count_tools(self.tools if tools is None else tools)

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
        items = given_items(messages)
        thread_store = ThreadStore(self.store)
        if record is None:
            record = thread_store.record(thread_id)
        offload = self._offload_for(thread_id)
        with (
            _nesting_named(items),
            self._conversation(thread_id, items, record) as (state, given, original),
        ):
            tools_tokens = self._tools_tokens(tools)
            result, job, previous = self._govern_with(
                state, original, tools_tokens, overflows, offload
            )
            if job is not None:
                assert self._summary_writer is not None  # a job is found only with one
                written = self._summary_writer.write(job)
                state.summary = summary_kept(state.summary, job, written)
                state.previous_request = previous
                result = self._govern_with(state, original, tools_tokens, overflows, offload)[0]
            result = self._with_record(state, result, original, given, thread_id)
        thread_store.keep_record(thread_id, result.record)
        if offload is not None and thread_id is not None:
            thread_store.keep_offloaded(thread_id, offload)
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
        offload = self._offload_for(thread_id)
        if self._summary_writer is None and self.store is None and offload is None:
            # Nothing to await: governance is computation on a copy.
            return self.govern(
                messages, thread_id=thread_id, tools=tools, record=record, overflows=overflows
            )
        items = given_items(messages)
        thread_store = ThreadStore(self.store)
        if record is None:
            record = await thread_store.arecord(thread_id)
        with (
            _nesting_named(items),
            self._conversation(thread_id, items, record) as (state, given, original),
        ):
            tools_tokens = self._tools_tokens(tools)
            result, job, previous = self._govern_with(
                state, original, tools_tokens, overflows, offload
            )
            if job is not None:
                assert self._summary_writer is not None  # a job is found only with one
                written = await self._summary_writer.awrite(job)
                state.summary = summary_kept(state.summary, job, written)
                state.previous_request = previous
                result = self._govern_with(state, original, tools_tokens, overflows, offload)[0]
            result = self._with_record(state, result, original, given, thread_id)
        await thread_store.akeep_record(thread_id, result.record)
        if offload is not None and thread_id is not None:
            await thread_store.akeep_offloaded(thread_id, offload)
        return result

    @contextmanager
    def _conversation(
        self,
        thread_id: str | None,
        items: list[Any],
        record: Mapping[str, Any] | None,
    ) -> Iterator[tuple[ConversationState, list[BaseMessage], list[BaseMessage]]]:
        """The conversation's state, held by this call (a fresh one where another holds
        it), the messages given (`items` read as messages), and those with their contents
        checked.

        Rather than wait for the other call, govern from a fresh state, which gives the
        same request: governance never blocks a thread or an event loop on a lock. A
        record written elsewhere since this state's last call is taken up
        (`_continue_from_record`). Only the items the conversation has not read before
        are read as messages (`messages_from`: the very objects read are not looked at
        again), and only the contents of messages it has not read before (as these very
        objects, or as equal messages of text) are checked (`readable_contents`). Tool
        calls are encoded once for the call (`calls_encoded_once`).
        """
        read: list[list[BaseMessage]] = []

        def history() -> list[BaseMessage]:
            # Read only where the lookup compares histories (no thread, or several).
            if not read:
                read.append(messages_from(items, check_contents=False))
            return read[0]

        with calls_encoded_once():
            state = self._conversations.state_for(thread_id, history)
            if not state.lock.acquire(blocking=False):
                state = self._new_conversation()
                given = history()
                yield state, given, self._checked_after_record(state, record, given, thread_id)
                return
            try:
                if read:
                    given = read[0]
                else:
                    known = state.repairs.objects_read_in(items)
                    given = messages_from(items, start=known, check_contents=False)
                yield state, given, self._checked_after_record(state, record, given, thread_id)
            finally:
                state.lock.release()

    def _checked_after_record(
        self,
        state: ConversationState,
        record: Mapping[str, Any] | None,
        given: list[BaseMessage],
        thread_id: str | None,
    ) -> list[BaseMessage]:
        """`given` from the newest provider compaction on (`ConversationState.
        provider_window`: what it stands for is never sent again), with their contents
        checked (`readable_contents`), once `state` took up `record`: the messages a
        record's decisions were taken up for were read by that pass, which found whether
        their contents need a look (`checked_before`).

        The record is read before the check, as a history is compared before its
        contents are checked (a `None` content read as ""); a content that cannot be
        read is then a ValueError naming its index.
        """
        found, _, start = state.provider_window(given)
        window = given if start is None else list(found)
        self._continue_from_record(state, record, window, thread_id)
        return readable_contents(window, start=state.repairs.checked_before(window))

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
                max_summary_chars=max_summary_chars(summary_tokens(self._pipeline.budget)),
            )
        except UnusableRecord as reason:
            logger.debug("context governance: the record is not used (%s); rebuilding", reason)
            state.forget_record()
            return
        if self._summary_writer is None and record.summary is not None:
            # Only a summary this governor's summary model writes is ever sent.
            record = dataclasses.replace(record, summary=None)
        if not state.continue_from(record, messages):
            logger.debug("context governance: the record was written for another history")

    def _with_record(
        self,
        state: ConversationState,
        result: GovernanceResult,
        messages: list[BaseMessage],
        given: list[BaseMessage],
        thread_id: str | None,
    ) -> GovernanceResult:
        """`result` with the conversation's record after this call on `messages` (the
        `given` ones from the newest provider compaction on) in thread `thread_id`, its
        report by `given`'s indices."""
        record = state.to_record(
            settings=self._settings_digest, history=messages, thread=thread_digest(thread_id)
        )
        report = result.report
        if messages is not given:
            _, leading, start = state.provider_window(given)
            if start is not None:
                report = _in_given(report, len(given), leading, start)
        return dataclasses.replace(result, report=report, record=record.to_dict())

    def _offload_for(self, thread_id: str | None) -> Offload | None:
        """What this call keeps of what leaves its request: with `offload`, in a thread
        (without one, `read_context` reads nothing, so no handle is shown)."""
        return Offload() if self.offload and thread_id is not None else None

    def read_context_tool(self) -> BaseTool:
        """The `read_context` tool that reads back what this governor offloaded (see
        docs/offload.md): add it to the agent's tools where `offload=True` (the
        `create_agent` middleware registers it itself). It reads the store this governor
        writes to, a page at most a tenth of the input budget.

        Example:
            >>> governor = ContextGovernor(context_window_tokens=8_000, offload=True)
            >>> tool = governor.read_context_tool()
            >>> tool.name
            'read_context'
            >>> tool.invoke({"handle": "k7f3q2m5xa"}, config={"configurable": {"thread_id": "t"}})
            'read_context: nothing is kept under handle "k7f3q2m5xa" in this conversation.'
        """
        page = page_characters_for(self._pipeline.budget)
        return read_context_tool(store=self.store, page_characters=page)

    def _govern_with(
        self,
        state: ConversationState,
        original: list[BaseMessage],
        tools_tokens: int,
        overflows: Sequence[Overflow] = (),
        offload: Offload | None = None,
    ) -> tuple[GovernanceResult, SummaryJob | None, PreviousRequest | None]:
        """One run of the pipeline; the summary the cut needs, if any, is not made here.

        Returns the result, the summary job, and the conversation's previous request as
        it was before this run, so that a second run (with the summary) reports the
        prefix against the same request.
        """
        pipeline = self._pipeline
        previous = state.previous_request
        fixed_tokens = pipeline.counter.request_overhead + tools_tokens
        call: Call | None = Call(state, original, fixed_tokens, overflows, offload=offload)
        try:
            assert call is not None
            pipeline.run(call)
            governed, changes = call.request, call.changes()
        except Exception as error:
            named = nested_too_deep(original) if isinstance(error, RecursionError) else None
            if named is not None:
                raise named from error
            logger.exception("context governance failed; sending the minimal repair instead")
            state.start_over()
            governed, changes = self._minimal_repair(original)
            call = None
        dropped: tuple[int, ...] = ()
        if call is None and pipeline.profile.bindings:
            # What the minimal repair changed (or added) is before everything after it.
            governed, positions = leave_out_stale_reasoning(
                governed,
                original,
                position_of=lambda index: index,
                still_bound=lambda index, position: True,
            )
            dropped = tuple(positions)
        calibration = pipeline.calibration_for(call.plan if call else None, overflows)
        report = report_of(
            pipeline,
            original,
            governed,
            changes,
            call,
            fixed_tokens=fixed_tokens,
            calibration=calibration,
            dropped=dropped,
        )
        logger.debug("context governance report: %s", report)
        job = call.summary_job if call is not None else None
        if job is None and report.reasoning_dropped and not state.reasoning_warned:
            state.reasoning_warned = True
            _warn_reasoning_dropped(report)
        fit = call.fit if call is not None else None
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

    def _minimal_repair(
        self, messages: list[BaseMessage]
    ) -> tuple[list[BaseMessage], dict[str, int]]:
        """The fallback's repairs (`Pipeline.minimal_repair`), or the messages unchanged
        where even those fail."""
        try:
            return self._pipeline.minimal_repair(messages)
        except Exception:
            logger.exception("the minimal repair failed too; sending the messages unchanged")
            return list(messages), {}

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


@contextmanager
def _nesting_named(messages: list[Any]) -> Iterator[None]:
    """A recursion error in reading `messages` (JSON and `repr` recurse) said as a
    ValueError naming the message nested too deep; any other is raised as it came."""
    try:
        yield
    except RecursionError as error:
        named = nested_too_deep(messages)
        if named is None:
            raise
        raise named from error


def _in_given(report: GovernanceReport, given: int, leading: int, start: int) -> GovernanceReport:
    """`report` of the messages from a provider compaction at `start` on (after the
    `leading` system messages), by the indices of all `given` messages: what the
    compaction stands for is cut."""

    def index(position: int) -> int:
        return position if position < leading else position - leading + start

    cut = tuple((index(low), index(high - 1) + 1) for low, high in report.cut)
    return dataclasses.replace(
        report,
        messages_before=given,
        compacted=tuple(map(index, report.compacted)),
        cut=((leading, start), *cut) if start > leading else cut,
        truncated=tuple(map(index, report.truncated)),
        kept=tuple((index(position), why) for position, why in report.kept),
        reasoning_dropped=tuple(map(index, report.reasoning_dropped)),
    )


def _warn_reasoning_dropped(report: GovernanceReport) -> None:
    """Reasoning left out is never silent: one WARNING per conversation."""
    logger.warning(
        "context governance: the reasoning (thinking blocks, reasoning items) of messages %s "
        "was left out of the request: compaction, a cut, the note or a repair changed what "
        "came before it, and the provider binds reasoning to the exact prefix it was made "
        "after (Anthropic answers 400, OpenAI drops it). The model loses that earlier "
        "reasoning and may redo it (more output tokens); what it reasons from now on stays "
        "valid. See docs/reasoning.md.",
        ", ".join(map(str, report.reasoning_dropped)),
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
