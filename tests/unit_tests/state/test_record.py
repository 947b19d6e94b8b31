"""The governance record: small, versioned, plain data, used only where it belongs."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, messages_to_dict
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.store.memory import InMemoryStore

from langchain_context_governance import ContextGovernor
from langchain_context_governance.state.record import (
    RECORD_VERSION,
    GovernanceRecord,
    HistoryDigest,
    HistoryMark,
    UnusableRecord,
)
from langchain_context_governance.testing import ScriptedChatModel
from tests.builders import ai_calls, call, result, tool_loop

ROOT = Path(__file__).resolve().parents[3]


def summarizer() -> ScriptedChatModel:
    return ScriptedChatModel(lambda request: AIMessage(f"SUMMARY-{len(request[2].text)}"))


def governor(**settings: Any) -> ContextGovernor:
    # Nothing is compactable, so the window has to cut.
    return ContextGovernor(
        context_window_tokens=6_000,
        max_output_tokens=500,
        exclude_tools={"read_file"},
        **settings,
    )


def grow(history: list[BaseMessage], n: int) -> list[BaseMessage]:
    return [*history, ai_calls(call(f"g{n}")), result(f"g{n}", "z" * 900)]


def grown(steps: int) -> list[list[BaseMessage]]:
    histories, history = [], tool_loop(2)
    for n in range(steps):
        history = grow(history, n)
        histories.append(history)
    return histories


def test_a_record_is_plain_data_that_checkpointers_store_as_it_is() -> None:
    summaries = summarizer()
    outcome = None
    for history in grown(60):
        outcome = governor(summary_model=summaries).govern(
            history, record=None if outcome is None else outcome.record
        )
    assert outcome is not None and outcome.record is not None
    record = outcome.record
    assert record["summary"]["text"].startswith("SUMMARY-")
    assert json.loads(json.dumps(record)) == record
    serializer = JsonPlusSerializer()
    assert serializer.loads_typed(serializer.dumps_typed(record)) == record
    # Small: the summary text, an 8-byte digest per request message, a few counts...
    without_summary = len(json.dumps({**record, "summary": None, "resume": None}))
    assert without_summary < 40 + 11 * outcome.report.messages_after + 300
    # ... and what the repairs and the replay decided: packed positions, counts and call
    # ids, a few bytes per history message (the note's values are bounded by the budget).
    resume = record["resume"]
    note_values = len(json.dumps(resume["replay"]["decisions"]["note_values"]))
    assert len(json.dumps(resume)) - note_values < 40 * len(history) + 1_500


def test_a_record_of_another_version_or_settings_is_never_read() -> None:
    data = GovernanceRecord(settings="s", history=HistoryMark.of([])).to_dict()
    with pytest.raises(UnusableRecord, match=f"expected {RECORD_VERSION}"):
        GovernanceRecord.from_dict({**data, "version": RECORD_VERSION + 1}, settings="s")
    with pytest.raises(UnusableRecord, match="other settings"):
        GovernanceRecord.from_dict(data, settings="t")
    with pytest.raises(UnusableRecord, match="cannot be read"):
        GovernanceRecord.from_dict({**data, "history": {"count": -1, "digest": None}}, settings="s")
    with pytest.raises(UnusableRecord, match="mapping"):
        GovernanceRecord.from_dict("a record", settings="s")


@pytest.mark.parametrize(
    "change",
    [
        {"version": RECORD_VERSION + 1},
        {"settings": "written-by-a-governor-with-other-settings"},
        {"summary": "not a summary"},
    ],
)
def test_a_thread_whose_record_cannot_be_used_is_rebuilt(
    change: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    """Rebuilt from the history: the same request and summary as on first contact."""
    histories = grown(80)
    summaries = summarizer()
    worker = governor(summary_model=summaries)
    outcome = None
    for history in histories[:-1]:
        outcome = worker.govern(history, thread_id="t", record=outcome and outcome.record)
    assert outcome is not None and outcome.record is not None
    first_contact_summaries = summarizer()
    first_contact = governor(summary_model=first_contact_summaries).govern(
        histories[-1], thread_id="t"
    )

    other = governor(summary_model=summarizer())
    with caplog.at_level(logging.DEBUG, logger="langchain_context_governance"):
        rebuilt = other.govern(histories[-1], thread_id="t", record={**outcome.record, **change})

    assert rebuilt.messages == first_contact.messages
    assert rebuilt.record == first_contact.record
    assert "the record is not used" in caplog.text
    # The worker that wrote the record also rebuilds when given one it cannot use.
    again = worker.govern(histories[-1], thread_id="t", record={**outcome.record, **change})
    assert again.messages == first_contact.messages


def test_a_record_written_for_another_history_is_left_aside() -> None:
    histories = grown(80)
    worker = governor(summary_model=summarizer())
    outcome = None
    for history in histories[:-1]:
        outcome = worker.govern(history, thread_id="t", record=outcome and outcome.record)
    assert outcome is not None and outcome.record is not None
    other_history = {**outcome.record, "history": {"count": 3, "digest": "0" * 32}}
    continued = worker.govern(histories[-1], thread_id="t", record=outcome.record)
    again = governor(summary_model=summarizer())
    for history in histories[:-1]:
        again.govern(history, thread_id="t")
    assert again.govern(histories[-1], thread_id="t", record=other_history).messages == (
        continued.messages
    )
    first_contact = governor(summary_model=summarizer())
    assert (
        first_contact.govern(histories[-1], thread_id="t", record=other_history).messages
        == governor(summary_model=summarizer()).govern(histories[-1]).messages
    )


def test_a_worker_continues_from_the_record_with_the_summary_and_prefix_of_another() -> None:
    histories = grown(90)
    summaries = summarizer()
    workers = [governor(summary_model=summaries), governor(summary_model=summaries)]
    alone_summaries = summarizer()
    alone = governor(summary_model=alone_summaries)
    record = None
    for step, history in enumerate(histories):
        shared = workers[step % 2].govern(history, thread_id="t", record=record)
        record = shared.record
        single = alone.govern(history, thread_id="t")
        assert shared.messages == single.messages, step
        assert shared.report == single.report, step
    assert len(summaries.requests) == len(alone_summaries.requests) >= 2
    # The incremental summary: the second asks with the first, never from message 0.
    assert "<previous_summary>" in summaries.requests[1][2].text


def test_the_prefix_report_compares_with_the_thread_s_previous_request_on_any_worker() -> None:
    histories = grown(40)
    first, second = governor(), governor()
    record = first.govern(histories[-3], thread_id="t").record
    first.govern(histories[-2], thread_id="t", record=record)  # the stale worker's last call
    record = second.govern(histories[-2], thread_id="t", record=record).record
    stale = first.govern(histories[-1], thread_id="t", record=record).report
    fresh = governor().govern(histories[-2], thread_id="t")
    expected = governor().govern(histories[-1], thread_id="t", record=fresh.record).report
    assert stale.unchanged_prefix_messages == expected.unchanged_prefix_messages is not None
    assert stale.unchanged_prefix_tokens == expected.unchanged_prefix_tokens


def test_a_store_shares_the_record_between_workers_of_plain_calls() -> None:
    store = InMemoryStore()
    summaries = summarizer()
    workers = [governor(summary_model=summaries, store=store) for _ in range(2)]
    alone_summaries = summarizer()
    alone = governor(summary_model=alone_summaries)
    for step, history in enumerate(grown(70)):
        assert (
            workers[step % 2].govern(history, thread_id="t").messages
            == alone.govern(history, thread_id="t").messages
        )
    assert len(summaries.requests) == len(alone_summaries.requests) >= 1
    stored = store.get(("context_governance",), "t")
    assert stored is not None and stored.value["summary"]["text"].startswith("SUMMARY-")


async def test_a_store_is_awaited_in_the_async_path() -> None:
    store = InMemoryStore()
    histories = grown(60)
    workers = [governor(store=store), governor(store=store)]
    for step, history in enumerate(histories):
        await workers[step % 2].agovern(history, thread_id="t")
    assert (await store.aget(("context_governance",), "t")) is not None


def test_bad_store_is_named() -> None:
    with pytest.raises(ValueError, match="store must be a LangGraph BaseStore"):
        governor(store={"t": {}})


def test_a_record_written_in_one_process_is_read_in_another() -> None:
    """Python salts its string hashes per process: the record's digests must not be."""
    histories = grown(50)
    first = governor().govern(histories[-2], thread_id="t")
    expected = governor().govern(histories[-1], thread_id="t", record=first.record)
    assert expected.report.unchanged_prefix_messages is not None
    program = (
        "import json, sys\n"
        "from langchain_core.messages import messages_from_dict\n"
        "from langchain_context_governance import ContextGovernor\n"
        "data = json.load(sys.stdin)\n"
        "governor = ContextGovernor(context_window_tokens=6_000, max_output_tokens=500,\n"
        "                           exclude_tools={'read_file'})\n"
        "history = messages_from_dict(data['history'])\n"
        "outcome = governor.govern(history, thread_id='t', record=data['record'])\n"
        "print(json.dumps([outcome.report.unchanged_prefix_messages,\n"
        "                  outcome.report.unchanged_prefix_tokens, outcome.record]))\n"
    )
    payload = json.dumps({"history": messages_to_dict(histories[-1]), "record": first.record})
    finished = subprocess.run(
        [sys.executable, "-c", program],
        input=payload,
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONHASHSEED": "12345"},
    )
    messages, tokens, record = json.loads(finished.stdout)
    assert [messages, tokens] == [
        expected.report.unchanged_prefix_messages,
        expected.report.unchanged_prefix_tokens,
    ]
    assert record == expected.record


def test_the_history_digest_tells_a_message_without_an_id_by_everything_sent() -> None:
    def digest(*batches: list[BaseMessage]) -> str:
        grown = HistoryDigest()
        for batch in batches:
            grown.add(batch)
        return grown.hexdigest()

    first = HumanMessage("a", id="1")
    with_id, without_id, empty_id = AIMessage("b", id="2"), AIMessage("b"), AIMessage("b", id="")
    assert digest([first, without_id]) != digest([first, with_id])
    assert digest([first, empty_id]) != digest([first, with_id])
    assert digest([first, empty_id]) != digest([first, AIMessage("x", id="")])
    assert digest([first, without_id]) != digest([first, AIMessage("c")])
    assert digest([first], [without_id]) == digest([first, without_id])
