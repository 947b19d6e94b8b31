"""What each provider's API rejects, checked on the JSON body a real client sends.

These checks read the wire format only (OpenAI and Mistral `messages`, Anthropic
`messages` and `system`, Gemini `contents`), and share no code with the package's own
validator, so they can catch what the package gets wrong about a provider or a client.
Each check carries the provider's own error text and a public source that shows it: the
provider's documentation, its open-source validator, or an issue quoting the 400 answer.
A check yields one `WireViolation` per offending message or part.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

Payload = dict[str, Any]


@dataclass(frozen=True)
class WireViolation:
    """One rule a request body breaks: which rule, where in the body, and what is wrong."""

    rule: str
    where: str
    detail: str


WireCheck = Callable[[Payload], Iterator[WireViolation]]


def _messages(payload: Payload) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = payload.get("messages") or []
    return messages


def _call_ids(message: dict[str, Any]) -> list[Any]:
    return [call.get("id") for call in message.get("tool_calls") or []]


# --- OpenAI chat completions (also what langchain-openai sends to vLLM, Ollama, Azure) ----


def openai_tool_message_answers_a_call(payload: Payload) -> Iterator[WireViolation]:
    """A tool message answers a call of the assistant message right before its run of results.

    OpenAI: "Invalid parameter: messages with role 'tool' must be a response to a
    preceeding message with 'tool_calls'." (https://github.com/miurla/morphic/issues/136,
    https://github.com/FoundationAgents/OpenManus/issues/744).
    """
    open_calls: set[Any] | None = None
    for index, message in enumerate(_messages(payload)):
        role = message.get("role")
        if role == "assistant":
            open_calls = set(_call_ids(message))
        elif role == "tool":
            if open_calls is None or message.get("tool_call_id") not in open_calls:
                yield WireViolation(
                    "openai-tool-without-call",
                    f"messages[{index}]",
                    f"tool_call_id {message.get('tool_call_id')!r} answers no preceding call",
                )
        else:
            open_calls = None


def openai_every_call_answered(payload: Payload) -> Iterator[WireViolation]:
    """Every tool call is answered by the tool messages that directly follow its message.

    OpenAI: "An assistant message with 'tool_calls' must be followed by tool messages
    responding to each 'tool_call_id'. The following tool_call_ids did not have response
    messages: ..." (https://github.com/aliasrobotics/cai/issues/111).
    """
    messages = _messages(payload)
    for index, message in enumerate(messages):
        if message.get("role") != "assistant" or not message.get("tool_calls"):
            continue
        answered = set()
        for later in messages[index + 1 :]:
            if later.get("role") != "tool":
                break
            answered.add(later.get("tool_call_id"))
        missing = [call_id for call_id in _call_ids(message) if call_id not in answered]
        if missing:
            yield WireViolation(
                "openai-unanswered-tool-call", f"messages[{index}]", f"no result for {missing}"
            )


OPENAI_MAX_TOOL_CALL_ID_LENGTH = 40


def openai_tool_call_id_is_short_string(payload: Payload) -> Iterator[WireViolation]:
    """A tool call id is a string (the schema requires it) of at most 40 characters.

    OpenAI: "Invalid 'messages[2].tool_calls[0].id': string too long. Expected a string
    with maximum length 40, but got a string with length 41 instead."
    (https://github.com/camel-ai/camel/issues/2215,
    https://github.com/microsoft/autogen/issues/6377); `id` is a required string in
    https://platform.openai.com/docs/api-reference/chat/create.
    """
    for index, message in enumerate(_messages(payload)):
        for position, call_id in enumerate(_call_ids(message)):
            if not isinstance(call_id, str) or len(call_id) > OPENAI_MAX_TOOL_CALL_ID_LENGTH:
                yield WireViolation(
                    "openai-tool-call-id",
                    f"messages[{index}].tool_calls[{position}].id",
                    f"{call_id!r} is not a string of at most 40 characters",
                )


# --- Anthropic Messages -------------------------------------------------------------------


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [block for block in content or [] if isinstance(block, dict)]


def _tool_uses(message: dict[str, Any] | None) -> list[Any]:
    if message is None or message.get("role") != "assistant":
        return []
    return [b.get("id") for b in _blocks(message.get("content")) if b.get("type") == "tool_use"]


def anthropic_first_message_is_user(payload: Payload) -> Iterator[WireViolation]:
    """The first message is a user message.

    Anthropic: 'messages: first message must use the "user" role'
    (https://github.com/lobehub/lobehub/issues/1601,
    https://github.com/mckaywrigley/chatbot-ui/issues/1656).
    """
    messages = _messages(payload)
    if not messages or messages[0].get("role") != "user":
        role = messages[0].get("role") if messages else None
        yield WireViolation("anthropic-first-not-user", "messages[0]", f"role is {role!r}")


def anthropic_roles_alternate(payload: Payload) -> Iterator[WireViolation]:
    """User and assistant messages alternate.

    Anthropic: 'messages: roles must alternate between "user" and "assistant", but found
    multiple "assistant" roles in a row' (https://github.com/lobehub/lobehub/issues/1496,
    https://github.com/etkecc/baibot/issues/13 for "user").
    """
    messages = _messages(payload)
    for index in range(1, len(messages)):
        if messages[index].get("role") == messages[index - 1].get("role"):
            role = messages[index].get("role")
            yield WireViolation("anthropic-roles-alternate", f"messages[{index}]", f"{role!r}")


def anthropic_tool_use_answered_in_next_message(payload: Payload) -> Iterator[WireViolation]:
    """Every tool_use has a tool_result in the next message, and the results come first there.

    Anthropic: "messages.N: `tool_use` ids were found without `tool_result` blocks
    immediately after: toolu_... Each `tool_use` block must have a corresponding
    `tool_result` block in the next message."
    (https://github.com/anthropics/claude-code/issues/1237) and "Did not find 1
    tool_result block(s) at the beginning of this message. Messages following tool_use
    blocks must begin with a matching number of tool_result blocks."
    (https://github.com/apify/tester-mcp-client/issues/12).
    """
    messages = _messages(payload)
    for index, message in enumerate(messages):
        uses = _tool_uses(message)
        if not uses:
            continue
        following = messages[index + 1] if index + 1 < len(messages) else {}
        blocks = _blocks(following.get("content")) if following.get("role") == "user" else []
        answered = {b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"}
        missing = [use for use in uses if use not in answered]
        if missing:
            yield WireViolation(
                "anthropic-tool-use-without-result", f"messages[{index}]", f"{missing}"
            )
            continue
        leading = 0
        for block in blocks:
            if block.get("type") != "tool_result":
                break
            leading += 1
        if leading < len(uses):
            yield WireViolation(
                "anthropic-tool-results-not-first",
                f"messages[{index + 1}]",
                f"{leading} leading tool_result blocks for {len(uses)} tool_use blocks",
            )


def anthropic_tool_result_follows_its_use(payload: Payload) -> Iterator[WireViolation]:
    """Every tool_result answers a tool_use of the message right before it.

    Anthropic: "messages.N.content.0: unexpected `tool_use_id` found in `tool_result`
    blocks: toolu_... Each `tool_result` block must have a corresponding `tool_use` block
    in the previous message." (https://github.com/anthropics/claude-code/issues/13460).
    """
    messages = _messages(payload)
    for index, message in enumerate(messages):
        uses = set(_tool_uses(messages[index - 1] if index else None))
        for block in _blocks(message.get("content")):
            if block.get("type") == "tool_result" and block.get("tool_use_id") not in uses:
                yield WireViolation(
                    "anthropic-tool-result-without-use",
                    f"messages[{index}]",
                    f"tool_use_id {block.get('tool_use_id')!r}",
                )


ANTHROPIC_TOOL_USE_ID = re.compile(r"[a-zA-Z0-9_-]+")


def anthropic_tool_use_ids_unique_and_well_formed(payload: Payload) -> Iterator[WireViolation]:
    """tool_use ids are unique across the request and match ^[a-zA-Z0-9_-]+$.

    Anthropic: "messages.1.content.3: `tool_use` ids must be unique"
    (https://github.com/anthropics/claude-code/issues/20573) and
    "messages.1.content.1.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'"
    (https://github.com/anomalyco/opencode/issues/1279).
    """
    seen: set[Any] = set()
    for index, message in enumerate(_messages(payload)):
        for block in _blocks(message.get("content")):
            if block.get("type") != "tool_use":
                continue
            use_id = block.get("id")
            if use_id in seen:
                yield WireViolation("anthropic-duplicate-tool-use-id", f"messages[{index}]", use_id)
            seen.add(use_id)
            if not isinstance(use_id, str) or not ANTHROPIC_TOOL_USE_ID.fullmatch(use_id):
                yield WireViolation(
                    "anthropic-tool-use-id-format", f"messages[{index}]", f"{use_id!r}"
                )


def anthropic_no_empty_text(payload: Payload) -> Iterator[WireViolation]:
    """No empty text block; no message or system prompt whose text is only whitespace.

    Anthropic, as measured and tabulated in
    https://github.com/experientiallabs/experiential/pull/804: "messages: text content
    blocks must be non-empty" for a text block "" anywhere; "text content blocks must
    contain non-whitespace text" when a message's only text is whitespace; "messages.0:
    user messages must have non-empty content" for a user content "" or []; the same two
    for the system prompt ("system: ..."). An assistant content "" or [] is accepted.
    """
    system = payload.get("system")
    if isinstance(system, str) and system and not system.strip():
        yield WireViolation("anthropic-empty-text", "system", "whitespace-only system prompt")
    if isinstance(system, list):
        for block in system:
            if isinstance(block, dict) and block.get("type") == "text" and not block.get("text"):
                yield WireViolation("anthropic-empty-text", "system", "empty text block")
    for index, message in enumerate(_messages(payload)):
        content = message.get("content")
        where = f"messages[{index}]"
        if message.get("role") == "user" and not content:
            yield WireViolation("anthropic-empty-text", where, "user message without content")
            continue
        if isinstance(content, str):
            if content and not content.strip():
                yield WireViolation("anthropic-empty-text", where, "whitespace-only text")
            continue
        blocks = _blocks(content)
        texts = [block.get("text") or "" for block in blocks if block.get("type") == "text"]
        if any(text == "" for text in texts):
            yield WireViolation("anthropic-empty-text", where, "empty text block")
        elif texts and len(texts) == len(blocks) and not any(text.strip() for text in texts):
            yield WireViolation("anthropic-empty-text", where, "whitespace-only text blocks")


# --- Mistral chat completions (La Plateforme) ---------------------------------------------


def mistral_role_order(payload: Payload) -> Iterator[WireViolation]:
    """No user message right after a tool message; a tool message only after a call or a tool.

    Mistral: {"message":"Unexpected role 'user' after role 'tool'",
    "type":"invalid_request_message_order","code":"3230"}
    (https://github.com/datapizza-labs/datapizza-ai/issues/98,
    https://github.com/avante-corp/avante.nvim/issues/2562,
    https://github.com/BerriAI/litellm/issues/17761) and "Unexpected role 'tool' after role
    'user'" with the same code (https://github.com/charmbracelet/crush/issues/279).
    """
    previous: dict[str, Any] | None = None
    for index, message in enumerate(_messages(payload)):
        role = message.get("role")
        previous_role = previous.get("role") if previous else None
        if role == "user" and previous_role == "tool":
            yield WireViolation("mistral-user-after-tool", f"messages[{index}]", "")
        if role == "tool" and not (
            previous_role == "tool"
            or (previous_role == "assistant" and previous is not None and _call_ids(previous))
        ):
            yield WireViolation(
                "mistral-tool-after-non-call", f"messages[{index}]", f"after {previous_role!r}"
            )
        previous = message


def mistral_last_message(payload: Payload) -> Iterator[WireViolation]:
    """The request ends on a user or tool message, or an assistant message with prefix true.

    Mistral: "Expected last role User or Tool (or Assistant with prefix True) for serving
    but got assistant" (https://github.com/0xPlaygrounds/rig/issues/708).
    """
    messages = _messages(payload)
    if not messages:
        yield WireViolation("mistral-last-role", "messages", "no messages")
        return
    last = messages[-1]
    if last.get("role") in ("user", "tool"):
        return
    if last.get("role") == "assistant" and last.get("prefix") is True:
        return
    yield WireViolation("mistral-last-role", f"messages[{len(messages) - 1}]", last.get("role"))


def mistral_calls_and_results_balance(payload: Payload) -> Iterator[WireViolation]:
    """Each assistant message's calls are answered by as many tool messages before the next.

    Mistral's validator (serving mode): "Not the same number of function calls and
    responses" (`_validate_tool_calls_followed_by_tool_messages` in
    https://github.com/mistralai/mistral-common/blob/main/src/mistral_common/protocol/instruct/validator.py).
    """
    expected = 0
    opened_at = -1
    for index, message in enumerate(_messages(payload)):
        role = message.get("role")
        if role == "tool":
            expected -= 1
        elif role == "assistant":
            if expected:
                yield WireViolation(
                    "mistral-calls-results-count", f"messages[{opened_at}]", f"off by {expected}"
                )
            expected = len(message.get("tool_calls") or [])
            opened_at = index
    if expected:
        yield WireViolation(
            "mistral-calls-results-count", f"messages[{opened_at}]", f"off by {expected}"
        )


MISTRAL_TOOL_CALL_ID = re.compile(r"[a-zA-Z0-9]{9}")


def mistral_tool_call_ids(payload: Payload) -> Iterator[WireViolation]:
    """Tool call ids, in calls and in tool messages, are 9 letters or digits.

    Mistral: "Tool call id was {id} but must be a-z, A-Z, 0-9, with a length of 9."
    (`_validate_tool_call_id` in mistral_common's validator.py, linked above).
    """
    for index, message in enumerate(_messages(payload)):
        ids = _call_ids(message)
        if message.get("role") == "tool":
            ids.append(message.get("tool_call_id"))
        for call_id in ids:
            if not isinstance(call_id, str) or not MISTRAL_TOOL_CALL_ID.fullmatch(call_id):
                yield WireViolation("mistral-tool-call-id", f"messages[{index}]", f"{call_id!r}")


def mistral_assistant_has_content_or_calls(payload: Payload) -> Iterator[WireViolation]:
    """An assistant message carries text or tool calls.

    Mistral: "Assistant message must have either content or tool_calls"
    (`_validate_assistant_message` in mistral_common's validator.py, linked above).
    """
    for index, message in enumerate(_messages(payload)):
        if message.get("role") != "assistant" or message.get("tool_calls"):
            continue
        content = message.get("content")
        if isinstance(content, list):
            content = "".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
        if not content:
            yield WireViolation("mistral-empty-assistant", f"messages[{index}]", "")


# --- Gemini generateContent ---------------------------------------------------------------


def _contents(payload: Payload) -> list[dict[str, Any]]:
    contents: list[dict[str, Any]] = payload.get("contents") or []
    return contents


def _parts(content: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [part for part in content.get("parts") or [] if kind in part]


def gemini_parts_not_empty(payload: Payload) -> Iterator[WireViolation]:
    """Every content has parts, and no part is an empty text.

    Gemini: "GenerateContentRequest.contents[3].parts: contents.parts must not be empty."
    (https://github.com/simonw/llm-gemini/issues/100) and "Unable to submit request because
    it has an empty text parameter. Add a value to the parameter and try again."
    (https://github.com/google-gemini/deprecated-generative-ai-js/issues/361, where an
    empty text part in the history is rejected).
    """
    for index, content in enumerate(_contents(payload)):
        where = f"contents[{index}]"
        if not content.get("parts"):
            yield WireViolation("gemini-empty-parts", where, "no parts")
        for part in content.get("parts") or []:
            if "text" in part and part["text"] == "":
                yield WireViolation("gemini-empty-text-part", where, "empty text part")


def gemini_function_turns(payload: Payload) -> Iterator[WireViolation]:
    """Function calls follow a user turn; their responses follow them directly, one for one.

    Gemini: "Please ensure that function call turn comes immediately after a user turn or
    after a function response turn." (https://github.com/google-gemini/gemini-cli/issues/11814),
    "Please ensure that function response turn comes immediately after a function call
    turn." (https://github.com/langchain-ai/langchain/issues/27799), and "Please ensure
    that the number of function response parts is equal to the number of function call
    parts of the function call turn." (https://github.com/google-gemini/gemini-cli/issues/4217).
    """
    contents = _contents(payload)
    for index, content in enumerate(contents):
        where = f"contents[{index}]"
        previous = contents[index - 1] if index else None
        calls = _parts(content, "functionCall")
        responses = _parts(content, "functionResponse")
        if calls and (previous is None or previous.get("role") != "user"):
            yield WireViolation("gemini-call-not-after-user", where, "")
        if not responses:
            continue
        previous_calls = _parts(previous, "functionCall") if previous else []
        if not previous_calls:
            yield WireViolation("gemini-response-not-after-call", where, "")
        elif len(previous_calls) != len(responses):
            yield WireViolation(
                "gemini-responses-count",
                where,
                f"{len(responses)} responses for {len(previous_calls)} calls",
            )


def gemini_roles(payload: Payload) -> Iterator[WireViolation]:
    """Every content has the role "user" or "model".

    Gemini's `Content.role`: "Must be either 'user' or 'model'."
    (https://ai.google.dev/api/caching#Content).
    """
    for index, content in enumerate(_contents(payload)):
        if content.get("role") not in ("user", "model"):
            yield WireViolation("gemini-role", f"contents[{index}]", f"{content.get('role')!r}")


WIRE_RULES: dict[str, tuple[WireCheck, ...]] = {
    "openai": (
        openai_tool_message_answers_a_call,
        openai_every_call_answered,
        openai_tool_call_id_is_short_string,
    ),
    "anthropic": (
        anthropic_first_message_is_user,
        anthropic_roles_alternate,
        anthropic_tool_use_answered_in_next_message,
        anthropic_tool_result_follows_its_use,
        anthropic_tool_use_ids_unique_and_well_formed,
        anthropic_no_empty_text,
    ),
    "mistral": (
        mistral_role_order,
        mistral_last_message,
        mistral_calls_and_results_balance,
        mistral_tool_call_ids,
        mistral_assistant_has_content_or_calls,
    ),
    "gemini": (gemini_parts_not_empty, gemini_function_turns, gemini_roles),
}
"""The checks for each provider's request body, keyed by the governor profile name."""


def wire_violations(provider: str, payload: Payload) -> list[WireViolation]:
    """Every rule of `provider` that the request body `payload` breaks."""
    return [violation for check in WIRE_RULES[provider] for violation in check(payload)]
