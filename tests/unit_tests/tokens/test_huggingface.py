"""A local Hugging Face tokenizer counts text plus its chat template's overhead, offline.

The tokenizer is built here from a few sentences with the `tokenizers` library (byte-level
BPE, ChatML special tokens): nothing is downloaded.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from langchain_context_governance import ContextGovernor
from langchain_context_governance.rules.templates import render_chat_template
from langchain_context_governance.tokens.counter import get_token_counter

tokenizers = pytest.importorskip("tokenizers")
pytest.importorskip("jinja2")

CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
CORPUS = [
    "You are a careful assistant. Answer briefly and cite the file you read.",
    "Read the file and tell me what the function returns, then run the tests again.",
    "The function returns the sum of the values; all twelve tests pass now.",
    "def total(values):\n    return sum(values)\n",
]
CONVERSATIONS: list[list[BaseMessage]] = [
    [HumanMessage("Read the file")],
    [SystemMessage("You are a careful assistant."), HumanMessage("What does total return?")],
    [
        SystemMessage("Answer briefly."),
        HumanMessage("Read the file and run the tests."),
        AIMessage("The function returns the sum of the values."),
        HumanMessage("Cite the file you read."),
        AIMessage("def total(values):\n    return sum(values)"),
    ],
]


@functools.cache
def chatml_tokenizer() -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=["<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.train_from_iterator(CORPUS, trainer)
    return tokenizer


def rendered_tokens(messages: Sequence[BaseMessage]) -> int:
    prompt = render_chat_template(CHATML, messages)
    return len(chatml_tokenizer().encode(prompt, add_special_tokens=False).ids)


class TransformersLikeTokenizer:
    """A `transformers` tokenizer's counting surface: `encode` and its own template."""

    __module__ = "transformers.tokenization_utils_fast"
    chat_template = CHATML

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return list(chatml_tokenizer().encode(text, add_special_tokens=add_special_tokens).ids)

    def apply_chat_template(
        self, conversation: list[dict[str, Any]], *, tokenize: bool, add_generation_prompt: bool
    ) -> str:
        messages = [
            {"user": HumanMessage, "assistant": AIMessage, "system": SystemMessage}[m["role"]](
                m["content"]
            )
            for m in conversation
            if m["role"] != "tool"
        ]
        return render_chat_template(CHATML, messages)


@pytest.mark.parametrize("messages", CONVERSATIONS)
def test_a_tokenizer_with_the_governors_template_counts_the_rendered_prompt(
    messages: list[BaseMessage],
) -> None:
    governor = ContextGovernor(token_counter=chatml_tokenizer(), chat_template=CHATML)
    assert governor.counter.exact
    assert governor.counter.name == "tokenizer:Tokenizer + chat template"
    assert governor.count_tokens(messages) == rendered_tokens(messages)


@pytest.mark.parametrize("messages", CONVERSATIONS)
def test_a_transformers_tokenizer_counts_with_its_own_template(
    messages: list[BaseMessage],
) -> None:
    counter = get_token_counter(TransformersLikeTokenizer())  # type: ignore[arg-type]
    assert counter.count_messages(messages) == rendered_tokens(messages)


def test_a_model_holding_a_tokenizer_is_counted_with_it() -> None:
    class LocalModel(FakeListChatModel):
        tokenizer: Any = None

    model = LocalModel(responses=["ok"], tokenizer=TransformersLikeTokenizer())
    counter = get_token_counter(model)
    assert counter.exact
    assert counter.count_messages(CONVERSATIONS[2]) == rendered_tokens(CONVERSATIONS[2])


def test_tool_traffic_costs_its_text_json_and_turn_overheads() -> None:
    counter = get_token_counter(TransformersLikeTokenizer())  # type: ignore[arg-type]
    call = {"name": "read", "args": {"path": "a.py"}, "id": "c1", "type": "tool_call"}
    caller = AIMessage("", tool_calls=[call])
    assert counter.count_message(caller) > counter.count_message(AIMessage(""))
    assert counter.count_message(ToolMessage("total", tool_call_id="c1")) > 0


def test_a_tokenizer_without_a_template_counts_text_only_as_an_estimate() -> None:
    counter = get_token_counter(chatml_tokenizer())
    assert not counter.exact
    assert counter.request_overhead == 0
    text = "Read the file and run the tests."
    expected = len(chatml_tokenizer().encode(text, add_special_tokens=False).ids)
    assert counter.count_message(HumanMessage(text)) == expected
