"""How far a counter is from the provider's own count, learned from what the provider reports.

Every response of the real chat-model clients carries `usage_metadata["input_tokens"]`:
the provider's own count of the request that produced it. The governor knows its own
estimate of that request (the window replays each call point of the history), so each
response is one observation of how far the estimate is from the truth. A `Calibration`
folds these observations into one factor: raised at once to a higher ratio (a request
the factor under-counts may be refused), lowered by a tenth of the gap to a lower one
(one cheap request should not undo what an expensive one taught), kept within
[`MIN_FACTOR`, `MAX_FACTOR`]. The window and the last resort compare `corrected(tokens)`
with their thresholds.

A provider that refuses a request for its length says so in an error; `Overflow` is what
the error states (the size it counted, its limit, where the message says them) with the
governor's estimate of the refused request. A refusal only ever raises the factor. The
reply of the retry carries the overflows in its `response_metadata`, so that replaying
the history reproduces the retry and the calibration stays a function of the history.

Example:
    >>> calibration = Calibration().observe(estimate=1_000, reported=1_300)
    >>> calibration.factor, calibration.corrected(2_000)
    (1.3, 2600)
    >>> calibration.observe(estimate=1_000, reported=1_000).factor  # lowered slowly
    1.27
    >>> Calibration.from_dict(calibration.to_dict()) == calibration
    True
"""

from __future__ import annotations

import math
import re
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from langchain_core.messages import AIMessage, BaseMessage

from langchain_context_governance._added import ADDED_KEY

__all__ = [
    "MAX_FACTOR",
    "MIN_FACTOR",
    "UNCALIBRATED",
    "Calibration",
    "Overflow",
    "SharedCalibration",
    "forget_shared_calibrations",
    "overflow_from_error",
    "overflows_of",
    "reported_input_tokens",
    "shared_calibration",
    "with_overflows",
]

# A count more than 4x off is a broken counter, not an estimate to correct; an estimate
# twice too high is as far as a lower factor is trusted.
MIN_FACTOR = 0.5
MAX_FACTOR = 4.0
# Share of the gap to a lower ratio closed per observation: ten cheap requests close
# two thirds of it, so one request of another kind (prose after code) cannot undo it.
LOWER_RATE = 0.1
# Where a refusal states no size, the request is taken to have been this much larger
# than the larger of its corrected estimate and the limit: the retry then cuts deeper.
UNSTATED_OVERFLOW_SCALE = 1.25
# A refusal shows the factor was too low; a stated size is taken with this margin, since
# the ratio of one request is not the next one's (a scripted provider adding 40 tokens a
# message refused 4 of 60 requests without it, 2 with it; tests/unit_tests/test_overflow.py).
STATED_OVERFLOW_MARGIN = 1.1
# Per-model defaults kept in one process (one per model a fleet calls; few in practice).
MAX_SHARED_CALIBRATIONS = 256

_RECORD_VERSION = 1
# Under governance's mark in `response_metadata` (see `_added.py`): the refusals a reply
# was retried after.
_OVERFLOWS_KEY = "overflows"


def _bounded(factor: float) -> float:
    return min(MAX_FACTOR, max(MIN_FACTOR, factor))


@dataclass(frozen=True)
class Calibration:
    """The factor between a counter's estimate and the provider's count, for one conversation.

    Immutable: `observe` returns a new value. `observations` counts the reported sizes
    folded in (refusals included); a value without any is the neutral 1.0.
    """

    factor: float = 1.0
    observations: int = 0

    def __post_init__(self) -> None:
        if not (MIN_FACTOR <= self.factor <= MAX_FACTOR):
            raise ValueError(
                f"calibration factor must be in [{MIN_FACTOR}, {MAX_FACTOR}], got {self.factor}"
            )
        if self.observations < 0:
            raise ValueError(f"calibration observations must be >= 0, got {self.observations}")

    def observe(self, *, estimate: int, reported: int) -> Calibration:
        """Fold in one request the counter estimated at `estimate` and the provider counted
        at `reported`: raised at once to a higher ratio, lowered slowly towards a lower one.
        Non-positive sizes say nothing and change nothing."""
        if estimate <= 0 or reported <= 0:
            return self
        ratio = _bounded(reported / estimate)
        if ratio >= self.factor:
            factor = ratio
        else:
            factor = _bounded(self.factor - (self.factor - ratio) * LOWER_RATE)
        return Calibration(factor=round(factor, 6), observations=self.observations + 1)

    def observe_overflow(self, overflow: Overflow, *, budget: int) -> Calibration:
        """Fold in a refusal for length: the factor only rises, past what makes the refused
        request's estimate fit `budget` no more.

        Where the provider states the size it counted, the ratio is that size over the
        estimate, with a margin of `STATED_OVERFLOW_MARGIN`; where not, the request is
        taken to have been `UNSTATED_OVERFLOW_SCALE` times the larger of its corrected
        estimate and the limit (or `budget`). A stated
        limit below `budget` (the governor's window is larger than the model's) scales the
        factor by `budget / limit`, so that the retry fits the limit.
        """
        estimate = max(overflow.estimate_tokens, 1)
        if overflow.reported_tokens is not None:
            ratio = overflow.reported_tokens / estimate * STATED_OVERFLOW_MARGIN
        else:
            floor = max(self.corrected(estimate), overflow.limit_tokens or budget)
            ratio = floor * UNSTATED_OVERFLOW_SCALE / estimate
        if overflow.limit_tokens is not None and 0 < overflow.limit_tokens < budget:
            ratio *= budget / overflow.limit_tokens
        factor = _bounded(max(self.factor, ratio))
        return Calibration(factor=round(factor, 6), observations=self.observations + 1)

    def corrected(self, tokens: int) -> int:
        """`tokens` as the provider would count them, by this factor (rounded up)."""
        if self.factor == 1.0:
            return tokens
        return math.ceil(tokens * self.factor - 1e-9)

    def limit(self, tokens: int) -> int:
        """The largest estimate whose corrected count is at most `tokens`."""
        if self.factor == 1.0:
            return tokens
        return max(int(tokens / self.factor + 1e-9), 0)

    def to_dict(self) -> dict[str, Any]:
        """The value as JSON-safe data, for the conversation's record."""
        return {
            "version": _RECORD_VERSION,
            "factor": self.factor,
            "observations": self.observations,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Calibration:
        """The value `to_dict` wrote; ValueError for data of another version or shape."""
        if not isinstance(data, Mapping) or data.get("version") != _RECORD_VERSION:
            raise ValueError(f"not a calibration record of version {_RECORD_VERSION}: {data!r}")
        factor, observations = data.get("factor"), data.get("observations")
        if isinstance(factor, bool) or not isinstance(factor, (int, float)):
            raise ValueError(f"calibration record: factor must be a number, got {factor!r}")
        if isinstance(observations, bool) or not isinstance(observations, int):
            raise ValueError(
                f"calibration record: observations must be an int, got {observations!r}"
            )
        return cls(factor=float(factor), observations=observations)


UNCALIBRATED = Calibration()
"""The neutral value: counts are taken as the provider's."""


@dataclass(frozen=True)
class Overflow:
    """A request the provider refused for its length.

    `estimate_tokens` is the governor's own (uncorrected) count of the refused request;
    `reported_tokens` and `limit_tokens` are what the provider's message stated, None
    where it stated nothing.
    """

    estimate_tokens: int
    reported_tokens: int | None = None
    limit_tokens: int | None = None

    def to_dict(self) -> dict[str, int | None]:
        return {
            "estimate_tokens": self.estimate_tokens,
            "reported_tokens": self.reported_tokens,
            "limit_tokens": self.limit_tokens,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Overflow:
        def size(key: str) -> int | None:
            value = data.get(key)
            if value is None:
                return None
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"overflow record: {key} must be a non-negative int or None")
            return value

        estimate = size("estimate_tokens")
        if estimate is None:
            raise ValueError("overflow record: estimate_tokens is missing")
        return cls(estimate, size("reported_tokens"), size("limit_tokens"))


def reported_input_tokens(message: BaseMessage) -> int | None:
    """The provider's count of the request that produced `message`, where it reported one.

    LangChain's clients put it in `usage_metadata["input_tokens"]` (Anthropic's with the
    cached tokens added, as its client does), so it is the size of the whole request.
    """
    if not isinstance(message, AIMessage) or not message.usage_metadata:
        return None
    reported = message.usage_metadata.get("input_tokens")
    if isinstance(reported, bool) or not isinstance(reported, int) or reported <= 0:
        return None
    return reported


AIMessageT = TypeVar("AIMessageT", bound=BaseMessage)


def with_overflows(message: AIMessageT, overflows: Sequence[Overflow]) -> AIMessageT:
    """`message` (the reply of a retry) with the refusals that preceded it, in its metadata.

    No client sends `response_metadata` to a provider; the mark lets a replay of the
    history reproduce the retry's request, and so its calibration.
    """
    if not overflows:
        return message
    mark = message.response_metadata.get(ADDED_KEY)
    mark = dict(mark) if isinstance(mark, Mapping) else {}
    mark[_OVERFLOWS_KEY] = [overflow.to_dict() for overflow in overflows]
    metadata = {**message.response_metadata, ADDED_KEY: mark}
    return message.model_copy(update={"response_metadata": metadata})


def overflows_of(message: BaseMessage) -> tuple[Overflow, ...]:
    """The refusals a reply's mark records (see `with_overflows`); () where none or unreadable."""
    mark = message.response_metadata.get(ADDED_KEY)
    if not isinstance(mark, Mapping):
        return ()
    entries = mark.get(_OVERFLOWS_KEY)
    if not isinstance(entries, list):
        return ()
    try:
        return tuple(Overflow.from_dict(entry) for entry in entries)
    except (ValueError, TypeError, AttributeError):
        return ()


# What the providers' refusals say, with the size counted and the limit where stated.
# Sources: langchain-openai's and langchain-anthropic's overflow handling (the phrases they
# classify on), and the providers' error texts quoted in their issue trackers.
_SIZE_PATTERNS: tuple[tuple[re.Pattern[str], str, str], ...] = (
    # OpenAI, vLLM: "maximum context length is 128000 tokens. However, your messages
    # resulted in 130532 tokens" / "However, you requested 130532 tokens".
    (
        re.compile(
            r"maximum context length is (?P<limit>\d+) tokens.*?"
            r"(?:resulted in|requested) (?P<reported>\d+) tokens",
            re.S,
        ),
        "reported",
        "limit",
    ),
    # Anthropic: "prompt is too long: 208310 tokens > 200000 maximum".
    (
        re.compile(r"prompt is too long: (?P<reported>\d+) tokens > (?P<limit>\d+)"),
        "reported",
        "limit",
    ),
    # Gemini: "The input token count (1200000) exceeds the maximum number of tokens
    # allowed (1048576)".
    (
        re.compile(
            r"input token count \(?(?P<reported>\d+)\)? exceeds the maximum number of "
            r"tokens allowed \(?(?P<limit>\d+)\)?"
        ),
        "reported",
        "limit",
    ),
    # Mistral: "Prompt contains 131294 tokens and 0 draft tokens, too large for model
    # with 131072 maximum context length".
    (
        re.compile(
            r"contains (?P<reported>\d+) tokens.*?too large for model with "
            r"(?P<limit>\d+) maximum context length",
            re.S,
        ),
        "reported",
        "limit",
    ),
)
# Phrases of refusals for length where the client raises no ContextOverflowError.
_OVERFLOW_PHRASES = (
    "context_length_exceeded",
    "maximum context length",
    "prompt is too long",
    "exceeds the context window",
    "context window",
    "too large for model with",
    "exceeds the maximum number of tokens",
    "input tokens exceed the configured limit",
    "contextwindowexceedederror",
)


def _context_overflow_types() -> tuple[type[BaseException], ...]:
    import langchain_core.exceptions

    found = getattr(langchain_core.exceptions, "ContextOverflowError", None)
    return (found,) if isinstance(found, type) else ()


def overflow_from_error(error: BaseException, *, estimate_tokens: int) -> Overflow | None:
    """The refusal `error` states, or None when `error` is no refusal for length.

    A refusal is langchain-core's `ContextOverflowError` (langchain-openai, -anthropic,
    -google-genai raise subclasses of it) or an error whose message uses a provider's
    words for it (langchain-mistralai raises a plain HTTP error). The sizes are read
    from the message where it states them.

    Example:
        >>> error = ValueError(
        ...     "Error code: 400 - prompt is too long: 208310 tokens > 200000 maximum"
        ... )
        >>> overflow_from_error(error, estimate_tokens=180_000)
        Overflow(estimate_tokens=180000, reported_tokens=208310, limit_tokens=200000)
        >>> overflow_from_error(ValueError("rate limited"), estimate_tokens=10) is None
        True
    """
    text = _error_text(error)
    lowered = text.lower()
    is_overflow = isinstance(error, _context_overflow_types()) or any(
        phrase in lowered for phrase in _OVERFLOW_PHRASES
    )
    if not is_overflow:
        return None
    for pattern, reported_group, limit_group in _SIZE_PATTERNS:
        found = pattern.search(text) or pattern.search(lowered)
        if found:
            return Overflow(
                estimate_tokens=estimate_tokens,
                reported_tokens=int(found.group(reported_group)),
                limit_tokens=int(found.group(limit_group)),
            )
    return Overflow(estimate_tokens=estimate_tokens)


def _error_text(error: BaseException) -> str:
    """The error's message and the messages of the errors it was raised from."""
    parts: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        parts.append(str(current))
        body = getattr(current, "body", None)
        if body is not None:
            parts.append(str(body))
        current = current.__cause__ or current.__context__
    return "\n".join(parts)


class SharedCalibration:
    """A model's default calibration, learned from every conversation of this process.

    A conversation uses it only until its own history reports a size: from then on its
    calibration is a function of its history alone. Safe across threads.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._value = Calibration()

    @property
    def value(self) -> Calibration:
        with self._lock:
            return self._value

    def observe(self, *, estimate: int, reported: int) -> None:
        with self._lock:
            self._value = self._value.observe(estimate=estimate, reported=reported)


_SHARED: OrderedDict[str, SharedCalibration] = OrderedDict()
_SHARED_LOCK = threading.Lock()


def shared_calibration(key: str) -> SharedCalibration:
    """The default calibration of the model named `key` in this process (least recently
    used dropped past `MAX_SHARED_CALIBRATIONS` models).

    Example:
        >>> shared_calibration("doc-example") is shared_calibration("doc-example")
        True
    """
    with _SHARED_LOCK:
        found = _SHARED.get(key)
        if found is None:
            found = _SHARED[key] = SharedCalibration()
            while len(_SHARED) > MAX_SHARED_CALIBRATIONS:
                _SHARED.popitem(last=False)
        else:
            _SHARED.move_to_end(key)
        return found


def forget_shared_calibrations() -> None:
    """Forget every model's default learned in this process (tests start from none)."""
    with _SHARED_LOCK:
        _SHARED.clear()
