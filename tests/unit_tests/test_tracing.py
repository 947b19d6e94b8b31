"""Governance is a named run, "ContextGovernor", whose outputs carry the report, in every path."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

import pytest
from langchain.agents import create_agent
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from langchain_context_governance import ContextGovernor
from langchain_context_governance.langgraph import build_pre_model_hook
from langchain_context_governance.middleware import ContextGovernanceMiddleware
from langchain_context_governance.testing import ScriptedChatModel
from tests.builders import ai_calls, call, tool_loop

REPORT_KEYS = {
    "tokens_before",
    "tokens_after",
    "budget",
    "changes",
    "messages_before",
    "messages_after",
    "unchanged_prefix_messages",
    "unchanged_prefix_tokens",
    "within_budget",
    "fell_back",
}


@dataclass
class Run:
    name: str
    parent: UUID | None
    outputs: Any = None
    error: BaseException | None = None


@dataclass
class RunRecorder(BaseCallbackHandler):
    """Records every chain run: its name, its parent and what it returned."""

    runs: dict[UUID, Run] = field(default_factory=dict)

    def on_chain_start(
        self,
        serialized: dict[str, Any] | None,
        inputs: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        self.runs[run_id] = Run(kwargs.get("name") or "", parent_run_id)

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self.runs[run_id].outputs = outputs

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self.runs[run_id].error = error

    def named(self, name: str) -> list[Run]:
        return [run for run in self.runs.values() if run.name == name]

    def parent_name(self, run: Run) -> str | None:
        return self.runs[run.parent].name if run.parent in self.runs else None


def governor_runs(recorder: RunRecorder) -> list[Run]:
    runs = recorder.named("ContextGovernor")
    assert runs, f"no ContextGovernor run among {sorted({r.name for r in recorder.runs.values()})}"
    for run in runs:
        assert set(run.outputs["report"]) >= REPORT_KEYS
        assert run.outputs["messages"]
    return runs


def test_invoke_is_a_run_whose_outputs_hold_the_report() -> None:
    recorder = RunRecorder()
    governor = ContextGovernor(context_window_tokens=2_000, max_output_tokens=200, safety_buffer=0)
    history = tool_loop(20)
    governed = governor.invoke(history, config={"callbacks": [recorder]})
    (run,) = governor_runs(recorder)
    report = run.outputs["report"]
    assert run.outputs["messages"] == governed
    assert report["budget"] == 1_800
    assert report["tokens_after"] <= report["budget"] < report["tokens_before"]
    assert report["changes"]["snip_history"] > 0


async def test_ainvoke_in_a_chain_is_a_child_run() -> None:
    recorder = RunRecorder()
    model = ScriptedChatModel([AIMessage("done")])
    chain = ContextGovernor(context_window_tokens=8_000) | model
    await chain.ainvoke([HumanMessage("hi")], config={"callbacks": [recorder]})
    (run,) = governor_runs(recorder)
    assert recorder.parent_name(run) == "RunnableSequence"


def test_pre_model_hook_runs_governance_as_a_child_of_its_node() -> None:
    recorder = RunRecorder()
    hook = build_pre_model_hook(ContextGovernor(context_window_tokens=8_000))
    state = {"messages": [HumanMessage("hi"), ai_calls(call("c1"))]}
    hook.invoke(state, config={"callbacks": [recorder]})
    (run,) = governor_runs(recorder)
    assert recorder.parent_name(run) == "context_governance"
    assert run.outputs["report"]["changes"]["backfill_missing_tool_results"] == 1


@pytest.mark.parametrize("asynchronous", [False, True])
async def test_middleware_governs_each_model_call_in_a_named_run(asynchronous: bool) -> None:
    recorder = RunRecorder()
    model = ScriptedChatModel([AIMessage("hello")], max_input_tokens=8_000)
    governor = ContextGovernor.from_model(model, max_output_tokens=1_000)
    agent = create_agent(
        model, [], system_prompt="Be brief.", middleware=[ContextGovernanceMiddleware(governor)]
    )
    state = {"messages": [HumanMessage("hi")]}
    config: Any = {"callbacks": [recorder]}
    if asynchronous:
        await agent.ainvoke(state, config=config)
    else:
        agent.invoke(state, config=config)
    (run,) = governor_runs(recorder)
    assert recorder.parent_name(run) == "model"
    assert run.outputs["report"]["budget"] == governor.budget
    assert isinstance(run.outputs["messages"][0], SystemMessage)


def test_a_failing_governance_run_records_the_error() -> None:
    recorder = RunRecorder()
    with pytest.raises(ValueError):
        ContextGovernor().invoke([{"role": "nobody"}], config={"callbacks": [recorder]})
    (run,) = recorder.named("ContextGovernor")
    assert isinstance(run.error, ValueError)
