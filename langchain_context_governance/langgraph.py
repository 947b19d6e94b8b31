"""The LangGraph pre-model node: govern the graph's messages before every model call.

Governance runs inside the agent loop, once per model call, because one user turn can
run dozens of tool iterations and the request changes after each of them.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, RemoveMessage
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langchain_core.runnables.base import coerce_to_runnable
from langgraph.graph import MessagesState
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from langchain_context_governance.governor import ContextGovernor, GovernanceResult
from langchain_context_governance.overflow import (
    acall_with_overflow_recovery,
    call_with_overflow_recovery,
)
from langchain_context_governance.tokens.calibration import Overflow, with_overflows
from langchain_context_governance.tracing import agovern_in_run, govern_in_run, report_as_dict

__all__ = [
    "LLM_INPUT_MESSAGES_KEY",
    "PRE_MODEL_HOOK_MODES",
    "GovernedMessagesState",
    "PreModelHookMode",
    "build_pre_model_hook",
    "with_overflow_recovery",
]

PreModelHookMode = Literal["llm_input", "replace"]
PRE_MODEL_HOOK_MODES: tuple[PreModelHookMode, ...] = ("llm_input", "replace")

LLM_INPUT_MESSAGES_KEY = "llm_input_messages"
"""The state key `create_react_agent` sends to the model instead of `messages`."""

_MESSAGES_KEY = "messages"
_NODE_NAME = "context_governance"


class GovernedMessagesState(MessagesState, total=False):
    """`MessagesState` plus `llm_input_messages`, for hand-written graphs in `llm_input` mode.

    LangGraph drops update keys the state does not declare, so a plain `MessagesState`
    would silently lose the governed copy. The model node reads
    `state["llm_input_messages"]`; `state["messages"]` stays the whole history.
    """

    llm_input_messages: list[AnyMessage]


@dataclass(frozen=True)
class _PreModelNode:
    """Reads the graph state, governs its messages, writes the update for `mode`."""

    governor: ContextGovernor
    mode: PreModelHookMode
    report_key: str | None = None

    def update_for(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        messages = _state_messages(state)
        return self._update(messages, govern_in_run(self.governor, messages, config))

    async def aupdate_for(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        messages = _state_messages(state)
        return self._update(messages, await agovern_in_run(self.governor, messages, config))

    def _update(self, messages: list[BaseMessage], result: GovernanceResult) -> dict[str, Any]:
        governed = result.messages
        if not governed:
            # create_react_agent treats an empty llm_input_messages as absent and would
            # send the whole ungoverned history instead.
            raise ValueError(
                f"state[{_MESSAGES_KEY!r}] holds nothing a model can be asked: governance "
                f"left no message out of {len(messages)}"
            )
        update: dict[str, Any]
        if self.mode == "replace":
            update = {_MESSAGES_KEY: _replacement_of_history(governed)}
        else:
            update = {LLM_INPUT_MESSAGES_KEY: governed}
        if self.report_key is not None:
            update[self.report_key] = report_as_dict(result.report)
        return update


def build_pre_model_hook(
    governor: ContextGovernor,
    *,
    mode: PreModelHookMode = "llm_input",
    report_key: str | None = None,
) -> Runnable[Any, dict[str, Any]]:
    """A LangGraph node that governs `state["messages"]` before each model call.

    - `mode="llm_input"`: returns `{"llm_input_messages": governed}`. The model sees the
      governed copy; the stored history, and what the checkpointer saves, stay whole.
      `create_react_agent(pre_model_hook=...)` reads that key; a hand-written graph
      declares it with `GovernedMessagesState` and its model node reads it.
    - `mode="replace"`: returns `{"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES),
      *governed]}`, so the stored history itself shrinks. Kept messages keep their ids;
      messages governance creates get new ones (user turns joined into one message keep
      the first one's). Every user message stays verbatim in the stored thread, as a
      message or as a run of whole blocks of one: what governance added (the note at a
      cut) is marked in `response_metadata`, which the checkpointer keeps, and is
      recognised by that mark and replaced at the next cut, never searched for in text.

    With `report_key`, the update also holds the report as a plain dict under that key
    (declare the key in the state, or LangGraph drops it). Each call shows in traces as a
    child run named "ContextGovernor" whose outputs carry the report.

    The node works the same under `invoke`, `ainvoke`, `stream` and `astream`, finds
    the conversation's state by the run's `thread_id`, and raises ValueError rather
    than return an empty list of messages.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> hook = build_pre_model_hook(ContextGovernor(context_window_tokens=8_000))
        >>> call = {"name": "read_file", "args": {}, "id": "c1"}
        >>> state = {"messages": [HumanMessage("hi"), AIMessage("", tool_calls=[call])]}
        >>> [m.type for m in hook.invoke(state)["llm_input_messages"]]
        ['human', 'ai', 'tool']
        >>> len(state["messages"])
        2
    """
    if mode not in PRE_MODEL_HOOK_MODES:
        raise ValueError(f"mode must be one of {PRE_MODEL_HOOK_MODES}, got {mode!r}")
    if report_key is not None and (not isinstance(report_key, str) or not report_key):
        raise ValueError(f"report_key must be a non-empty string or None, got {report_key!r}")
    if report_key in (_MESSAGES_KEY, LLM_INPUT_MESSAGES_KEY):
        raise ValueError(f"report_key must not be {report_key!r}: the node writes messages there")
    node = _PreModelNode(governor=governor, mode=mode, report_key=report_key)
    return RunnableLambda(node.update_for, afunc=node.aupdate_for, name=_NODE_NAME)


def _state_messages(state: Any) -> list[BaseMessage]:
    """`state["messages"]` of a dict state, or `state.messages` of a pydantic state."""
    if isinstance(state, Mapping):
        messages = state.get(_MESSAGES_KEY)
    else:
        messages = getattr(state, _MESSAGES_KEY, None)
    if messages is None:
        raise ValueError(
            f"the graph state has no {_MESSAGES_KEY!r} key; the pre-model node governs "
            f"state[{_MESSAGES_KEY!r}] (use MessagesState or a state that declares it)"
        )
    return list(messages)


def _replacement_of_history(governed: list[BaseMessage]) -> list[BaseMessage]:
    """The update that swaps the stored history for `governed`; new messages get ids."""
    with_ids = [
        message if message.id else message.model_copy(update={"id": str(uuid.uuid4())})
        for message in governed
    ]
    return [RemoveMessage(id=REMOVE_ALL_MESSAGES), *with_ids]


@dataclass(frozen=True)
class _RecoveringModelNode:
    """Governs the state's messages for the model node; governs again after a refusal."""

    node: Runnable[Any, Any]
    governor: ContextGovernor

    def update_for(self, state: Any, config: RunnableConfig) -> Any:
        history = _state_messages(state)
        return call_with_overflow_recovery(
            lambda overflows: govern_in_run(self.governor, history, config, overflows=overflows),
            lambda result: self.node.invoke(_with_llm_input(state, result.messages), config),
            retries=self.governor.overflow_retries,
            mark=_with_overflows_in_update,
        )

    async def aupdate_for(self, state: Any, config: RunnableConfig) -> Any:
        history = _state_messages(state)
        return await acall_with_overflow_recovery(
            lambda overflows: agovern_in_run(self.governor, history, config, overflows=overflows),
            lambda result: self.node.ainvoke(_with_llm_input(state, result.messages), config),
            retries=self.governor.overflow_retries,
            mark=_with_overflows_in_update,
        )


def with_overflow_recovery(
    model_node: Runnable[Any, Any] | Callable[..., Any], governor: ContextGovernor
) -> Runnable[Any, Any]:
    """A model node that is given the governed request, and retries after a refusal for length.

    `model_node` is the graph's own model node: it reads `state["llm_input_messages"]`
    (as with the `llm_input` pre-model node) and returns its update, the model's reply
    under `"messages"`. The wrapper governs `state["messages"]` into
    `llm_input_messages` before each call, so a separate pre-model node is not needed
    (one may stay: it gives the same request). Where the model refuses the request for
    its length (`langchain_core.exceptions.ContextOverflowError`, or a client error in a
    provider's words), the history is governed again with the size the provider stated
    and the node runs again, `governor.overflow_retries` times at most; the reply of the
    retry carries the refusal in its metadata, so later calls replay it. A refusal past
    the retries is raised with a note saying what was tried.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> from langchain_context_governance.testing import ScriptedChatModel
        >>> model = ScriptedChatModel([AIMessage("done")], max_input_tokens=8_000)
        >>> def call_model(state):
        ...     return {"messages": [model.invoke(state["llm_input_messages"])]}
        >>> node = with_overflow_recovery(call_model, ContextGovernor.from_model(model))
        >>> node.invoke({"messages": [HumanMessage("hi")]})["messages"][0].content
        'done'
    """
    recovering = _RecoveringModelNode(coerce_to_runnable(model_node), governor)
    return RunnableLambda(recovering.update_for, afunc=recovering.aupdate_for, name="call_model")


def _with_llm_input(state: Any, governed: list[BaseMessage]) -> Any:
    """The state the model node reads, with the governed request under `llm_input_messages`."""
    if isinstance(state, Mapping):
        return {**state, LLM_INPUT_MESSAGES_KEY: governed}
    return state.model_copy(update={LLM_INPUT_MESSAGES_KEY: governed})


def _with_overflows_in_update(update: Any, overflows: Sequence[Overflow]) -> Any:
    """The node's update with its replies marked with the refusals that preceded them."""
    if not isinstance(update, Mapping) or _MESSAGES_KEY not in update:
        return update
    messages = update[_MESSAGES_KEY]
    if isinstance(messages, AIMessage):
        return {**update, _MESSAGES_KEY: with_overflows(messages, overflows)}
    if isinstance(messages, list):
        marked = [
            with_overflows(message, overflows) if isinstance(message, AIMessage) else message
            for message in messages
        ]
        return {**update, _MESSAGES_KEY: marked}
    return update
