"""The compaction policy: one setting of "the newest results", read the same way by the
cache-aware policy, the `keep_recent` mode and the public pass; the last resort's own rule."""

from __future__ import annotations

import pytest
from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage

from langchain_context_governance import ContextGovernor, get_token_counter, microcompact
from langchain_context_governance.offload.kept import Offload
from langchain_context_governance.policy.compaction import (
    DEFAULT_KEEP_RECENT,
    ResultCompaction,
    compact_all_but_newest,
    compacted_placeholder,
    offloaded_result,
    results_of_the_newest_call,
)
from langchain_context_governance.policy.last_resort import fit_to_budget
from langchain_context_governance.state.cache_aware import CacheAwareReplay
from tests.builders import ai_calls, call, result, tool_loop

COUNTER = get_token_counter("approximate")


def whole_results(history: list[BaseMessage], request: list[BaseMessage]) -> list[int]:
    """Positions (in `history`) of the results `request` sends as they are."""
    sent = {id(message) for message in request}
    return [
        index
        for index, message in enumerate(history)
        if isinstance(message, ToolMessage) and id(message) in sent
    ]


def result_positions(history: list[BaseMessage]) -> list[int]:
    return [index for index, message in enumerate(history) if isinstance(message, ToolMessage)]


@pytest.mark.parametrize("available", [0, 1, 3, 4, 10])
@pytest.mark.parametrize("keep_recent", [0, 1, 3, 5])
def test_all_but_the_newest_keep_recent_may_be_compacted(available: int, keep_recent: int) -> None:
    count = ResultCompaction(keep_recent=keep_recent).compactable_count(available)
    assert count == max(available - keep_recent, 0)


@pytest.mark.parametrize(("keep_recent", "low_watermark"), [(0, 0.05), (2, 0.3), (5, 0.6)])
def test_every_policy_leaves_the_same_newest_results_whole(
    keep_recent: int, low_watermark: float
) -> None:
    """The `keep_recent` mode, the public pass and the cache-aware step (with nothing cut)
    leave exactly the newest `keep_recent` results whole."""
    history = tool_loop(8, size=2_000)
    newest = result_positions(history)[len(result_positions(history)) - keep_recent :]
    compaction = ResultCompaction(keep_recent=keep_recent)

    mode, _ = compact_all_but_newest(history, compaction)
    public = microcompact(history, keep_recent=keep_recent)
    # 8 results of about 500 tokens: the step compacts all it may and needs no cut.
    replay = CacheAwareReplay(
        max_tokens=4_000, counter=COUNTER, compaction=compaction, low_watermark=low_watermark
    )
    step = replay.plan(history).messages

    assert whole_results(history, mode) == newest
    assert whole_results(history, public) == newest
    assert whole_results(history, step) == newest
    assert len(step) == len(history)


def test_the_governor_setting_reaches_the_policy_unchanged() -> None:
    assert ContextGovernor().result_compaction().keep_recent == DEFAULT_KEEP_RECENT
    governor = ContextGovernor(keep_recent=5, min_chars=10, exclude_tools={"plan"})
    assert governor.result_compaction() == ResultCompaction(
        keep_recent=5, min_chars=10, exclude_tools=frozenset({"plan"})
    )


def test_what_may_be_compacted() -> None:
    compaction = ResultCompaction(min_chars=100, exclude_tools={"plan"})
    large = result("c1", "x" * 100)
    assert compaction.may_compact(large, "read_file")
    assert not compaction.may_compact(result("c1", "x" * 99), "read_file")
    assert not compaction.may_compact(large, "plan")
    exact = ResultCompaction(min_chars=0)
    assert not exact.may_compact(result("c1", compacted_placeholder("grep")), "grep")
    kept = offloaded_result(large, "read_file", {}, Offload())
    assert not ResultCompaction(min_chars=0).may_compact(kept, "read_file")


def test_an_allow_list_still_loses_the_excluded_tools() -> None:
    compaction = ResultCompaction(compactable_tools={"grep", "plan"}, exclude_tools={"plan"})
    assert [compaction.applies_to(name) for name in ("grep", "plan", "bash")] == [
        True,
        False,
        False,
    ]


def test_the_last_resort_clears_even_the_newest_but_spares_the_newest_call() -> None:
    history = tool_loop(4, size=4_000)
    fit = fit_to_budget(
        history,
        max_tokens=800,
        counter=COUNTER,
        compaction=ResultCompaction(keep_recent=DEFAULT_KEEP_RECENT),
    )
    positions = result_positions(history)
    assert results_of_the_newest_call(history) == {positions[-1]}
    assert set(fit.compacted) == set(positions[:-1])
    assert fit.messages[positions[-1]] is not history[positions[-1]]  # cut, not cleared
    assert "were cut here" in str(fit.messages[positions[-1]].content)


def test_the_newest_call_is_only_one_the_request_ends_with() -> None:
    answered = [HumanMessage("go"), ai_calls(call("a"), call("b")), result("a"), result("b")]
    assert results_of_the_newest_call(answered) == {2, 3}
    assert results_of_the_newest_call([*answered, HumanMessage("next")]) == set()
    assert results_of_the_newest_call([result("a")]) == set()


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"keep_recent": -1}, "keep_recent must be >= 0, got -1"),
        ({"min_chars": -5}, "min_chars must be >= 0, got -5"),
        ({"keep_recent": True}, "keep_recent must be an int, got bool"),
        ({"placeholder": "{tool}"}, "placeholder may only use the field"),
        ({"exclude_tools": "plan"}, "exclude_tools must be a collection"),
    ],
)
def test_bad_settings_are_refused_by_name(settings: dict[str, object], message: str) -> None:
    with pytest.raises((ValueError, TypeError), match=message.replace("{", r"\{")):
        ResultCompaction(**settings)  # type: ignore[arg-type]
