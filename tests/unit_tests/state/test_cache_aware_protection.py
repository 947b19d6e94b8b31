"""What a cut keeps by protection class, and what its note lists (issue 20, wave 2)."""

from __future__ import annotations

import itertools
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from langchain_context_governance import ContextGovernor, get_token_counter
from langchain_context_governance._added import added_kind, user_parts
from langchain_context_governance.policy.compaction import ResultCompaction
from langchain_context_governance.policy.protection import EARLIER_USER
from langchain_context_governance.state.cache_aware import CacheAwareReplay
from langchain_context_governance.tuning import EARLIER_USERS_SHARE
from tests.builders import ai_calls, block_texts, call, result

COUNTER = get_token_counter("approximate")


def note_of(request: list[BaseMessage]) -> str | None:
    """The text of the note at the cut in `request` and of the data turn after it, found
    by their marks."""
    texts = []
    for message in request:
        if isinstance(message, HumanMessage):
            for blocks, kind in user_parts(message):
                if kind == "cut-note":
                    texts.append("".join(block_texts(HumanMessage(blocks))))
        elif added_kind(message) == "cut-data":
            texts.append(message.text)
    return "\n".join(texts) or None


def lookups(count: int, *, size: int = 1_200) -> list[BaseMessage]:
    """A task, then `count` lookups of orders, each result naming its order's code."""
    history: list[BaseMessage] = [SystemMessage("You help with orders."), HumanMessage("audit")]
    for n in range(count):
        history.append(ai_calls(call(f"c{n}", "get_order", order_id=f"W{1000 + n}")))
        text = f'{{"order_id": "W{1000 + n}", "code": "Q{n:03d}X", "log": "{"." * size}"}}'
        history.append(result(f"c{n}", text, name="get_order"))
    return history


def test_the_note_lists_the_values_the_cut_left_out_until_the_next_cut() -> None:
    replay = CacheAwareReplay(
        max_tokens=4_000, counter=COUNTER, compaction=ResultCompaction(min_chars=100_000)
    )
    history = lookups(60)
    notes = []
    for end in range(4, len(history) + 1, 2):
        plan = replay.plan(history[:end])
        note = note_of(plan.messages)
        if note is None:
            continue
        notes.append(note)
        sent = {c["id"] for m in plan.messages if isinstance(m, AIMessage) for c in m.tool_calls}
        called = (end - 2) // 2
        newest_left_out = max(n for n in range(called) if f"c{n}" not in sent)
        # The newest order the request no longer shows is named in its note.
        assert f"W{1000 + newest_left_out}" in note, note
        assert f"Q{newest_left_out:03d}X" in note
        assert COUNTER.count_messages(plan.messages) <= 4_000
    assert notes, "the budget should force cuts"
    changes = sum(1 for old, new in itertools.pairwise(notes) if old != new)
    assert 0 < changes < len(notes) / 3, "the note changes at a cut, not on every call"


def excluded_turns() -> list[BaseMessage]:
    """A receipt of a booking, then a turn whose large result leaves no room for it, then a
    small new turn: the receipt fits again."""
    return [
        SystemMessage("You book trips."),
        HumanMessage("Book flight 7 for me."),
        ai_calls(call("b1", "book_flight", flight="7")),
        result("b1", '{"booking_id": "3426812", "status": "booked"}', name="book_flight"),
        AIMessage("Booked."),
        HumanMessage("Now read the whole travel policy."),
        ai_calls(call("r1", "read_policy")),
        result("r1", "policy text " * 260, name="read_policy"),
        AIMessage("Read it."),
        HumanMessage("What was my booking id again?"),
    ]


def test_an_excluded_result_comes_back_where_it_fits_again() -> None:
    governor = ContextGovernor(
        context_window_tokens=870,
        max_output_tokens=0,
        safety_buffer=0,
        exclude_tools=frozenset({"book_flight"}),
    )
    history = excluded_turns()
    crowded = governor.govern(history[:8], thread_id="trip")
    assert crowded.report.within_budget
    assert "3426812" not in "".join(str(m.content) for m in crowded.messages)
    later = governor.govern(history, thread_id="trip")
    assert '{"booking_id": "3426812", "status": "booked"}' in [
        m.content for m in later.messages if isinstance(m, ToolMessage)
    ]
    assert later.report.within_budget


def test_a_history_of_excluded_results_only_is_not_cut_on_every_call() -> None:
    governor = ContextGovernor(
        context_window_tokens=5_000,
        max_output_tokens=0,
        safety_buffer=0,
        exclude_tools=frozenset({"save_note"}),
    )
    history: list[BaseMessage] = [SystemMessage("You take notes."), HumanMessage("take notes")]
    notes = []
    for n in range(80):
        history = [
            *history,
            ai_calls(call(f"s{n}", "save_note")),
            result(f"s{n}", f"note {n}: " + "z" * 800, name="save_note"),
        ]
        governed = governor.govern(history, thread_id="notes")
        assert governed.report.within_budget
        notes.append(note_of(governed.messages))
    cuts = [note for note in notes if note is not None]
    changes = sum(1 for old, new in itertools.pairwise(cuts) if old != new)
    assert cuts and changes < len(cuts) / 3


def test_earlier_user_messages_take_at_most_their_share_of_the_room() -> None:
    budget = 3_000
    replay = CacheAwareReplay(max_tokens=budget, counter=COUNTER)
    history: list[BaseMessage] = [SystemMessage("You chat."), HumanMessage("start")]
    for n in range(40):
        history += [
            HumanMessage(f"Question {n}: " + "why " * 60),
            ai_calls(call(f"c{n}", "search", q=f"q{n}")),
            result(f"c{n}", "r" * 800, name="search"),
            AIMessage(f"Answer {n}."),
        ]
    plan = replay.plan(history)
    kept_users = [index for index, why in plan.kept if why == EARLIER_USER]
    assert plan.omitted > 0
    room = budget - COUNTER.count_messages(history[:2])
    assert sum(COUNTER.count_message(history[i]) for i in kept_users) <= EARLIER_USERS_SHARE * room


def test_a_small_room_gets_the_brief_note() -> None:
    tools: list[dict[str, Any]] = [
        {
            "type": "function",
            "function": {"name": f"tool_{n}", "description": "looks up a record " * 6},
        }
        for n in range(40)
    ]
    governor = ContextGovernor(
        context_window_tokens=2_400, max_output_tokens=0, safety_buffer=0, tools=tools
    )
    history: list[BaseMessage] = [SystemMessage("Be brief."), HumanMessage("look them up")]
    for n in range(30):
        history += [ai_calls(call(f"c{n}", "tool_1")), result(f"c{n}", f"record R{n}" * 8)]
    note = note_of(governor.govern(history).messages)
    assert note is not None and note.startswith("[Context note: ") and "omitted here." in note
    assert "Work done in them" not in note


def tiny(provider: str, budget: int) -> ContextGovernor:
    """A governor whose whole window is the input budget."""
    return ContextGovernor(
        provider=provider, context_window_tokens=budget, max_output_tokens=0, safety_buffer=0
    )


def test_a_task_over_the_budget_beside_the_current_turn_gives_way() -> None:
    """The protected messages alone over the budget: the watermarks stay at the budget,
    so the task (below the current turn) is cut instead of the request going over."""
    history = [SystemMessage("alpha"), HumanMessage("x"), SystemMessage("alpha")]
    history.append(HumanMessage("u3 alpha"))
    governor = tiny("openai", 20)
    assert governor.count_tokens(history) > 20

    governed = governor.govern(history).messages

    assert governor.count_tokens(governed) <= 20
    assert [m.content for m in governed] == ["alpha", "alpha", "u3 alpha"]


def test_a_response_without_calls_ends_the_turn_before_a_thinking_tool_loop() -> None:
    """Only the loop from its thinking-led opening is kept whole; an earlier answer
    (two responses in a row, a user turn added between them) is cut like any message."""
    thinking = {"type": "thinking", "thinking": "alpha", "signature": "sig-a1"}
    answer = AIMessage([{**thinking, "signature": "sig-a0"}, {"type": "text", "text": "alpha"}])
    loop = AIMessage([thinking], tool_calls=[call("c1", "read_file", q="alpha")])
    governor = tiny("glm", 53)

    governed = governor.govern([answer, loop]).messages

    assert governor.count_tokens(governed) <= 53
    assert [m for m in governed if isinstance(m, AIMessage)] == [loop]
