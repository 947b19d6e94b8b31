"""The LangGraph pre-model node: govern the graph's messages before every model call.

Governance runs inside the agent loop, once per model call, because one user turn can
run dozens of tool iterations and the request changes after each of them.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from langchain_core.messages import AnyMessage, BaseMessage, RemoveMessage
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langgraph.graph import MessagesState
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from langchain_context_governance.governor import ContextGovernor, GovernanceResult
from langchain_context_governance.tracing import agovern_in_run, govern_in_run, report_as_dict

__all__ = [
    "LLM_INPUT_MESSAGES_KEY",
    "PRE_MODEL_HOOK_MODES",
    "GovernedMessagesState",
    "PreModelHookMode",
    "build_pre_model_hook",
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
      messages governance creates get new ones.

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
