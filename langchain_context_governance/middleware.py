"""Middleware for `langchain.agents.create_agent`: govern the request of every model call.

Needs the `agents` extra (`pip install "langchain-context-governance[agents]"`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, cast

from langchain_core.messages import AnyMessage, BaseMessage, SystemMessage
from langgraph.config import get_config

from langchain_context_governance.conversation import thread_id_of
from langchain_context_governance.governor import ContextGovernor

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


class ContextGovernanceMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """Govern each model request of a `create_agent` agent; the agent state stays whole.

    Before every model call (`wrap_model_call`, `awrap_model_call`) the request's
    messages are governed together with its system message, and its tool definitions
    count against the budget, since both are sent with the messages. Only the request
    changes: the agent state, and what a checkpointer saves, keep every message.

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

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelCallResult[Any]:
        return handler(self._governed_request(request))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelCallResult[Any]:
        return await handler(self._governed_request(request))

    def _governed_request(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        governor = self._governors.for_tools(request.tools)
        system = request.system_message
        sent: list[BaseMessage] = [*request.messages]
        if system is not None:
            sent.insert(0, system)
        governed = governor.govern(sent, thread_id=_current_thread_id()).messages
        governed_system, messages = _split_system_message(governed, had_system=system is not None)
        return request.override(
            system_message=governed_system, messages=cast("list[AnyMessage]", messages)
        )


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


def _current_thread_id() -> str | None:
    """The thread of the agent run this model call belongs to, if it runs in one."""
    try:
        config = get_config()
    except RuntimeError:  # called outside a runnable context
        return None
    return thread_id_of(config)


def _same_objects(first: tuple[Any, ...], second: tuple[Any, ...]) -> bool:
    return len(first) == len(second) and all(a is b for a, b in zip(first, second, strict=True))
