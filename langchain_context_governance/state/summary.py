"""Summaries of what a cut drops, made once per cut by a chat model the user gives.

A cut leaves the model a note that earlier messages were omitted; with
`ContextGovernor(summary_model=...)` the note also carries a summary of them, so the
model keeps the facts and decisions the dropped messages held. The summary is asked for
once per cut (and never per call), from the summary of the previous cut and the messages
cut since, and it stays the same until the next cut, so the provider's prompt cache
keeps it. It is kept in the conversation's record (state/record.py), so every worker
sends the same text and none asks again. It is plain text inside the note: it holds no
tool result and no turn of its own, so pairing and alternation are untouched.

A summary model that does not answer within `timeout` seconds is left behind (the
request goes out with the plain note), in the sync and the async path alike.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    get_buffer_string,
)
from langchain_core.runnables import Runnable

from langchain_context_governance.state.record import SummaryRecord

DEFAULT_SUMMARY_PROMPT = (
    "You compress the early part of a conversation between a user and an AI agent that "
    "uses tools. Write a summary the agent can continue from: the user's goal and "
    "constraints, what was done and found (files, commands, results, errors), decisions "
    "made and why, and what remains open. Be specific (names, paths, values), keep it "
    "short, and do not invent anything. Write the summary only."
)
# The dropped part is sent to the summary model as text; a longer one keeps its head and
# tail, so the model's own window is not exceeded.
MAX_SUMMARY_INPUT_CHARS = 200_000
# Characters per token for the cap on the summary's length (a rough, safe estimate).
_CHARS_PER_TOKEN = 4


@dataclass(frozen=True)
class SummaryJob:
    """What one summary is made of: the messages a cut drops and the previous summary."""

    cut: int
    dropped: tuple[BaseMessage, ...]
    earlier: str | None
    max_tokens: int


def summary_job(
    kept: SummaryRecord | None, history: Sequence[BaseMessage], *, cut: int, max_tokens: int
) -> SummaryJob | None:
    """The summary a cut at `cut` needs, or None where it has one or must not ask again.

    Incremental: the summary of the previous cut and the messages cut since it, never
    everything since the first message (but where the previous summary is missing or
    belongs to a later cut of another history).

    Example:
        >>> history = [HumanMessage(f"step {n}") for n in range(10)]
        >>> job = summary_job(SummaryRecord(cut=4, text="steps 0-3"), history, cut=7,
        ...                   max_tokens=100)
        >>> job.earlier, [m.content for m in job.dropped]
        ('steps 0-3', ['step 4', 'step 5', 'step 6'])
        >>> summary_job(SummaryRecord(cut=7, text="steps 0-6"), history, cut=7,
        ...             max_tokens=100) is None
        True
    """
    kept = kept or SummaryRecord()
    if not kept.wanted_for(cut):
        return None
    start, earlier = 0, None
    if kept.text is not None and kept.cut < cut:
        start, earlier = kept.cut, kept.text
    return SummaryJob(
        cut=cut,
        dropped=dropped_messages(history, start, cut),
        earlier=earlier,
        max_tokens=max_tokens,
    )


def summary_kept(kept: SummaryRecord | None, job: SummaryJob, text: str | None) -> SummaryRecord:
    """What the conversation keeps after asking for `job`: the text, or that it failed.

    A failed cut is not asked again; the next cut summarizes from the last summary made.

    Example:
        >>> job = SummaryJob(cut=9, dropped=(), earlier=None, max_tokens=100)
        >>> summary_kept(SummaryRecord(cut=4, text="a"), job, None)
        SummaryRecord(cut=4, text='a', failed_cut=9)
        >>> summary_kept(SummaryRecord(cut=4, text="a"), job, "b")
        SummaryRecord(cut=9, text='b', failed_cut=None)
    """
    if text is not None:
        return SummaryRecord(cut=job.cut, text=text)
    kept = kept or SummaryRecord()
    return SummaryRecord(cut=kept.cut, text=kept.text, failed_cut=job.cut)


def summary_request(job: SummaryJob, *, prompt: str) -> list[BaseMessage]:
    """The request for the summary model.

    Example:
        >>> from langchain_core.messages import AIMessage
        >>> job = SummaryJob(cut=3, dropped=(HumanMessage("fix a.py"), AIMessage("done")),
        ...                  earlier=None, max_tokens=100)
        >>> [m.type for m in summary_request(job, prompt=DEFAULT_SUMMARY_PROMPT)]
        ['system', 'human']
    """
    text = get_buffer_string(list(job.dropped))
    if len(text) > MAX_SUMMARY_INPUT_CHARS:
        half = MAX_SUMMARY_INPUT_CHARS // 2
        text = (
            f"{text[:half]}\n[... {len(text) - 2 * half:,} characters left out ...]\n{text[-half:]}"
        )
    if job.earlier:
        text = f"Summary of what came before:\n{job.earlier}\n\nWhat followed:\n{text}"
    limit = f"Use at most about {job.max_tokens:,} tokens."
    return [SystemMessage(f"{prompt}\n\n{limit}"), HumanMessage(text)]


def summary_text(reply: BaseMessage, *, max_tokens: int) -> str | None:
    """The summary in `reply`, cut to `max_tokens` (estimated); None where it is empty."""
    text = reply.text.strip() if isinstance(reply.text, str) else ""
    if not text:
        return None
    limit = max_tokens * _CHARS_PER_TOKEN
    return text if len(text) <= limit else text[:limit].rstrip() + " […]"


def dropped_messages(
    history: Sequence[BaseMessage], start: int, cut: int
) -> tuple[BaseMessage, ...]:
    """The non-system messages from `start` to `cut`: what a cut drops since the last one."""
    return tuple(
        history[index]
        for index in range(start, cut)
        if not isinstance(history[index], SystemMessage)
    )


def ask_within(
    model: Runnable[Any, Any], request: list[BaseMessage], *, timeout: float | None
) -> Any:
    """`model.invoke(request)`, or `TimeoutError` after `timeout` seconds (None: no limit).

    The call runs in a daemon thread, with the caller's context (callbacks, tracing); a
    model that hangs is left behind, it never holds the agent.
    """
    if timeout is None:
        return model.invoke(request)
    outcome: list[Any] = []
    failure: list[BaseException] = []
    context = contextvars.copy_context()

    def ask() -> None:
        try:
            outcome.append(context.run(model.invoke, request))
        except BaseException as error:  # handed to the caller below
            failure.append(error)

    worker = threading.Thread(target=ask, name="context-governance-summary", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        raise TimeoutError(f"the summary model gave no answer within {timeout:g} s")
    if failure:
        raise failure[0]
    return outcome[0]


async def aask_within(
    model: Runnable[Any, Any], request: list[BaseMessage], *, timeout: float | None
) -> Any:
    """`await model.ainvoke(request)`, cancelled with `TimeoutError` after `timeout` s."""
    if timeout is None:
        return await model.ainvoke(request)
    try:
        return await asyncio.wait_for(model.ainvoke(request), timeout)
    except asyncio.TimeoutError as error:
        # asyncio.TimeoutError is TimeoutError from Python 3.11 on, not before.
        raise TimeoutError(f"the summary model gave no answer within {timeout:g} s") from error


def summary_of_reply(reply: Any, job: SummaryJob) -> str | None:
    """The summary text of the model's reply to `job`, cut to the job's size."""
    message = reply if isinstance(reply, BaseMessage) else AIMessage(str(reply))
    return summary_text(message, max_tokens=job.max_tokens)
