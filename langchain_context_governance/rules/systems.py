"""System messages: where each provider or template takes them, and how many.

Example:
    >>> from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
    >>> request = [HumanMessage("hi"), AIMessage("a"), SystemMessage("s"), HumanMessage("b")]
    >>> [v.rule for v in SYSTEM_NOT_FIRST.check(request)]
    ['system-not-first']
    >>> [m.type for m in SYSTEM_NOT_FIRST.repair(request)[0]]
    ['system', 'human', 'ai', 'human']
"""

from __future__ import annotations

import functools

from langchain_core.messages import BaseMessage, HumanMessage

from langchain_context_governance._messages import is_assistant, is_system, is_tool_result, is_user
from langchain_context_governance.passes.alternation import (
    insert_user_before_leading_assistant,
    merge_contents,
)
from langchain_context_governance.rules.rule import Rule, Violation, neighbours, profiles

__all__ = [
    "NO_SYSTEM_ROLE",
    "ONE_LEADING_SYSTEM_MESSAGE",
    "SYSTEM_AFTER_ASSISTANT_OR_TOOL",
    "SYSTEM_NOT_FIRST",
    "SYSTEM_THEN_ASSISTANT",
    "move_systems_to_front",
]


def _late_system_positions(messages: list[BaseMessage], *, all_late: bool) -> list[int]:
    """System messages after the conversation started (all, or only those at the end)."""
    first_turn = next((i for i, m in enumerate(messages) if not is_system(m)), len(messages))
    last_answerable = max(
        (i for i, m in enumerate(messages) if is_user(m) or is_tool_result(m)), default=-1
    )
    start = first_turn if all_late else max(first_turn, last_answerable + 1)
    return [i for i in range(start, len(messages)) if is_system(messages[i])]


def move_systems_to_front(
    messages: list[BaseMessage], *, all_late: bool
) -> tuple[list[BaseMessage], int]:
    """Move late system messages, in order, to the end of the leading system messages."""
    late = _late_system_positions(messages, all_late=all_late)
    if not late:
        return messages, 0
    moved = set(late)
    leading = next((i for i, m in enumerate(messages) if not is_system(m)), len(messages))
    rest = [m for i, m in enumerate(messages[leading:], start=leading) if i not in moved]
    return [*messages[:leading], *(messages[i] for i in late), *rest], len(late)


_move_late_systems_to_front = functools.partial(move_systems_to_front, all_late=True)


def merge_system_messages(messages: list[BaseMessage]) -> tuple[list[BaseMessage], int]:
    """Move every system message to the front and merge them into one."""
    moved, count = move_systems_to_front(messages, all_late=True)
    leading = next((i for i, m in enumerate(moved) if not is_system(m)), len(moved))
    if leading < 2:
        return moved, count
    merged = moved[0]
    for message in moved[1:leading]:
        merged = merged.model_copy(
            update={"content": merge_contents(merged.content, message.content)}
        )
    return [merged, *moved[leading:]], count + leading - 1


def fold_system_messages_into_first_user(
    messages: list[BaseMessage],
) -> tuple[list[BaseMessage], int]:
    """Put the text of every system message at the start of the first user message.

    With no user message, the system text becomes one, where the first system message was.
    """
    systems = [message for message in messages if is_system(message)]
    if not systems:
        return messages, 0
    text: str | list[str | dict[str, object]] = ""
    for system in systems:
        text = merge_contents(text, system.content)
    first_user = next((i for i, m in enumerate(messages) if is_user(m)), None)
    output: list[BaseMessage] = []
    for index, message in enumerate(messages):
        if is_system(message):
            if first_user is None and message is systems[0]:
                output.append(HumanMessage(text))
        elif index == first_user:
            output.append(
                message.model_copy(update={"content": merge_contents(text, message.content)})
            )
        else:
            output.append(message)
    return output, len(systems)


def _repair_system_then_assistant(messages: list[BaseMessage]) -> tuple[list[BaseMessage], int]:
    moved, moved_count = _move_late_systems_to_front(messages)
    opened, opened_count = insert_user_before_leading_assistant(moved)
    return opened, moved_count + opened_count


def _check_system_not_first(request: list[BaseMessage]) -> list[Violation]:
    first_turn = next((i for i, m in enumerate(request) if not is_system(m)), len(request))
    return [
        Violation(
            index,
            "system-not-first",
            f"System message {index} comes after the conversation started; this provider "
            "takes system messages only at the start.",
        )
        for index in range(first_turn, len(request))
        if is_system(request[index])
    ]


def _check_one_leading_system(request: list[BaseMessage]) -> list[Violation]:
    systems = [index for index, message in enumerate(request) if is_system(message)]
    return [
        Violation(
            index,
            "several-system-messages",
            f"System message {index} is not the only system message; this model takes one "
            "system message, first.",
        )
        for index in systems[1:]
    ] + [
        Violation(
            index,
            "several-system-messages",
            f"System message {index} is not the first message; this model takes one system "
            "message, first.",
        )
        for index in systems[:1]
        if index != 0
    ]


def _check_no_system_role(request: list[BaseMessage]) -> list[Violation]:
    return [
        Violation(
            index,
            "system-role",
            f"Message {index} is a system message; this model has no system role.",
        )
        for index, message in enumerate(request)
        if is_system(message)
    ]


SYSTEM_NOT_FIRST = Rule(
    name="system-not-first",
    codes=("system-not-first",),
    prevents=(
        'langchain-anthropic: "System message must be at beginning of message list."; '
        'LangChain Google GenAI: "System message should be the first one".'
    ),
    source="langchain-anthropic _format_messages; langchain-google-genai.",
    check=_check_system_not_first,
    repair=_move_late_systems_to_front,
    profiles=profiles("anthropic", "gemini", "strict"),
)

SYSTEM_AFTER_ASSISTANT_OR_TOOL = Rule(
    name="system-after-assistant-or-tool",
    codes=("system-after-assistant-or-tool",),
    prevents="Mistral: \"Unexpected role 'system' after role 'tool'\" (or 'assistant').",
    source="mistral_common MistralRequestValidator._validate_message_order.",
    check=neighbours(
        "system-after-assistant-or-tool",
        lambda previous, message: (
            (is_assistant(previous) or is_tool_result(previous)) and is_system(message)
        ),
        "System message {index} directly follows {previous_type} message "
        "{previous_index}; this provider takes a system message only after a system or "
        "user message.",
    ),
    repair=_move_late_systems_to_front,
    profiles=profiles("mistral", "strict"),
)

SYSTEM_THEN_ASSISTANT = Rule(
    name="system-then-assistant",
    codes=("system-then-assistant",),
    prevents='Zhipu GLM error 1214: "messages 参数非法。请检查文档。" for a system message '
    "followed directly by an assistant message.",
    source="Zhipu BigModel API error codes.",
    check=neighbours(
        "system-then-assistant",
        lambda previous, message: is_system(previous) and is_assistant(message),
        "Assistant message {index} directly follows system message {previous_index}; "
        "this provider rejects it (GLM error 1214).",
    ),
    repair=_repair_system_then_assistant,
    profiles=profiles("glm", "strict"),
)

ONE_LEADING_SYSTEM_MESSAGE = Rule(
    name="one-leading-system-message",
    codes=("several-system-messages",),
    prevents='Qwen3.5 chat template: "System message must be at the beginning."; Mistral '
    'templates: "Only user and assistant roles are supported, with the exception of an '
    'initial optional system message!"',
    source="Qwen/Qwen3.5 and mistralai/Mistral-Nemo-Instruct-2407 chat templates.",
    check=_check_one_leading_system,
    repair=merge_system_messages,
    profiles=profiles("qwen", "mistral_template", "llama3", "strict"),
)

NO_SYSTEM_ROLE = Rule(
    name="no-system-role",
    within_group=True,
    codes=("system-role",),
    prevents='Gemma 2 chat template: "System role not supported".',
    source="google/gemma-2-2b-it tokenizer_config.json chat_template.",
    check=_check_no_system_role,
    repair=fold_system_messages_into_first_user,
    profiles=profiles("gemma"),
)
