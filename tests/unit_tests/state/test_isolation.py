"""Isolation and redaction: what governance derives from messages is bound to the exact
content it came from, and to its thread (issue 28, item 2).

The adversarial reproductions of the issue: a redaction in place (same id, same length)
on the same worker and on another given the record; a redaction of another length with
the old record; a record of one conversation passed with another; one shared governor
serving two users without thread ids, with front-end ids and equal-length results.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from langchain_context_governance import ContextGovernor
from langchain_context_governance._added import added_kind
from langchain_context_governance.state.record import HistoryDigest
from langchain_context_governance.testing import ScriptedChatModel
from tests.builders import ai_calls, call, result
from tests.strategies import histories

SSN = "123-45-6789"
REDACTED = "XXX-XX-XXXX"


def request_text(messages: list[BaseMessage]) -> str:
    return "\n".join(message.text for message in messages)


def echo_summarizer() -> ScriptedChatModel:
    """A summary that repeats the transcript it is given (so it holds what it read)."""
    return ScriptedChatModel(lambda request: AIMessage(request[2].text[-3_000:]))


def governor(**settings: Any) -> ContextGovernor:
    return ContextGovernor(context_window_tokens=8_000, max_output_tokens=1_000, **settings)


def customer_history(ssn: str, *, turns: int = 60, prefix: str = "") -> list[BaseMessage]:
    """A support agent's lookups, the customer's SSN in an early result; ids throughout."""
    history: list[BaseMessage] = [
        SystemMessage("You help customers.", id=f"{prefix}s"),
        HumanMessage("check my account", id=f"{prefix}u"),
        ai_calls(call(f"{prefix}c0", "get_customer")),
        result(f"{prefix}c0", f'{{"name": "Ada", "ssn": "{ssn}"}}', "get_customer"),
    ]
    history[2].id, history[3].id = f"{prefix}a0", f"{prefix}r0"
    for n in range(1, turns):
        step = [ai_calls(call(f"{prefix}c{n}", "read_log")), result(f"{prefix}c{n}", "." * 900)]
        step[0].id, step[1].id = f"{prefix}a{n}", f"{prefix}r{n}"
        history += step
    return history


def redacted(history: list[BaseMessage]) -> list[BaseMessage]:
    """The history with the SSN redacted in place: the same message id and length."""
    return [
        m.model_copy(update={"content": m.content.replace(SSN, REDACTED)})
        if isinstance(m.content, str) and SSN in m.content
        else m
        for m in history
    ]


def test_a_redaction_in_place_drops_what_was_derived_from_the_old_text_on_the_same_worker() -> None:
    shared = governor()
    before = shared.govern(customer_history(SSN), thread_id="t")
    assert SSN in request_text(before.messages), "the note should list the SSN it left out"
    after = shared.govern(redacted(customer_history(SSN)), thread_id="t")
    assert SSN not in request_text(after.messages)
    assert REDACTED in request_text(after.messages)


def test_a_redaction_in_place_makes_the_record_unusable_on_another_worker() -> None:
    first = governor(summary_model=echo_summarizer())
    before = first.govern(customer_history(SSN), thread_id="t")
    assert SSN in request_text(before.messages)
    summaries = echo_summarizer()
    other = governor(summary_model=summaries)
    after = other.govern(redacted(customer_history(SSN)), thread_id="t", record=before.record)
    assert SSN not in request_text(after.messages)
    # The old summary (which held the SSN) was not sent: the summary was asked again.
    assert summaries.requests and SSN not in request_text(summaries.requests[0])


def test_a_redaction_of_another_length_never_brings_back_the_old_summary() -> None:
    first = governor(summary_model=echo_summarizer())
    before = first.govern(customer_history(SSN), thread_id="t")
    shorter = [
        m.model_copy(update={"content": m.content.replace(SSN, "[redacted]")})
        if isinstance(m.content, str) and SSN in m.content
        else m
        for m in customer_history(SSN)
    ]
    summaries = echo_summarizer()
    after = governor(summary_model=summaries).govern(shorter, thread_id="t", record=before.record)
    assert SSN not in request_text(after.messages)
    assert summaries.requests, "the summary must be asked again for the new content"


def test_a_record_of_one_conversation_gives_another_nothing() -> None:
    # Same length, identical last message, no ids: only the content tells them apart.
    alice = customer_history(SSN)
    bob = customer_history("987-65-4321")
    for history in (alice, bob):
        for message in history:
            message.id = None
    assert alice[-1] == bob[-1] and len(alice) == len(bob)
    alice_record = governor(summary_model=echo_summarizer()).govern(alice).record
    bobs = governor(summary_model=echo_summarizer()).govern(bob, record=alice_record)
    assert SSN not in request_text(bobs.messages)
    fresh = governor(summary_model=echo_summarizer()).govern(bob)
    assert bobs.messages == fresh.messages


def test_a_record_of_another_thread_is_not_used() -> None:
    first = governor(summary_model=echo_summarizer())
    record = first.govern(customer_history(SSN), thread_id="alice").record
    summaries = echo_summarizer()
    again = governor(summary_model=summaries)
    again.govern(customer_history(SSN), thread_id="bob", record=record)
    assert summaries.requests, "the record of thread alice was taken up for thread bob"


def test_one_governor_without_thread_ids_never_serves_one_user_another_s_values() -> None:
    # A front end numbers messages "0", "1", ... in every conversation, and both users'
    # results have the same lengths: only the content tells the conversations apart.
    def numbered(history: list[BaseMessage]) -> list[BaseMessage]:
        return [m.model_copy(update={"id": str(n)}) for n, m in enumerate(history)]

    def user_history(account: str) -> list[BaseMessage]:
        history: list[BaseMessage] = [SystemMessage("You are a bank agent."), HumanMessage("hi")]
        for n in range(60):
            text = f'{{"account": "ACCT-{account}-{n:04d}", "log": "{"." * 800}"}}'
            history += [
                ai_calls(call(f"c{n}", "get_account")),
                result(f"c{n}", text, "get_account"),
            ]
        return numbered(history)

    shared = governor()
    alice_request = shared.govern(user_history("ALICE")).messages
    assert "ACCT-ALICE" in request_text(alice_request)
    bob_request = shared.govern(user_history("BOBBY")).messages
    assert "ACCT-ALICE" not in request_text(bob_request)
    assert bob_request == governor().govern(user_history("BOBBY")).messages
    [data] = [m for m in bob_request if added_kind(m) == "cut-data"]
    assert "ACCT-BOBBY" in data.text


@settings(max_examples=200)
@given(history=histories(max_size=16), cuts=st.lists(st.integers(0, 16), max_size=4))
def test_the_history_digest_is_the_same_however_the_history_is_taken_in(
    history: list[BaseMessage], cuts: list[int]
) -> None:
    whole = HistoryDigest().add(history).hexdigest()
    grown, start = HistoryDigest(), 0
    for cut in sorted(min(cut, len(history)) for cut in cuts):
        grown.add(history[start:cut])
        start = cut
    assert grown.add(history[start:]).hexdigest() == whole
