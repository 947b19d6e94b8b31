"""Compaction: which tool results may give way to a one-line placeholder, and which stay.

This module is the one reader of the compaction settings (`keep_recent`, `min_chars`,
`compactable_tools`, `exclude_tools`, `placeholder`): they are the fields of
`ResultCompaction`, validated when it is made, and every policy that compacts asks it.

What "the newest results" are, by policy:
- the cache-aware policy (the default) compacts in rare steps and leaves the newest
  `keep_recent` compactable results of a step whole (`ResultCompaction.compactable_count`);
  results that arrive after the step stay whole until the next one;
- `compaction="keep_recent"` leaves the newest `keep_recent` whole on every call
  (`compact_all_but_newest`);
- the last resort, whose request is still over budget, clears even those, and spares only
  the results of the newest call (`results_of_the_newest_call`): the model has not seen
  them yet, and their head and tail tell it more than a placeholder.

Example:
    >>> from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    >>> history = [HumanMessage("look")]
    >>> for n in range(4):
    ...     history.append(
    ...         AIMessage("", tool_calls=[{"name": "bash", "args": {}, "id": f"c{n}"}])
    ...     )
    ...     history.append(ToolMessage("x" * 600, tool_call_id=f"c{n}"))
    >>> compaction = ResultCompaction(keep_recent=1)
    >>> compacted, count = compact_all_but_newest(history, compaction)
    >>> count, compacted[-1] is history[-1]
    (3, True)
    >>> compacted[2].content
    '[Output cleared to save context; the bash call did run. To see it again, re-run it narrowed to the part you need.]'
"""  # noqa: E501

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, cast

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from langchain_context_governance._messages import content_text_length, tool_names_by_call_id
from langchain_context_governance.offload.items import brief_call, calls_by_id, result_item
from langchain_context_governance.offload.kept import (
    READ_CONTEXT,
    Offload,
    marked_offloaded,
    offloaded_handle,
    read_call,
)

# Newest compactable results a cache-aware step leaves whole. The step happens only when
# the high watermark is crossed, and results that arrive after it stay whole until the
# next one, so a small number costs the model little; 3 instead of 10 compacts enough in
# one step that cuts are rarer: hit ratio 94.3% against 93.4% on the real runs, 96.0%
# against 94.0% on the loop's worst seed, and cost 0.58x against 0.61x ClearToolUsesEdit
# (low watermark 0.2). LangChain's `ClearToolUsesEdit` keeps 3 too.
DEFAULT_KEEP_RECENT = 3
# Shorter results cost less than the placeholder's reading and re-running saves.
DEFAULT_MIN_CHARS = 500

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


def _validate_count(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")


@dataclass(frozen=True)
class ResultCompaction:
    """Which tools' results may be compacted, how many of the newest stay whole, and the
    line that replaces the others. Invalid settings raise when it is made.

    Example:
        >>> compaction = ResultCompaction(exclude_tools={"get_ticket"})
        >>> compaction.applies_to("bash"), compaction.applies_to("get_ticket")
        (True, False)
        >>> compaction.compactable_count(5)
        2
        >>> ResultCompaction(keep_recent=-1)
        Traceback (most recent call last):
        ...
        ValueError: keep_recent must be >= 0, got -1
    """

    keep_recent: int = DEFAULT_KEEP_RECENT
    """Newest compactable results that stay whole (see the module doc for each policy)."""

    min_chars: int = DEFAULT_MIN_CHARS
    """Results shorter than this many characters are never compacted."""

    compactable_tools: Collection[str] | None = None
    """`None`: every tool not in `exclude_tools` (the convention of LangChain's
    `ClearToolUsesEdit` and Anthropic's `clear_tool_uses`); a set makes it an allow-list,
    still minus `exclude_tools`."""

    exclude_tools: Collection[str] = frozenset()
    """Tools whose results are never compacted (and whose groups a cut keeps)."""

    placeholder: str = DEFAULT_PLACEHOLDER
    """The line a compacted result becomes; `{tool_name}` is filled in."""

    def __post_init__(self) -> None:
        _validate_count("keep_recent", self.keep_recent)
        _validate_count("min_chars", self.min_chars)
        validate_placeholder(self.placeholder)
        if isinstance(self.exclude_tools, str):
            raise TypeError("exclude_tools must be a collection of tool names, not a str")
        if isinstance(self.compactable_tools, str):
            raise TypeError("compactable_tools must be a collection of tool names or None")

    def is_excluded(self, tool_name: str) -> bool:
        """Whether results of `tool_name` are protected from compaction."""
        return tool_name in self.exclude_tools

    def applies_to(self, tool_name: str) -> bool:
        """Whether results of `tool_name` may be compacted at all."""
        if self.is_excluded(tool_name):
            return False
        return self.compactable_tools is None or tool_name in self.compactable_tools

    def may_compact(self, message: ToolMessage, tool_name: str) -> bool:
        """Whether `message`, a result of `tool_name`, is one compaction may clear: of a
        compactable tool, at least `min_chars` long, not a placeholder already."""
        if not self.applies_to(tool_name):
            return False
        if content_text_length(message.content) < self.min_chars:
            return False
        return message.content != self.placeholder_for(tool_name) and (
            offloaded_handle(message) is None
        )

    def compactable_count(self, available: int) -> int:
        """How many of `available` compactable results, oldest first, may be compacted:
        all but the newest `keep_recent`."""
        return max(available - self.keep_recent, 0)

    def placeholder_for(self, tool_name: str) -> str:
        return self.placeholder.format(tool_name=tool_name or "tool")


def compacted_placeholder(tool_name: str, placeholder: str = DEFAULT_PLACEHOLDER) -> str:
    """The one line that stands in for a compacted result of `tool_name`."""
    return ResultCompaction(placeholder=placeholder).placeholder_for(tool_name)


def result_tool_name(message: ToolMessage, names_by_call_id: dict[str, str]) -> str:
    """The tool a result answers: its own `name`, else the name of the call it answers."""
    return message.name or names_by_call_id.get(message.tool_call_id, "")


def results_of_the_newest_call(messages: Sequence[BaseMessage]) -> set[int]:
    """Indexes of the results that answer the newest assistant message, where the
    request ends with them: what the last resort leaves whole."""
    newest: set[int] = set()
    index = len(messages) - 1
    while index >= 0 and isinstance(messages[index], ToolMessage):
        newest.add(index)
        index -= 1
    if index >= 0 and isinstance(messages[index], AIMessage):
        return newest
    return set()


def compact_tool_result(
    message: ToolMessage,
    tool_name: str,
    compaction: ResultCompaction,
    *,
    offload: Offload | None = None,
    args: Any = None,
) -> ToolMessage:
    """The placeholder copy of a result, or the result itself when it is short or done.

    With `offload`, the result is kept there and the placeholder shows its handle
    (`offloaded_result`); `args` are those of the call it answers.
    """
    if offload is not None:
        done = offloaded_handle(message) is not None
        if done or content_text_length(message.content) < compaction.min_chars:
            return message
        return offloaded_result(message, tool_name, args, offload)
    placeholder = compaction.placeholder_for(tool_name)
    if (
        message.content == placeholder
        or content_text_length(message.content) < compaction.min_chars
    ):
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


def compact_all_but_newest(
    messages: list[BaseMessage],
    compaction: ResultCompaction,
    *,
    offload: Offload | None = None,
) -> tuple[list[BaseMessage], int]:
    """The `compaction="keep_recent"` decision: compact every compactable result but the
    newest `keep_recent`; return the list and how many were compacted.

    Returns the very same list when nothing is compacted. With `offload`, each result
    compacted is kept there (`compact_tool_result`).
    """
    names_by_call_id = tool_names_by_call_id(messages)
    positions = [
        index
        for index, message in enumerate(messages)
        if isinstance(message, ToolMessage)
        and compaction.applies_to(result_tool_name(message, names_by_call_id))
    ]
    older = positions[: compaction.compactable_count(len(positions))]
    calls = calls_by_id(messages) if offload is not None and older else {}
    output: list[BaseMessage] | None = None
    changed = 0
    for index in older:
        message = messages[index]
        assert isinstance(message, ToolMessage)
        compacted = compact_tool_result(
            message,
            result_tool_name(message, names_by_call_id),
            compaction,
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
