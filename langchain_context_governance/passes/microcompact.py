"""Replace old, large tool results with a one-line placeholder the model can act on."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, cast

from langchain_core.messages import BaseMessage, ToolMessage
from langchain_core.messages.utils import MessageLikeRepresentation

from langchain_context_governance._messages import (
    as_message_list,
    content_text_length,
    tool_names_by_call_id,
)
from langchain_context_governance.offload.items import (
    brief_call,
    calls_by_id,
    result_item,
)
from langchain_context_governance.offload.kept import (
    READ_CONTEXT,
    Offload,
    marked_offloaded,
    offloaded_handle,
    read_call,
)
from langchain_context_governance.passes._dual_use import runnable_when_called_without_messages

# The seed's allow-list of tools whose output the agent can obtain again by calling them
# again. No longer the default (None: every tool but `exclude_tools`): none of the tool
# names of 27 real agent runs (bash, execute_bash, str_replace_editor, open, business
# tools) is in it, so compaction never fired on them. Kept for users who want an allow-list.
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

# Says that the output was cleared on purpose (so the model does not echo the line as a
# result of its own), that the call ran (so it does not take it for a failure and repeat
# it as is), and how to get the content back at a lower cost. Short, because a long
# conversation holds hundreds of them.
DEFAULT_PLACEHOLDER = (
    "[Output cleared to save context; the {tool_name} call did run. To see it again, "
    "re-run it narrowed to the part you need.]"
)

# With offload, the placeholder says what the result held and how to read it back
# (offload/): about as long as DEFAULT_PLACEHOLDER where the call's arguments are short.
OFFLOADED_PLACEHOLDER = (
    "[Output cleared: {call} returned {characters:,} characters; {read} reads it back.]"
)
# A result of read_context is not kept a second time: the same call reads it again.
READ_AGAIN_PLACEHOLDER = (
    "[Output cleared: {call} returned {characters:,} characters; the same call reads it again.]"
)


def validate_placeholder(placeholder: str) -> None:
    """A placeholder template may use `{tool_name}` and nothing else."""
    if not isinstance(placeholder, str):
        raise TypeError(f"placeholder must be a str, got {type(placeholder).__name__}")
    try:
        placeholder.format(tool_name="tool")
    except (KeyError, IndexError, ValueError) as error:
        raise ValueError(
            f"placeholder may only use the field {{tool_name}} (double other braces), "
            f"got {placeholder!r}: {error!r}"
        ) from error


@dataclass(frozen=True)
class ResultCompaction:
    """Which tools' results may be compacted, and the line that replaces them.

    `compactable_tools=None` means every tool not in `exclude_tools` (the convention of
    LangChain's `ClearToolUsesEdit` and Anthropic's `clear_tool_uses`); a set makes it an
    allow-list, still minus `exclude_tools`.
    """

    compactable_tools: Collection[str] | None = None
    exclude_tools: Collection[str] = frozenset()
    placeholder: str = DEFAULT_PLACEHOLDER

    def __post_init__(self) -> None:
        validate_placeholder(self.placeholder)
        if isinstance(self.exclude_tools, str):
            raise TypeError("exclude_tools must be a collection of tool names, not a str")
        if isinstance(self.compactable_tools, str):
            raise TypeError("compactable_tools must be a collection of tool names or None")

    def applies_to(self, tool_name: str) -> bool:
        if tool_name in self.exclude_tools:
            return False
        return self.compactable_tools is None or tool_name in self.compactable_tools

    def placeholder_for(self, tool_name: str) -> str:
        return self.placeholder.format(tool_name=tool_name or "tool")


def compacted_placeholder(tool_name: str, placeholder: str = DEFAULT_PLACEHOLDER) -> str:
    """The one line that stands in for a compacted result of `tool_name`."""
    return placeholder.format(tool_name=tool_name or "tool")


def validate_microcompact_settings(*, keep_recent: int, min_chars: int) -> None:
    if keep_recent < 0:
        raise ValueError(f"keep_recent must be >= 0, got {keep_recent}")
    if min_chars < 0:
        raise ValueError(f"min_chars must be >= 0, got {min_chars}")


def compactable_result_positions(
    messages: list[BaseMessage], compaction: ResultCompaction
) -> list[tuple[int, str]]:
    """(index, tool name) of every result of a compactable tool, oldest first."""
    names_by_call_id = tool_names_by_call_id(messages)
    positions: list[tuple[int, str]] = []
    for index, message in enumerate(messages):
        if isinstance(message, ToolMessage):
            name = message.name or names_by_call_id.get(message.tool_call_id, "")
            if compaction.applies_to(name):
                positions.append((index, name))
    return positions


def compact_tool_result(
    message: ToolMessage,
    tool_name: str,
    *,
    min_chars: int,
    compaction: ResultCompaction,
    offload: Offload | None = None,
    args: Any = None,
) -> ToolMessage:
    """The placeholder copy of a result, or the result itself when it is short or done.

    With `offload`, the result is kept there and the placeholder shows its handle
    (`offloaded_result`); `args` are those of the call it answers.
    """
    if offload is not None:
        done = offloaded_handle(message) is not None
        if done or content_text_length(message.content) < min_chars:
            return message
        return offloaded_result(message, tool_name, args, offload)
    placeholder = compaction.placeholder_for(tool_name)
    if message.content == placeholder or content_text_length(message.content) < min_chars:
        return message
    return message.model_copy(update={"content": placeholder})


def offloaded_result(
    message: ToolMessage, tool_name: str, args: Any, offload: Offload
) -> ToolMessage:
    """The placeholder copy of a result kept in `offload`: the call, the size and the
    handle to read it back with, marked with that handle (`offloaded_handle`). A result
    of `read_context` is not kept again: its placeholder says that the call reads it.

    Example:
        >>> result = ToolMessage("x" * 2_000, tool_call_id="c1")
        >>> copy = offloaded_result(result, "bash", {"command": "ls -la"}, Offload())
        >>> head, read = copy.content.split("; ")
        >>> head
        '[Output cleared: bash(command="ls -la") returned 2,000 characters'
        >>> read
        'read_context(handle="...") reads it back.]'
    """
    characters = content_text_length(message.content)
    if tool_name == READ_CONTEXT:
        handle = args.get("handle") if isinstance(args, dict) else None
        call = brief_call(tool_name, args, limit=None)
        text = READ_AGAIN_PLACEHOLDER.format(call=call, characters=characters)
        return cast(ToolMessage, marked_offloaded(message, text, str(handle or "")))
    handle = offload.keep(result_item(message, tool_name, args))
    text = OFFLOADED_PLACEHOLDER.format(
        call=brief_call(tool_name, args), characters=characters, read=read_call(handle)
    )
    return cast(ToolMessage, marked_offloaded(message, text, handle))


def microcompact_with_count(
    messages: list[BaseMessage],
    *,
    keep_recent: int,
    min_chars: int,
    compaction: ResultCompaction,
    offload: Offload | None = None,
) -> tuple[list[BaseMessage], int]:
    """Compact all but the newest `keep_recent` compactable results; return list and count.

    Returns the very same list when nothing is compacted. With `offload`, each result
    compacted is kept there (`compact_tool_result`).
    """
    positions = compactable_result_positions(messages, compaction)
    older = positions[: max(len(positions) - keep_recent, 0)]
    calls = calls_by_id(messages) if offload is not None and older else {}
    output: list[BaseMessage] | None = None
    changed = 0
    for index, name in older:
        message = messages[index]
        assert isinstance(message, ToolMessage)
        compacted = compact_tool_result(
            message,
            name,
            min_chars=min_chars,
            compaction=compaction,
            offload=offload,
            args=calls.get(message.tool_call_id, ("", None))[1],
        )
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
    compactable_tools: Collection[str] | None = None,
    exclude_tools: Collection[str] = (),
    placeholder: str = DEFAULT_PLACEHOLDER,
) -> list[BaseMessage]:
    """Replace old, large tool results with a one-line placeholder.

    Results of compactable tools (every tool but `exclude_tools`, or only
    `compactable_tools` where that is given) are counted from the newest back; the
    newest `keep_recent` stay whole. Each older one whose text is at least `min_chars`
    characters long gets the content `placeholder` with `{tool_name}` filled in.
    Shorter results and other tools' results stay as they are. The tool name is
    `ToolMessage.name` or, where that is empty, the name of the call it answers.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
        >>> history = [HumanMessage("look")]
        >>> for n in range(3):
        ...     history.append(
        ...         AIMessage("", tool_calls=[{"name": "bash", "args": {}, "id": f"c{n}"}])
        ...     )
        ...     history.append(ToolMessage("x" * 600, tool_call_id=f"c{n}"))
        >>> [m.content[:22] for m in microcompact(history, keep_recent=1)[2::2]]
        ['[Output cleared to sav', '[Output cleared to sav', 'xxxxxxxxxxxxxxxxxxxxxx']
    """
    validate_microcompact_settings(keep_recent=keep_recent, min_chars=min_chars)
    compacted, _ = microcompact_with_count(
        as_message_list(messages),
        keep_recent=keep_recent,
        min_chars=min_chars,
        compaction=ResultCompaction(
            compactable_tools=compactable_tools,
            exclude_tools=exclude_tools,
            placeholder=placeholder,
        ),
    )
    return list(compacted)
