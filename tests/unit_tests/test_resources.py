"""Resources (issue 28, item 5): content nested ~1,000 deep gives a result or a ValueError
naming the message, never a RecursionError out of `govern`; a summary model that hangs
holds a few shared workers, never a thread per cut."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from langchain_context_governance import ContextGovernor
from langchain_context_governance.state.summary import SUMMARY_WORKERS
from langchain_context_governance.testing import ScriptedChatModel
from tests.builders import ai_calls, call, result, tool_loop


def nested(depth: int) -> Any:
    value: Any = "v"
    for _ in range(depth):
        value = {"k": [value]}
    return value


def deep_histories(depth: int) -> dict[str, list[BaseMessage]]:
    called = ai_calls(call("c1", "read_file"))
    return {
        "content": [HumanMessage([{"type": "text", "text": "hi", "x": nested(depth)}])],
        "arguments": [HumanMessage("hi"), ai_calls(call("c1", "f", a=nested(depth)))],
        "extra fields": [HumanMessage("hi", additional_kwargs={"x": nested(depth)})],
        "a result": [
            HumanMessage("hi"),
            called,
            ToolMessage([{"type": "text", "text": "r", "x": nested(depth)}], tool_call_id="c1"),
        ],
    }


@pytest.mark.parametrize("depth", [1_000, 1_500, 5_000])
@pytest.mark.parametrize("where", ["content", "arguments", "extra fields", "a result"])
def test_content_nested_deep_gives_a_result_or_names_the_message(depth: int, where: str) -> None:
    history = deep_histories(depth)[where]
    for governor in (ContextGovernor(context_window_tokens=8_000), ContextGovernor()):
        try:
            governed = governor.govern(history)
        except ValueError as error:
            assert str(error).startswith(f"message {len(history) - 1}: ")
            assert "nest more than" in str(error)
        else:
            assert governed.messages


async def test_nested_content_is_named_in_the_async_path_too() -> None:
    history = deep_histories(2_000)["content"]
    governor = ContextGovernor(context_window_tokens=8_000, summary_model=ScriptedChatModel([]))
    with pytest.raises(ValueError, match=r"message 0: .*nest more than"):
        await governor.agovern(history)


class HangingModel(ScriptedChatModel):
    """A summary model that answers after `release` is set (or 30 s)."""

    release: Any = None

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any):
        self.release.wait(30)
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


def test_a_hanging_summary_model_holds_a_few_workers_never_a_thread_per_cut() -> None:
    model = HangingModel(lambda request: AIMessage("summary"), release=threading.Event())
    governor = ContextGovernor(
        context_window_tokens=6_000,
        max_output_tokens=500,
        exclude_tools={"read_file"},
        summary_model=model,
        summary_timeout=0.05,
    )
    history = tool_loop(2)
    for n in range(60):
        history = [*history, ai_calls(call(f"g{n}")), result(f"g{n}", "z" * 900)]
    before = threading.active_count()
    started = time.monotonic()
    try:
        for conversation in range(200):
            governed = governor.govern(history, thread_id=f"t{conversation}")
            assert "omitted here" in governed.messages[1].text
        assert threading.active_count() <= before + SUMMARY_WORKERS
        # Once every worker waits, a cut keeps its plain note at once: 200 cuts in far
        # less than 200 timeouts' worth of waiting plus the work.
        assert time.monotonic() - started < 30
    finally:
        model.release.set()


def test_the_async_path_starts_no_thread() -> None:
    class AsyncHanging(ScriptedChatModel):
        async def _agenerate(self, *args: Any, **kwargs: Any):
            await asyncio.sleep(30)
            return await super()._agenerate(*args, **kwargs)

    governor = ContextGovernor(
        context_window_tokens=6_000,
        max_output_tokens=500,
        exclude_tools={"read_file"},
        summary_model=AsyncHanging(lambda request: AIMessage("summary")),
        summary_timeout=0.05,
    )
    history = tool_loop(2)
    for n in range(60):
        history = [*history, ai_calls(call(f"g{n}")), result(f"g{n}", "z" * 900)]
    before = threading.active_count()

    async def many() -> None:
        for conversation in range(20):
            await governor.agovern(history, thread_id=f"a{conversation}")

    asyncio.run(many())
    assert threading.active_count() <= before
