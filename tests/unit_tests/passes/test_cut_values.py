"""The values a cut drops, listed in its note: extracted, grouped by name, newest first."""

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from langchain_context_governance._added import cut_note_turn, join_user_parts, user_parts
from langchain_context_governance.passes.cut_note import cut_note
from langchain_context_governance.passes.cut_values import (
    MAX_VALUE_CHARS,
    dropped_values,
    grouped,
    shown_words,
    values_of,
    values_text,
)
from tests.builders import ai_calls, call


def test_a_json_result_gives_its_short_leaves_under_their_keys() -> None:
    text = (
        '{"reservation_id": "4WQ150", "flights": [{"flight_number": "HAT097", '
        '"date": "2024-05-17", "price": 165, "seats": 1}], "paid": true, '
        '"note": "' + "x" * (MAX_VALUE_CHARS + 1) + '"}'
    )
    found = values_of(ToolMessage(text, tool_call_id="c1", name="get_reservation_details"))
    assert found == [
        ("reservation_id", "4WQ150"),
        ("flight_number", "HAT097"),
        ("date", "2024-05-17"),
        ("price", "165"),
    ]


def test_calls_give_their_arguments_and_text_its_identifiers() -> None:
    message = ai_calls(
        call("c1", "cancel_reservation", reservation_id="ZFA04Y", reason="change of plan"),
        content="Your flight JFK to SFO on 2024-05-20 is in src/app.py, as you said.",
    )
    assert values_of(message) == [
        ("reservation_id", "ZFA04Y"),
        ("reason", "change of plan"),
        ("assistant", "JFK"),
        ("assistant", "SFO"),
        ("assistant", "2024-05-20"),
        ("assistant", "src/app.py"),
    ]
    assert values_of(HumanMessage("my order is #W2378156, thanks")) == [("user", "W2378156")]


def test_a_plain_text_result_gives_identifiers_not_prose() -> None:
    result = ToolMessage("Found 3 matches in utils/io.py at line 42", tool_call_id="c", name="grep")
    assert values_of(result) == [("grep", "utils/io.py"), ("grep", "42")]


def test_what_governance_added_to_a_user_message_gives_no_values() -> None:
    joined = join_user_parts(
        [user_parts(HumanMessage("order W1234")), user_parts(cut_note_turn("[note 77]"))]
    )
    assert values_of(joined) == [("user", "W1234")]


def test_newest_first_each_once_within_the_size_and_not_what_is_shown() -> None:
    newest = ToolMessage('{"id": "A100", "city": "Paris"}', tool_call_id="c2", name="lookup")
    older = ToolMessage('{"id": "A099", "city": "Paris", "zip": "75001"}', tool_call_id="c1")
    values = dropped_values([newest, older], max_chars=1_000, shown={"75001"})
    assert values == [("id", "A100"), ("city", "Paris"), ("id", "A099")]
    assert values_text(grouped(values)) == "id: A100, A099; city: Paris"
    assert len(values_text(grouped(dropped_values([newest, older], max_chars=12)))) <= 12


def test_a_value_too_long_for_the_room_left_is_passed_over_for_shorter_ones() -> None:
    message = ToolMessage('{"a": "' + "y" * 40 + '", "b": "B12"}', tool_call_id="c")
    assert dropped_values([message], max_chars=20) == [("b", "B12")]


def test_tool_names_are_skipped() -> None:
    message = AIMessage("Done: get_order_details.")
    assert dropped_values([message], max_chars=100, skip={"get_order_details"}) == []


def test_shown_words_hold_call_arguments() -> None:
    assert "ZFA04Y" in shown_words([ai_calls(call("c1", "cancel", reservation_id="ZFA04Y"))])


def test_the_note_lists_the_values_after_its_text() -> None:
    values = values_text((("order_id", ("W123",)),))
    assert cut_note(4, values=values) == (
        cut_note(4) + "\n[Values from them, newest first: order_id: W123]"
    )
    assert cut_note(4, brief=True) == "[Context note: 4 earlier messages omitted here.]"
    assert cut_note(1, values=values, brief=True).endswith("[Values from it: order_id: W123]")
