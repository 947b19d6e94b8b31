"""Mistral models counted as Mistral's API tokenizes the request (mistral_common, offline)."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool

from langchain_context_governance import ContextGovernor
from langchain_context_governance.tokens.counter import get_token_counter
from langchain_context_governance.tokens.mistral import (
    MistralTokenizerChoice,
    mistral_call_id,
    mistral_tokenizer,
    tokenizer_for_model,
)

pytest.importorskip("mistral_common")
langchain_mistralai = pytest.importorskip("langchain_mistralai")
from langchain_core.utils.function_calling import convert_to_openai_tool  # noqa: E402
from langchain_mistralai.chat_models import (  # noqa: E402
    _convert_message_to_mistral_chat_message,
    _convert_tool_call_id_to_mistral_compatible,
)
from mistral_common.protocol.instruct.request import ChatCompletionRequest  # noqa: E402


@tool
def read_file(path: str, start: int = 0) -> str:
    """Return the text of a file from line `start` on."""
    return path


def call(call_id: str, name: str = "read_file", **args: Any) -> dict[str, Any]:
    return {"name": name, "args": args or {"path": "a.py"}, "id": call_id, "type": "tool_call"}


CONVERSATIONS: list[list[BaseMessage]] = [
    [HumanMessage("hello")],
    [SystemMessage("You are careful."), HumanMessage("What is 2 + 2?")],
    [
        SystemMessage("Answer in French.\nBe brief."),
        HumanMessage("Good morning, how are you?"),
        AIMessage("Bonjour ! Je vais bien, merci."),
        HumanMessage("And the weather? Ünïcödé, emoji 😀, 中文 text."),
    ],
    [
        SystemMessage("You are a coding agent."),
        HumanMessage("Read a.py and b.py"),
        # langchain-mistralai drops the text of a message that calls tools.
        AIMessage("Let me look.", tool_calls=[call("aB3dE5gH1"), call("call_0001", path="b.py")]),
        ToolMessage('{"lines": [1, 2,3], "ok": true}', tool_call_id="aB3dE5gH1"),
        ToolMessage("def f():\n    return 'x'\n", tool_call_id="call_0001", name="read_file"),
        AIMessage("Both files are short."),
        HumanMessage("Now start at line 10"),
        AIMessage("", tool_calls=[call("Zy9xW7vU2", start=10)]),
        ToolMessage("", tool_call_id="Zy9xW7vU2"),
    ],
    [HumanMessage([{"type": "text", "text": "first part"}, {"type": "text", "text": "second"}])],
]


def reference_tokens(
    messages: list[BaseMessage], tokenizer_file: str, tools: list[Any] | None = None
) -> int:
    """What mistral_common's `encode_chat_completion` counts for the request langchain-mistralai
    would send."""
    request = ChatCompletionRequest.model_validate(
        {
            "messages": [_convert_message_to_mistral_chat_message(m) for m in messages],
            "tools": [convert_to_openai_tool(t) for t in tools] if tools else None,
        }
    )
    return len(mistral_tokenizer(tokenizer_file).encode_chat_completion(request).tokens)


@pytest.mark.parametrize("tokenizer_file", ["tekken_240718", "v3", "v7"])
@pytest.mark.parametrize("messages", CONVERSATIONS)
def test_the_count_is_mistral_commons_count_of_the_request(
    messages: list[BaseMessage], tokenizer_file: str
) -> None:
    model = {"tekken_240718": "open-mistral-nemo", "v3": "mistral-large-2407"}.get(
        tokenizer_file, "mistral-large-2411"
    )
    counter = get_token_counter(f"mistral:{model}")
    assert counter.name == f"mistral_common:{tokenizer_file}"
    assert counter.exact
    assert counter.count_messages(messages) == reference_tokens(messages, tokenizer_file)


@pytest.mark.parametrize("tokenizer_file", ["tekken_240718", "v7"])
def test_tool_definitions_count_as_mistral_writes_them(tokenizer_file: str) -> None:
    model = "open-mistral-nemo" if tokenizer_file == "tekken_240718" else "mistral-large-2411"
    counter = get_token_counter(f"mistral:{model}")
    messages = CONVERSATIONS[3]
    with_tools = counter.count_messages(messages) + counter.count_tools([read_file])
    assert with_tools == reference_tokens(messages, tokenizer_file, tools=[read_file])


def test_call_ids_are_sent_as_langchain_mistralai_sends_them() -> None:
    for call_id in ["aB3dE5gH1", "call_0001", "toolu_01A09q90qw90lq917835lq9", "x"]:
        assert mistral_call_id(call_id) == _convert_tool_call_id_to_mistral_compatible(call_id)


@pytest.mark.parametrize(
    ("name", "choice"),
    [
        ("open-mistral-nemo", MistralTokenizerChoice("tekken_240718", exact=True)),
        ("open-mistral-nemo-2407", MistralTokenizerChoice("tekken_240718", exact=True)),
        ("mistralai/Mistral-Nemo-Instruct-2407", MistralTokenizerChoice("tekken_240718", True)),
        ("pixtral-12b-2409", MistralTokenizerChoice("tekken_240911", exact=True)),
        ("mistral-large-2411", MistralTokenizerChoice("v7", exact=True)),
        ("codestral-2405", MistralTokenizerChoice("v3", exact=True)),
        ("mistral-small-2402", MistralTokenizerChoice("v2", exact=True)),
        ("mistral-medium-2312", MistralTokenizerChoice("v1", exact=True)),
        ("mistral-small-latest", MistralTokenizerChoice("tekken_240718", exact=False)),
        ("devstral-medium-2507", MistralTokenizerChoice("tekken_240718", exact=False)),
    ],
)
def test_the_tokenizer_is_chosen_from_the_model_name(
    name: str, choice: MistralTokenizerChoice
) -> None:
    assert tokenizer_for_model(name) == choice


def test_a_name_that_is_no_mistral_model_is_a_setting_error() -> None:
    with pytest.raises(ValueError, match=r"token_counter='mistral:gpt-4o'.*names no Mistral"):
        get_token_counter("mistral:gpt-4o")


def test_an_unbundled_mistral_model_counts_as_an_estimate() -> None:
    counter = get_token_counter("mistral:mistral-small-latest")
    assert not counter.exact
    assert counter.count_messages([HumanMessage("hi")]) > 0


def test_from_model_counts_a_chat_mistral_model_with_its_tokenizer() -> None:
    model = langchain_mistralai.ChatMistralAI(model="open-mistral-nemo", api_key="unused")
    governor = ContextGovernor.from_model(
        model, context_window_tokens=32_000, max_output_tokens=1_000
    )
    assert governor.counter.name == "mistral_common:tekken_240718"
    assert governor.counter.exact
    messages = CONVERSATIONS[2]
    assert governor.count_tokens(messages) == reference_tokens(messages, "tekken_240718")


def test_mistral_weights_served_by_another_client_count_with_mistral_common() -> None:
    langchain_openai = pytest.importorskip("langchain_openai")
    served = langchain_openai.ChatOpenAI(
        model="mistralai/Mistral-Nemo-Instruct-2407", api_key="unused", base_url="http://vllm"
    )
    assert get_token_counter(served).name == "mistral_common:tekken_240718"
