"""The LangGraph pre-model node: govern the graph's messages before every model call.

Governance runs inside the agent loop, once per model call, because one user turn can
run dozens of tool iterations and the request changes after each of them. The node keeps
the conversation's governance record (state/record.py) in the graph state under
`RECORD_KEY`, so the checkpointer saves it with the thread and any worker continues
from it.

The record is the node's own: a channel of the graph that the graph's input never
writes. LangGraph makes a channel for every key of a node's own input schema, which it
reads from the type of the node's first parameter, and a key that only a node's schema
declares is no key of the graph's input schema (LangGraph's "private state": the input
is filtered by the graph's input schema). The node declares the key that way
(`GovernanceNodeState`), so a client that sends `{"context_governance": ...}` with its
messages writes nothing: the record comes only from the node's own writes, which the
checkpointer keeps with the thread. A state schema of your own must not declare the key
(it would then be part of the graph's input).
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, RemoveMessage
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langchain_core.runnables.base import coerce_to_runnable
from langgraph.graph import MessagesState
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from langchain_context_governance.overflow import (
    acall_with_overflow_recovery,
    call_with_overflow_recovery,
)
from langchain_context_governance.report import GovernanceResult
from langchain_context_governance.state.record import RECORD_KEY
from langchain_context_governance.tokens.calibration import Overflow, with_overflows
from langchain_context_governance.tracing import (
    Governs,
    agovern_in_run,
    govern_in_run,
    report_as_dict,
)

__all__ = [
    "LLM_INPUT_MESSAGES_KEY",
    "PRE_MODEL_HOOK_MODES",
    "RECORD_KEY",
    "GovernanceNodeState",
    "GovernanceRecordField",
    "GovernedMessagesState",
    "PreModelHookMode",
    "build_pre_model_hook",
    "keep_latest_record",
    "with_overflow_recovery",
]

logger = logging.getLogger(__name__)

PreModelHookMode = Literal["llm_input", "replace"]
PRE_MODEL_HOOK_MODES: tuple[PreModelHookMode, ...] = ("llm_input", "replace")

LLM_INPUT_MESSAGES_KEY = "llm_input_messages"
"""The state key `create_react_agent` sends to the model instead of `messages`."""

_MESSAGES_KEY = "messages"
# The config keys under which LangGraph gives a node its state reader and the graph's
# checkpointer.
_CONFIG_KEY_READ = "__pregel_read"
_CONFIG_KEY_CHECKPOINTER = "__pregel_checkpointer"
_NODE_NAME = "context_governance"


def keep_latest_record(
    current: dict[str, Any] | None, update: dict[str, Any] | None
) -> dict[str, Any] | None:
    """The reducer of `RECORD_KEY`: the record written last wins; None leaves it as it is.

    Example:
        >>> keep_latest_record({"serial": "a"}, {"serial": "b"})
        {'serial': 'b'}
        >>> keep_latest_record({"serial": "a"}, None)
        {'serial': 'a'}
    """
    return current if update is None else update


GovernanceRecordField = Annotated[dict[str, Any] | None, keep_latest_record]
"""The type of the `RECORD_KEY` channel: the record written last wins (plain data: the
checkpointer stores it with the thread). The pre-model node declares it itself
(`GovernanceNodeState`); a graph's own state schema must not, or the graph's input could
write it."""


class GovernanceNodeState(TypedDict, total=False):
    """The pre-model node's own input schema: the history it governs and the record it
    keeps. LangGraph reads it from the node's signature and makes the record a channel
    of the graph that no graph input writes (see the module doc)."""

    # A plain list (LangGraph's LastValue): the graph's own `messages` channel, with its
    # reducer, is the one kept.
    messages: list[AnyMessage]
    context_governance: GovernanceRecordField


class GovernedMessagesState(MessagesState, total=False):
    """`MessagesState` plus `llm_input_messages`.

    For hand-written graphs: LangGraph drops update keys the state does not declare, so
    a plain `MessagesState` would silently lose the governed copy (in `llm_input` mode).
    The model node reads `state["llm_input_messages"]`; `state["messages"]` stays the
    whole history. The governance record is the pre-model node's own channel
    (`GovernanceNodeState`), which the graph's input never writes.
    """

    llm_input_messages: list[AnyMessage]


class _GovernanceNode(RunnableLambda[Any, dict[str, Any]]):
    """The pre-model node as a Runnable whose call is typed with its own input schema, so
    that LangGraph's `add_node` (and `create_react_agent(pre_model_hook=...)`) makes the
    record a channel the graph's input never writes."""

    def __call__(self, state: GovernanceNodeState, config: RunnableConfig) -> dict[str, Any]:
        return self.invoke(state, config)


class _PreModelNode:
    """Reads the graph state, governs its messages, writes the update for `mode`."""

    def __init__(self, governor: Governs, mode: PreModelHookMode, report_key: str | None) -> None:
        self.governor = governor
        self.mode = mode
        self.report_key = report_key
        self._warned = threading.Event()
        self._warned_record = threading.Event()

    def update_for(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        messages = _state_messages(state)
        channels = self._channels(config)
        result = govern_in_run(self.governor, messages, config, record=_state_record(state))
        return self._update(messages, result, channels)

    async def aupdate_for(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        messages = _state_messages(state)
        channels = self._channels(config)
        record = _state_record(state)
        result = await agovern_in_run(self.governor, messages, config, record=record)
        return self._update(messages, result, channels)

    def _channels(self, config: RunnableConfig) -> Collection[str] | None:
        """The graph's state keys; warns once where the model cannot see the governed copy."""
        channels = _graph_channels(config)
        if (
            channels is not None
            and self.mode == "llm_input"
            and LLM_INPUT_MESSAGES_KEY not in channels
            and not self._warned.is_set()
        ):
            self._warned.set()
            logger.warning(
                "context governance: the graph state has no %r key, so the governed copy "
                "this pre-model node returns is dropped and the model sees the whole, "
                "ungoverned history. Declare it (GovernedMessagesState, or "
                "create_react_agent(pre_model_hook=...), which does) and have the model "
                "node read state[%r], or use as_pre_model_hook(mode='replace').",
                LLM_INPUT_MESSAGES_KEY,
                LLM_INPUT_MESSAGES_KEY,
            )
        if channels is not None and RECORD_KEY not in channels:
            self._warn_if_the_record_stays_in_this_process(config)
        return channels

    def _warn_if_the_record_stays_in_this_process(self, config: RunnableConfig) -> None:
        """Once per node: a checkpointed graph whose state cannot hold the record.

        A node cannot add a key to a compiled graph's state (its channels are fixed by
        the schema), so the user declares it.
        """
        checkpointer = (config.get("configurable") or {}).get(_CONFIG_KEY_CHECKPOINTER)
        if checkpointer is None or self.governor.store is not None:
            return
        if self._warned_record.is_set():
            return
        self._warned_record.set()
        logger.warning(
            "context governance: this graph has a checkpointer, but no %r channel, so the "
            "governance record (the summary, the decisions of earlier calls) is kept in this "
            "process only: another worker, or this one after a restart, rebuilds it and may "
            "ask the summary model again and send a request the prompt cache does not hold. "
            "Add the node as as_pre_model_hook() returns it (add_node(name, hook), or "
            "create_react_agent(pre_model_hook=hook)), not wrapped in another Runnable: "
            "LangGraph then reads its input schema and keeps the record in a channel of "
            "its own.",
            RECORD_KEY,
        )

    def _update(
        self,
        messages: list[BaseMessage],
        result: GovernanceResult,
        channels: Collection[str] | None,
    ) -> dict[str, Any]:
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
        if channels is None or RECORD_KEY in channels:
            update[RECORD_KEY] = result.record
        return update


def build_pre_model_hook(
    governor: Governs,
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

    The node reads the conversation's governance record from `state["context_governance"]`
    (`RECORD_KEY`) and writes the updated one there: a channel the node declares itself
    (`GovernanceNodeState`), which the graph's input never writes and the checkpointer
    keeps with the thread, so another worker, or this one after a restart, continues
    with the same summary and prefix report instead of asking the summary model again.
    Wrapped in another Runnable, the node's schema is not read: without the channel the
    record lives in this process, and on a graph with a checkpointer (and a governor
    without a `store`) the node logs one WARNING saying so.

    With the governor's `offload=True`, what governance takes out of a request is kept in
    the graph's store (the node's runtime store, `compile(store=...)`), else the
    governor's `store`, else the process's, and the request shows the handle to read it
    back with: give the agent `governor.read_context_tool()` (docs/offload.md).

    The node works the same under `invoke`, `ainvoke`, `stream` and `astream`, finds
    the conversation's state by the run's `thread_id`, and raises ValueError rather
    than return an empty list of messages. In `llm_input` mode on a graph whose state
    has no `llm_input_messages` key it logs one WARNING: the model would never see the
    governed copy.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> from langchain_context_governance import ContextGovernor
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
    if report_key in (_MESSAGES_KEY, LLM_INPUT_MESSAGES_KEY, RECORD_KEY):
        raise ValueError(f"report_key must not be {report_key!r}: the node writes there")
    node = _PreModelNode(governor=governor, mode=mode, report_key=report_key)
    return _GovernanceNode(node.update_for, afunc=node.aupdate_for, name=_NODE_NAME)


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


def _state_record(state: Any) -> Mapping[str, Any] | None:
    """The governance record in the graph state, where there is one."""
    if isinstance(state, Mapping):
        record = state.get(RECORD_KEY)
    else:
        record = getattr(state, RECORD_KEY, None)
    return record if isinstance(record, Mapping) else None


def _graph_channels(config: RunnableConfig) -> Collection[str] | None:
    """The state keys of the graph running this node, or None where it cannot be told.

    LangGraph installs its state reader in the node's config as
    `functools.partial(local_read, scratchpad, channels, ...)`; langgraph.prebuilt's
    ToolNode reads the channels the same way.
    """
    reader = (config.get("configurable") or {}).get(_CONFIG_KEY_READ)
    arguments: tuple[Any, ...] = getattr(reader, "args", ())
    if len(arguments) > 1 and isinstance(arguments[1], Mapping):
        return set(arguments[1])
    return None


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
    governor: Governs

    def update_for(self, state: Any, config: RunnableConfig) -> Any:
        history, record = _state_messages(state), _state_record(state)
        return call_with_overflow_recovery(
            lambda overflows: govern_in_run(
                self.governor, history, config, record=record, overflows=overflows
            ),
            lambda result: self.node.invoke(_with_llm_input(state, result.messages), config),
            retries=self.governor.overflow_retries,
            mark=_with_overflows_in_update,
        )

    async def aupdate_for(self, state: Any, config: RunnableConfig) -> Any:
        history, record = _state_messages(state), _state_record(state)
        return await acall_with_overflow_recovery(
            lambda overflows: agovern_in_run(
                self.governor, history, config, record=record, overflows=overflows
            ),
            lambda result: self.node.ainvoke(_with_llm_input(state, result.messages), config),
            retries=self.governor.overflow_retries,
            mark=_with_overflows_in_update,
        )


def with_overflow_recovery(
    model_node: Runnable[Any, Any] | Callable[..., Any], governor: Governs
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
        >>> from langchain_context_governance import ContextGovernor
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
