"""Turns: known roles, a user first, roles alternating, a request that ends on something to answer.

The turn order is the core promise of every profile (repaired by role alternation);
Mistral also wants an assistant turn between tool results and the next user message.

Example:
    >>> from langchain_core.messages import AIMessage, HumanMessage
    >>> request = [HumanMessage("a"), HumanMessage("b"), AIMessage("c")]
    >>> [v.rule for v in TURN_ORDER.check(request)]
    ['consecutive-user', 'last-not-user-or-tool']
    >>> [m.content for m in TURN_ORDER.repair(request)[0]]
    [[{'type': 'text', 'text': 'a'}, {'type': 'text', 'text': 'b'}]]
"""

from __future__ import annotations

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
)

from langchain_context_governance._added import mark_added, synthetic_user_turn
from langchain_context_governance._messages import is_assistant, is_system, is_tool_result, is_user
from langchain_context_governance.passes.alternation import (
    enforce_role_alternation_with_count,
    merge_contents,
)
from langchain_context_governance.rules.rule import (
    ALTERNATION_PASS_NAME,
    EVERY_PROFILE,
    Rule,
    Violation,
    insert_between,
    map_messages,
    neighbours,
    profiles,
    role_phrase,
)
from langchain_context_governance.rules.systems import move_systems_to_front

__all__ = [
    "MESSAGE_TYPES",
    "NO_USER_AFTER_TOOL_RESULTS",
    "REQUEST_HAS_A_TURN",
    "SYNTHETIC_ASSISTANT_CONTENT",
    "TURN_ORDER",
]

# What the assistant says between tool results and the next user message, for templates
# and APIs that want an assistant turn there (Mistral).
SYNTHETIC_ASSISTANT_CONTENT = "(tool results received)"

_ROLE_CLASSES: dict[str, type[BaseMessage]] = {
    "user": HumanMessage,
    "human": HumanMessage,
    "assistant": AIMessage,
    "ai": AIMessage,
    "system": SystemMessage,
    "developer": SystemMessage,
}


# --- message types --------------------------------------------------------------------------


def _check_message_types(request: list[BaseMessage]) -> list[Violation]:
    return [
        Violation(
            index,
            "unsupported-message-type",
            f"Message {index} is {role_phrase(message)} message; use SystemMessage, "
            "HumanMessage, AIMessage or ToolMessage.",
        )
        for index, message in enumerate(request)
        if not (
            is_system(message)
            or is_user(message)
            or is_assistant(message)
            or is_tool_result(message)
        )
    ]


def convert_other_message_types(messages: list[BaseMessage]) -> tuple[list[BaseMessage], int]:
    """A ChatMessage becomes the message class of its role; any other role, and a
    FunctionMessage, a user message that names the role, so no text is lost."""

    def convert(message: BaseMessage) -> BaseMessage:
        if not isinstance(message, (ChatMessage, FunctionMessage)):
            return message
        role = message.role if isinstance(message, ChatMessage) else f"function {message.name}"
        target = _ROLE_CLASSES.get(role.lower())
        if target is not None:
            return target(content=message.content, id=message.id)
        return HumanMessage(merge_contents(f"({role})", message.content), id=message.id)

    return map_messages(messages, convert)


# --- turn order -----------------------------------------------------------------------------


def _check_turn_order(request: list[BaseMessage]) -> list[Violation]:
    violations: list[Violation] = []
    first = next(((i, m) for i, m in enumerate(request) if not is_system(m)), None)
    if first is not None and not is_user(first[1]):
        index, message = first
        violations.append(
            Violation(
                index,
                "first-not-user",
                f"The first message after the system prompt is {role_phrase(message)} "
                "message; it must be a user message.",
            )
        )
    for index in range(1, len(request)):
        previous, message = request[index - 1], request[index]
        if is_user(previous) and is_user(message):
            violations.append(
                Violation(
                    index,
                    "consecutive-user",
                    f"User message {index} directly follows user message {index - 1}; roles "
                    "must alternate.",
                )
            )
        if is_assistant(previous) and is_assistant(message):
            violations.append(
                Violation(
                    index,
                    "consecutive-assistant",
                    f"Assistant message {index} directly follows assistant message "
                    f"{index - 1}; roles must alternate.",
                )
            )
    if request and not (is_user(request[-1]) or is_tool_result(request[-1])):
        violations.append(
            Violation(
                len(request) - 1,
                "last-not-user-or-tool",
                f"The request ends with {role_phrase(request[-1])} message; it must end with "
                "a user message or tool results (no assistant prefill).",
            )
        )
    return violations


def separate_consecutive_assistants(
    messages: list[BaseMessage],
) -> tuple[list[BaseMessage], int]:
    """Put the synthetic user turn between two assistant messages left side by side.

    Role alternation never merges a response carrying reasoning state into the one
    before it (see rules/reasoning.py); a user turn between them keeps both intact and
    the roles alternating.
    """
    return insert_between(
        messages,
        lambda previous, message: is_assistant(previous) and is_assistant(message),
        synthetic_user_turn,
    )


def repair_turn_order(messages: list[BaseMessage]) -> tuple[list[BaseMessage], int]:
    """No request ends on a system message; then role alternation, and a user turn between
    two responses alternation must keep apart."""
    moved, moved_count = move_systems_to_front(messages, all_late=False)
    alternated, alternated_count = enforce_role_alternation_with_count(moved)
    separated, separated_count = separate_consecutive_assistants(alternated)
    return separated, moved_count + alternated_count + separated_count


# --- an assistant turn after tool results ---------------------------------------------------


def _user_after_tool(previous: BaseMessage, message: BaseMessage) -> bool:
    return is_tool_result(previous) and is_user(message)


def _assistant_turn() -> AIMessage:
    return mark_added(AIMessage(SYNTHETIC_ASSISTANT_CONTENT), "assistant-turn")


def put_assistant_turn_after_tool_results(
    messages: list[BaseMessage],
) -> tuple[list[BaseMessage], int]:
    """Insert a short assistant turn where a user message directly follows tool results."""
    return insert_between(messages, _user_after_tool, _assistant_turn)


def _assistant_turn_between(previous: BaseMessage, message: BaseMessage) -> list[BaseMessage]:
    return [_assistant_turn()] if _user_after_tool(previous, message) else []


# --- something to answer --------------------------------------------------------------------


def _check_has_a_turn(request: list[BaseMessage]) -> list[Violation]:
    if any(not is_system(message) for message in request):
        return []
    if request:
        text = "The request holds only system messages; it needs a user message to answer."
    else:
        text = "The request has no messages."
    return [Violation(-1, "empty-request", text)]


def _repair_has_a_turn(messages: list[BaseMessage]) -> tuple[list[BaseMessage], int]:
    # An empty request has nothing to govern and stays empty.
    if not messages or not all(is_system(message) for message in messages):
        return messages, 0
    return [*messages, synthetic_user_turn()], 1


# --- the rules ------------------------------------------------------------------------------

MESSAGE_TYPES = Rule(
    name="message-types",
    codes=("unsupported-message-type",),
    prevents="A role the provider does not know (a ChatMessage or FunctionMessage).",
    source="OpenAI chat completions: roles system, developer, user, assistant, tool.",
    check=_check_message_types,
    repair=convert_other_message_types,
    profiles=EVERY_PROFILE,
)

TURN_ORDER = Rule(
    name="turn-order",
    codes=(
        "first-not-user",
        "consecutive-user",
        "consecutive-assistant",
        "last-not-user-or-tool",
    ),
    prevents=(
        'Anthropic: "messages: first message must use the "user" role"; Gemini: "Please '
        'ensure that multiturn requests alternate between user and model."; Mistral: '
        '"Expected last role User or Tool (or Assistant with prefix) for serving but got '
        'assistant".'
    ),
    source="The providers' 400 error texts; mistral_common.",
    check=_check_turn_order,
    repair=repair_turn_order,
    profiles=EVERY_PROFILE,
    reported_as=ALTERNATION_PASS_NAME,
)

NO_USER_AFTER_TOOL_RESULTS = Rule(
    name="no-user-after-tool-results",
    codes=("user-after-tool",),
    prevents=(
        "Mistral: invalid_request_message_order \"Unexpected role 'user' after role "
        "'tool'\" (error 3230); Mistral chat templates: \"After the optional system "
        'message, conversation roles must alternate user/assistant/user/assistant/..."'
    ),
    source="Mistral API error 3230; mistral_common up to 1.11.0; Mistral-Nemo template.",
    check=neighbours(
        "user-after-tool",
        _user_after_tool,
        "User message {index} directly follows tool message {previous_index}; this "
        "provider wants an assistant turn between tool results and the next user message.",
    ),
    repair=put_assistant_turn_after_tool_results,
    profiles=profiles("mistral", "mistral_template", "strict"),
    between=_assistant_turn_between,
)

REQUEST_HAS_A_TURN = Rule(
    name="request-has-a-turn",
    codes=("empty-request",),
    prevents=(
        'OpenAI: "[] is too short - \'messages\'"; Anthropic: "messages: at least one '
        'message is required"; a system prompt alone leaves Anthropic and Gemini no turn.'
    ),
    source="The providers' 400 error texts.",
    check=_check_has_a_turn,
    repair=_repair_has_a_turn,
    profiles=EVERY_PROFILE,
    reported_as=ALTERNATION_PASS_NAME,
)
