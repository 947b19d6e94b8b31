"""Token counters the peers are given, written the way users plug them into LangChain.

`make_tiktoken_list_counter` follows the `tiktoken_counter` of LangChain's "How to trim
messages" guide (OpenAI's accounting: 3 tokens a message plus role, content and name, 3 to
prime the reply), adds tool-call arguments and ids so it counts what the governor counts,
and uses `encode_ordinary`, the fastest encode call, so the peer is not slowed by our choice.
It is a `Callable[[list[BaseMessage]], int]` with no memory: trim_messages calls it on many
prefixes of the history, so it re-counts the same messages.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from functools import cache
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately

__all__ = [
    "MessageCounter",
    "approximate_tokens",
    "make_tiktoken_list_counter",
    "offline_encoding",
]

# OpenAI's chat accounting, as in the guide and in langchain-openai.
TOKENS_PER_MESSAGE = 3
TOKENS_PER_REPLY = 3
TOKENS_PER_NAME = 1
OPENAI_ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}

MessageCounter = Callable[[Sequence[BaseMessage]], int]


@cache
def offline_encoding() -> Any:
    """cl100k_base from the file bundled with the package, so nothing is downloaded."""
    from langchain_context_governance.tokens.encodings import get_encoding

    return get_encoding("cl100k_base")


def make_tiktoken_list_counter() -> MessageCounter:
    """A fresh list counter over the offline cl100k encoding, with no memory between calls."""
    encoding = offline_encoding()

    def tokens(text: str) -> int:
        return len(encoding.encode_ordinary(text))

    def count(messages: Sequence[BaseMessage]) -> int:
        total = TOKENS_PER_REPLY
        for message in messages:
            total += TOKENS_PER_MESSAGE + tokens(_openai_role(message)) + tokens(message.text)
            if message.name:
                total += TOKENS_PER_NAME + tokens(message.name)
            total += sum(tokens(text) for text in _tool_texts(message))
        return total

    return count


def approximate_tokens(messages: Sequence[BaseMessage]) -> int:
    """LangChain's own approximation (4 characters a token, 3 tokens of framing a message)."""
    return count_tokens_approximately(messages)


def _openai_role(message: BaseMessage) -> str:
    return OPENAI_ROLES.get(message.type, message.type)


def _tool_texts(message: BaseMessage) -> list[str]:
    if isinstance(message, AIMessage):
        return [text for c in message.tool_calls for text in (c["name"], json.dumps(c["args"]))]
    if isinstance(message, ToolMessage):
        return [message.tool_call_id]
    return []
