"""The summary job: asked only where the note can carry it, no longer than its share."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from langchain_context_governance import tuning
from langchain_context_governance.policy.summary_job import (
    SummaryRecord,
    summary_job,
    summary_size,
    summary_tokens,
)


def test_a_summary_is_asked_only_with_room_for_the_smallest_one() -> None:
    smallest = tuning.MIN_SUMMARY_TOKENS
    assert summary_size(budget=100_000, room=smallest - 1) is None
    assert summary_size(budget=100_000, room=smallest) == smallest


def test_a_summary_takes_at_most_a_tenth_of_the_budget_and_the_room() -> None:
    assert summary_size(budget=20_000, room=50_000) == 2_000 == summary_tokens(20_000)
    assert summary_size(budget=20_000, room=700) == 700
    # A tiny budget still allows the smallest summary worth asking for.
    assert summary_tokens(100) == tuning.MIN_SUMMARY_TOKENS


def test_a_job_summarizes_what_was_cut_since_the_last_summary_without_system_messages() -> None:
    history = [SystemMessage("rules"), HumanMessage("go"), AIMessage("a"), HumanMessage("b")]
    history += [AIMessage("c"), SystemMessage("late rule"), HumanMessage("d")]
    first = summary_job(None, history, cut=4, max_tokens=100)
    assert first is not None and first.earlier is None
    assert [m.content for m in first.dropped] == ["go", "a", "b"]
    later = summary_job(SummaryRecord(cut=4, text="S"), history, cut=7, max_tokens=100)
    assert later is not None and later.earlier == "S"
    assert [m.content for m in later.dropped] == ["c", "d"]
    failed = SummaryRecord(cut=4, text="S", failed_cut=7)
    assert summary_job(failed, history, cut=7, max_tokens=100) is None
