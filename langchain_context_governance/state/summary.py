"""Summaries of what a cut drops, made once per cut by a chat model the user gives.

A cut leaves the model a note that earlier messages were omitted; with
`ContextGovernor(summary_model=...)` the note also carries a summary of them, so the
model keeps the facts and decisions the dropped messages held. The summary is asked for
once per cut (and never per call), from the messages the cut drops and the summary of the
previous cut, and it stays the same until the next cut, so the provider's prompt cache
keeps it. It is plain text inside the note: it holds no tool result and no turn of its
own, so pairing and alternation are untouched.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage, get_buffer_string

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
