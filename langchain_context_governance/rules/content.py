"""Content: no empty text block and no message without content, where the provider rejects them.

Blank text blocks go; a system or assistant message with nothing left goes; a blank user
message becomes the synthetic user turn (the turn order around it depends on it). Only
text is removed: image, file, tool-use and reasoning blocks stay as they are.

Example:
    >>> from langchain_core.messages import AIMessage, HumanMessage
    >>> request = [HumanMessage("hi"), AIMessage(" "), HumanMessage("?")]
    >>> [v.rule for v in NON_EMPTY_CONTENT.check(request)]
    ['empty-content']
    >>> [m.content for m in NON_EMPTY_CONTENT.repair(request)[0]]
    ['hi', '?']
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from langchain_core.messages import BaseMessage

from langchain_context_governance._added import SYNTHETIC_USER_CONTENT, mark_added
from langchain_context_governance._messages import has_tool_calls, is_tool_result, is_user
from langchain_context_governance.rules.rule import Rule, Violation, profiles, role_phrase

__all__ = ["NON_EMPTY_CONTENT", "drop_blank_content", "is_blank_message"]

Content = str | list[str | dict[str, Any]]


def _is_blank_block(block: str | dict[str, Any]) -> bool:
    if isinstance(block, str):
        return not block.strip()
    return block.get("type") == "text" and not str(block.get("text") or "").strip()


def _is_blank(content: Content) -> bool:
    if isinstance(content, str):
        return not content.strip()
    return all(_is_blank_block(block) for block in content)


def _blank_text_blocks(content: Content) -> Iterator[int]:
    if isinstance(content, str):
        return
    for position, block in enumerate(content):
        if _is_blank_block(block):
            yield position


def _without_blank_text(content: Content) -> Content:
    if isinstance(content, str):
        return content if content.strip() else ""
    return [block for block in content if not _is_blank_block(block)]


def is_blank_message(message: BaseMessage) -> bool:
    """No text and no other block, so providers that reject empty messages reject it."""
    if is_tool_result(message) or has_tool_calls(message):
        return False
    return not message.content


def _check_non_empty_content(request: list[BaseMessage]) -> list[Violation]:
    # An empty tool result is accepted (Anthropic tool_result content is optional, a Gemini
    # function response may be empty); the call it answers is what matters.
    violations: list[Violation] = []
    for index, message in enumerate(request):
        if not (is_tool_result(message) or has_tool_calls(message)) and _is_blank(message.content):
            violations.append(
                Violation(
                    index,
                    "empty-content",
                    f"Message {index} ({role_phrase(message)} message) has no content; this "
                    "provider rejects empty messages.",
                )
            )
            continue
        violations.extend(
            Violation(
                index,
                "empty-content",
                f"Content block {position} of message {index} is an empty text block; text "
                "content blocks must be non-empty.",
            )
            for position in _blank_text_blocks(message.content)
        )
    return violations


def _remove_blank_text(message: BaseMessage) -> BaseMessage | None:
    """The message without blank text; None where nothing is left to send.

    A blank user message becomes the synthetic user turn rather than vanish, since the
    turn order around it depends on it.
    """
    content = _without_blank_text(message.content)
    if content != message.content:
        message = message.model_copy(update={"content": content})
    if not is_blank_message(message):
        return message
    if is_user(message):
        return mark_added(
            message.model_copy(update={"content": SYNTHETIC_USER_CONTENT}), "user-turn"
        )
    return None


def drop_blank_content(messages: list[BaseMessage]) -> tuple[list[BaseMessage], int]:
    """Remove blank text blocks; drop blank system and assistant messages."""
    output: list[BaseMessage] = []
    changed = 0
    for message in messages:
        kept = _remove_blank_text(message)
        changed += kept is not message
        if kept is not None:
            output.append(kept)
    if changed == 0:
        return messages, 0
    return output, changed


NON_EMPTY_CONTENT = Rule(
    name="non-empty-content",
    within_group=True,
    codes=("empty-content",),
    prevents=(
        'Anthropic: "messages: text content blocks must be non-empty"; Vertex/Gemini: '
        '"Unable to submit request because it has an empty text parameter."; '
        'mistral_common (tokenizers before v7): "Assistant message must have either '
        'content or tool_calls".'
    ),
    source="The providers' 400 error texts; mistral_common.",
    check=_check_non_empty_content,
    repair=drop_blank_content,
    profiles=profiles("anthropic", "gemini", "mistral", "strict"),
)
