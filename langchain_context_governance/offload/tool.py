"""The `read_context` tool: the agent reads back what governance took out of its request.

The placeholder of a cleared result, the marker of a cut text and the note at a cut show
`read_context(handle="...")`; the tool returns what the handle holds as a tool result:
the text itself where it fits one page, else a page and the offset to continue from, or
the lines that match a pattern, with their line numbers. A handle of a cut reads the
messages it left out as a transcript. The tool finds its conversation in the run's config
(`configurable.thread_id`, as LangGraph gives it to tools) and its store as the governor
does (store.py); without a thread it reads nothing.

Example:
    >>> from langchain_core.messages import HumanMessage
    >>> from langchain_context_governance.offload.items import message_item
    >>> from langchain_context_governance.offload.store import BoundedMemoryStore, OffloadStore
    >>> store = BoundedMemoryStore()
    >>> item = message_item(HumanMessage("line one\\nthe code is 4417\\nline three"))
    >>> _ = OffloadStore(store).keep("t1", [item])
    >>> tool = read_context_tool(store=store)
    >>> config = {"configurable": {"thread_id": "t1"}}
    >>> tool.invoke({"handle": item.handle, "pattern": "code"}, config=config).splitlines()[0]
    '2: the code is 4417'
    >>> tool.invoke({"handle": item.handle}, config={"configurable": {"thread_id": "t2"}})[:40]
    'read_context: nothing is kept under hand'
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.store.base import BaseStore
from pydantic import BaseModel, Field

from langchain_context_governance.offload.kept import READ_CONTEXT
from langchain_context_governance.offload.store import (
    OffloadStore,
    StoredContent,
    embedded_store,
    store_in_run,
)
from langchain_context_governance.tokens.counter import APPROXIMATE_CHARS_PER_TOKEN
from langchain_context_governance.tuning import (
    PAGE_SHARE,
)

__all__ = [
    "DEFAULT_PAGE_CHARACTERS",
    "PAGE_SHARE",
    "ReadContextArguments",
    "page_characters_for",
    "read_context_answer",
    "read_context_tool",
]

# Without a budget (a governor that only repairs), a page of about 4,000 tokens.
DEFAULT_PAGE_CHARACTERS = 16_000
MIN_PAGE_CHARACTERS = 1_000
# A matching line longer than this is shown around its match.
MATCH_LINE_CHARACTERS = 300
_BEFORE_MATCH = 100

DESCRIPTION = (
    "Read back content that was taken out of this conversation's context to fit the "
    "context window: a cleared tool result, the cut part of a long message, or earlier "
    "messages left out. Call it with the handle shown where the content was, as "
    'read_context(handle="..."). Returns the text, one page at a time (pass the offset '
    "given at the end of a page to continue, and limit for fewer characters), or, with "
    "pattern (a regular expression), the matching lines with their line numbers."
)


class ReadContextArguments(BaseModel):
    """The arguments of `read_context`."""

    handle: str = Field(description="The handle shown where the content was.")
    offset: int = Field(default=0, ge=0, description="Character offset to read from.")
    limit: int | None = Field(
        default=None, gt=0, description="Characters to read at most (at most a page)."
    )
    pattern: str | None = Field(
        default=None, description="A regular expression: return only the lines matching it."
    )


def page_characters_for(budget: int | None) -> int:
    """The characters of a page for a governor with the input `budget` (tokens).

    Example:
        >>> page_characters_for(122_000), page_characters_for(None)
        (48800, 16000)
    """
    if budget is None:
        return DEFAULT_PAGE_CHARACTERS
    return max(int(budget * PAGE_SHARE) * APPROXIMATE_CHARS_PER_TOKEN, MIN_PAGE_CHARACTERS)


def read_context_tool(
    *,
    store: BaseStore | None = None,
    page_characters: int | Callable[[], int] = DEFAULT_PAGE_CHARACTERS,
) -> BaseTool:
    """The `read_context` tool, reading the graph's store, else `store`, else the
    process's embedded store; a page holds at most `page_characters` characters (or as
    many as it returns at each read, for a budget known only once a model is called).

    `ContextGovernor.read_context_tool()` gives it with the governor's store and a page
    sized to its budget.
    """
    if isinstance(page_characters, int) and page_characters < 1:
        raise ValueError(f"page_characters must be >= 1, got {page_characters}")

    def page() -> int:
        size = page_characters if isinstance(page_characters, int) else page_characters()
        return max(size, 1)

    def reading(config: RunnableConfig) -> tuple[OffloadStore, str | None]:
        found = store_in_run(config) or store or embedded_store()
        thread = (config.get("configurable") or {}).get("thread_id")
        return OffloadStore(found), None if thread is None else str(thread)

    def read_context(
        handle: str,
        config: RunnableConfig,
        offset: int = 0,
        limit: int | None = None,
        pattern: str | None = None,
    ) -> str:
        kept, thread = reading(config)
        if thread is None:
            return _NO_THREAD
        content = kept.read(thread, handle)
        return read_context_answer(content, handle, offset, limit, pattern, page())

    async def aread_context(
        handle: str,
        config: RunnableConfig,
        offset: int = 0,
        limit: int | None = None,
        pattern: str | None = None,
    ) -> str:
        kept, thread = reading(config)
        if thread is None:
            return _NO_THREAD
        content = await kept.aread(thread, handle)
        return read_context_answer(content, handle, offset, limit, pattern, page())

    return StructuredTool.from_function(
        func=read_context,
        coroutine=aread_context,
        name=READ_CONTEXT,
        description=DESCRIPTION,
        args_schema=ReadContextArguments,
    )


_NO_THREAD = (
    "read_context: this run has no conversation thread (configurable.thread_id), so "
    "nothing can be read."
)


def read_context_answer(
    content: StoredContent,
    handle: str,
    offset: int = 0,
    limit: int | None = None,
    pattern: str | None = None,
    page_characters: int = DEFAULT_PAGE_CHARACTERS,
) -> str:
    """What `read_context` answers for `content` read under `handle`.

    Example:
        >>> found = StoredContent("found", "abcdefghij", "user message")
        >>> print(read_context_answer(found, "h", page_characters=4))
        abcd
        [read_context: characters 0 to 4 of 10; the rest: read_context(handle="h", offset=4)]
        >>> read_context_answer(found, "h", offset=8, page_characters=4)
        'ij\\n[read_context: characters 8 to 10 of 10; the end]'
    """
    if content.status == "unknown":
        return f'read_context: nothing is kept under handle "{handle}" in this conversation.'
    if content.status == "gone":
        return (
            f'read_context: what handle "{handle}" held is no longer kept: this '
            "conversation's store passed its size limit and removed its oldest content."
        )
    text = content.text
    size = page_characters if limit is None else min(limit, page_characters)
    if offset > len(text):
        return f"read_context: offset {offset:,} is past the end ({len(text):,} characters)."
    if pattern is not None:
        return _matching_lines(text, handle, pattern, offset, size)
    end = min(offset + size, len(text))
    if offset == 0 and end == len(text):
        return text
    if end < len(text):
        rest = f'the rest: read_context(handle="{handle}", offset={end})'
    else:
        rest = "the end"
    shown = f"characters {offset:,} to {end:,} of {len(text):,}"
    return f"{text[offset:end]}\n[read_context: {shown}; {rest}]"


def _compiled(pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error:
        # Not a regular expression: searched as the text it is.
        return re.compile(re.escape(pattern))


def _matching_lines(text: str, handle: str, pattern: str, offset: int, size: int) -> str:
    """The lines of `text` from `offset` on that match `pattern`, numbered, within `size`."""
    regex = _compiled(pattern)
    shown: list[str] = []
    used = 0
    position = offset
    line_number = text.count("\n", 0, offset) + 1
    counted_to = offset
    resume: int | None = None
    while position <= len(text):
        match = regex.search(text, position)
        if match is None:
            break
        start = text.rfind("\n", 0, match.start()) + 1
        stop = text.find("\n", match.end())
        stop = len(text) if stop < 0 else stop
        line_number += text.count("\n", counted_to, start)
        counted_to = start
        entry = f"{line_number}: {_clipped(text[start:stop], match.start() - start)}"
        if shown and used + len(entry) > size:
            resume = start
            break
        shown.append(entry)
        used += len(entry) + 1
        position = stop + 1
    if not shown:
        return f'read_context: no line under handle "{handle}" matches {pattern!r}.'
    if resume is None:
        shown.append(f"[read_context: {len(shown):,} matching lines; no more]")
    else:
        call = f'read_context(handle="{handle}", pattern={json.dumps(pattern)}, offset={resume})'
        shown.append(f"[read_context: more may match from character {resume:,}: {call}]")
    return "\n".join(shown)


def _clipped(line: str, at: int) -> str:
    if len(line) <= MATCH_LINE_CHARACTERS:
        return line
    start = max(at - _BEFORE_MATCH, 0)
    stop = start + MATCH_LINE_CHARACTERS
    return ("…" if start else "") + line[start:stop] + ("…" if stop < len(line) else "")
