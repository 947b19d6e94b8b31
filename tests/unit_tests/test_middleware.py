"""ContextGovernanceMiddleware in langchain.agents.create_agent."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.tools import BaseTool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph.state import CompiledStateGraph

from langchain_context_governance import BACKFILL_CONTENT, ContextGovernor
from langchain_context_governance.middleware import ContextGovernanceMiddleware, GovernedAgentState
from langchain_context_governance.rules.table import PROFILES
from langchain_context_governance.testing import (
    ContextLengthExceeded,
    ProviderRejectedRequest,
    ScriptedChatModel,
)
from tests.agent_tools import (
    GovernanceRuns,
    agent_model,
    assert_requests_legal_and_within_budget,
    assert_some_request_shortened,
    exploration_script,
    summarize,
    whole_history,
    workspace_tools,
    write_workspace,
)
from tests.builders import ai_calls, call, result

ITERATIONS = 40
QUESTION = "review every module"
SYSTEM_PROMPT = "You review Python modules and report what they compute. " * 20


@pytest.fixture
def tools(tmp_path: Path) -> list[BaseTool]:
    write_workspace(tmp_path)
    return workspace_tools(tmp_path)


@pytest.fixture
def governance_runs(monkeypatch: pytest.MonkeyPatch) -> GovernanceRuns:
    return GovernanceRuns(monkeypatch)


def governor_for(model: ScriptedChatModel, tools: list[BaseTool]) -> ContextGovernor:
    return ContextGovernor.from_model(model.bind_tools(tools), tools=tools, keep_recent=4)


def governed_agent(
    model: ScriptedChatModel, tools: list[BaseTool], **kwargs: Any
) -> CompiledStateGraph[Any]:
    middleware = ContextGovernanceMiddleware(
        ContextGovernor.from_model(model, keep_recent=4, provider=model.provider)
    )
    return create_agent(
        model, tools, system_prompt=SYSTEM_PROMPT, middleware=[middleware], **kwargs
    )


class TestCreateAgent:
    def test_ungoverned_agent_is_rejected(self, tools: list[BaseTool]) -> None:
        model = agent_model(exploration_script(ITERATIONS))
        agent = create_agent(model, tools, system_prompt=SYSTEM_PROMPT)

        with pytest.raises(ContextLengthExceeded):
            agent.invoke({"messages": [HumanMessage(QUESTION)]})

    def test_long_turn(self, tools: list[BaseTool], governance_runs: GovernanceRuns) -> None:
        script = exploration_script(ITERATIONS)
        model = agent_model(script)

        final = governed_agent(model, tools).invoke({"messages": [HumanMessage(QUESTION)]})

        assert len(model.requests) == ITERATIONS + 1
        assert governance_runs.count == len(model.requests)
        assert all(request[0].content == SYSTEM_PROMPT for request in model.requests)
        assert_requests_legal_and_within_budget(model.requests, governor_for(model, tools))
        assert_some_request_shortened(model.requests, "read_file")
        assert summarize(final["messages"]) == whole_history(QUESTION, script, tools)

    @pytest.mark.parametrize("run", ["ainvoke", "astream"])
    async def test_async_runs_send_the_same_requests(
        self, tools: list[BaseTool], governance_runs: GovernanceRuns, run: str
    ) -> None:
        question = {"messages": [HumanMessage(QUESTION)]}
        sync_model = agent_model(exploration_script(ITERATIONS))
        governed_agent(sync_model, tools).invoke(question)
        async_model = agent_model(exploration_script(ITERATIONS))
        agent = governed_agent(async_model, tools)

        if run == "ainvoke":
            final = await agent.ainvoke(question)
        else:
            states = [state async for state in agent.astream(question, stream_mode="values")]
            final = states[-1]

        assert governance_runs.count == 2 * (ITERATIONS + 1)
        assert [summarize(r) for r in async_model.requests] == [
            summarize(r) for r in sync_model.requests
        ]
        whole = whole_history(QUESTION, exploration_script(ITERATIONS), tools)
        assert summarize(final["messages"]) == whole

    @pytest.mark.parametrize("governed", [True, False])
    def test_interrupted_thread_resumes(
        self, tools: list[BaseTool], tmp_path: Path, governed: bool
    ) -> None:
        config: Any = {"configurable": {"thread_id": "interrupted"}}
        database = str(tmp_path / "checkpoints.sqlite")
        asking = ai_calls(call("readfile1", path="module_1.py"))
        with SqliteSaver.from_conn_string(database) as saver:
            agent = governed_agent(
                agent_model([asking]), tools, checkpointer=saver, interrupt_before=["tools"]
            )
            agent.invoke({"messages": [HumanMessage("read a module")]}, config)
            interrupted = agent.get_state(config).values["messages"]

        resumed_model = agent_model([AIMessage("Starting over.")])
        with SqliteSaver.from_conn_string(database) as saver:
            if governed:
                agent = governed_agent(resumed_model, tools, checkpointer=saver)
            else:
                agent = create_agent(
                    resumed_model, tools, system_prompt=SYSTEM_PROMPT, checkpointer=saver
                )
            resume = {"messages": [HumanMessage("start over")]}
            if not governed:
                with pytest.raises(ProviderRejectedRequest, match="unanswered"):
                    agent.invoke(resume, config)
                return
            agent.invoke(resume, config)
            stored = agent.get_state(config).values["messages"]

        (request,) = resumed_model.requests
        # The strict profile puts an assistant turn between tool results and a user message.
        assert [m.type for m in request] == ["system", "human", "ai", "tool", "ai", "human"]
        assert request[3].content == BACKFILL_CONTENT
        assert stored[:2] == interrupted
        assert [message.content for message in stored[2:]] == ["start over", "Starting over."]


class TestRequest:
    """wrap_model_call on hand-built requests."""

    @staticmethod
    def governed(
        middleware: ContextGovernanceMiddleware, request: ModelRequest[Any]
    ) -> ModelRequest[Any]:
        seen: list[ModelRequest[Any]] = []

        def handler(sent: ModelRequest[Any]) -> ModelResponse[Any]:
            seen.append(sent)
            return ModelResponse(result=[AIMessage("ok")])

        middleware.wrap_model_call(request, handler)
        (sent,) = seen
        return sent

    @staticmethod
    def history() -> list[BaseMessage]:
        messages: list[BaseMessage] = [HumanMessage("look things up")]
        for n in range(6):
            call_id = f"lookup{n:03d}"
            messages.append(ai_calls(call(call_id, "lookup", key=str(n))))
            messages.append(result(call_id, f"value {n} " * 90, name="lookup"))
        return messages

    def test_system_message_and_tools_count_against_the_budget(self, mutation_guard: Any) -> None:
        governor = ContextGovernor(
            context_window_tokens=3_000,
            max_output_tokens=500,
            safety_buffer=0,
            compactable_tools=frozenset(),
        )
        system = SystemMessage("Answer from the looked-up values only. " * 80)
        lookup = {
            "type": "function",
            "function": {
                "name": "lookup",
                "description": "Look up a value by key. " * 100,
                "parameters": {"type": "object", "properties": {"key": {"type": "string"}}},
            },
        }
        messages = mutation_guard.watch(self.history())
        assert governor.budget is not None
        assert governor.count_tokens(messages) <= governor.budget
        request = ModelRequest(
            model=ScriptedChatModel([]), messages=messages, system_message=system, tools=[lookup]
        )

        sent = self.governed(ContextGovernanceMiddleware(governor), request)

        assert sent.system_message is system
        assert len(sent.messages) < len(messages)
        counted = governor.model_copy(update={"tools": [lookup]})
        assert counted.count_tokens([system, *sent.messages]) <= governor.budget
        assert request.messages is messages

    def test_a_request_that_fits_is_sent_as_it_is(self) -> None:
        governor = ContextGovernor(context_window_tokens=30_000)
        messages = self.history()
        system = SystemMessage("Be brief.")
        request = ModelRequest(
            model=ScriptedChatModel([]), messages=messages, system_message=system
        )

        sent = self.governed(ContextGovernanceMiddleware(governor), request)

        assert sent.system_message is system
        assert len(sent.messages) == len(messages)
        assert all(a is b for a, b in zip(sent.messages, messages, strict=True))

    async def test_async_request_without_system_message(self) -> None:
        messages = [HumanMessage("read it"), ai_calls(call("readfile1", path="a.py"))]
        request = ModelRequest(model=ScriptedChatModel([]), messages=messages)
        seen: list[ModelRequest[Any]] = []

        async def handler(sent: ModelRequest[Any]) -> ModelResponse[Any]:
            seen.append(sent)
            return ModelResponse(result=[AIMessage("ok")])

        await ContextGovernanceMiddleware(ContextGovernor()).awrap_model_call(request, handler)

        (sent,) = seen
        assert sent.system_message is None
        assert [message.type for message in sent.messages] == ["human", "ai", "tool"]

    def test_rejects_something_else_than_a_governor(self) -> None:
        with pytest.raises(TypeError, match="governor must be a ContextGovernor"):
            ContextGovernanceMiddleware("approximate")  # type: ignore[arg-type]


class TestImport:
    def test_package_exports_the_middleware(self) -> None:
        import langchain_context_governance

        exported = langchain_context_governance.ContextGovernanceMiddleware

        assert exported is ContextGovernanceMiddleware

    def test_package_imports_without_langchain(self) -> None:
        program = (
            "import sys\n"
            "sys.modules['langchain'] = None\n"
            "import langchain_context_governance as package\n"
            "print(package.ContextGovernor.__name__)\n"
            "try:\n"
            "    package.ContextGovernanceMiddleware\n"
            "except ImportError as error:\n"
            "    print(error)\n"
        )
        root = Path(__file__).resolve().parents[2]

        finished = subprocess.run(
            [sys.executable, "-c", program], cwd=root, capture_output=True, text=True, check=True
        )

        assert finished.stdout.splitlines() == [
            "ContextGovernor",
            "ContextGovernanceMiddleware needs langchain >= 1.2.9: "
            'pip install "langchain-context-governance[agents]"',
        ]


class RouteTo(AgentMiddleware[AgentState[Any], Any, Any]):
    """Routing middleware: sends every model call to another model."""

    def __init__(self, model: ScriptedChatModel) -> None:
        self.model = model

    def wrap_model_call(self, request: ModelRequest[Any], handler: Any) -> Any:
        return handler(request.override(model=self.model))

    async def awrap_model_call(self, request: ModelRequest[Any], handler: Any) -> Any:
        return await handler(request.override(model=self.model))


class TestSizedForTheModelCalled:
    def routed_agent(
        self, governor: ContextGovernor, routed: ScriptedChatModel, tools: list[BaseTool]
    ) -> CompiledStateGraph[Any]:
        primary = ScriptedChatModel([], max_input_tokens=1_000_000)
        middleware = [RouteTo(routed), ContextGovernanceMiddleware(governor)]
        return create_agent(primary, tools, system_prompt=SYSTEM_PROMPT, middleware=middleware)

    def test_a_governor_without_window_is_sized_for_the_routed_model(
        self, tools: list[BaseTool]
    ) -> None:
        script = exploration_script(ITERATIONS)
        routed = agent_model(script)
        agent = self.routed_agent(ContextGovernor(keep_recent=4), routed, tools)

        final = agent.invoke({"messages": [HumanMessage(QUESTION)]})

        assert len(routed.requests) == ITERATIONS + 1
        assert_requests_legal_and_within_budget(routed.requests, governor_for(routed, tools))
        assert summarize(final["messages"]) == whole_history(QUESTION, script, tools)

    def test_a_fixed_window_is_kept_whatever_model_is_called(self, tools: list[BaseTool]) -> None:
        routed = agent_model(exploration_script(ITERATIONS))
        governor = ContextGovernor(context_window_tokens=1_000_000, keep_recent=4)
        with pytest.raises(ContextLengthExceeded):
            self.routed_agent(governor, routed, tools).invoke(
                {"messages": [HumanMessage(QUESTION)]}
            )

    def test_a_model_without_window_is_repaired_and_logged(
        self, tools: list[BaseTool], caplog: pytest.LogCaptureFixture
    ) -> None:
        routed = ScriptedChatModel([AIMessage("done")])
        agent = self.routed_agent(ContextGovernor(), routed, tools)
        broken = [HumanMessage("hi"), ai_calls(call("c1")), HumanMessage("again")]
        with caplog.at_level("WARNING", logger="langchain_context_governance"):
            agent.invoke({"messages": broken})
        assert "cannot size the request for ScriptedChatModel" in caplog.text
        assert [message.type for message in routed.requests[0]] == [
            "system",
            "human",
            "ai",
            "tool",
            "human",
        ]


class TestSettings:
    def test_takes_the_governor_s_settings(self) -> None:
        middleware = ContextGovernanceMiddleware(context_window_tokens=30_000, keep_recent=4)

        assert middleware.governor.context_window_tokens == 30_000
        assert middleware.governor.keep_recent == 4

    def test_an_unknown_setting_is_named_as_the_governor_names_it(self) -> None:
        with pytest.raises(TypeError, match="context_window_tokens"):
            ContextGovernanceMiddleware(context_window=30_000)

    def test_a_governor_and_settings_together_are_refused(self) -> None:
        with pytest.raises(TypeError, match="a governor or its settings, not both"):
            ContextGovernanceMiddleware(ContextGovernor(), keep_recent=4)

    @pytest.mark.parametrize("provider", list(PROFILES))
    def test_every_profile_works_through_the_middleware(
        self, provider: str, tools: list[BaseTool]
    ) -> None:
        # Nine alphanumerics: an id every profile takes as it is.
        calls = [call(f"read{n:05d}", "read_file", path=f"module_{n % 8}.py") for n in range(12)]
        script = [AIMessage("", tool_calls=[c]) for c in calls] + [AIMessage("Read them.")]
        model = ScriptedChatModel(
            script, provider=provider, max_input_tokens=6_000, max_output_tokens=500
        )
        middleware = ContextGovernanceMiddleware(
            provider=provider, keep_recent=2, safety_buffer=1_500
        )
        agent = create_agent(model, tools, system_prompt=SYSTEM_PROMPT, middleware=[middleware])

        final = agent.invoke({"messages": [HumanMessage("read the modules")]})

        assert final["messages"][-1].content == "Read them."
        assert len(model.requests) == len(script)
        # A profile without a system role gets the system text in the first user turn.
        first = model.requests[0][0]
        assert SYSTEM_PROMPT.strip() in str(first.content)


class TestPerCall:
    def test_the_tools_of_each_call_count_and_the_state_is_kept(self) -> None:
        """One governor, one conversation state, whatever tools each request sends."""
        middleware = ContextGovernanceMiddleware(
            context_window_tokens=3_000, max_output_tokens=500, safety_buffer=0
        )
        lookup = {
            "type": "function",
            "function": {"name": "lookup", "description": "Look up. " * 600, "parameters": {}},
        }
        messages = TestRequest.history()
        tool_sets: list[list[Any]] = [[lookup], []]
        sent = []
        for tools in tool_sets * 2:
            request = ModelRequest(model=ScriptedChatModel([]), messages=messages, tools=tools)
            sent.append(TestRequest.governed(middleware, request))
        assert len(middleware.governor._conversations) == 1
        with_tools, without = sent[0], sent[1]
        count = middleware.governor.count_tokens
        assert count(with_tools.messages) < count(without.messages)
        assert sent[2].messages == with_tools.messages
        assert sent[3].messages == without.messages
        assert not hasattr(ContextGovernor, "with_tools")

    def test_the_profile_comes_from_the_model_called_unless_given(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        import langchain_context_governance.middleware as middleware_module

        def mistral_model_settings(model: Any) -> dict[str, Any]:
            return {"provider": "mistral"}

        monkeypatch.setattr(middleware_module, "settings_for_model", mistral_model_settings)
        messages = [HumanMessage("look it up"), ai_calls(call("call_lookup_0001", "lookup"))]
        request = ModelRequest(model=ScriptedChatModel([]), messages=messages)

        from_model = TestRequest.governed(
            ContextGovernanceMiddleware(context_window_tokens=30_000), request
        )
        given = TestRequest.governed(
            ContextGovernanceMiddleware(context_window_tokens=30_000, provider="openai"), request
        )

        # mistral's ids are 9 letters or digits; openai takes this one as it is.
        assert from_model.messages[1].tool_calls[0]["id"] != "call_lookup_0001"
        assert given.messages[1].tool_calls[0]["id"] == "call_lookup_0001"

    def test_the_record_is_written_to_the_agent_state(self, tools: list[BaseTool]) -> None:
        model = agent_model(exploration_script(10))
        agent = governed_agent(model, tools)

        final = agent.invoke({"messages": [HumanMessage(QUESTION)]})

        # Private: kept by the checkpointer, not part of the agent's output.
        assert "context_governance" not in final
        assert "context_governance" in GovernedAgentState.__annotations__
