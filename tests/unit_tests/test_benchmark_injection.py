"""The injection replay (benchmarks/injection.py) on one conversation: its conversations
carry attacks where the replay looks for them, and the governor promotes none."""

from __future__ import annotations

from langchain_core.messages import ToolMessage

from benchmarks.injection import (
    MARKER,
    build_conversation,
    measure,
    promoted,
)


def test_a_generated_conversation_is_the_same_from_its_seed_and_carries_attacks() -> None:
    history = build_conversation(0, 0)
    assert history == build_conversation(0, 0)
    results = [message for message in history if isinstance(message, ToolMessage)]
    assert sum(MARKER in str(result.content) for result in results) > len(results) // 3
    assert not promoted(history)


def test_the_replay_cuts_and_finds_no_promotion() -> None:
    counts = measure("without a summary model", [build_conversation(0, 1)])
    assert counts.requests > 40 and counts.cuts > 10
    assert counts.promotions == 0
    assert counts.facts_share is not None and counts.cache_share is not None
