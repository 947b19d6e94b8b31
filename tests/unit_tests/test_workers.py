"""Several workers on one checkpointer: a thread's turns land on any of them.

Two graphs compiled separately (two "workers", each with its own governor) on one SQLite
checkpointer take turns serving the same threads. They must send exactly the requests
one graph serving every turn sends, and ask the summary model once per cut, because the
governance record travels with the thread in the checkpoint.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import tool
from langchain_openai.chat_models.base import _convert_message_to_dict
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from langchain_context_governance import ContextGovernanceMiddleware, ContextGovernor
from langchain_context_governance.langgraph import (
    LLM_INPUT_MESSAGES_KEY,
    RECORD_KEY,
    GovernedMessagesState,
)
from langchain_context_governance.testing import ScriptedChatModel

THREADS = ("t1", "t2")
TURNS = 5
ITERATIONS = 7
QUESTION = re.compile(r"^thread (\w+), turn (\d+): ")
CALL = re.compile(r"^(\w+)k(\d+)i(\d+)$")


@tool
def read_file(path: str) -> str:
    """Return the text of a file."""
    return f"# {path}\n" + f"value = {len(path)}\n" * 110


def question(thread: str, turn: int) -> str:
    return f"thread {thread}, turn {turn}: read the next files"


def reply(request: list[BaseMessage]) -> AIMessage:
    """The next call of the thread's turn, read from the request alone."""
    last = request[-1]
    if isinstance(last, HumanMessage):
        asked = QUESTION.match(last.text)
        assert asked, last.text
        thread, turn, iteration = asked[1], int(asked[2]), 0
    else:
        assert isinstance(last, ToolMessage)
        called = CALL.match(last.tool_call_id)
        assert called, last.tool_call_id
        thread, turn, iteration = called[1], int(called[2]), int(called[3]) + 1
    if iteration == ITERATIONS:
        return AIMessage(f"Turn {turn} of {thread} done.")
    path = f"{thread}/turn{turn}/file{iteration}.py"
    call_id = f"{thread}k{turn}i{iteration}"
    return AIMessage("", tool_calls=[{"name": "read_file", "args": {"path": path}, "id": call_id}])


def summarizer() -> ScriptedChatModel:
    """A summary that depends on every character it is given."""

    def summarize(request: list[BaseMessage]) -> AIMessage:
        # The transcript is quoted as data in the assistant turn of the request.
        digest = hashlib.blake2b(request[2].text.encode(), digest_size=6).hexdigest()
        return AIMessage(f"Summary {digest}: files were read.")

    return ScriptedChatModel(summarize)


def payload(requests: Sequence[list[BaseMessage]]) -> list[str]:
    """What the provider receives: OpenAI's request body messages, as bytes."""
    import json

    return [
        json.dumps([_convert_message_to_dict(m) for m in request], sort_keys=True)
        for request in requests
    ]


def make_governor(summaries: ScriptedChatModel) -> ContextGovernor:
    # read_file results are never compacted, so the window must cut.
    return ContextGovernor(
        context_window_tokens=5_000,
        max_output_tokens=500,
        exclude_tools={"read_file"},
        summary_model=summaries,
        tools=[read_file],
    )


def node_worker(
    model: ScriptedChatModel, governor: ContextGovernor, saver: SqliteSaver
) -> CompiledStateGraph[Any]:
    """A hand-written graph: govern -> model -> tools -> govern ..."""
    bound = model.bind_tools([read_file])

    def call_model(state: dict[str, Any]) -> dict[str, Any]:
        return {"messages": [bound.invoke(state[LLM_INPUT_MESSAGES_KEY])]}

    graph = StateGraph(GovernedMessagesState)
    graph.add_node("govern", governor.as_pre_model_hook())
    graph.add_node("model", call_model)
    graph.add_node("tools", ToolNode([read_file]))
    graph.add_edge(START, "govern")
    graph.add_edge("govern", "model")
    graph.add_conditional_edges("model", tools_condition, {"tools": "tools", END: END})
    graph.add_edge("tools", "govern")
    return graph.compile(checkpointer=saver)


def middleware_worker(
    model: ScriptedChatModel, governor: ContextGovernor, saver: SqliteSaver
) -> CompiledStateGraph[Any]:
    return create_agent(
        model, [read_file], middleware=[ContextGovernanceMiddleware(governor)], checkpointer=saver
    )


Worker = Callable[[ScriptedChatModel, ContextGovernor, SqliteSaver], CompiledStateGraph[Any]]


def serve(
    database: Path, worker: Worker, *, workers: int
) -> tuple[list[list[BaseMessage]], ScriptedChatModel, list[CompiledStateGraph[Any]]]:
    """Every turn of every thread, turn k on worker k % `workers`; the requests sent."""
    model = ScriptedChatModel(reply, max_input_tokens=5_000)
    summaries = summarizer()
    graphs = []
    for _ in range(workers):
        connection = sqlite3.connect(database, check_same_thread=False)
        graphs.append(worker(model, make_governor(summaries), SqliteSaver(connection)))
    for turn in range(TURNS):
        for thread in THREADS:
            config: Any = {"configurable": {"thread_id": thread}, "recursion_limit": 100}
            graphs[turn % workers].invoke(
                {"messages": [HumanMessage(question(thread, turn))]}, config
            )
    return model.requests, summaries, graphs


def cuts_summarized(requests: Sequence[list[BaseMessage]]) -> int:
    """The distinct summaries the requests carried (in the data turn after the note, never
    in a user message): one per cut summarized."""
    found = set()
    for request in requests:
        for message in request:
            summaries = re.findall(r"Summary [0-9a-f]{12}", message.text)
            assert not (summaries and isinstance(message, HumanMessage))
            found.update(summaries)
    return len(found)


@pytest.mark.parametrize("worker", [node_worker, middleware_worker], ids=["node", "middleware"])
def test_two_workers_on_one_checkpointer_send_what_one_worker_sends(
    tmp_path: Path, worker: Worker
) -> None:
    alone, alone_summaries, _ = serve(tmp_path / "one.sqlite", worker, workers=1)
    shared, shared_summaries, graphs = serve(tmp_path / "two.sqlite", worker, workers=2)

    assert payload(shared) == payload(alone)
    cuts = cuts_summarized(alone)
    assert cuts >= 3, "the window never cut"
    assert len(alone_summaries.requests) == cuts
    assert len(shared_summaries.requests) == cuts
    state = graphs[0].get_state({"configurable": {"thread_id": "t1"}}).values
    if worker is node_worker:
        assert state[RECORD_KEY]["summary"]["text"].startswith("Summary ")


def test_without_the_record_workers_ask_again_and_send_other_requests(tmp_path: Path) -> None:
    """What the record is for: a node without its record channel (the node as an untyped
    Runnable: LangGraph then makes no channel for the record) leaves the state per
    process. Any state schema keeps the record where the node is added as it comes."""

    def worker_without_record(
        model: ScriptedChatModel, governor: ContextGovernor, saver: SqliteSaver
    ) -> CompiledStateGraph[Any]:
        bound = model.bind_tools([read_file])

        class State(MessagesState, total=False):
            llm_input_messages: list[AnyMessage]

        def call_model(state: dict[str, Any]) -> dict[str, Any]:
            return {"messages": [bound.invoke(state[LLM_INPUT_MESSAGES_KEY])]}

        hook = governor.as_pre_model_hook()
        graph = StateGraph(State)
        graph.add_node("govern", RunnableLambda(hook.invoke, afunc=hook.ainvoke))
        graph.add_node("model", call_model)
        graph.add_node("tools", ToolNode([read_file]))
        graph.add_edge(START, "govern")
        graph.add_edge("govern", "model")
        graph.add_conditional_edges("model", tools_condition, {"tools": "tools", END: END})
        graph.add_edge("tools", "govern")
        return graph.compile(checkpointer=saver)

    _, alone_summaries, _ = serve(tmp_path / "one.sqlite", node_worker, workers=1)
    _, shared_summaries, _ = serve(tmp_path / "two.sqlite", worker_without_record, workers=2)
    assert len(shared_summaries.requests) > len(alone_summaries.requests)
