"""The thread's store of offloaded items: written once, bounded, one namespace a thread."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.store.base import BaseStore, Op, PutOp, Result, SearchOp
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore

from langchain_context_governance.offload import store as store_module
from langchain_context_governance.offload.items import OffloadItem, cut_item, message_item
from langchain_context_governance.offload.store import (
    NAMESPACE,
    BoundedMemoryStore,
    OffloadStore,
    embedded_store,
    namespace_of,
    store_in_run,
)


class CountingStore(BaseStore):
    """A store that counts the offloaded items written to it (the index apart)."""

    def __init__(self, inner: BaseStore) -> None:
        self.inner = inner
        self.written: list[str] = []

    def _count(self, ops: Iterable[Op]) -> list[Op]:
        ops = list(ops)
        self.written += [
            op.key
            for op in ops
            if isinstance(op, PutOp)
            and op.namespace[0] == NAMESPACE
            and op.value
            and op.key != "index"
        ]
        return ops

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return self.inner.batch(self._count(ops))

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await self.inner.abatch(self._count(ops))


def items(count: int, size: int = 100) -> list[OffloadItem]:
    return [message_item(HumanMessage(f"{number:04d}" + "x" * size)) for number in range(count)]


@pytest.fixture(params=["memory", "bounded", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BaseStore]:
    if request.param == "memory":
        yield InMemoryStore()
    elif request.param == "bounded":
        yield BoundedMemoryStore()
    else:
        connection = sqlite3.connect(
            tmp_path / "store.sqlite", check_same_thread=False, isolation_level=None
        )
        sqlite = SqliteStore(connection)
        sqlite.setup()
        yield sqlite
        connection.close()


def test_an_item_is_written_once_and_read_back(store: BaseStore) -> None:
    counting = CountingStore(store)
    kept = OffloadStore(counting)
    [first, second] = items(2)
    assert kept.keep("t.1", [first]) == 1
    assert kept.keep("t.1", [first, second, first]) == 1
    assert counting.written == [first.handle, second.handle]
    read = kept.read("t.1", second.handle)
    assert (read.status, read.text, read.about) == ("found", second.value["text"], "user message")


def test_a_handle_of_one_thread_reads_nothing_in_another(store: BaseStore) -> None:
    kept = OffloadStore(store)
    [item] = items(1)
    kept.keep("thread.a", [item])
    assert kept.read("thread%2Ea", item.handle).status == "unknown"
    assert kept.read("thread.b", item.handle).status == "unknown"
    assert kept.read("thread.a", "index").status == "unknown"


def test_past_the_limit_the_oldest_items_go_and_say_so(store: BaseStore) -> None:
    batch = items(10)
    kept = OffloadStore(store, max_bytes_per_thread=batch[0].size * 4)
    for item in batch[:6]:
        kept.keep("t", [item])
    assert [kept.read("t", item.handle).status for item in batch[:6]] == ["gone"] * 2 + [
        "found"
    ] * 4
    assert kept.keep("t", batch[6:]) == 4
    assert [kept.read("t", item.handle).status for item in batch] == ["gone"] * 6 + ["found"] * 4
    # What is gone is not written again.
    assert kept.keep("t", batch[:2]) == 0


def test_an_item_larger_than_the_limit_is_gone_at_once(store: BaseStore) -> None:
    kept = OffloadStore(store, max_bytes_per_thread=50)
    [item] = items(1)
    assert kept.keep("t", [item]) == 0
    assert kept.read("t", item.handle).status == "gone"


def test_a_cut_reads_as_a_transcript_of_what_is_still_kept(store: BaseStore) -> None:
    parts = [
        message_item(HumanMessage("deploy the invoicing service")),
        message_item(HumanMessage("x" * 400)),
    ]
    cut = cut_item(parts)
    kept = OffloadStore(store, max_bytes_per_thread=parts[1].size + cut.size + 10)
    kept.keep("t", [*parts, cut])
    read = kept.read("t", cut.handle)
    assert read.status == "found" and read.about == "2 omitted messages"
    assert read.text == (
        "[1/2] (no longer kept: removed past the limit)\n\n[2/2] user message\n" + "x" * 400
    )


def test_the_index_lists_the_gone_handles_it_keeps(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_module, "GONE_KEPT", 2)
    batch = items(5)
    kept = OffloadStore(InMemoryStore(), max_bytes_per_thread=batch[0].size)
    for item in batch:
        kept.keep("t", [item])
    statuses = [kept.read("t", item.handle).status for item in batch]
    assert statuses == ["unknown", "unknown", "gone", "gone", "found"]


def test_an_unreadable_index_or_item_is_read_as_absent() -> None:
    store = InMemoryStore()
    [item] = items(1)
    store.put(namespace_of("t"), "index", {"kept": "nonsense", "gone": 3})
    store.put(namespace_of("t"), item.handle, {"kind": "other"})
    kept = OffloadStore(store)
    assert kept.read("t", item.handle).status == "unknown"
    assert kept.keep("t", [item]) == 1
    assert kept.read("t", item.handle).text == item.value["text"]


async def test_async_callers_await_the_store() -> None:
    store = CountingStore(InMemoryStore())
    kept = OffloadStore(store)
    [item] = items(1)
    assert await kept.akeep("t", [item]) == 1
    assert await kept.akeep("t", [item]) == 0
    assert (await kept.aread("t", item.handle)).text == item.value["text"]
    assert store.written == [item.handle]
    assert await kept.akept_bytes("t") == item.size


def test_namespaces_take_any_thread_id() -> None:
    assert namespace_of("a.b%c\x00") == (NAMESPACE, "a%2Eb%25c%00")
    assert namespace_of("") == (NAMESPACE, "%")
    assert namespace_of("a%2Eb") != namespace_of("a.b")


def test_the_bounded_store_drops_the_least_recently_used_namespace() -> None:
    store = BoundedMemoryStore(max_bytes=300)
    store.put(("a",), "k", {"text": "a" * 100})
    store.put(("b",), "k", {"text": "b" * 100})
    assert store.get(("a",), "k") is not None
    store.put(("c",), "k", {"text": "c" * 100})
    assert [store.get((name,), "k") is None for name in "abc"] == [False, True, False]
    store.delete(("a",), "k")
    assert store.get(("a",), "k") is None
    with pytest.raises(NotImplementedError, match="SearchOp"):
        store.batch([SearchOp(("a",))])
    with pytest.raises(ValueError, match="max_bytes"):
        BoundedMemoryStore(max_bytes=0)


def test_the_store_of_the_running_graph_is_found() -> None:
    graph_store = InMemoryStore()
    seen: list[Any] = []

    def node(state: MessagesState) -> dict[str, Any]:
        seen.append(store_in_run())
        return {}

    builder = StateGraph(MessagesState)
    builder.add_node("node", node)
    builder.add_edge(START, "node")
    builder.compile(store=graph_store).invoke({"messages": [HumanMessage("hi")]})
    builder.compile().invoke({"messages": [HumanMessage("hi")]})
    assert seen == [graph_store, None]
    assert store_in_run() is None
    assert embedded_store() is embedded_store()


def test_a_thread_says_how_many_bytes_it_keeps(store: BaseStore) -> None:
    kept = OffloadStore(store)
    batch = items(3)
    assert kept.kept_bytes("t") == 0
    kept.keep("t", batch)
    assert kept.kept_bytes("t") == sum(item.size for item in batch)
    assert kept.kept_bytes("u") == 0
