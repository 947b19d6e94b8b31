"""Middleware for `langchain.agents.create_agent`: govern the request of every model call.

Needs the `agents` extra (`pip install "langchain-context-governance[agents]"`).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Annotated, Any, Literal, cast

from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, SystemMessage
from langchain_core.tools import BaseTool
from langgraph.types import Command
from typing_extensions import NotRequired

from langchain_context_governance.governor import ContextGovernor
from langchain_context_governance.langgraph import keep_latest_record
from langchain_context_governance.model_settings import model_label, settings_for_model
from langchain_context_governance.offload import read_context_tool
from langchain_context_governance.offload.tool import page_characters_for
from langchain_context_governance.overflow import (
    acall_with_overflow_recovery,
    call_with_overflow_recovery,
)
from langchain_context_governance.report import GovernanceResult
from langchain_context_governance.settings import reject_unknown_settings
from langchain_context_governance.state.record import RECORD_KEY
from langchain_context_governance.tokens.calibration import Overflow, with_overflows
from langchain_context_governance.tracing import agovern_in_run, govern_in_run

try:
    from langchain.agents.middleware import (
        AgentMiddleware,
        AgentState,
        ExtendedModelResponse,
        ModelCallResult,
        ModelRequest,
        ModelResponse,
    )
    from langchain.agents.middleware.types import PrivateStateAttr
except ImportError as error:  # pragma: no cover - exercised in a subprocess test
    raise ImportError(
        "ContextGovernanceMiddleware needs langchain >= 1.2.9: "
        'pip install "langchain-context-governance[agents]"'
    ) from error

__all__ = ["ContextGovernanceMiddleware", "GovernedAgentState"]

logger = logging.getLogger(__name__)

# Models one agent calls are few (a main model and its fallbacks); the oldest is dropped.
MAX_GOVERNED_MODELS = 32
# What the called model decides where the user did not: its window (with its output
# reservation and counter, as `ContextGovernor.from_model` reads them) and its profile.
_SIZE_SETTING = "context_window_tokens"
_PROFILE_SETTINGS = ("provider", "chat_template")
# The tools sent are the request's, on each call.
_PER_CALL = ("tools",)
# Anthropic's request setting for thinking blocks that fail the prefix check, and the
# beta it needs (platform.claude.com/docs/en/build-with-claude/preserved-thinking).
PrefixMismatchBehavior = Literal["drop_block", "error"]
BINDING_CONTROLS_BETA = "thinking-binding-controls-2026-08-01"
_PREFIX_BINDING_MISMATCH = "prefix_binding_mismatch"


class GovernedAgentState(AgentState[Any]):
    """The agent state plus the governance record, which the checkpointer keeps with the
    thread (private: not part of the agent's input or output)."""

    context_governance: NotRequired[
        Annotated[dict[str, Any] | None, PrivateStateAttr, keep_latest_record]
    ]


class _GovernorsByModel:
    """The governor for each model called: the user's, completed from the model.

    Routing and fallback middleware swap `request.model`. Where the user gave no window,
    it is read from the model actually called (`ContextGovernor.from_model`); where the
    user gave no provider profile (nor chat template), the model's is taken
    (`settings_for_model(model)["provider"]`, where the model says). The settings the
    user set are kept. One governor per model object, so each keeps its conversations.
    """

    def __init__(self, governor: ContextGovernor) -> None:
        self._governor = governor
        user_set = governor.model_fields_set
        self._settings = {
            name: getattr(governor, name)
            for name in user_set
            if name != _SIZE_SETTING and name not in _PER_CALL
        }
        self._sized = _SIZE_SETTING not in user_set and governor.context_window_tokens is None
        self._profiled = not any(name in user_set for name in _PROFILE_SETTINGS)
        self._by_model: OrderedDict[int, tuple[Any, ContextGovernor]] = OrderedDict()
        self._lock = threading.Lock()

    def smallest_budget(self) -> int | None:
        """The smallest input budget of the governors made so far (None: none has one)."""
        with self._lock:
            budgets = [governor.budget for _, governor in self._by_model.values()]
        return min((budget for budget in budgets if budget is not None), default=None)

    def for_model(self, model: Any) -> ContextGovernor:
        if not (self._sized or self._profiled):
            return self._governor
        with self._lock:
            found = self._by_model.get(id(model))
            if found is not None and found[0] is model:
                self._by_model.move_to_end(id(model))
                return found[1]
        governor = self._completed_for(model)
        with self._lock:
            self._by_model[id(model)] = (model, governor)
            if len(self._by_model) > MAX_GOVERNED_MODELS:
                self._by_model.popitem(last=False)
        return governor

    def _completed_for(self, model: Any) -> ContextGovernor:
        if self._sized:
            try:
                return type(self._governor).from_model(model, **self._settings)
            except ValueError as error:
                logger.warning(
                    "context governance: cannot size the request for %s (%s); it is "
                    "repaired but not trimmed",
                    model_label(model),
                    error,
                )
        if not self._profiled:
            return self._governor
        found = settings_for_model(model)
        profile = {name: found[name] for name in _PROFILE_SETTINGS if name in found}
        current = {name: getattr(self._governor, name) for name in profile}
        if not profile or profile == current:
            return self._governor
        return self._governor.model_copy(update=profile)


class _BindingControls:
    """Anthropic models copied with `thinking.block_binding.prefix_mismatch_behavior` set
    and its beta, one copy per model called; other models as they are."""

    def __init__(self, behavior: PrefixMismatchBehavior | None) -> None:
        self._behavior = behavior
        self._by_model: OrderedDict[int, tuple[Any, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def for_model(self, model: Any) -> Any:
        if self._behavior is None or not _takes_binding_controls(model):
            return model
        with self._lock:
            found = self._by_model.get(id(model))
            if found is not None and found[0] is model:
                return found[1]
        thinking = dict(model.thinking or {"type": "adaptive"})
        thinking["block_binding"] = {"prefix_mismatch_behavior": self._behavior}
        betas = [*(model.betas or []), BINDING_CONTROLS_BETA]
        controlled = model.model_copy(update={"thinking": thinking, "betas": betas})
        with self._lock:
            self._by_model[id(model)] = (model, controlled)
            if len(self._by_model) > MAX_GOVERNED_MODELS:
                self._by_model.popitem(last=False)
        return controlled


def _takes_binding_controls(model: Any) -> bool:
    """A langchain-anthropic chat model that thinks (enabled or adaptive, or by default)."""
    if not type(model).__module__.startswith("langchain_anthropic"):
        return False
    thinking = getattr(model, "thinking", None)
    return hasattr(model, "betas") and (thinking is None or thinking.get("type") != "disabled")


def _log_dropped_thinking(response: Any) -> None:
    """Never silent: thinking the API dropped for a prefix that changed, which governance
    did not change (the application's own edits of the history, `system` or `tools`)."""
    messages = getattr(response, "result", [response])
    for message in messages if isinstance(messages, list) else [messages]:
        if not isinstance(message, AIMessage):
            continue
        changes = message.response_metadata.get("input_transformations") or []
        dropped = [
            c
            for c in changes
            if isinstance(c, Mapping) and c.get("reason") == _PREFIX_BINDING_MISMATCH
        ]
        if dropped:
            logger.warning(
                "context governance: Anthropic dropped %d thinking block(s) whose prefix "
                "changed since they were made (first at %s): something other than governance "
                "edited the history, the system prompt or the tools; the model redoes that "
                "reasoning.",
                len(dropped),
                dropped[0].get("path"),
            )


class ContextGovernanceMiddleware(AgentMiddleware[GovernedAgentState, Any, Any]):
    """Govern each model request of a `create_agent` agent; the agent state stays whole.

    Takes the governor's settings (`ContextGovernanceMiddleware(context_window_tokens=
    128_000, keep_recent=4)`, as `ContextGovernor` takes them), or a governor. Before
    every model call (`wrap_model_call`, `awrap_model_call`) the request's messages are
    governed together with its system message, and the request's tool definitions count
    against the budget of that call, since both are sent with the messages. Only the
    request changes: the agent state, and what a checkpointer saves, keep every message.

    The model of each call decides what the user did not set: without a window, the
    request is sized for `request.model` (its profile, as `ContextGovernor.from_model`
    reads it), and without `provider` (or `chat_template`), the model's provider
    profile is used, so models swapped in by routing or fallback middleware are
    governed for their own window and rules. The conversation's governance record is
    kept in the agent state (`state_schema` declares it, privately), so the checkpointer
    saves it with the thread and any worker continues from it. Each call shows in traces
    as a child run named "ContextGovernor" whose outputs carry the report.

    Offload is on unless `offload=False` is given (or a governor without it): what
    governance clears, cuts or truncates is kept in the graph's store
    (`create_agent(store=...)`, else the governor's `store`, else this process's), in the
    thread's namespace, and the middleware registers the `read_context` tool (`tools`)
    with which the agent reads it back by the handle shown where it was (docs/offload.md).
    Without a thread (no checkpointer), nothing is kept and no handle is shown.

    Governance leaves out, on purpose, the reasoning whose prefix it changed
    (docs/reasoning.md). `prefix_mismatch_behavior` (off by default) also sets Anthropic's
    `thinking.block_binding.prefix_mismatch_behavior` (with its beta header) on the calls
    of thinking langchain-anthropic models: "drop_block" has the API drop, rather than
    refuse with a 400, thinking whose prefix changed elsewhere (the application editing
    the history, the system prompt or the tools); "error" asks for the 400 on accounts
    that are not enforced by default. Its cost: on an account created before 2026-08-31
    the check is then enforced, so thinking the API would have used is dropped, and the
    model redoes that reasoning (more output tokens); each drop the API reports is logged
    as a WARNING.

    Example:
        >>> from langchain.agents import create_agent
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> from langchain_context_governance.testing import ScriptedChatModel
        >>> model = ScriptedChatModel([AIMessage("hello")], max_input_tokens=8_000)
        >>> middleware = ContextGovernanceMiddleware(max_output_tokens=1_000)
        >>> agent = create_agent(model, [], middleware=[middleware])
        >>> agent.invoke({"messages": [HumanMessage("hi")]})["messages"][-1].content
        'hello'
    """

    state_schema = GovernedAgentState

    def __init__(
        self,
        governor: ContextGovernor | None = None,
        *,
        prefix_mismatch_behavior: PrefixMismatchBehavior | None = None,
        **settings: Any,
    ) -> None:
        if prefix_mismatch_behavior not in (None, "drop_block", "error"):
            raise ValueError(
                "prefix_mismatch_behavior must be 'drop_block', 'error' or None, "
                f"got {prefix_mismatch_behavior!r}"
            )
        if governor is None:
            # Offload is on by default here: the middleware gives the agent the tool that
            # reads back what governance took out of its requests.
            reject_unknown_settings(
                settings, ContextGovernor.model_fields, where=type(self).__name__
            )
            settings.setdefault("offload", True)
            governor = ContextGovernor(**settings)
        elif not isinstance(governor, ContextGovernor):
            raise TypeError(f"governor must be a ContextGovernor, got {type(governor).__name__}")
        elif settings:
            raise TypeError(
                "ContextGovernanceMiddleware takes a governor or its settings, not both; "
                f"got a governor and {sorted(settings)}"
            )
        self.governor = governor
        self.prefix_mismatch_behavior = prefix_mismatch_behavior
        self._governors = _GovernorsByModel(governor)
        self._controls = _BindingControls(prefix_mismatch_behavior)
        self.tools = [self._read_context_tool()] if governor.offload else []

    def _read_context_tool(self) -> BaseTool:
        """The governor's `read_context`; where the window is read from each model called,
        a page is sized for the smallest budget of the models governed so far."""
        if self.governor.budget is not None:
            return self.governor.read_context_tool()
        return read_context_tool(
            store=self.governor.store,
            page_characters=lambda: page_characters_for(self._governors.smallest_budget()),
        )

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelCallResult[Any]:
        """Call the model on the governed request; after a refusal for length, govern
        again to fit and retry (`overflow_retries` times, see overflow.py)."""
        call = _GovernedCall(
            self._governors.for_model(request.model),
            request,
            self._controls.for_model(request.model),
        )
        response = call_with_overflow_recovery(
            call.govern,
            lambda result: handler(call.request_for(result)),
            retries=call.governor.overflow_retries,
            mark=_with_overflows_marked,
        )
        if self.prefix_mismatch_behavior is not None:
            _log_dropped_thinking(response)
        return call.with_record(response)

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelCallResult[Any]:
        """`wrap_model_call` for async agents."""
        call = _GovernedCall(
            self._governors.for_model(request.model),
            request,
            self._controls.for_model(request.model),
        )
        response = await acall_with_overflow_recovery(
            call.agovern,
            lambda result: handler(call.request_for(result)),
            retries=call.governor.overflow_retries,
            mark=_with_overflows_marked,
        )
        if self.prefix_mismatch_behavior is not None:
            _log_dropped_thinking(response)
        return call.with_record(response)


class _GovernedCall:
    """One model call's request governed: its messages with the system message, the tools
    it sends, the conversation's record from the agent state; the last result kept."""

    def __init__(self, governor: ContextGovernor, request: ModelRequest[Any], model: Any) -> None:
        self.governor = governor
        self._request = request
        # The model called: the request's, or its copy with Anthropic's binding controls.
        self._model = model
        self._sent: list[BaseMessage] = [*request.messages]
        if request.system_message is not None:
            self._sent.insert(0, request.system_message)
        state = request.state
        record = state.get(RECORD_KEY) if isinstance(state, Mapping) else None
        self._record = record if isinstance(record, Mapping) else None
        self._result: GovernanceResult | None = None

    def govern(self, overflows: Sequence[Overflow]) -> GovernanceResult:
        self._result = govern_in_run(
            self.governor,
            self._sent,
            tools=self._request.tools,
            record=self._record,
            overflows=overflows,
        )
        return self._result

    async def agovern(self, overflows: Sequence[Overflow]) -> GovernanceResult:
        self._result = await agovern_in_run(
            self.governor,
            self._sent,
            tools=self._request.tools,
            record=self._record,
            overflows=overflows,
        )
        return self._result

    def request_for(self, result: GovernanceResult) -> ModelRequest[Any]:
        """The request with the governed messages, its system message taken back off.

        A profile without a system role (e.g. "gemma") writes the system text into the
        first user turn: the request then has no system message of its own.
        """
        governed = result.messages
        system: SystemMessage | None = None
        if (
            self._request.system_message is not None
            and governed
            and isinstance(governed[0], SystemMessage)
        ):
            system, governed = governed[0], governed[1:]
        if self._model is not self._request.model:
            return self._request.override(
                system_message=system,
                messages=cast("list[AnyMessage]", governed),
                model=self._model,
            )
        return self._request.override(
            system_message=system, messages=cast("list[AnyMessage]", governed)
        )

    def with_record(self, response: ModelCallResult[Any]) -> ModelCallResult[Any]:
        """The model's response with the conversation's updated record for the agent state."""
        assert self._result is not None
        if isinstance(response, ExtendedModelResponse):
            # An inner handler's own command; LangChain's composition never hands one here.
            return response
        if isinstance(response, AIMessage):
            response = ModelResponse(result=[response])
        return ExtendedModelResponse(
            model_response=response, command=Command(update={RECORD_KEY: self._result.record})
        )


def _with_overflows_marked(
    response: ModelResponse[Any], overflows: Sequence[Overflow]
) -> ModelResponse[Any]:
    """The response with its reply marked with the refusals that preceded it."""
    if isinstance(response, AIMessage):
        return cast("ModelResponse[Any]", with_overflows(response, overflows))
    if isinstance(response, ModelResponse):
        marked = [
            with_overflows(message, overflows) if isinstance(message, AIMessage) else message
            for message in response.result
        ]
        return dataclasses.replace(response, result=marked)
    inner = getattr(response, "model_response", None)
    if isinstance(inner, ModelResponse) and dataclasses.is_dataclass(response):
        # An inner middleware's ExtendedModelResponse (a response and a state command).
        return cast(
            "ModelResponse[Any]",
            dataclasses.replace(response, model_response=_with_overflows_marked(inner, overflows)),
        )
    return response
