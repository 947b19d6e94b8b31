"""Independent judges of request legality, for tests that check our validator against them.

`mistral_common` is Mistral's own request validator and runs offline, so it can judge a
request the way Mistral's serving stack would, without a network or a key.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, convert_to_openai_messages
from mistral_common.exceptions import MistralCommonException
from mistral_common.protocol.instruct.request import ChatCompletionRequest
from mistral_common.protocol.instruct.validator import ValidationMode, get_validator
from mistral_common.tokens.tokenizers.base import TokenizerVersion

# v11 is the newest tokenizer that still demands 9-character tool-call ids, and the first
# that pairs tool results with calls by id; from v7 on an assistant message may carry both
# text and tool calls, as LangChain's AIMessages often do.
_MISTRAL_VALIDATOR = get_validator(TokenizerVersion.v11, ValidationMode.serving)


def mistral_common_accepts(
    messages: Sequence[BaseMessage], *, tools: Sequence[dict[str, Any]] | None = None
) -> tuple[bool, str]:
    """Whether Mistral's serving validator accepts `messages`, and its error text if not.

    The messages are sent as langchain-openai would send them: OpenAI dicts, with
    invalid tool calls included as tool calls (`convert_to_openai_messages` drops them).
    """
    openai_messages = _as_openai_request(messages)
    try:
        request = ChatCompletionRequest.from_openai(
            messages=openai_messages, tools=list(tools) if tools else None, model="oracle"
        )
        _MISTRAL_VALIDATOR.validate_request(request)
    except (MistralCommonException, ValueError) as error:
        return False, f"{type(error).__name__}: {error}"
    return True, ""


def _as_openai_request(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    converted = convert_to_openai_messages(list(messages))
    for message, openai_message in zip(messages, converted, strict=True):
        if isinstance(message, AIMessage) and message.invalid_tool_calls:
            openai_message.setdefault("tool_calls", []).extend(
                {
                    "type": "function",
                    "id": invalid.get("id"),
                    "function": {
                        "name": invalid.get("name") or "",
                        "arguments": invalid.get("args") or "",
                    },
                }
                for invalid in message.invalid_tool_calls
            )
    return converted
