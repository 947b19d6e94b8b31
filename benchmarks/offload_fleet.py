"""Offload on PostgreSQL: worker processes on one `PostgresStore` read each other's handles.

Part of `make scale` (`benchmarks.scale`). Two worker processes, each a `create_agent`
graph with `ContextGovernanceMiddleware` (offload is on there by default) on one
`AsyncPostgresSaver` and one `AsyncPostgresStore` (each worker with its own connection
pool), play three turns of every thread, each turn on the other worker:

1. worker 0: the agent reads `LOGS_A_TURN` daily logs: governance clears and cuts, and
   keeps what it takes out in the store;
2. worker 1: the agent reads back, page after page, every handle its first request shows,
   then reads as many new logs (new items, which this worker writes);
3. worker 0: the agent reads back every handle its first request shows.

Checks (PASS/FAIL in `benchmarks.scale`): every read found what its handle holds (none
answered that nothing is kept or that it is gone), and a cleared log read back page by
page equals the log; no worker wrote an item another had written (a worker taking a
thread up writes only what is new); and the bytes each thread keeps, printed.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import re
import statistics
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.store.base import BaseStore, Op, PutOp, Result

from benchmarks.report import Target
from langchain_context_governance.middleware import ContextGovernanceMiddleware
from langchain_context_governance.offload.items import result_item
from langchain_context_governance.offload.store import NAMESPACE, OffloadStore
from langchain_context_governance.testing import ScriptedChatModel

__all__ = ["OffloadFleetResult", "offload_fleet_report", "run_offload_fleet"]

LOGS_A_TURN = 12
WORKERS = 2
TURNS = 3
WINDOW_TOKENS = 7_000
OUTPUT_TOKENS = 1_000
RECURSION_LIMIT = 400
_HANDLE = re.compile(r'read_context\(handle="([a-z2-7]{10})"')
_QUESTION = re.compile(r"thread (\d+), turn (\d): ")
_NOT_FOUND = ("nothing is kept under handle", "is no longer kept")


def log_text(day: int) -> str:
    """A day's log: about 2,000 characters, different every day."""
    return "\n".join(
        f"day {day:03d} 10:{minute:02d} job {day * 61 + minute * 7:05d} finished in "
        f"{(day * 13 + minute) % 97} s"
        for minute in range(48)
    )


@tool
def read_log(day: int) -> str:
    """Return the log of a day."""
    return log_text(day)


def question(thread: int, turn: int) -> str:
    return f"thread {thread}, turn {turn}: go through the logs"


class _CountingStore(BaseStore):
    """The shared store, with the offloaded items this worker writes counted."""

    def __init__(self, inner: BaseStore) -> None:
        self.inner = inner
        self.written: list[tuple[str, str]] = []

    def _count(self, ops: Iterable[Op]) -> list[Op]:
        ops = list(ops)
        self.written += [
            (op.namespace[-1], op.key)
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


@dataclass
class _Reading:
    """What the agent still has to read back in a turn: handles, and where in the first."""

    handles: list[str]
    offset: int = 0


class _Agent:
    """The scripted agent of one worker: reads logs, reads handles back, answers."""

    def __init__(self) -> None:
        # Each turn runs on one worker, call after call: the agent keeps where it is.
        self.readings: dict[tuple[int, int], _Reading] = {}
        self.logs_read: dict[tuple[int, int], int] = {}
        self.calls = 0

    def __call__(self, request: list[BaseMessage]) -> AIMessage:
        thread, turn = _asked(request)
        if turn > 1:
            reading = self.readings.setdefault((thread, turn), _Reading(_shown(request)))
            step = self._read_back(reading, request[-1])
            if step is not None:
                return step
        logs = self.logs_read.get((thread, turn), 0)
        if turn < 3 and logs < LOGS_A_TURN:
            self.logs_read[(thread, turn)] = logs + 1
            return self._call("read_log", day=LOGS_A_TURN * (turn - 1) + logs)
        return AIMessage(f"thread {thread}, turn {turn}: done")

    def _read_back(self, reading: _Reading, newest: BaseMessage) -> AIMessage | None:
        if isinstance(newest, ToolMessage) and newest.name == "read_context":
            rest = re.search(r"offset=(\d+)\)\]$", str(newest.content))
            if rest is None:
                reading.handles.pop(0)
                reading.offset = 0
            else:
                reading.offset = int(rest[1])
        if not reading.handles:
            return None
        return self._call("read_context", handle=reading.handles[0], offset=reading.offset)

    def _call(self, name: str, **args: Any) -> AIMessage:
        self.calls += 1
        call = {"name": name, "args": args, "id": f"call{self.calls:05d}"}
        return AIMessage("", tool_calls=[call])


def _asked(request: Sequence[BaseMessage]) -> tuple[int, int]:
    for message in reversed(request):
        if isinstance(message, HumanMessage):
            found = _QUESTION.search(message.text)
            if found is not None:
                return int(found[1]), int(found[2])
    raise ValueError("no question in the request")


def _shown(request: Sequence[BaseMessage]) -> list[str]:
    found = (_HANDLE.findall(message.text) for message in request)
    return list(dict.fromkeys(handle for handles in found for handle in handles))


_worker: _Worker | None = None


class _Worker:
    """One worker process: its agent and middleware, kept across turns."""

    def __init__(self, conninfo: str) -> None:
        self.conninfo = conninfo
        self.agent = _Agent()
        self.model = ScriptedChatModel(
            self.agent,
            provider="strict",
            max_input_tokens=WINDOW_TOKENS,
            max_output_tokens=OUTPUT_TOKENS,
        )
        self.middleware = ContextGovernanceMiddleware(provider="strict")

    def run_turn(self, threads: Sequence[int], turn: int) -> tuple[list[Any], list[str]]:
        return asyncio.run(self._run(threads, turn))

    async def _run(self, threads: Sequence[int], turn: int) -> tuple[list[Any], list[str]]:
        from langchain.agents import create_agent
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
        from langgraph.store.postgres.aio import AsyncPostgresStore
        from psycopg.rows import dict_row
        from psycopg_pool import AsyncConnectionPool

        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            self.conninfo,
            max_size=max(4, 2 * len(threads)),
            kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
            open=False,
        )
        await pool.open()
        try:
            store = _CountingStore(AsyncPostgresStore(pool))
            graph = create_agent(
                self.model,
                [read_log],
                middleware=[self.middleware],
                checkpointer=AsyncPostgresSaver(pool),
                store=store,
            )
            runs = [
                graph.ainvoke(
                    {"messages": [HumanMessage(question(thread, turn))]},
                    {
                        "configurable": {"thread_id": f"offload-{thread}"},
                        "recursion_limit": RECURSION_LIMIT,
                    },
                )
                for thread in threads
            ]
            outcomes = await asyncio.gather(*runs, return_exceptions=True)
        finally:
            await pool.close()
        errors = [f"{type(o).__name__}: {o}" for o in outcomes if isinstance(o, BaseException)]
        return store.written, errors


def _start_worker(conninfo: str) -> None:
    global _worker
    _worker = _Worker(conninfo)


def _run_turn_in_worker(threads: Sequence[int], turn: int) -> tuple[list[Any], list[str]]:
    assert _worker is not None
    return _worker.run_turn(threads, turn)


@dataclass
class OffloadFleetResult:
    """What the workers wrote turn by turn, the threads' histories and bytes kept."""

    threads: int
    written: list[list[tuple[str, str]]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    histories: dict[str, list[BaseMessage]] = field(default_factory=dict)
    kept_bytes: list[int] = field(default_factory=list)


async def _set_up(conninfo: str) -> None:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from langgraph.store.postgres.aio import AsyncPostgresStore

    async with AsyncPostgresStore.from_conn_string(conninfo) as store:
        await store.setup()
    async with AsyncPostgresSaver.from_conn_string(conninfo) as saver:
        await saver.setup()


async def _read_threads(conninfo: str, result: OffloadFleetResult) -> None:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from langgraph.store.postgres.aio import AsyncPostgresStore

    async with (
        AsyncPostgresSaver.from_conn_string(conninfo) as saver,
        AsyncPostgresStore.from_conn_string(conninfo) as store,
    ):
        kept = OffloadStore(store)
        for thread in range(result.threads):
            thread_id = f"offload-{thread}"
            stored = await saver.aget_tuple({"configurable": {"thread_id": thread_id}})
            messages = stored.checkpoint["channel_values"].get("messages", []) if stored else []
            result.histories[thread_id] = list(messages)
            result.kept_bytes.append(await kept.akept_bytes(thread_id))


def run_offload_fleet(conninfo: str, threads: int) -> OffloadFleetResult:
    """Every thread's turns, turn k on worker k % 2 (see the module doc)."""
    asyncio.run(_set_up(conninfo))
    result = OffloadFleetResult(threads)
    context = multiprocessing.get_context("spawn")
    with contextlib.ExitStack() as stack:
        pools = [
            stack.enter_context(
                ProcessPoolExecutor(
                    1, mp_context=context, initializer=_start_worker, initargs=(conninfo,)
                )
            )
            for _ in range(WORKERS)
        ]
        for turn in range(1, TURNS + 1):
            written, errors = (
                pools[(turn - 1) % WORKERS]
                .submit(_run_turn_in_worker, list(range(threads)), turn)
                .result()
            )
            result.written.append(written)
            result.errors += errors
    asyncio.run(_read_threads(conninfo, result))
    return result


def _reads(history: Sequence[BaseMessage]) -> list[tuple[str, int, str]]:
    """(handle, offset, answer) of every read_context call of a history."""
    answers = {m.tool_call_id: str(m.content) for m in history if isinstance(m, ToolMessage)}
    return [
        (call["args"]["handle"], call["args"].get("offset", 0), answers.get(call["id"], ""))
        for m in history
        if isinstance(m, AIMessage)
        for call in m.tool_calls
        if call["name"] == "read_context"
    ]


def _page_text(answer: str) -> str:
    return re.sub(r"\n\[read_context: characters [^\]]*\]$", "", answer)


def offload_fleet_report(result: OffloadFleetResult) -> tuple[str, list[Target]]:
    logs = {
        result_item(
            ToolMessage(log_text(day), tool_call_id=""), "read_log", {"day": day}
        ).handle: day
        for day in range(2 * LOGS_A_TURN)
    }
    reads = failed = logs_checked = logs_differ = 0
    for history in result.histories.values():
        read_text: dict[str, str] = {}
        for handle, _, answer in _reads(history):
            reads += 1
            if any(phrase in answer for phrase in _NOT_FOUND):
                failed += 1
            read_text[handle] = read_text.get(handle, "") + _page_text(answer)
        for handle, text in read_text.items():
            if handle in logs:
                logs_checked += 1
                logs_differ += text != log_text(logs[handle])
    rewritten = 0
    seen: set[tuple[str, str]] = set()
    for written in result.written:
        rewritten += len(set(written) & seen)
        seen.update(written)
    per_turn = ", ".join(str(len(written)) for written in result.written)
    kept = result.kept_bytes or [0]
    text = (
        f"\nOffload on PostgreSQL: {result.threads} threads x {TURNS} turns, each on the other "
        f"of {WORKERS} worker processes (create_agent, the middleware's defaults, one "
        f"AsyncPostgresStore): items written per turn {per_turn}; {reads} read_context calls, "
        f"{logs_checked} cleared logs read back whole; store per thread median "
        f"{statistics.median(kept) / 1024:.0f} KiB, largest {max(kept) / 1024:.0f} KiB"
    )
    targets = [
        Target(
            "offload: every thread's turns on two workers finished",
            not result.errors,
            result.errors[0] if result.errors else f"{result.threads} threads x {TURNS} turns",
        ),
        Target(
            "offload: every handle a request showed read back on the other worker",
            reads > 0 and failed == 0 and len(result.written) == TURNS and all(result.written[:2]),
            f"{failed} of {reads} reads found nothing",
        ),
        Target(
            "offload: a cleared log read back page by page equals the log",
            logs_checked > 0 and logs_differ == 0,
            f"{logs_differ} of {logs_checked} differ",
        ),
        Target(
            "offload: no worker wrote an item another had written",
            rewritten == 0,
            f"{rewritten} items written again",
        ),
    ]
    return text, targets
