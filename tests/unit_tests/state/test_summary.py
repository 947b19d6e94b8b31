"""summary_model: one model call per cut, the summary in the note, failures fall back."""

import asyncio
import itertools
import logging
import threading
import time
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from langchain_context_governance import ContextGovernor, validate_messages
from langchain_context_governance._added import added_kind
from langchain_context_governance.state.summary import DEFAULT_SUMMARY_PROMPT
from langchain_context_governance.testing import ScriptedChatModel
from tests.builders import ai_calls, call, result, tool_loop


def transcript(summary_request: list[BaseMessage]) -> str:
    """The transcript a summary request quotes (an assistant turn of quoted data)."""
    return summary_request[2].text


def summary_sent(request: list[BaseMessage]) -> bool:
    """Whether `request` carries a summary: in the data turn after the note, never in a
    user message."""
    users = "".join(m.text for m in request if isinstance(m, HumanMessage))
    assert "SUMMARY-" not in users
    return any(added_kind(m) == "cut-data" and "SUMMARY-" in m.text for m in request)


def summarizer(*, fail: bool = False) -> ScriptedChatModel:
    """Answers every summary request; counts them in `requests`."""

    def reply(request: list[BaseMessage]) -> AIMessage:
        if fail:
            raise RuntimeError("summary service down")
        return AIMessage(f"SUMMARY-{len(transcript(request))}")

    return ScriptedChatModel(reply)


def governor(model: Any, **settings: Any) -> ContextGovernor:
    # Nothing is compactable, so the window has to cut.
    return ContextGovernor(
        context_window_tokens=6_000,
        max_output_tokens=500,
        exclude_tools={"read_file"},
        summary_model=model,
        **settings,
    )


def grow(history: list[BaseMessage], n: int) -> list[BaseMessage]:
    return [*history, ai_calls(call(f"g{n}")), result(f"g{n}", "z" * 900)]


def run(shared: ContextGovernor, steps: int) -> list[tuple[list[BaseMessage], Any]]:
    history = tool_loop(2)
    calls = []
    for n in range(steps):
        history = grow(history, n)
        outcome = shared.govern(history, thread_id="t")
        calls.append((outcome.messages, outcome.report))
    return calls


def test_one_summary_per_cut_kept_in_every_request_until_the_next_cut() -> None:
    model = summarizer()
    calls = run(governor(model), 60)
    with_summary = [request for request, _ in calls if summary_sent(request)]
    assert with_summary, "no cut happened"
    assert 0 < len(model.requests) < len(with_summary)
    for request in model.requests:
        assert request[0].content.startswith(DEFAULT_SUMMARY_PROMPT)
    for request, report in calls:
        assert validate_messages(request) == []
        assert report.within_budget


def test_the_summary_of_a_later_cut_includes_the_earlier_one() -> None:
    model = summarizer()
    run(governor(model), 120)
    assert len(model.requests) >= 2
    assert "SUMMARY-" in transcript(model.requests[-1])


def test_a_failing_summary_model_leaves_the_plain_note_and_is_not_asked_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    model = summarizer(fail=True)
    shared = governor(model)
    with caplog.at_level(logging.WARNING):
        calls = run(shared, 60)
    notes = [r for r, _ in calls if "omitted here to fit the context window" in str(r[1].content)]
    assert notes and not any(summary_sent(r) for r, _ in calls)
    failures = [r for r in caplog.records if "summary model failed" in r.getMessage()]
    # One WARNING saying what failed, without a traceback, not an ERROR on every cut.
    assert [(r.levelno, r.exc_info) for r in failures] == [(logging.WARNING, None)]
    # one call per cut, not one per request
    assert len(model.requests) < len(notes)


def test_a_restarted_governor_asks_again_once_and_reports_the_same_shape() -> None:
    model = summarizer()
    history = tool_loop(2)
    for n in range(60):
        history = grow(history, n)
    fresh = governor(model)
    first = fresh.govern(history, thread_id="t").messages
    asked = len(model.requests)
    assert asked == 1
    assert fresh.govern(history, thread_id="t").messages == first
    assert len(model.requests) == asked


async def test_async_governance_awaits_the_summary_model() -> None:
    model = summarizer()
    shared = governor(model)
    history = tool_loop(2)
    for n in range(60):
        history = grow(history, n)
    config = {"configurable": {"thread_id": "t"}}
    request = await shared.ainvoke(history, config)
    assert summary_sent(request)
    assert len(model.requests) == 1


def test_bad_summary_settings_are_named() -> None:
    with pytest.raises(ValueError, match="summary_model"):
        ContextGovernor(context_window_tokens=6_000, summary_model=42)
    with pytest.raises(ValueError, match="summary_model"):
        ContextGovernor(summary_model=summarizer())
    with pytest.raises(ValueError, match="summary_prompt"):
        ContextGovernor(context_window_tokens=6_000, summary_prompt=" ")


def test_without_a_summary_model_nothing_is_asked() -> None:
    calls = run(
        ContextGovernor(
            context_window_tokens=6_000, max_output_tokens=500, exclude_tools={"read_file"}
        ),
        60,
    )
    assert any("omitted here" in str(r[1].content) for r, _ in calls)
    assert not any(
        "Summary of" in m.text for r, _ in calls for m in r if added_kind(m) == "cut-data"
    )


class HangingModel(ScriptedChatModel):
    """A summary model that answers only after `release` is set (or never)."""

    release: Any = None

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any):
        self.release.wait(30)
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)

    async def _agenerate(
        self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any
    ):
        await asyncio.sleep(30)
        return await super()._agenerate(messages, stop=stop, run_manager=run_manager, **kwargs)


def hanging_summarizer() -> HangingModel:
    return HangingModel(
        lambda request: AIMessage(f"SUMMARY-{len(transcript(request))}"), release=threading.Event()
    )


def cut_history(steps: int = 60) -> list[BaseMessage]:
    history = tool_loop(2)
    for n in range(steps):
        history = grow(history, n)
    return history


def test_a_hanging_summary_model_gives_way_to_the_plain_note_within_the_timeout(
    caplog: pytest.LogCaptureFixture,
) -> None:
    model = hanging_summarizer()
    shared = governor(model, summary_timeout=0.3)
    started = time.perf_counter()
    with caplog.at_level(logging.WARNING):
        request = shared.govern(cut_history(), thread_id="t").messages
    assert time.perf_counter() - started < 3
    assert "omitted here to fit the context window" in str(request[1].content)
    assert not summary_sent(request)
    assert "gave no answer within 0.3 s" in caplog.text
    # The same cut is not asked again; the next cut is, and includes what this one cut.
    model.release.set()
    assert not summary_sent(shared.govern(cut_history(), thread_id="t").messages)
    assert len(model.requests) <= 1
    history = cut_history()
    for n in range(60, 140):
        history = grow(history, n)
        request = shared.govern(history, thread_id="t").messages
        if summary_sent(request):
            break
    else:
        pytest.fail("the next cut never asked the summary model again")
    assert "<previous_summary>" not in transcript(model.requests[-1])


async def test_a_hanging_summary_model_is_cancelled_in_the_async_path() -> None:
    model = hanging_summarizer()
    shared = governor(model, summary_timeout=0.3)
    config = {"configurable": {"thread_id": "t"}}
    started = time.perf_counter()
    request = await shared.ainvoke(cut_history(), config)
    assert time.perf_counter() - started < 3
    assert "omitted here to fit the context window" in str(request[1].content)
    assert not summary_sent(request)


def test_bad_summary_timeout_is_named() -> None:
    for bad in (0, -1, float("nan")):
        with pytest.raises(ValueError, match="summary_timeout"):
            governor(summarizer(), summary_timeout=bad)
    assert governor(summarizer(), summary_timeout=None).summary_timeout is None


def test_summary_model_takes_a_provider_model_string_without_network() -> None:
    from langchain_openai import ChatOpenAI

    shared = governor("openai:gpt-4o-mini")
    assert isinstance(shared._summary_writer.model, ChatOpenAI)  # type: ignore[union-attr]
    assert shared.summary_model == "openai:gpt-4o-mini"
    assert len(repr(shared)) < 2_000


def test_the_default_summary_prompt_is_exported() -> None:
    import langchain_context_governance

    assert langchain_context_governance.DEFAULT_SUMMARY_PROMPT == DEFAULT_SUMMARY_PROMPT


def test_every_summary_made_is_sent_when_excluded_results_vary_in_size() -> None:
    """Results of excluded tools that give way (or come back) leave the history the room
    between the watermarks, not just what the budget has left: otherwise the next call
    gives them up again and cuts on every call (a summary model asked at every cut)."""
    made = itertools.count()
    model = ScriptedChatModel(lambda request: AIMessage(f"SUMMARY-{next(made)}"))
    shared = governor(model)
    history = tool_loop(2)
    sent: set[str] = set()
    for n in range(60):
        size = 2_400 if n % 2 else 100
        history = [*history, ai_calls(call(f"g{n}")), result(f"g{n}", "z" * size)]
        request = shared.govern(history, thread_id="t").messages
        sent.update(word for m in request for word in m.text.split() if "SUMMARY-" in word)
    # Each cut leaves the room between the watermarks, a few calls' growth here: no cut
    # follows another on every call or every other call.
    assert 2 <= len(model.requests) <= 60 // 5
    assert len(model.requests) == len(sent)


@pytest.mark.parametrize("size", [2_664, 2_858, 3_343])
def test_no_summary_is_asked_for_a_cut_whose_note_has_no_room_for_one(size: int) -> None:
    """Kept results of excluded tools can leave a cut's note room for its plain words
    only: a summary asked there would never be sent (a paid call for nothing). The
    summary model is asked only where the note can carry its answer."""
    made = itertools.count()
    model = ScriptedChatModel(lambda request: AIMessage(f"SUMMARY-{next(made)}"))
    shared = governor(model)
    history = tool_loop(2)
    sent: set[str] = set()
    cuts = set()
    for n in range(14):
        history = [*history, ai_calls(call(f"g{n}")), result(f"g{n}", "z" * size)]
        outcome = shared.govern(history, thread_id="t")
        sent.update(w for m in outcome.messages for w in m.text.split() if "SUMMARY-" in w)
        if outcome.report.cut:
            cuts.add(outcome.report.cut[-1][1])
    assert len(cuts) > len(model.requests) >= 1
    assert len(model.requests) == len(sent)
