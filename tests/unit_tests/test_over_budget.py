"""The over-budget warning: once per conversation, bounded memory."""

from __future__ import annotations

import logging

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from langchain_context_governance.over_budget import OverBudgetWarnings, conversation_key


def test_conversations_are_told_apart_by_their_first_user_message() -> None:
    system = SystemMessage("rules")
    assert conversation_key([system, HumanMessage("a"), AIMessage("x")]) == "a"
    assert conversation_key([HumanMessage("b", id="m1")]) == "m1"
    assert conversation_key([system]) is None


def test_warns_once_per_conversation_and_forgets_the_oldest(
    caplog: pytest.LogCaptureFixture,
) -> None:
    warnings = OverBudgetWarnings(max_conversations=2)
    first, second, third = ([HumanMessage(text)] for text in ("one", "two", "three"))
    with caplog.at_level(logging.WARNING, logger="langchain_context_governance"):
        assert warnings.check(first, tokens=11, budget=10)
        assert not warnings.check(first, tokens=12, budget=10)
        assert not warnings.check(second, tokens=10, budget=10)
        assert not warnings.check(second, tokens=10_000, budget=None)
        assert warnings.check(second, tokens=11, budget=10)
        assert warnings.check(third, tokens=11, budget=10)
        # "one" was the oldest of three and is forgotten: it is warned about again.
        assert warnings.check(first, tokens=11, budget=10)
    assert len(caplog.records) == 4
    assert "11 tokens for a budget of 10 (1 over)" in caplog.records[0].getMessage()
