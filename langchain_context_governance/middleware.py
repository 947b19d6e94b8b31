"""Middleware for `langchain.agents.create_agent`: govern the request of every model call.

Needs the `agents` extra (`pip install "langchain-context-governance[agents]"`).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, cast

from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, SystemMessage

from langchain_context_governance.governor import ContextGovernor, GovernanceResult
from langchain_context_governance.model_settings import model_label
from langchain_context_governance.overflow import (
    acall_with_overflow_recovery,
    call_with_overflow_recovery,
)
from langchain_context_governance.tokens.calibration import Overflow, with_overflows
from langchain_context_governance.tracing import agovern_in_run, govern_in_run

try:
    from langchain.agents.middleware import (
        AgentMiddleware,
        AgentState,
        ModelCallResult,
        ModelRequest,
        ModelResponse,
    )
except ImportError as error:  # pragma: no cover - exercised in a subprocess test
    raise ImportError(
        "ContextGovernanceMiddleware needs langchain: "
        'pip install "langchain-context-governance[agents]"'
    ) from error

__all__ = ["ContextGovernanceMiddleware"]

logger = logging.getLogger(__name__)

# Models one agent calls are few (a main model and its fallbacks); the oldest is dropped.
MAX_GOVERNED_MODELS = 32
# The window comes from the called model, the tools from the request.
_NOT_KEPT = ("context_window_tokens", "tools")


class _GovernorForTools:
    """The governor to use for a request's tools, reused while the tools stay the same.

    Tool definitions are sent with every request, so they count against the budget;
    a governor copy holds them. The agent passes the same tool objects on every call.
    Replacing `_last` whole is atomic, so concurrent calls need no lock: at worst two
    of them build the same copy.
    """

    def __init__(self, governor: ContextGovernor) -> None:
        self._governor = governor
        self._last: tuple[tuple[Any, ...], ContextGovernor] = (
            tuple(governor.tools or ()),
            governor,
        )

    def for_tools(self, tools: Sequence[Any]) -> ContextGovernor:
        key = tuple(tools)
        last_tools, last_governor = self._last
        if _same_objects(key, last_tools):
            return last_governor
        governor = self._governor.with_tools(key)
        self._last = (key, governor)
        return governor


class _GovernorForModels:
    """For a governor built without a window: a governor sized for each model called.

    Routing and fallback middleware swap `request.model`, so the window is read from the
    model actually called (`ContextGovernor.from_model`), with the settings the user set
    by hand kept. One governor per model object, so each keeps its replay state.
    """

    def __init__(self, governor: ContextGovernor) -> None:
        self._governor = governor
        self._settings = {
            name: getattr(governor, name)
            for name in governor.model_fields_set
            if name not in _NOT_KEPT
        }
        self._by_model: OrderedDict[int, tuple[Any, _GovernorForTools]] = OrderedDict()
        self._lock = threading.Lock()

    def for_model(self, model: Any) -> _GovernorForTools:
        with self._lock:
            found = self._by_model.get(id(model))
            if found is not None and found[0] is model:
                self._by_model.move_to_end(id(model))
                return found[1]
        governors = _GovernorForTools(self._sized_for(model))
        with self._lock:
            self._by_model[id(model)] = (model, governors)
            if len(self._by_model) > MAX_GOVERNED_MODELS:
                self._by_model.popitem(last=False)
        return governors

    def _sized_for(self, model: Any) -> ContextGovernor:
        try:
            return type(self._governor).from_model(model, **self._settings)
        except ValueError as error:
            logger.warning(
                "context governance: cannot size the request for %s (%s); it is repaired "
                "but not trimmed",
                model_label(model),
                error,
            )
            return self._governor


class ContextGovernanceMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """Govern each model request of a `create_agent` agent; the agent state stays whole.

    Before every model call (`wrap_model_call`, `awrap_model_call`) the request's
    messages are governed together with its system message, and its tool definitions
    count against the budget, since both are sent with the messages. Only the request
    changes: the agent state, and what a checkpointer saves, keep every message.

    A governor built without `context_window_tokens` is sized for each call from
    `request.model` (its profile, as `ContextGovernor.from_model` reads it), so models
    swapped in by routing or fallback middleware are governed for their own window;
    settings set on the governor by hand are kept. Each call shows in traces as a child
    run named "ContextGovernor" whose outputs carry the report.

    Example:
        >>> from langchain.agents import create_agent
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> from langchain_context_governance import ContextGovernor
        >>> from langchain_context_governance.testing import ScriptedChatModel
        >>> model = ScriptedChatModel([AIMessage("hello")], max_input_tokens=8_000)
        >>> governor = ContextGovernor.from_model(model, max_output_tokens=1_000)
        >>> agent = create_agent(
        ...     model, [], middleware=[ContextGovernanceMiddleware(governor)]
        ... )
        >>> agent.invoke({"messages": [HumanMessage("hi")]})["messages"][-1].content
        'hello'
    """

    def __init__(self, governor: ContextGovernor) -> None:
        if not isinstance(governor, ContextGovernor):
            raise TypeError(f"governor must be a ContextGovernor, got {type(governor).__name__}")
        self.governor = governor
        self._governors = _GovernorForTools(governor)
        self._per_model = _GovernorForModels(governor) if governor.budget is None else None

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelCallResult[Any]:
        """Call the model on the governed request; after a refusal for length, govern
        again to fit and retry (`overflow_retries` times, see overflow.py)."""
        governor, sent = self._governor_and_messages(request)
        return call_with_overflow_recovery(
            lambda overflows: govern_in_run(governor, sent, overflows=overflows),
            lambda result: handler(_with_messages(request, result, sent)),
            retries=governor.overflow_retries,
            mark=_with_overflows_marked,
        )

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelCallResult[Any]:
        """`wrap_model_call` for async agents."""
        governor, sent = self._governor_and_messages(request)
        return await acall_with_overflow_recovery(
            lambda overflows: agovern_in_run(governor, sent, overflows=overflows),
            lambda result: handler(_with_messages(request, result, sent)),
            retries=governor.overflow_retries,
            mark=_with_overflows_marked,
        )

    def _governor_and_messages(
        self, request: ModelRequest[Any]
    ) -> tuple[ContextGovernor, list[BaseMessage]]:
        """The governor for this call's model and tools, and the messages the call sends."""
        governors = self._governors
        if self._per_model is not None:
            governors = self._per_model.for_model(request.model)
        sent: list[BaseMessage] = [*request.messages]
        if request.system_message is not None:
            sent.insert(0, request.system_message)
        return governors.for_tools(request.tools), sent


def _with_messages(
    request: ModelRequest[Any], result: GovernanceResult, sent: list[BaseMessage]
) -> ModelRequest[Any]:
    had_system = request.system_message is not None
    governed_system, messages = _split_system_message(result.messages, had_system=had_system)
    return request.override(
        system_message=governed_system, messages=cast("list[AnyMessage]", messages)
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


def _split_system_message(
    governed: list[BaseMessage], *, had_system: bool
) -> tuple[SystemMessage | None, list[BaseMessage]]:
    """Take the request's system message back off the front of the governed list."""
    if not had_system:
        return None, governed
    first = governed[0]
    # Governance never drops, merges or moves a leading system message.
    assert isinstance(first, SystemMessage)
    return first, governed[1:]


def _same_objects(first: tuple[Any, ...], second: tuple[Any, ...]) -> bool:
    return len(first) == len(second) and all(a is b for a, b in zip(first, second, strict=True))
