"""Replace old, large tool results with a one-line placeholder the model can act on.

A thin wrapper over the compaction policy (`policy/compaction.py`), which holds the
decision and its settings.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from langchain_core.messages import BaseMessage
from langchain_core.messages.utils import MessageLikeRepresentation

from langchain_context_governance._messages import as_message_list
from langchain_context_governance.passes._dual_use import runnable_when_called_without_messages
from langchain_context_governance.policy.compaction import (
    DEFAULT_KEEP_RECENT,
    DEFAULT_MIN_CHARS,
    DEFAULT_PLACEHOLDER,
    ResultCompaction,
    compact_all_but_newest,
)


@runnable_when_called_without_messages
def microcompact(
    messages: Sequence[MessageLikeRepresentation],
    *,
    keep_recent: int = DEFAULT_KEEP_RECENT,
    min_chars: int = DEFAULT_MIN_CHARS,
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
    compaction = ResultCompaction(
        keep_recent=keep_recent,
        min_chars=min_chars,
        compactable_tools=compactable_tools,
        exclude_tools=exclude_tools,
        placeholder=placeholder,
    )
    compacted, _ = compact_all_but_newest(as_message_list(messages), compaction)
    return list(compacted)
