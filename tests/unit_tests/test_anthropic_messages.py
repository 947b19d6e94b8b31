"""Anthropic Messages request bodies: read into LangChain messages, written back in kind."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from langchain_context_governance import ContextGovernor
from langchain_context_governance.anthropic_messages import (
    anthropic_body,
    looks_like_anthropic,
    messages_from_anthropic,
)
from langchain_context_governance.transcripts import (
    TranscriptError,
    dump_transcript,
    parse_transcript,
)

WEATHER_TOOL = {
    "name": "get_weather",
    "description": "Current weather for a city.",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}


def body() -> dict[str, Any]:
    """A body with every shape the reader handles: system blocks, parallel tool uses, results
    followed by text in one user turn, an error result, a final text answer."""
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "system": [{"type": "text", "text": "You answer weather questions."}],
        "tools": [WEATHER_TOOL],
        "messages": [
            {"role": "user", "content": "Weather in Paris and Oslo?"},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Checking both."},
                    {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "get_weather",
                        "input": {"city": "Paris"},
                    },
                    {
                        "type": "tool_use",
                        "id": "toolu_2",
                        "name": "get_weather",
                        "input": {"city": "Oslo"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "18C"},
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_2",
                        "content": [{"type": "text", "text": "service down"}],
                        "is_error": True,
                    },
                    {"type": "text", "text": "Also, is it windy?"},
                ],
            },
            {"role": "assistant", "content": "Paris is 18C; Oslo is unknown."},
        ],
    }


def test_a_body_reads_as_langchain_messages() -> None:
    messages, rest = messages_from_anthropic(body())
    assert rest == {"model": "claude-sonnet-4-5", "max_tokens": 1024, "tools": [WEATHER_TOOL]}
    assert [type(message) for message in messages] == [
        SystemMessage,
        HumanMessage,
        AIMessage,
        ToolMessage,
        ToolMessage,
        HumanMessage,
        AIMessage,
    ]
    calling = messages[2]
    assert isinstance(calling, AIMessage)
    assert [(c["id"], c["args"]) for c in calling.tool_calls] == [
        ("toolu_1", {"city": "Paris"}),
        ("toolu_2", {"city": "Oslo"}),
    ]
    failed = messages[4]
    assert isinstance(failed, ToolMessage)
    assert (failed.tool_call_id, failed.status) == ("toolu_2", "error")


def test_a_body_is_written_back_as_it_was() -> None:
    assert anthropic_body(*messages_from_anthropic(body())) == body()


def test_a_transcript_file_round_trips_in_kind() -> None:
    text = json.dumps(body())
    transcript = parse_transcript(text)
    assert transcript.format == "anthropic-request"
    written = dump_transcript(
        transcript.messages, format="anthropic-request", request=transcript.request
    )
    assert json.loads(written) == body()


@pytest.mark.parametrize(
    ("document", "anthropic"),
    [
        (body(), True),
        ({"system": "s", "messages": [{"role": "user", "content": "hi"}]}, True),
        ({"tools": [WEATHER_TOOL], "messages": [{"role": "user", "content": "hi"}]}, True),
        ({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}, False),
        (
            {
                "messages": [{"role": "user", "content": "hi"}],
                "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
            },
            False,
        ),
    ],
)
def test_anthropic_bodies_are_recognised(document: dict[str, Any], anthropic: bool) -> None:
    assert looks_like_anthropic(document) is anthropic


def test_governing_a_body_keeps_results_in_the_user_turn_after_their_call() -> None:
    broken = body()
    # The results of toolu_2 went missing: governance backfills one.
    broken["messages"][2]["content"] = [broken["messages"][2]["content"][0]]
    messages, rest = messages_from_anthropic(broken)
    governed = ContextGovernor(provider="anthropic").invoke(messages)
    written = anthropic_body(governed, rest)
    results = written["messages"][2]["content"]
    assert written["messages"][2]["role"] == "user"
    assert [block["tool_use_id"] for block in results] == ["toolu_1", "toolu_2"]


@pytest.mark.parametrize(
    ("message", "problem"),
    [
        ({"role": "system", "content": "x"}, "message 1: role must be 'user' or 'assistant'"),
        ({"role": "user", "content": 3}, "message 1: content must be a string or a list"),
        (
            {"role": "assistant", "content": [{"type": "tool_use", "name": "f", "input": {}}]},
            "message 1: a tool_use block needs a string 'id' and 'name'",
        ),
        (
            {"role": "user", "content": [{"type": "tool_result", "content": "x"}]},
            "message 1: a tool_result block needs a 'tool_use_id'",
        ),
    ],
)
def test_a_bad_message_is_named_by_its_index(message: dict[str, Any], problem: str) -> None:
    document = {"system": "s", "messages": [{"role": "user", "content": "hi"}, message]}
    with pytest.raises(TranscriptError, match=f"^chat.json: {problem}"):
        parse_transcript(json.dumps(document), source="chat.json")


def test_a_system_message_after_the_first_turn_cannot_be_written() -> None:
    with pytest.raises(ValueError, match="message 1: a 'system' message"):
        anthropic_body([HumanMessage("hi"), SystemMessage("late")], {})
