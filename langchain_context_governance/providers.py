"""What each chat-model provider accepts, and a validator that reports every rule a request breaks.

Every rule carries the provider's own wording (its documentation or the text of its 400
error) so a violation can be traced to the error it prevents. Rules that hold for every
provider are checked under every profile: the tool-call pairing rules, and the turn order
this package promises (user first, roles alternate, the request ends on a user message or
tool results). Each profile then adds what only its provider enforces; "strict" adds all.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.messages.utils import MessageLikeRepresentation

from langchain_context_governance._messages import (
    as_message_list,
    has_tool_calls,
    is_assistant,
    is_system,
    is_tool_result,
    is_user,
    iter_declared_tool_calls,
)

__all__ = ["PROVIDERS", "Violation", "validate_messages"]

PROVIDERS: tuple[str, ...] = ("openai", "anthropic", "gemini", "glm", "mistral", "strict")
"""Profile names `validate_messages` accepts; "openai" also covers vLLM, Ollama and Azure."""


@dataclass(frozen=True)
class Violation:
    """One broken rule: where (`index` of the message, -1 for the whole request), which, why."""

    index: int
    rule: str
    message: str


@dataclass(frozen=True)
class _IdFormat:
    pattern: re.Pattern[str]
    requirement: str


# Mistral: "Tool call id was {id} but must be a-z, A-Z, 0-9, with a length of 9."
# (mistral_common MistralRequestValidatorV3, tokenizers v3 to v11).
_MISTRAL_ID = _IdFormat(re.compile(r"[a-zA-Z0-9]{9}"), "exactly 9 characters from a-z, A-Z, 0-9")
# Anthropic: tool_use ids must match ^[a-zA-Z0-9_-]+$ ("String should match pattern").
_ANTHROPIC_ID = _IdFormat(re.compile(r"[a-zA-Z0-9_-]+"), "only a-z, A-Z, 0-9, '_' and '-'")
# Mistral: "Function name was {name} but must be a-z, A-Z, 0-9, or contain underscores and
# dashes, with a maximum length of 64." (MistralRequestValidator._validate_function_call).
_TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
# OpenAI: "Invalid 'messages[2].tool_calls[0].id': string too long. Expected a string with
# maximum length 40, but got a string with length 41 instead."
_OPENAI_MAX_TOOL_CALL_ID_LENGTH = 40


@dataclass(frozen=True)
class _Profile:
    """The rules one provider adds to those every profile checks."""

    system_only_at_start: bool = False
    no_system_then_assistant: bool = False
    no_system_after_assistant_or_tool: bool = False
    non_empty_content: bool = False
    tool_call_ids_unique_in_request: bool = False
    tool_call_id_formats: tuple[_IdFormat, ...] = ()
    max_tool_call_id_length: int | None = None
    tool_name_format: bool = False


def _union(profiles: Sequence[_Profile]) -> _Profile:
    settings: dict[str, Any] = {}
    for setting in fields(_Profile):
        values = [getattr(profile, setting.name) for profile in profiles]
        if setting.name == "tool_call_id_formats":
            settings[setting.name] = tuple(dict.fromkeys(f for value in values for f in value))
        elif setting.name == "max_tool_call_id_length":
            settings[setting.name] = min((v for v in values if v is not None), default=None)
        else:
            settings[setting.name] = any(values)
    return _Profile(**settings)


_PROFILES: dict[str, _Profile] = {
    # OpenAI: "Invalid 'messages[2].tool_calls[0].id': string too long ..." (above).
    "openai": _Profile(max_tool_call_id_length=_OPENAI_MAX_TOOL_CALL_ID_LENGTH),
    # Anthropic takes the system prompt as a request field, so langchain-anthropic raises
    # "System message must be at beginning of message list."; the API answers
    # "messages: text content blocks must be non-empty" (and "... must contain
    # non-whitespace text"), and "`tool_use` ids must be unique" across the request.
    "anthropic": _Profile(
        system_only_at_start=True,
        non_empty_content=True,
        tool_call_ids_unique_in_request=True,
        tool_call_id_formats=(_ANTHROPIC_ID,),
    ),
    # Gemini takes the system prompt as system_instruction, so the LangChain Google
    # integrations raise "System message should be the first one"; Vertex answers an empty
    # part with "Unable to submit request because it has an empty text parameter."
    "gemini": _Profile(system_only_at_start=True, non_empty_content=True),
    # Zhipu GLM answers a system message followed directly by an assistant message with
    # error 1214 "messages 参数非法。请检查文档。" (the messages parameter is illegal).
    "glm": _Profile(no_system_then_assistant=True),
    # mistral_common: "Tool call id was ... with a length of 9.", "Function name was ...",
    # (tokenizers before v7) "Assistant message must have either content or tool_calls",
    # and "Unexpected role 'system' after role 'tool'" (or 'assistant').
    "mistral": _Profile(
        non_empty_content=True,
        no_system_after_assistant_or_tool=True,
        tool_call_id_formats=(_MISTRAL_ID,),
        tool_name_format=True,
    ),
}
_PROFILES["strict"] = _union(list(_PROFILES.values()))


def validate_messages(
    messages: Sequence[MessageLikeRepresentation], *, provider: str = "openai"
) -> list[Violation]:
    """Return every rule of `provider` that the request `messages` breaks, in message order.

    An empty list means the provider accepts the request. Nothing is changed: the
    validator only reads. `provider` is one of `PROVIDERS`.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
        >>> call = {"name": "search", "args": {}, "id": "call_1"}
        >>> asked = [HumanMessage("hi"), AIMessage("", tool_calls=[call])]
        >>> [violation.rule for violation in validate_messages(asked)]
        ['unanswered-tool-call', 'last-not-user-or-tool']
        >>> validate_messages([*asked, ToolMessage("3 results", tool_call_id="call_1")])
        []
    """
    profile = _profile_named(provider)
    request = as_message_list(messages)
    if not any(not is_system(message) for message in request):
        return [_empty_request(request)]
    violations = [
        *_check_message_types(request),
        *_ToolCallLedger(profile).check(request),
        *_check_turn_order(request, profile),
        *_check_content(request, profile),
    ]
    violations.sort(key=lambda violation: violation.index)
    return violations


def _profile_named(provider: str) -> _Profile:
    try:
        return _PROFILES[provider]
    except KeyError:
        known = ", ".join(repr(name) for name in PROVIDERS)
        raise ValueError(f"provider must be one of {known}; got {provider!r}") from None


def _empty_request(request: list[BaseMessage]) -> Violation:
    # OpenAI: "[] is too short - 'messages'"; Anthropic: "messages: at least one message is
    # required". A system prompt alone leaves Anthropic and Gemini with no turns at all.
    if request:
        text = "The request holds only system messages; it needs a user message to answer."
    else:
        text = "The request has no messages."
    return Violation(-1, "empty-request", text)


def _role(message: BaseMessage) -> str:
    if is_assistant(message):
        return "an assistant"
    if is_user(message):
        return "a user"
    if is_tool_result(message):
        return "a tool"
    if is_system(message):
        return "a system"
    return f"a {message.type!r}"


def _check_message_types(request: list[BaseMessage]) -> Iterator[Violation]:
    # The rules below are written for the four roles every provider shares; a ChatMessage
    # or FunctionMessage would be sent with a role some providers reject.
    for index, message in enumerate(request):
        if not (
            is_system(message)
            or is_user(message)
            or is_assistant(message)
            or is_tool_result(message)
        ):
            yield Violation(
                index,
                "unsupported-message-type",
                f"Message {index} is {_role(message)} message; use SystemMessage, "
                "HumanMessage, AIMessage or ToolMessage.",
            )


@dataclass
class _ToolCallLedger:
    """One pass over the request pairing tool calls with their results.

    A tool call is answered only by a ToolMessage in the unbroken run of ToolMessages
    directly after the assistant message that declares it. OpenAI: "An assistant message
    with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'.
    The following tool_call_ids did not have response messages: ..." and "messages with
    role 'tool' must be a response to a preceding message with 'tool_calls'". Anthropic:
    "`tool_use` ids were found without `tool_result` blocks immediately after: ..." and
    "unexpected `tool_use_id` found in `tool_result` blocks: ...". Gemini: "Please ensure
    that function response turn comes immediately after a function call turn." and "...
    the number of function response parts is equal to the number of function call parts".
    Mistral: "Not the same number of function calls and responses", "Unexpected tool call
    id ... in tool results", "Duplicate tool call id ... in tool results".
    """

    profile: _Profile
    violations: list[Violation] = field(default_factory=list)
    declared_at: dict[str, int] = field(default_factory=dict)
    answered: set[str] = field(default_factory=set)
    run_owner: int = -1
    pending: dict[str, str] = field(default_factory=dict)

    def check(self, request: list[BaseMessage]) -> list[Violation]:
        for index, message in enumerate(request):
            if isinstance(message, ToolMessage):
                self._answer(index, message)
            elif isinstance(message, AIMessage):
                self._open_run(index, message)
            else:
                self._close_run()
        self._close_run()
        return self.violations

    def _open_run(self, index: int, message: AIMessage) -> None:
        self._close_run()
        self._check_declared_ids(index, message)
        for call_id, name in iter_declared_tool_calls(message):
            if call_id in self.declared_at and self.profile.tool_call_ids_unique_in_request:
                self._add(
                    index,
                    "reused-tool-call-id",
                    f"Tool call id {call_id!r} was already used by message "
                    f"{self.declared_at[call_id]}; tool call ids must be unique in a request.",
                )
            self.declared_at[call_id] = index
            self.answered.discard(call_id)
            self.pending[call_id] = name
        self.run_owner = index

    def _check_declared_ids(self, index: int, message: AIMessage) -> None:
        # Mistral: "Duplicate tool call id {id} in assistant message"; Anthropic: "`tool_use`
        # ids must be unique"; OpenAI requires messages[i].tool_calls[j].id.
        seen: set[str] = set()
        for position, call in enumerate([*message.tool_calls, *message.invalid_tool_calls]):
            call_id = call.get("id")
            name = call.get("name") or "unnamed"
            if not call_id:
                self._add(
                    index,
                    "tool-call-without-id",
                    f"Tool call {position} ({name}) has no id, so no tool result can answer it.",
                )
            elif call_id in seen:
                self._add(
                    index,
                    "duplicate-tool-call-id",
                    f"Tool call id {call_id!r} appears twice in this assistant message.",
                )
            else:
                seen.add(call_id)

    def _answer(self, index: int, message: ToolMessage) -> None:
        call_id = message.tool_call_id
        if call_id in self.pending:
            del self.pending[call_id]
            self.answered.add(call_id)
        elif call_id not in self.declared_at:
            self._add(
                index,
                "orphan-tool-result",
                f"Tool result for {call_id!r} answers no tool call declared by an earlier "
                "assistant message.",
            )
        elif call_id in self.answered:
            self._add(
                index,
                "duplicate-tool-result",
                f"Tool call {call_id!r} already has a tool result; this is a second one.",
            )
        else:
            self.answered.add(call_id)
            self._add(
                index,
                "tool-result-not-adjacent",
                f"Tool result for {call_id!r} is not in the run of tool messages directly "
                f"after message {self.declared_at[call_id]}, which declares the call.",
            )

    def _close_run(self) -> None:
        for call_id, name in self.pending.items():
            self._add(
                self.run_owner,
                "unanswered-tool-call",
                f"Tool call {call_id!r} ({name or 'unnamed'}) is not answered by a tool "
                "message directly after the assistant message that declares it.",
            )
        self.pending.clear()
        self.run_owner = -1

    def _add(self, index: int, rule: str, text: str) -> None:
        self.violations.append(Violation(index, rule, text))


def _check_turn_order(request: list[BaseMessage], profile: _Profile) -> Iterator[Violation]:
    yield from _check_first_turn(request)
    yield from _check_last_turn(request)
    yield from _check_neighbours(request, profile)


def _check_first_turn(request: list[BaseMessage]) -> Iterator[Violation]:
    # Anthropic: "messages: first message must use the \"user\" role"; Gemini: "Please
    # ensure that multiturn requests alternate between user and model." (user first);
    # GLM: a system prompt followed by an assistant turn is error 1214.
    index, first = next((i, m) for i, m in enumerate(request) if not is_system(m))
    if not is_user(first):
        yield Violation(
            index,
            "first-not-user",
            f"The first message after the system prompt is {_role(first)} message; it must "
            "be a user message.",
        )


def _check_last_turn(request: list[BaseMessage]) -> Iterator[Violation]:
    # Mistral: "Expected last role User or Tool (or Assistant with prefix) for serving but
    # got assistant"; Gemini: "Please ensure multiturn requests end with a user role or a
    # function response."; Anthropic rejects a trailing assistant turn on models without
    # prefill.
    last = request[-1]
    if not (is_user(last) or is_tool_result(last)):
        yield Violation(
            len(request) - 1,
            "last-not-user-or-tool",
            f"The request ends with {_role(last)} message; it must end with a user message "
            "or tool results (no assistant prefill).",
        )


def _check_neighbours(request: list[BaseMessage], profile: _Profile) -> Iterator[Violation]:
    # Gemini: "Please ensure that multiturn requests alternate between user and model.";
    # Anthropic's legacy "roles must alternate between \"user\" and \"assistant\"".
    conversation_started = False
    for index, message in enumerate(request):
        previous = request[index - 1] if index else None
        if previous is not None and is_user(previous) and is_user(message):
            yield Violation(
                index,
                "consecutive-user",
                f"User message {index} directly follows user message {index - 1}; roles "
                "must alternate.",
            )
        if previous is not None and is_assistant(previous) and is_assistant(message):
            yield Violation(
                index,
                "consecutive-assistant",
                f"Assistant message {index} directly follows assistant message {index - 1}; "
                "roles must alternate.",
            )
        if is_system(message) and conversation_started and profile.system_only_at_start:
            yield Violation(
                index,
                "system-not-first",
                f"System message {index} comes after the conversation started; this "
                "provider takes system messages only at the start.",
            )
        if (
            profile.no_system_then_assistant
            and previous is not None
            and is_system(previous)
            and is_assistant(message)
        ):
            yield Violation(
                index,
                "system-then-assistant",
                f"Assistant message {index} directly follows system message {index - 1}; "
                "this provider rejects it (GLM error 1214).",
            )
        if (
            profile.no_system_after_assistant_or_tool
            and previous is not None
            and (is_assistant(previous) or is_tool_result(previous))
            and is_system(message)
        ):
            yield Violation(
                index,
                "system-after-assistant-or-tool",
                f"System message {index} directly follows {previous.type} message "
                f"{index - 1}; this provider takes a system message only after a system or "
                "user message.",
            )
        conversation_started = conversation_started or not is_system(message)


def _check_content(request: list[BaseMessage], profile: _Profile) -> Iterator[Violation]:
    for index, message in enumerate(request):
        if profile.non_empty_content:
            yield from _check_not_empty(index, message)
        if profile.tool_call_id_formats or profile.max_tool_call_id_length:
            yield from _check_tool_call_ids(index, message, profile)
        if profile.tool_name_format:
            yield from _check_tool_names(index, message)


def _check_not_empty(index: int, message: BaseMessage) -> Iterator[Violation]:
    if _is_empty_message(message):
        yield Violation(
            index,
            "empty-content",
            f"Message {index} ({_role(message)} message) has no content; this provider "
            "rejects empty messages.",
        )
        return
    for position in _blank_text_blocks(message.content):
        yield Violation(
            index,
            "empty-content",
            f"Content block {position} of message {index} is an empty text block; text "
            "content blocks must be non-empty.",
        )


def _is_empty_message(message: BaseMessage) -> bool:
    # An empty tool result is accepted (Anthropic tool_result content is optional, a Gemini
    # function response may be empty); the call it answers is what matters.
    if is_tool_result(message) or has_tool_calls(message):
        return False
    return _is_blank(message.content)


def _is_blank(content: str | list[str | dict[str, Any]]) -> bool:
    if isinstance(content, str):
        return not content.strip()
    for block in content:
        if isinstance(block, str):
            if block.strip():
                return False
        elif block.get("type") != "text" or str(block.get("text") or "").strip():
            return False
    return True


def _blank_text_blocks(content: str | list[str | dict[str, Any]]) -> Iterator[int]:
    if isinstance(content, str):
        return
    for position, block in enumerate(content):
        if isinstance(block, dict) and block.get("type") == "text":
            if not str(block.get("text") or "").strip():
                yield position
        elif isinstance(block, str) and not block.strip():
            yield position


def _check_tool_call_ids(
    index: int, message: BaseMessage, profile: _Profile
) -> Iterator[Violation]:
    if isinstance(message, AIMessage):
        call_ids = [call_id for call_id, _ in iter_declared_tool_calls(message)]
    elif isinstance(message, ToolMessage):
        call_ids = [message.tool_call_id]
    else:
        return
    for call_id in call_ids:
        for id_format in profile.tool_call_id_formats:
            if not id_format.pattern.fullmatch(call_id):
                yield Violation(
                    index,
                    "tool-call-id-format",
                    f"Tool call id {call_id!r} must be {id_format.requirement}.",
                )
        limit = profile.max_tool_call_id_length
        if limit is not None and isinstance(message, AIMessage) and len(call_id) > limit:
            yield Violation(
                index,
                "tool-call-id-too-long",
                f"Tool call id {call_id!r} has {len(call_id)} characters; the limit is {limit}.",
            )


def _check_tool_names(index: int, message: BaseMessage) -> Iterator[Violation]:
    if isinstance(message, AIMessage):
        names = [(call_id, name) for call_id, name in iter_declared_tool_calls(message)]
    elif isinstance(message, ToolMessage) and message.name is not None:
        names = [(message.tool_call_id, message.name)]
    else:
        return
    for call_id, name in names:
        if not _TOOL_NAME.fullmatch(name):
            yield Violation(
                index,
                "tool-name-format",
                f"Tool name {name!r} of tool call {call_id!r} must be 1 to 64 characters from "
                "a-z, A-Z, 0-9, '_' and '-'.",
            )
