"""Replace old, large results of re-obtainable tools with a one-line placeholder."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from langchain_core.messages import BaseMessage, ToolMessage
from langchain_core.messages.utils import MessageLikeRepresentation

from langchain_context_governance._messages import (
    as_message_list,
    content_text_length,
    tool_names_by_call_id,
)
from langchain_context_governance.passes._dual_use import runnable_when_called_without_messages

# Tools whose output the agent can obtain again by calling them again.
DEFAULT_COMPACTABLE_TOOLS: frozenset[str] = frozenset(
    {
        "read_file",
        "exec",
        "grep",
        "find_files",
        "web_search",
        "web_fetch",
        "list_dir",
        "list_exec_sessions",
    }
)


def compacted_placeholder(tool_name: str) -> str:
    """The one line that stands in for a compacted tool result."""
    return f"[{tool_name} result omitted from context]"


def validate_microcompact_settings(*, keep_recent: int, min_chars: int) -> None:
    if keep_recent < 0:
        raise ValueError(f"keep_recent must be >= 0, got {keep_recent}")
    if min_chars < 0:
        raise ValueError(f"min_chars must be >= 0, got {min_chars}")


def compactable_result_positions(
    messages: list[BaseMessage], compactable_tools: Collection[str]
) -> list[tuple[int, str]]:
    """(index, tool name) of every result of a compactable tool, oldest first."""
    names_by_call_id = tool_names_by_call_id(messages)
    positions: list[tuple[int, str]] = []
    for index, message in enumerate(messages):
        if isinstance(message, ToolMessage):
            name = message.name or names_by_call_id.get(message.tool_call_id, "")
            if name in compactable_tools:
                positions.append((index, name))
    return positions


def compact_tool_result(message: ToolMessage, tool_name: str, *, min_chars: int) -> ToolMessage:
    """The placeholder copy of a result, or the result itself when it is short or done."""
    placeholder = compacted_placeholder(tool_name)
    if message.content == placeholder or content_text_length(message.content) < min_chars:
        return message
    return message.model_copy(update={"content": placeholder})


def microcompact_with_count(
    messages: list[BaseMessage],
    *,
    keep_recent: int,
    min_chars: int,
    compactable_tools: Collection[str],
) -> tuple[list[BaseMessage], int]:
    """Compact all but the newest `keep_recent` compactable results; return list and count.

    Returns the very same list when nothing is compacted.
    """
    positions = compactable_result_positions(messages, compactable_tools)
    older = positions[: max(len(positions) - keep_recent, 0)]
    output: list[BaseMessage] | None = None
    changed = 0
    for index, name in older:
        message = messages[index]
        assert isinstance(message, ToolMessage)
        compacted = compact_tool_result(message, name, min_chars=min_chars)
        if compacted is not message:
            if output is None:
                output = list(messages)
            output[index] = compacted
            changed += 1
    if output is None:
        return messages, 0
    return output, changed


@runnable_when_called_without_messages
def microcompact(
    messages: Sequence[MessageLikeRepresentation],
    *,
    keep_recent: int = 10,
    min_chars: int = 500,
    compactable_tools: Collection[str] = DEFAULT_COMPACTABLE_TOOLS,
) -> list[BaseMessage]:
    """Replace old, large results of re-obtainable tools with a one-line placeholder.

    Results of `compactable_tools` are counted from the newest back; the newest
    `keep_recent` stay whole. Each older one whose text is at least `min_chars`
    characters long gets the content `[<tool name> result omitted from context]`.
    Shorter results and other tools' results stay as they are. The tool name is
    `ToolMessage.name` or, where that is empty, the name of the call it answers.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
        >>> history = [HumanMessage("look")]
        >>> for n in range(3):
        ...     history.append(
        ...         AIMessage("", tool_calls=[{"name": "read_file", "args": {}, "id": f"c{n}"}])
        ...     )
        ...     history.append(ToolMessage("x" * 600, tool_call_id=f"c{n}"))
        >>> [m.content[:12] for m in microcompact(history, keep_recent=1)[2::2]]
        ['[read_file r', '[read_file r', 'xxxxxxxxxxxx']
    """
    validate_microcompact_settings(keep_recent=keep_recent, min_chars=min_chars)
    compacted, _ = microcompact_with_count(
        as_message_list(messages),
        keep_recent=keep_recent,
        min_chars=min_chars,
        compactable_tools=compactable_tools,
    )
    return list(compacted)
