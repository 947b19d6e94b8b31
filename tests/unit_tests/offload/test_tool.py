"""read_context: pages, pattern search, the thread from the config, the store of the run."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.store.memory import InMemoryStore

from langchain_context_governance.offload.items import OffloadItem, message_item
from langchain_context_governance.offload.store import (
    BoundedMemoryStore,
    OffloadStore,
    StoredContent,
)
from langchain_context_governance.offload.tool import (
    DEFAULT_PAGE_CHARACTERS,
    MATCH_LINE_CHARACTERS,
    page_characters_for,
    read_context_answer,
    read_context_tool,
)

LINES = [f"line {number}: value {number * 7}" for number in range(1, 401)]
TEXT = "\n".join(LINES)


def config(thread: str | None = "t") -> Any:
    return {"configurable": {} if thread is None else {"thread_id": thread}}


@pytest.fixture
def kept() -> tuple[BoundedMemoryStore, OffloadItem]:
    store = BoundedMemoryStore()
    item = message_item(HumanMessage(TEXT))
    OffloadStore(store).keep("t", [item])
    return store, item


def read_all(tool: Any, handle: str, **arguments: Any) -> tuple[str, int]:
    """The text read page by page from the offsets the pages give, and the pages read."""
    text, offset, pages = "", 0, 0
    while True:
        page = tool.invoke({"handle": handle, "offset": offset, **arguments}, config=config())
        pages += 1
        body, _, trailer = page.rpartition("\n[read_context: characters ")
        text += body
        if "; the end]" in trailer:
            return text, pages
        offset = int(trailer.rsplit("offset=", 1)[1].rstrip(")]"))


def test_a_text_that_fits_a_page_is_returned_as_it_is(kept: Any) -> None:
    store, item = kept
    tool = read_context_tool(store=store)
    assert tool.invoke({"handle": item.handle}, config=config()) == TEXT


def test_a_long_text_reads_back_whole_in_pages(kept: Any) -> None:
    store, item = kept
    tool = read_context_tool(store=store, page_characters=1_000)
    text, pages = read_all(tool, item.handle)
    assert text == TEXT and pages == -(-len(TEXT) // 1_000)
    smaller, more_pages = read_all(tool, item.handle, limit=400)
    assert smaller == TEXT and more_pages > pages
    capped = tool.invoke({"handle": item.handle, "limit": 50_000}, config=config())
    assert capped.startswith(TEXT[:1_000] + "\n[read_context: characters 0 to 1,000 of")


def test_pattern_search_gives_the_matching_lines_with_their_numbers(kept: Any) -> None:
    store, item = kept
    tool = read_context_tool(store=store)
    found = tool.invoke({"handle": item.handle, "pattern": r"value 7\d\b"}, config=config())
    assert found.splitlines() == [
        "10: line 10: value 70",
        "11: line 11: value 77",
        "[read_context: 2 matching lines; no more]",
    ]
    # Not a regular expression: searched as it is.
    prices = StoredContent("found", "cost (EUR)\ntotal (EUR: 12")
    literal = read_context_answer(prices, "h", pattern="(EUR:")
    assert literal.splitlines()[0] == "2: total (EUR: 12"
    missing = tool.invoke({"handle": item.handle, "pattern": "absent"}, config=config())
    assert missing == f"read_context: no line under handle \"{item.handle}\" matches 'absent'."


def test_pattern_search_continues_from_the_offset_it_gives(kept: Any) -> None:
    store, item = kept
    tool = read_context_tool(store=store, page_characters=200)
    lines: list[str] = []
    arguments: dict[str, Any] = {"handle": item.handle, "pattern": "0: value"}
    while True:
        page = tool.invoke(arguments, config=config()).splitlines()
        lines += page[:-1]
        if page[-1].endswith("no more]"):
            break
        arguments["offset"] = int(page[-1].rsplit("offset=", 1)[1].rstrip(")]"))
    assert lines == [f"{n}: {LINES[n - 1]}" for n in range(10, 401, 10)]


def test_a_long_matching_line_is_shown_around_its_match() -> None:
    line = "a" * 1_000 + "NEEDLE" + "b" * 1_000
    answer = read_context_answer(StoredContent("found", line), "h", pattern="NEEDLE")
    shown = answer.splitlines()[0]
    assert "NEEDLE" in shown and len(shown) <= MATCH_LINE_CHARACTERS + 10


def test_what_cannot_be_read_says_why(kept: Any) -> None:
    store, item = kept
    tool = read_context_tool(store=store)
    assert "no conversation thread" in tool.invoke({"handle": item.handle}, config=config(None))
    other = tool.invoke({"handle": item.handle}, config=config("other"))
    assert (
        other == f'read_context: nothing is kept under handle "{item.handle}" in this conversation.'
    )
    assert "no longer kept" in read_context_answer(StoredContent("gone"), "h")
    past = tool.invoke({"handle": item.handle, "offset": len(TEXT) + 1}, config=config())
    assert (
        past
        == f"read_context: offset {len(TEXT) + 1:,} is past the end ({len(TEXT):,} characters)."
    )


async def test_async_invocation_reads_the_same(kept: Any) -> None:
    store, item = kept
    tool = read_context_tool(store=store)
    assert await tool.ainvoke({"handle": item.handle}, config=config()) == TEXT


def test_in_a_graph_the_tool_reads_the_graphs_store() -> None:
    graph_store = InMemoryStore()
    item = message_item(HumanMessage("kept in the graph's store"))
    OffloadStore(graph_store).keep("g", [item])
    tool = read_context_tool()
    asking = AIMessage(
        "", tool_calls=[{"name": "read_context", "args": {"handle": item.handle}, "id": "r1"}]
    )
    builder = StateGraph(MessagesState)
    builder.add_node("tools", ToolNode([tool]))
    builder.add_edge(START, "tools")
    graph = builder.compile(store=graph_store)
    final = graph.invoke({"messages": [HumanMessage("read"), asking]}, config("g"))
    answer = final["messages"][-1]
    assert isinstance(answer, ToolMessage) and answer.content == "kept in the graph's store"


def test_a_page_is_a_share_of_the_budget() -> None:
    assert page_characters_for(None) == DEFAULT_PAGE_CHARACTERS
    assert page_characters_for(100_000) == 40_000
    assert page_characters_for(100) == 1_000
    with pytest.raises(ValueError, match="page_characters"):
        read_context_tool(page_characters=0)
