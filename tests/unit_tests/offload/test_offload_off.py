"""With offload off, every request is the one the governor sent before offload existed.

`REQUESTS_BEFORE_OFFLOAD` are SHA-256 digests of the requests of each scenario below as
the package made them without offload (the trust boundaries' branch at 1aa1c51: the note in
two turns, its data framed and escaped; equal on main before the next change), then with a
note at every cut (issue 29: the last resort's scenario now keeps its note), every request
of every call as `messages_to_dict` JSON; and with the data turn's frame reserved beside the
values' share (the cache-aware scenario's notes list more values). Where a later change of the
requests is meant (a new note, a new placeholder), recompute them with
`python -m tests.unit_tests.offload.test_offload_off`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    messages_to_dict,
)

from benchmarks.histories import HistoryGenerator
from langchain_context_governance import ContextGovernor

REQUESTS_BEFORE_OFFLOAD = {
    "cache_aware": "604fa6814d3b5e2dbda50b4d78a77f0e64f692d31aa0696fd2cc32db5e375bd1",
    "keep_recent": "c0ed5912447713f074178bd105e57d2778ac3b80dde9a9775f02922627ab370a",
    "last_resort": "4e18ac4a1167cbc6bc94b81b37fa55809e6cf39d453ce7cba7bcc36b2ab3f3d7",
}


def _growing(iterations: int, *, seed: int) -> Iterator[list[BaseMessage]]:
    """A benchmark history (tool steps, now and then an answer and a follow-up), as it
    stands before each model call."""
    generator = HistoryGenerator(seed=seed)
    history = generator.opening()
    for _ in range(iterations):
        history = [*history, *generator.iteration()]
        yield history


def _cache_aware(offload: bool, thread: str | None) -> Iterator[list[BaseMessage]]:
    """120 iterations governed call by call in a thread: compaction, cuts with the values
    of what they leave out, the task pinned."""
    governor = ContextGovernor(context_window_tokens=12_000, offload=offload)
    for history in _growing(120, seed=3):
        yield governor.govern(history, thread_id=thread).messages


def _keep_recent(offload: bool, thread: str | None) -> Iterator[list[BaseMessage]]:
    governor = ContextGovernor(
        context_window_tokens=12_000, compaction="keep_recent", keep_recent=4, offload=offload
    )
    for history in _growing(60, seed=5):
        yield governor.govern(history, thread_id=thread).messages


def _last_resort(offload: bool, thread: str | None) -> Iterator[list[BaseMessage]]:
    """An oversized result, then an oversized user message: cut to a head and a tail."""
    governor = ContextGovernor(
        context_window_tokens=4_000, max_output_tokens=500, safety_buffer=100, offload=offload
    )
    history: list[BaseMessage] = [
        SystemMessage("You read logs."),
        HumanMessage("read the log"),
        AIMessage("", tool_calls=[{"name": "read_file", "args": {"path": "a"}, "id": "c1"}]),
        ToolMessage("log line 17 failed\n" * 2_000, tool_call_id="c1"),
    ]
    yield governor.govern(history, thread_id=thread).messages
    history += [AIMessage("It failed."), HumanMessage("here is mine: " + "trace " * 6_000)]
    yield governor.govern(history, thread_id=thread).messages


SCENARIOS: dict[str, Callable[[bool, str | None], Iterator[list[BaseMessage]]]] = {
    "cache_aware": _cache_aware,
    "keep_recent": _keep_recent,
    "last_resort": _last_resort,
}


def requests_digest(requests: Iterator[list[BaseMessage]]) -> str:
    digest = hashlib.sha256()
    for request in requests:
        digest.update(json.dumps(messages_to_dict(request), sort_keys=True).encode())
    return digest.hexdigest()


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_requests_with_offload_off_are_those_before_offload(scenario: str) -> None:
    requests = SCENARIOS[scenario](False, "thread-1")
    assert requests_digest(requests) == REQUESTS_BEFORE_OFFLOAD[scenario]


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_requests_without_a_thread_are_those_before_offload(scenario: str) -> None:
    # Without a thread read_context reads nothing, so no handle is shown.
    requests = SCENARIOS[scenario](True, None)
    assert requests_digest(requests) == REQUESTS_BEFORE_OFFLOAD[scenario]


if __name__ == "__main__":
    digests = {name: requests_digest(make(False, "thread-1")) for name, make in SCENARIOS.items()}
    print(json.dumps(digests, indent=4))
