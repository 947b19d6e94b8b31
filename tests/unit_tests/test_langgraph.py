"""The pre-model node in create_react_agent and in hand-written StateGraphs."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
)
from langchain_core.tools import BaseTool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode, create_react_agent, tools_condition
from langgraph.prebuilt.chat_agent_executor import AgentState
from langgraph.warnings import LangGraphDeprecatedSinceV10
from pydantic import BaseModel

from langchain_context_governance import BACKFILL_CONTENT, ContextGovernor
from langchain_context_governance import langgraph as langgraph_module
from langchain_context_governance._added import user_parts
from langchain_context_governance.langgraph import (
    LLM_INPUT_MESSAGES_KEY,
    RECORD_KEY,
    GovernanceRecordField,
    GovernedMessagesState,
    build_pre_model_hook,
)
from langchain_context_governance.state.record import RECORD_VERSION
from langchain_context_governance.testing import ContextLengthExceeded, ScriptedChatModel
from tests.agent_tools import (
    FINAL_ANSWER,
    GovernanceRuns,
    agent_model,
    assert_requests_legal_and_within_budget,
    assert_some_request_shortened,
    exploration_script,
    is_shortened,
    summarize,
    whole_history,
    workspace_tools,
    write_workspace,
)
from tests.builders import ai_calls, block_texts, call, result

ITERATIONS = 40
QUESTION = "review every module"
RECURSION: Any = {"recursion_limit": 400}


@pytest.fixture
def tools(tmp_path: Path) -> list[BaseTool]:
    write_workspace(tmp_path)
    return workspace_tools(tmp_path)


@pytest.fixture
def governance_runs(monkeypatch: pytest.MonkeyPatch) -> GovernanceRuns:
    return GovernanceRuns(monkeypatch)


def react_agent(model: Any, tools: list[BaseTool], **kwargs: Any) -> CompiledStateGraph[Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LangGraphDeprecatedSinceV10)
        return create_react_agent(model, tools, **kwargs)


def governor_for(model: ScriptedChatModel, tools: list[BaseTool]) -> ContextGovernor:
    return ContextGovernor.from_model(
        model.bind_tools(tools), tools=tools, keep_recent=4, provider=model.provider
    )


def hand_written_graph(
    model: ScriptedChatModel,
    tools: list[BaseTool],
    governor: ContextGovernor,
    *,
    mode: str,
) -> CompiledStateGraph[Any]:
    """hook -> model -> tools -> hook ..., the model reading the key `mode` writes."""
    bound = model.bind_tools(tools)
    key = LLM_INPUT_MESSAGES_KEY if mode == "llm_input" else "messages"

    def call_model(state: dict[str, Any]) -> dict[str, Any]:
        return {"messages": [bound.invoke(state[key])]}

    state_schema = GovernedMessagesState if mode == "llm_input" else MessagesState
    graph = StateGraph(state_schema)
    graph.add_node("govern", governor.as_pre_model_hook(mode))
    graph.add_node("model", call_model)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "govern")
    graph.add_edge("govern", "model")
    graph.add_conditional_edges("model", tools_condition, {"tools": "tools", END: END})
    graph.add_edge("tools", "govern")
    return graph.compile()


class TestNode:
    def test_llm_input_returns_the_governed_copy(self, mutation_guard: Any) -> None:
        history = mutation_guard.watch(
            [HumanMessage("read a.py"), ai_calls(call("c1", path="a.py"))]
        )
        hook = ContextGovernor().as_pre_model_hook()

        update = hook.invoke({"messages": history})

        # Outside a graph the node cannot tell the state's keys: the record is included.
        assert list(update) == [LLM_INPUT_MESSAGES_KEY, RECORD_KEY]
        governed = update[LLM_INPUT_MESSAGES_KEY]
        assert [message.type for message in governed] == ["human", "ai", "tool"]
        assert governed[2].content == BACKFILL_CONTENT

    async def test_async_node_gives_the_same_update(self) -> None:
        history = [HumanMessage("read a.py"), ai_calls(call("c1", path="a.py"))]
        hook = ContextGovernor().as_pre_model_hook()

        sync_update = hook.invoke({"messages": history})
        async_update = await hook.ainvoke({"messages": history})

        assert async_update == sync_update

    def test_replace_rewrites_history_keeping_ids(self, mutation_guard: Any) -> None:
        history = mutation_guard.watch(
            [
                HumanMessage("read a.py", id="h1"),
                ai_calls(call("c1", path="a.py")).model_copy(update={"id": "a1"}),
                HumanMessage("never mind", id="h2"),
            ]
        )
        hook = ContextGovernor().as_pre_model_hook("replace")

        update = hook.invoke({"messages": history})

        remove_all, *stored = update["messages"]
        assert isinstance(remove_all, RemoveMessage)
        assert remove_all.id == REMOVE_ALL_MESSAGES
        assert [message.type for message in stored] == ["human", "ai", "tool", "human"]
        assert [stored[0].id, stored[1].id, stored[3].id] == ["h1", "a1", "h2"]
        backfilled = stored[2]
        assert backfilled.id
        assert backfilled.id not in {"h1", "a1", "h2"}

    def test_reads_a_pydantic_state(self) -> None:
        class PydanticState(BaseModel):
            messages: list[BaseMessage]

        state = PydanticState(messages=[AIMessage("hello"), HumanMessage("hi")])
        hook = ContextGovernor().as_pre_model_hook()

        governed = hook.invoke(state)[LLM_INPUT_MESSAGES_KEY]  # type: ignore[arg-type]

        assert [message.type for message in governed] == ["human", "ai", "human"]

    def test_refuses_to_return_an_empty_request(self) -> None:
        hook = ContextGovernor().as_pre_model_hook()

        with pytest.raises(ValueError, match=r"state\['messages'\] holds nothing"):
            hook.invoke({"messages": [result("lost-call")]})

    def test_names_a_missing_messages_key(self) -> None:
        hook = ContextGovernor().as_pre_model_hook()

        with pytest.raises(ValueError, match="no 'messages' key"):
            hook.invoke({"history": [HumanMessage("hi")]})

    def test_rejects_an_unknown_mode(self) -> None:
        with pytest.raises(ValueError, match="mode must be one of"):
            build_pre_model_hook(ContextGovernor(), mode="trim")  # type: ignore[arg-type]

    def test_report_key_puts_the_report_in_the_update(self) -> None:
        governor = ContextGovernor(context_window_tokens=8_000)
        hook = governor.as_pre_model_hook(report_key="governance_report")
        state = {"messages": [HumanMessage("hi"), ai_calls(call("c1"))]}
        update = hook.invoke(state)
        report = update["governance_report"]
        assert set(update) == {"llm_input_messages", "governance_report", RECORD_KEY}
        assert report["changes"]["backfill_missing_tool_results"] == 1
        assert report["messages_before"] == 2
        assert report["messages_after"] == 3
        assert report["budget"] == governor.budget

    def test_report_key_reaches_the_graph_state(self) -> None:
        class ReportedState(GovernedMessagesState, total=False):
            governance_report: dict[str, Any]

        governor = ContextGovernor(context_window_tokens=8_000)
        graph = StateGraph(ReportedState)
        graph.add_node("govern", governor.as_pre_model_hook(report_key="governance_report"))
        graph.add_edge(START, "govern")
        graph.add_edge("govern", END)
        final = graph.compile().invoke({"messages": [HumanMessage("hi")]})
        assert final["governance_report"]["tokens_after"] > 0
        assert final["governance_report"]["within_budget"] is True

    @pytest.mark.parametrize("report_key", ["", "messages", "llm_input_messages"])
    def test_rejects_a_report_key_that_cannot_hold_it(self, report_key: str) -> None:
        with pytest.raises(ValueError, match="report_key"):
            build_pre_model_hook(ContextGovernor(), report_key=report_key)


class TestFromModel:
    def test_window_comes_through_bind_tools(self, tools: list[BaseTool]) -> None:
        model = ScriptedChatModel([], max_input_tokens=12_000, max_output_tokens=700)
        bound = model.bind_tools(tools).with_config(tags=["agent"])

        governor = ContextGovernor.from_model(bound)

        assert governor.context_window_tokens == 12_000
        assert governor.max_output_tokens == 700
        assert governor.budget == 12_000 - 700 - governor.safety_buffer


class TestReactAgent:
    def test_ungoverned_agent_is_rejected(self, tools: list[BaseTool]) -> None:
        model = agent_model(exploration_script(ITERATIONS))
        agent = react_agent(model, tools)

        with pytest.raises(ContextLengthExceeded):
            agent.invoke({"messages": [HumanMessage("review every module")]}, RECURSION)

    def test_long_turn_in_llm_input_mode(
        self, tools: list[BaseTool], governance_runs: GovernanceRuns
    ) -> None:
        script = exploration_script(ITERATIONS)
        model = agent_model(script)
        governor = governor_for(model, tools)
        agent = react_agent(model, tools, pre_model_hook=governor.as_pre_model_hook())

        final = agent.invoke({"messages": [HumanMessage(QUESTION)]}, RECURSION)

        assert len(model.requests) == ITERATIONS + 1
        assert governance_runs.count == len(model.requests)
        assert_requests_legal_and_within_budget(model.requests, governor)
        assert_some_request_shortened(model.requests, "read_file")
        assert summarize(final["messages"]) == whole_history(QUESTION, script, tools)

    async def test_async_runs_send_the_same_requests(self, tools: list[BaseTool]) -> None:
        requests = []
        for run in ("invoke", "ainvoke", "astream"):
            model = agent_model(exploration_script(ITERATIONS))
            governor = governor_for(model, tools)
            agent = react_agent(model, tools, pre_model_hook=governor.as_pre_model_hook())
            question = {"messages": [HumanMessage(QUESTION)]}
            if run == "invoke":
                agent.invoke(question, RECURSION)
            elif run == "ainvoke":
                await agent.ainvoke(question, RECURSION)
            else:
                chunks = [chunk async for chunk in agent.astream(question, RECURSION)]
                assert chunks
            requests.append([summarize(request) for request in model.requests])

        assert len(requests[0]) == ITERATIONS + 1
        assert requests[1] == requests[0]
        assert requests[2] == requests[0]

    def test_replace_mode_shrinks_the_stored_history(
        self, tools: list[BaseTool], governance_runs: GovernanceRuns
    ) -> None:
        model = agent_model(exploration_script(ITERATIONS))
        governor = governor_for(model, tools)
        agent = react_agent(model, tools, pre_model_hook=governor.as_pre_model_hook("replace"))

        final = agent.invoke({"messages": [HumanMessage(QUESTION)]}, RECURSION)

        assert governance_runs.count == len(model.requests) == ITERATIONS + 1
        assert_requests_legal_and_within_budget(model.requests, governor)
        assert is_shortened(final["messages"], "read_file")
        # The stored task carries the note of the latest cut, never one per cut.
        kinds = [kind for _, kind in user_parts(final["messages"][0])]
        assert block_texts(final["messages"][0])[0] == QUESTION
        assert kinds.count("cut-note") == 1
        assert final["messages"][-1].content == FINAL_ANSWER
        ids = [message.id for message in final["messages"]]
        assert len(set(ids)) == len(ids)

    def test_one_state_per_thread_and_the_same_requests_after_a_restart(
        self, tools: list[BaseTool], tmp_path: Path
    ) -> None:
        """Threads interleave on one governor; a new governor re-governs them identically."""
        database = str(tmp_path / "threads.sqlite")
        threads = [f"thread-{k}" for k in range(3)]
        script = exploration_script(6)
        models = {thread: agent_model(list(script)) for thread in threads}
        governor = governor_for(models[threads[0]], tools)
        hook = governor.as_pre_model_hook()
        with SqliteSaver.from_conn_string(database) as saver:
            for thread in threads:
                agent = react_agent(models[thread], tools, pre_model_hook=hook, checkpointer=saver)
                config: Any = {"configurable": {"thread_id": thread}, **RECURSION}
                agent.invoke({"messages": [HumanMessage(f"{QUESTION} ({thread})")]}, config)
            stored = {
                thread: agent.get_state({"configurable": {"thread_id": thread}}).values["messages"]
                for thread in threads
            }
        assert len(governor._conversations) == len(threads)
        restarted = governor_for(models[threads[0]], tools)
        for thread in threads:
            last_request = models[thread].requests[-1]
            history = stored[thread][:-1]  # the final answer came after the last request
            assert restarted.govern(history, thread_id=thread).messages == last_request

    def test_interrupted_thread_resumes_legally(
        self, tools: list[BaseTool], tmp_path: Path
    ) -> None:
        config: Any = {"configurable": {"thread_id": "interrupted"}, **RECURSION}
        database = str(tmp_path / "checkpoints.sqlite")
        asking = ai_calls(
            call("readfile1", path="module_1.py"), call("readfile2", path="module_2.py")
        )
        first_model = agent_model([asking])
        with SqliteSaver.from_conn_string(database) as saver:
            agent = react_agent(
                first_model,
                tools,
                pre_model_hook=governor_for(first_model, tools).as_pre_model_hook(),
                checkpointer=saver,
                interrupt_before=["tools"],
            )
            agent.invoke({"messages": [HumanMessage("read two modules")]}, config)
            interrupted = agent.get_state(config).values["messages"]
        assert [message.type for message in interrupted] == ["human", "ai"]

        resumed_model = agent_model([AIMessage("Let us start over.")])
        governor = governor_for(resumed_model, tools)
        with SqliteSaver.from_conn_string(database) as saver:
            agent = react_agent(
                resumed_model,
                tools,
                pre_model_hook=governor.as_pre_model_hook(),
                checkpointer=saver,
            )
            agent.invoke({"messages": [HumanMessage("forget that, start over")]}, config)
            stored = agent.get_state(config).values["messages"]

        (request,) = resumed_model.requests
        # The strict profile puts an assistant turn between tool results and a user message.
        assert [m.type for m in request] == ["human", "ai", "tool", "tool", "ai", "human"]
        assert [message.tool_call_id for message in request[2:4]] == ["readfile1", "readfile2"]
        assert {message.content for message in request[2:4]} == {BACKFILL_CONTENT}
        assert_requests_legal_and_within_budget(resumed_model.requests, governor)
        assert stored[:2] == interrupted
        assert [message.content for message in stored[2:]] == [
            "forget that, start over",
            "Let us start over.",
        ]


class TestHandWrittenGraph:
    @pytest.mark.parametrize("mode", ["llm_input", "replace"])
    def test_long_turn(
        self, tools: list[BaseTool], governance_runs: GovernanceRuns, mode: str
    ) -> None:
        script = exploration_script(ITERATIONS)
        model = agent_model(script)
        governor = governor_for(model, tools)
        graph = hand_written_graph(model, tools, governor, mode=mode)

        final = graph.invoke({"messages": [HumanMessage(QUESTION)]}, RECURSION)

        assert governance_runs.count == len(model.requests) == ITERATIONS + 1
        assert_requests_legal_and_within_budget(model.requests, governor)
        assert_some_request_shortened(model.requests, "read_file")
        whole = whole_history(QUESTION, script, tools)
        if mode == "llm_input":
            assert summarize(final["messages"]) == whole
        else:
            assert summarize(final["messages"]) != whole
            assert summarize(final["messages"][-1:]) == whole[-1:]

    async def test_astream_with_a_system_prompt(
        self, tools: list[BaseTool], governance_runs: GovernanceRuns
    ) -> None:
        model = agent_model(exploration_script(ITERATIONS))
        governor = governor_for(model, tools)
        graph = hand_written_graph(model, tools, governor, mode="llm_input")
        question = [SystemMessage("You review code. " * 50), HumanMessage("review")]

        updates = [update async for update in graph.astream({"messages": question}, RECURSION)]

        assert len(updates) == 3 * (ITERATIONS + 1) - 1
        assert governance_runs.count == len(model.requests) == ITERATIONS + 1
        assert all(request[0].type == "system" for request in model.requests)
        assert_requests_legal_and_within_budget(model.requests, governor)


class TestChannels:
    @staticmethod
    def graph(state_schema: Any, hook: Any) -> CompiledStateGraph[Any]:
        graph = StateGraph(state_schema)
        graph.add_node("govern", hook)
        graph.add_edge(START, "govern")
        graph.add_edge("govern", END)
        return graph.compile()

    def test_llm_input_mode_on_a_graph_without_the_key_warns_once(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        hook = ContextGovernor().as_pre_model_hook()
        app = self.graph(MessagesState, hook)
        with caplog.at_level("WARNING", logger="langchain_context_governance"):
            app.invoke({"messages": [HumanMessage("hi")]})
            app.invoke({"messages": [HumanMessage("hi again")]})
        warnings_logged = [r for r in caplog.records if "llm_input_messages" in r.getMessage()]
        assert len(warnings_logged) == 1
        assert "mode='replace'" in warnings_logged[0].getMessage()

    @pytest.mark.parametrize("mode", ["llm_input", "replace"])
    def test_no_warning_where_the_model_sees_the_governed_messages(
        self, mode: str, caplog: pytest.LogCaptureFixture
    ) -> None:
        state_schema = GovernedMessagesState if mode == "llm_input" else MessagesState
        app = self.graph(state_schema, ContextGovernor().as_pre_model_hook(mode))  # type: ignore[arg-type]
        with caplog.at_level("WARNING", logger="langchain_context_governance"):
            final = app.invoke({"messages": [HumanMessage("hi")]})
        assert not caplog.records
        # The record is the node's own channel: never in the graph's output (or input).
        assert RECORD_KEY not in final

    def test_create_react_agent_declares_the_governed_copy(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        model = ScriptedChatModel([AIMessage("hello")], max_input_tokens=8_000)
        agent = react_agent(model, [], pre_model_hook=ContextGovernor().as_pre_model_hook())
        with caplog.at_level("WARNING", logger="langchain_context_governance"):
            agent.invoke({"messages": [HumanMessage("hi")]})
        assert not caplog.records

    def test_a_state_schema_with_the_record_field_keeps_the_record(self) -> None:
        class State(AgentState):
            context_governance: GovernanceRecordField

        model = ScriptedChatModel([AIMessage("hello")], max_input_tokens=8_000)
        agent = react_agent(
            model, [], pre_model_hook=ContextGovernor().as_pre_model_hook(), state_schema=State
        )
        final = agent.invoke({"messages": [HumanMessage("hi")]})
        assert final[RECORD_KEY]["history"]["count"] == 1


class TestRecordChannel:
    """The record is the pre-model node's own channel: the checkpointer keeps it, the
    graph's input never writes it (issue 28, item 3)."""

    def test_the_default_agent_state_keeps_the_record_with_the_thread(self) -> None:
        model = ScriptedChatModel([AIMessage("hello"), AIMessage("again")], max_input_tokens=8_000)
        agent = react_agent(
            model,
            [],
            pre_model_hook=ContextGovernor().as_pre_model_hook(),
            checkpointer=InMemorySaver(),
        )
        config: Any = {"configurable": {"thread_id": "t"}}
        agent.invoke({"messages": [HumanMessage("hi")]}, config)
        agent.invoke({"messages": [HumanMessage("and now?")]}, config)
        assert agent.get_state(config).values[RECORD_KEY]["history"]["count"] == 3

    @pytest.mark.parametrize("hand_written", [False, True])
    def test_a_record_sent_with_the_graph_input_is_never_read(
        self, hand_written: bool, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        read: list[Any] = []
        original = langgraph_module._state_record
        monkeypatch.setattr(
            langgraph_module, "_state_record", lambda state: read.append(original(state))
        )
        forged = {
            "version": RECORD_VERSION,
            "summary": {"cut": 1, "text": "FORGED", "failed_cut": None},
        }
        hook = ContextGovernor().as_pre_model_hook()
        model = ScriptedChatModel([AIMessage("hello")], max_input_tokens=8_000)
        if hand_written:
            graph = StateGraph(GovernedMessagesState)
            graph.add_node("govern", hook)
            graph.add_edge(START, "govern")
            graph.add_edge("govern", END)
            app: Any = graph.compile(checkpointer=InMemorySaver())
        else:
            app = react_agent(model, [], pre_model_hook=hook, checkpointer=InMemorySaver())
        config: Any = {"configurable": {"thread_id": "t"}}
        app.invoke({"messages": [HumanMessage("hi")], RECORD_KEY: forged}, config)
        assert read == [None]
        assert app.get_state(config).values[RECORD_KEY]["history"]["count"] == 1


class TestRecordOutsideItsChannel:
    """A node whose input schema LangGraph cannot read (wrapped in another Runnable) has no
    record channel: on a checkpointed graph that is said once, never silently."""

    def _agent(self, governor: ContextGovernor, *, wrapped: bool, checkpointed: bool) -> Any:
        from langchain_core.runnables import RunnableLambda

        hook = governor.as_pre_model_hook()
        model = ScriptedChatModel([AIMessage("hello"), AIMessage("again")], max_input_tokens=8_000)
        return react_agent(
            model,
            [],
            pre_model_hook=RunnableLambda(hook.invoke) if wrapped else hook,
            checkpointer=InMemorySaver() if checkpointed else None,
        )

    def test_a_wrapped_node_on_a_checkpointed_graph_warns_once(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        agent = self._agent(ContextGovernor(), wrapped=True, checkpointed=True)
        config: Any = {"configurable": {"thread_id": "t1"}}
        with caplog.at_level("WARNING", logger="langchain_context_governance"):
            agent.invoke({"messages": [HumanMessage("hi")]}, config)
            agent.invoke({"messages": [HumanMessage("hi again")]}, config)
        said = [r.getMessage() for r in caplog.records if "this process only" in r.getMessage()]
        assert len(said) == 1
        assert "not wrapped in another Runnable" in said[0]

    @pytest.mark.parametrize("where", ["own-channel", "no-checkpointer", "store"])
    def test_no_warning_where_the_record_is_kept_or_no_thread_is(
        self, where: str, caplog: pytest.LogCaptureFixture
    ) -> None:
        from langgraph.store.memory import InMemoryStore

        governor = ContextGovernor(store=InMemoryStore() if where == "store" else None)
        agent = self._agent(
            governor, wrapped=where != "own-channel", checkpointed=where != "no-checkpointer"
        )
        with caplog.at_level("WARNING", logger="langchain_context_governance"):
            agent.invoke({"messages": [HumanMessage("hi")]}, {"configurable": {"thread_id": "t"}})
        assert not caplog.records
