"""Every public function over messages leaves its input list and messages untouched."""

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

import langchain_context_governance as package
from tests.builders import ai_calls, call, result, tool_loop


def messy_history():
    return [
        SystemMessage("rules"),
        result("ghost", "orphan"),
        AIMessage("leading assistant"),
        HumanMessage("a"),
        HumanMessage([{"type": "text", "text": "b"}]),
        ai_calls(call("x", "read_file"), call("y", "grep")),
        result("x", "x" * 3_000),
        HumanMessage("interrupted"),
        result("y", "late"),
        *tool_loop(12, size=1_500)[1:],
        AIMessage("trailing"),
    ]


PASSES = {
    "drop_orphan_tool_results": {},
    "backfill_missing_tool_results": {},
    "microcompact": {"keep_recent": 1},
    "snip_history": {"max_tokens": 800},
    "compact_in_batches": {"max_tokens": 800},
    "enforce_role_alternation": {},
    "apply_provider_rules": {"provider": "strict"},
    "truncate_oversized_messages": {"max_tokens": 800},
}


def test_every_public_pass_is_listed_here():
    public = {name for name in package.__all__ if callable(getattr(package, name))}
    passes = public - {
        "ContextBudgetExceeded",
        "ContextGovernor",
        "GovernanceReport",
        "GovernanceResult",
        "MessageTokenCounter",
        "CacheStats",
        "Violation",
        "TokenCounterFallbackWarning",
        "cut_note",
        "get_token_counter",
        "validate_messages",
        "BoundedMemoryStore",
        "OffloadStore",
        "read_context_tool",
    }
    assert passes == set(PASSES)


@pytest.mark.parametrize(("name", "settings"), PASSES.items())
def test_pass_is_pure(name, settings, mutation_guard):
    history = mutation_guard.watch(messy_history())
    output = getattr(package, name)(history, **settings)
    assert output is not history
    assert isinstance(output, list)


@pytest.mark.parametrize("provider", package.PROVIDERS)
def test_governor_and_validator_are_pure(provider, mutation_guard):
    history = mutation_guard.watch(messy_history())
    governor = package.ContextGovernor(context_window_tokens=6_000, provider=provider)
    governed = governor.invoke(history)
    assert package.validate_messages(governed, provider=provider) == []
    package.validate_messages(history, provider=provider)
    package.get_token_counter("tiktoken").count_messages(history)


def test_governor_with_offload_is_pure(mutation_guard):
    history = mutation_guard.watch(messy_history())
    governor = package.ContextGovernor(
        context_window_tokens=3_000, max_output_tokens=500, safety_buffer=100, offload=True
    )
    governed = governor.govern(history, thread_id="pure")
    assert governed.report.compacted or governed.report.cut or governed.report.truncated
