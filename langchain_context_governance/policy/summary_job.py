"""The summary job: when a cut's summary is asked for, of which messages, and how long.

With a summary model, the note at a cut carries a summary of what the cut left out. It
is asked for once per cut (never per call), incrementally: the summary of the previous
cut and the messages cut since, never everything from the first message (but where the
previous summary is missing). A cut whose summary failed keeps its plain note and is
not asked again; the next cut summarizes everything since the last summary made. A
summary is asked for only where the note has room to send it (at least
`tuning.MIN_SUMMARY_TOKENS`), and for no more than that room and a tenth of the budget.

How the model is asked (the transcript quoted as data, the timeout) is state/summary.py's.

Example:
    >>> from langchain_core.messages import HumanMessage
    >>> history = [HumanMessage(f"step {n}") for n in range(10)]
    >>> job = summary_job(SummaryRecord(cut=4, text="steps 0-3"), history, cut=7,
    ...                   max_tokens=100)
    >>> job.earlier, [m.content for m in job.dropped]
    ('steps 0-3', ['step 4', 'step 5', 'step 6'])
    >>> summary_job(SummaryRecord(cut=7, text="steps 0-6"), history, cut=7,
    ...             max_tokens=100) is None
    True
    >>> summary_size(budget=8_000, room=2_000), summary_size(budget=8_000, room=40)
    (800, None)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from langchain_core.messages import BaseMessage, SystemMessage

from langchain_context_governance import tuning


@dataclass(frozen=True)
class SummaryRecord:
    """The summary model's text for a cut, and the latest cut whose summary failed.

    `text` summarizes the non-system messages before position `cut` of the repaired
    history (None where no summary was made yet); `failed_cut` is a cut whose summary
    failed or timed out: it keeps the plain note and is not asked again, and the next
    cut summarizes everything since `cut`.
    """

    cut: int = 0
    text: str | None = None
    failed_cut: int | None = None

    def text_for(self, cut: int) -> str | None:
        """The summary to put in the note of a cut at `cut`, if there is one."""
        return self.text if self.text is not None and cut == self.cut else None

    def wanted_for(self, cut: int) -> bool:
        """Whether a cut at `cut` still needs its summary asked for."""
        return cut > 0 and cut != self.failed_cut and (self.text is None or cut != self.cut)


@dataclass(frozen=True)
class SummaryJob:
    """What one summary is made of: the messages a cut drops and the previous summary."""

    cut: int
    dropped: tuple[BaseMessage, ...]
    earlier: str | None
    max_tokens: int


def summary_tokens(budget: int | None) -> int:
    """The most tokens a summary may take in a request of `budget`: a tenth of it, at
    least `tuning.MIN_SUMMARY_TOKENS` (what a record's summary may hold too)."""
    return max(tuning.MIN_SUMMARY_TOKENS, (budget or 0) // 10)


def summary_size(*, budget: int, room: int) -> int | None:
    """How many tokens to ask a cut's summary for, where the note has `room` tokens for
    one: None where that is less than `tuning.MIN_SUMMARY_TOKENS` (the next cut's summary
    covers what this one left out)."""
    if room < tuning.MIN_SUMMARY_TOKENS:
        return None
    return min(summary_tokens(budget), room)


def summary_job(
    kept: SummaryRecord | None, history: Sequence[BaseMessage], *, cut: int, max_tokens: int
) -> SummaryJob | None:
    """The summary a cut at `cut` needs, or None where it has one or must not ask again:
    incremental from the previous cut's summary where there is one."""
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


def dropped_messages(
    history: Sequence[BaseMessage], start: int, cut: int
) -> tuple[BaseMessage, ...]:
    """The non-system messages from `start` to `cut`: what a cut drops since the last one."""
    return tuple(
        history[index]
        for index in range(start, cut)
        if not isinstance(history[index], SystemMessage)
    )
