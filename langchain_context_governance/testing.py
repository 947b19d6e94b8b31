"""A scripted chat model for offline tests, demos and notebooks.

`ScriptedChatModel` replays the replies you script and answers each request the way a
strict provider would: a request that breaks the provider's rules, or does not fit the
context window, raises the error the real API would return. A test that forgets to govern
its agent's history therefore fails loudly instead of passing against a lenient fake.
"""

from __future__ import annotations

import math
import threading
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.language_models.model_profile import ModelProfile
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field, PrivateAttr, field_validator

from langchain_context_governance.rules.validate import PROVIDERS, Violation, validate_messages
from langchain_context_governance.tokens.counter import APPROXIMATE_CHARS_PER_TOKEN

__all__ = [
    "ContextLengthExceeded",
    "ProviderRejectedRequest",
    "ScriptExhausted",
    "ScriptedChatModel",
]

# The default of count_tokens_approximately, so text and messages are counted alike.

Script = list[AIMessage] | Callable[[list[BaseMessage]], AIMessage]
"""Replies in order, or a function that makes the reply to each request."""


class ProviderRejectedRequest(ValueError):
    """The request breaks the provider's rules; a real API would answer it with a 400.

    `violations` holds every broken rule; the message quotes each with its message index.
    """

    def __init__(self, violations: Sequence[Violation], *, provider: str) -> None:
        self.violations = tuple(violations)
        self.provider = provider
        lines = [
            f"  {_where(violation.index)} [{violation.rule}] {violation.message}"
            for violation in self.violations
        ]
        super().__init__(
            f"Error code: 400 - invalid_request_error: the {provider!r} rules reject this "
            f"request ({len(lines)} violation{'s' if len(lines) != 1 else ''}):\n"
            + "\n".join(lines)
        )


def _context_overflow_base() -> type[Exception]:
    import langchain_core.exceptions

    found = getattr(langchain_core.exceptions, "ContextOverflowError", None)
    return found if isinstance(found, type) and issubclass(found, Exception) else ValueError


class ContextLengthExceeded(_context_overflow_base(), ValueError):  # type: ignore[misc]
    """The request is larger than the model's context window (OpenAI's context_length_exceeded).

    A `langchain_core.exceptions.ContextOverflowError`, as langchain-openai raises.
    """

    def __init__(self, *, max_input_tokens: int, request_tokens: int) -> None:
        self.max_input_tokens = max_input_tokens
        self.request_tokens = request_tokens
        super().__init__(
            f"Error code: 400 - context_length_exceeded: This model's maximum context length "
            f"is {max_input_tokens} tokens. However, your messages resulted in "
            f"{request_tokens} tokens. Please reduce the length of the messages."
        )


class ScriptExhausted(RuntimeError):
    """The model was called more often than its script has replies."""


def _where(index: int) -> str:
    return "request" if index < 0 else f"messages[{index}]"


class ScriptedChatModel(BaseChatModel):
    """A chat model that replays a script and rejects requests a strict provider would reject.

    Each call records a copy of the request in `requests`, checks it with
    `validate_messages(request, provider=provider)` (unless `check_requests=False`) and
    against `max_input_tokens`, then returns the next scripted reply. Tokens are counted
    with `count_tokens_approximately`, which `get_num_tokens_from_messages` also uses, so a
    governor sized with `ContextGovernor.from_model` counts exactly as the model does.

    A provider whose tokenizer differs from that estimate is scripted with
    `input_token_scale` and `input_tokens_per_message` (`input_tokens` is then its own
    count, checked against the window while `get_num_tokens_from_messages` stays the
    estimate); `report_usage=True` puts that count in each reply's `usage_metadata`, as
    the real clients do.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> model = ScriptedChatModel([AIMessage("Paris.")], max_input_tokens=1000)
        >>> model.invoke([HumanMessage("Capital of France?")]).content
        'Paris.'
        >>> [message.content for message in model.requests[0]]
        ['Capital of France?']
        >>> model.profile["max_input_tokens"]
        1000
    """

    script: Script
    """Replies in order (tool calls, then a final answer), or `(request) -> AIMessage`."""
    provider: str = "openai"
    """The profile of `validate_messages` each request must satisfy."""
    check_requests: bool = True
    """Raise `ProviderRejectedRequest` for a request that breaks the provider's rules."""
    max_input_tokens: int | None = None
    """Context window; a larger request raises `ContextLengthExceeded`. None: no limit."""
    max_output_tokens: int | None = None
    """Reported in `profile` so a governor reserves room for the reply."""
    requests: list[list[BaseMessage]] = Field(default_factory=list)
    """A copy of every request received, rejected ones included, in order."""
    bound_tools: list[dict[str, Any]] = Field(default_factory=list)
    """The tools of the latest `bind_tools` call, in OpenAI format."""
    input_token_scale: float = 1.0
    """The provider's own tokenizer counts this many times the approximate estimate..."""
    input_tokens_per_message: int = 0
    """...plus this many tokens a message."""
    report_usage: bool = False
    """Replies carry `usage_metadata` with the provider's count of their request."""

    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _replies_given: int = PrivateAttr(default=0)

    def __init__(self, script: Script | None = None, /, **kwargs: Any) -> None:
        if script is not None:
            kwargs["script"] = script
        super().__init__(**kwargs)

    @field_validator("provider")
    @classmethod
    def _known_provider(cls, provider: str) -> str:
        if provider not in PROVIDERS:
            known = ", ".join(repr(name) for name in PROVIDERS)
            raise ValueError(f"provider must be one of {known}; got {provider!r}")
        return provider

    @field_validator("input_token_scale")
    @classmethod
    def _positive_scale(cls, scale: float) -> float:
        if scale <= 0:
            raise ValueError(f"input_token_scale must be positive; got {scale}")
        return scale

    @field_validator("max_input_tokens", "max_output_tokens")
    @classmethod
    def _positive_or_none(cls, tokens: int | None) -> int | None:
        if tokens is not None and tokens <= 0:
            raise ValueError(f"token limits must be positive or None; got {tokens}")
        return tokens

    @property
    def _llm_type(self) -> str:
        return "scripted-chat-model"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {
            "provider": self.provider,
            "check_requests": self.check_requests,
            "max_input_tokens": self.max_input_tokens,
        }

    def _resolve_model_profile(self) -> ModelProfile | None:
        profile = ModelProfile(tool_calling=True)
        if self.max_input_tokens is not None:
            profile["max_input_tokens"] = self.max_input_tokens
        if self.max_output_tokens is not None:
            profile["max_output_tokens"] = self.max_output_tokens
        return profile

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Bind `tools` like a real chat model does, and record them in `bound_tools`."""
        formatted = [convert_to_openai_tool(tool) for tool in tools]
        with self._lock:
            self.bound_tools = formatted
        if tool_choice is not None:
            kwargs["tool_choice"] = tool_choice
        return self.bind(tools=formatted, **kwargs)

    def get_num_tokens(self, text: str) -> int:
        """Tokens of `text` by the same 4-characters-a-token estimate the window uses."""
        return math.ceil(len(text) / APPROXIMATE_CHARS_PER_TOKEN)

    def get_num_tokens_from_messages(
        self, messages: list[BaseMessage], tools: Sequence[Any] | None = None
    ) -> int:
        """Tokens of a request, counted exactly as the context-window check counts them."""
        formatted: list[BaseTool | dict[str, Any]] | None = (
            [convert_to_openai_tool(tool) for tool in tools] if tools else None
        )
        return count_tokens_approximately(messages, tools=formatted)

    def input_tokens(
        self, messages: Sequence[BaseMessage], tools: Sequence[Any] | None = None
    ) -> int:
        """The provider's own count of a request: what the window check and usage use."""
        estimate = self.get_num_tokens_from_messages(list(messages), tools)
        scaled = math.ceil(estimate * self.input_token_scale)
        return scaled + self.input_tokens_per_message * len(messages)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        reply = self._answer(messages, tools=kwargs.get("tools"))
        return ChatResult(generations=[ChatGeneration(message=reply)])

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        reply = self._answer(messages, tools=kwargs.get("tools"))
        return ChatResult(generations=[ChatGeneration(message=reply)])

    def _answer(self, messages: list[BaseMessage], *, tools: list[Any] | None) -> AIMessage:
        request = [message.model_copy(deep=True) for message in messages]
        with self._lock:
            self.requests.append(request)
        self._reject_if_illegal(request)
        self._reject_if_too_long(request, tools)
        reply = self._next_reply(request)
        if self.report_usage:
            input_tokens = self.input_tokens(request, tools)
            usage = {
                "input_tokens": input_tokens,
                "output_tokens": 1,
                "total_tokens": input_tokens + 1,
            }
            reply = reply.model_copy(update={"usage_metadata": usage})
        return reply

    def _reject_if_illegal(self, request: list[BaseMessage]) -> None:
        if not self.check_requests:
            return
        violations = validate_messages(request, provider=self.provider)
        if violations:
            raise ProviderRejectedRequest(violations, provider=self.provider)

    def _reject_if_too_long(self, request: list[BaseMessage], tools: list[Any] | None) -> None:
        if self.max_input_tokens is None:
            return
        tokens = self.input_tokens(request, tools)
        if tokens > self.max_input_tokens:
            raise ContextLengthExceeded(
                max_input_tokens=self.max_input_tokens, request_tokens=tokens
            )

    def _next_reply(self, request: list[BaseMessage]) -> AIMessage:
        script = self.script
        if isinstance(script, list):
            reply = self._take_scripted_reply(script)
        else:
            reply = script(list(request))
            if not isinstance(reply, AIMessage):
                raise TypeError(
                    f"script must return an AIMessage; it returned {type(reply).__name__}"
                )
        # Replies need distinct ids: LangGraph's add_messages replaces a message by id.
        update = {} if reply.id else {"id": f"scripted-{uuid.uuid4().hex}"}
        return reply.model_copy(update=update, deep=True)

    def _take_scripted_reply(self, script: list[AIMessage]) -> AIMessage:
        with self._lock:
            position = self._replies_given
            if position >= len(script):
                raise ScriptExhausted(
                    f"ScriptedChatModel has replayed all {len(script)} scripted replies; "
                    f"call {position + 1} has none. Add replies to the script, or check why "
                    "the agent called the model again."
                )
            self._replies_given += 1
        return script[position]
