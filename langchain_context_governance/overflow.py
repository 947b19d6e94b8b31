"""A request the provider refuses for its length: govern again to fit, and retry.

The middleware's model call and `recover_from_overflow` (for LangGraph model nodes) call the
model through `call_with_overflow_recovery`: where the call raises a refusal for length
(`langchain_core.exceptions.ContextOverflowError`, or a client's error with the provider's
error code: `tokens.calibration.overflow_from_error`; never an error that merely mentions
a context window), the size the provider states is read from its message, the governor
governs the same history again with that refusal (its calibration raised so that the
refused request no longer fits), and the call is retried, `overflow_retries` times at
most. The reply of a retry carries the refusals in its metadata, so that later calls
replay the retry as it was made; what the refusal added to the calibration decays with
every later call the provider answers. The last refusal is raised as it came, with a note
that says what was tried.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from langchain_context_governance.report import GovernanceResult
from langchain_context_governance.tokens.calibration import Overflow, overflow_from_error

__all__ = ["acall_with_overflow_recovery", "call_with_overflow_recovery"]

ResultT = TypeVar("ResultT")

Govern = Callable[[Sequence[Overflow]], GovernanceResult]
"""Governs the call's history with the refusals met so far (none on the first try)."""
Mark = Callable[[ResultT, Sequence[Overflow]], ResultT]
"""Puts the refusals into the reply of the retry that succeeded."""


def call_with_overflow_recovery(
    govern: Govern,
    call: Callable[[GovernanceResult], ResultT],
    *,
    retries: int,
    mark: Mark[ResultT],
) -> ResultT:
    """`call(govern(()))`, governed again and retried after each refusal for length.

    Example:
        >>> from langchain_core.exceptions import ContextOverflowError
        >>> from langchain_core.messages import HumanMessage
        >>> from langchain_context_governance import ContextGovernor
        >>> governor = ContextGovernor(context_window_tokens=8_000)
        >>> factors = []
        >>> def call(result):
        ...     factors.append(result.report.calibration_factor)
        ...     if len(factors) == 1:  # the provider counts 30% more than the estimate
        ...         size = result.report.tokens_after * 13 // 10
        ...         raise ContextOverflowError(f"prompt is too long: {size} tokens > 8000 maximum")
        ...     return "answered"
        >>> call_with_overflow_recovery(
        ...     lambda overflows: governor.govern([HumanMessage("hi" * 392)], overflows=overflows),
        ...     call,
        ...     retries=1,
        ...     mark=lambda reply, overflows: reply,
        ... )
        'answered'
        >>> factors  # the retry's: the provider's ratio, 1.3, and a tenth more
        [1.0, 1.43]
    """
    overflows: list[Overflow] = []
    result = govern(())
    while True:
        try:
            reply = call(result)
        except Exception as error:
            overflow = _refusal(error, result, overflows, retries=retries)
            overflows.append(overflow)
            result = govern(tuple(overflows))
            continue
        return mark(reply, overflows) if overflows else reply


async def acall_with_overflow_recovery(
    govern: Callable[[Sequence[Overflow]], Awaitable[GovernanceResult]],
    call: Callable[[GovernanceResult], Awaitable[ResultT]],
    *,
    retries: int,
    mark: Mark[ResultT],
) -> ResultT:
    """`call_with_overflow_recovery` for async callers."""
    overflows: list[Overflow] = []
    result = await govern(())
    while True:
        try:
            reply = await call(result)
        except Exception as error:
            overflow = _refusal(error, result, overflows, retries=retries)
            overflows.append(overflow)
            result = await govern(tuple(overflows))
            continue
        return mark(reply, overflows) if overflows else reply


def _refusal(
    error: Exception, result: GovernanceResult, earlier: Sequence[Overflow], *, retries: int
) -> Overflow:
    """The refusal `error` states; `error` itself, re-raised, where it is none or retries
    are spent (with a note saying what was tried)."""
    overflow = overflow_from_error(error, estimate_tokens=result.report.tokens_after)
    if overflow is None:
        raise error
    if len(earlier) >= retries:
        _add_note(error, _what_was_tried(overflow, result, earlier, retries=retries))
        raise error
    return overflow


def _what_was_tried(
    overflow: Overflow, result: GovernanceResult, earlier: Sequence[Overflow], *, retries: int
) -> str:
    report = result.report
    stated = (
        f"the provider counted {overflow.reported_tokens:,} tokens"
        if overflow.reported_tokens is not None
        else "the provider stated no size"
    )
    if not earlier:
        return (
            f"context governance: the request was refused for its length ({stated}; "
            f"estimated {report.tokens_after:,}, budget {report.budget}); overflow_retries="
            f"{retries}, so it was not governed again."
        )
    return (
        f"context governance: the request was refused for its length {len(earlier) + 1} "
        f"times. After each refusal it was governed again with the count raised to the "
        f"provider's (the last retry: {report.tokens_after:,} tokens estimated, x "
        f"{report.calibration_factor:.3g} = {report.corrected_tokens_after:,} for a budget "
        f"of {report.budget}), and refused again ({stated}). What governance cannot cut "
        "(the system message, the last turn, tool definitions) may not fit the model's "
        "window; check context_window_tokens and max_output_tokens."
    )


def _add_note(error: Exception, note: str) -> None:
    add_note = getattr(error, "add_note", None)
    if callable(add_note):
        add_note(note)
    else:  # Python 3.10: the attribute add_note sets (printed from 3.11 on)
        error.__notes__ = [*getattr(error, "__notes__", []), note]  # type: ignore[attr-defined]
