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
governor's estimate of the refused request. A refusal is recognised by the error's type
and the provider's error code (`overflow_from_error`), never by words found in a message,
and the sizes it states are bounded by the window. A refusal only raises the factor, and
what it added decays at every call the provider answered after it (`decayed`), so one
refusal never shrinks every later request. The reply of the retry carries the overflows
in its `response_metadata`, so that replaying the history reproduces the retry and the
calibration stays a function of the history.

Calibration is per conversation: what one conversation's replies report never moves
another's. A model's shared default (`SharedCalibration`), which a conversation uses
until its own history reports a size, moves only within [1.0, `SHARED_MAX_FACTOR`], and
only where several conversations agree: a factor under 1 can only push a request past
the window, and one conversation's reports (a proxy that reports 1 token, or 10^12)
cannot move it.

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
import statistics
import sys
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
# The shared default: never below 1.0 (under 1 it can only push requests past the window),
# at most this (a default twice too high halves requests: the most one model's default may
# cost a conversation before its own first report); moved only by the latest ratios of at
# least `SHARED_MIN_CONVERSATIONS` conversations that agree within `SHARED_AGREEMENT`,
# among the `SHARED_CONVERSATIONS_KEPT` that reported last.
SHARED_MAX_FACTOR = 2.0
SHARED_MIN_CONVERSATIONS = 3
SHARED_AGREEMENT = 1.25
SHARED_CONVERSATIONS_KEPT = 64
# What a refusal added to the factor shrinks to this share of itself at every call the
# provider answered after it: a third of it is left after four calls, none after a dozen.
OVERFLOW_DECAY = 0.75
# A stated size is taken up to this many times the larger of the window and the stated
# limit, and a stated limit down to the window divided by this: a garbled or hostile
# statement cannot make the factor jump further than a plain refusal would.
MAX_STATED_SCALE = 2.0

_RECORD_VERSION = 2
# Under governance's mark in `response_metadata` (see `_added.py`): the refusals a reply
# was retried after.
_OVERFLOWS_KEY = "overflows"


def _bounded(factor: float) -> float:
    return min(MAX_FACTOR, max(MIN_FACTOR, factor))


@dataclass(frozen=True)
class Calibration:
    """The factor between a counter's estimate and the provider's count, for one conversation.

    Immutable: `observe` returns a new value. `observations` counts the reported sizes
    folded in (refusals included); a value without any is the neutral 1.0. `boost` is the
    part of `factor` refusals added (`factor` is what the reports taught times it), which
    `decayed` shrinks.
    """

    factor: float = 1.0
    observations: int = 0
    boost: float = 1.0

    def __post_init__(self) -> None:
        if not (MIN_FACTOR <= self.factor <= MAX_FACTOR):
            raise ValueError(
                f"calibration factor must be in [{MIN_FACTOR}, {MAX_FACTOR}], got {self.factor}"
            )
        if self.observations < 0:
            raise ValueError(f"calibration observations must be >= 0, got {self.observations}")
        if not 1.0 <= self.boost <= MAX_FACTOR / MIN_FACTOR:
            raise ValueError(f"calibration boost must be in [1, 8], got {self.boost}")

    @property
    def reported_factor(self) -> float:
        """The factor the reported sizes taught, without what refusals added."""
        return _bounded(self.factor / self.boost)

    def observe(self, *, estimate: int, reported: int) -> Calibration:
        """Fold in one request the counter estimated at `estimate` and the provider counted
        at `reported`: raised at once to a higher ratio, lowered slowly towards a lower one.
        A reported size is what refusals only guessed at: what they added becomes part of
        what reports taught, and decays no more.
        Non-positive sizes say nothing and change nothing."""
        if estimate <= 0 or reported <= 0:
            return self
        ratio = _bounded(reported / estimate)
        factor = self.factor
        base = ratio if ratio >= factor else _bounded(factor - (factor - ratio) * LOWER_RATE)
        return _made(base, self.observations + 1, 1.0)

    def decayed(self) -> Calibration:
        """The value after a call the provider answered: what refusals added shrinks to
        `OVERFLOW_DECAY` of itself (gone once under a hundredth).

        Example:
            >>> raised = Calibration().observe_overflow(Overflow(1_000), budget=1_000)
            >>> raised.factor, raised.decayed().factor, raised.decayed().decayed().factor
            (1.25, 1.1875, 1.140625)
        """
        if self.boost == 1.0:
            return self
        return _made(self.reported_factor, self.observations, _decayed_boost(self.boost))

    def observe_overflow(self, overflow: Overflow, *, budget: int) -> Calibration:
        """Fold in a refusal for length: the factor only rises, past what makes the refused
        request's estimate fit `budget` no more.

        Where the provider states the size it counted, that size over the estimate is the
        ratio it taught (taken as a reported size is: `observe`), and a margin of
        `STATED_OVERFLOW_MARGIN` goes on top; where not, the request is taken to have been
        `UNSTATED_OVERFLOW_SCALE` times the larger of its corrected estimate and the limit
        (or `budget`). A stated limit below `budget` (the governor's window is larger than
        the model's) scales the factor by `budget / limit`, so that the retry fits the
        limit. Stated sizes are bounded by the window (`MAX_STATED_SCALE`). What goes on top
        of the ratio taught is the `boost`, which decays (`decayed`).
        """
        estimate = max(overflow.estimate_tokens, 1)
        budget = max(budget, 1)
        limit = overflow.limit_tokens
        if limit is not None:
            limit = min(max(limit, math.ceil(budget / MAX_STATED_SCALE)), budget * 64)
        base = self.reported_factor
        if overflow.reported_tokens is not None:
            reported = min(overflow.reported_tokens, MAX_STATED_SCALE * max(budget, limit or 0))
            base = max(base, _bounded(reported / estimate))
            ratio = reported / estimate * STATED_OVERFLOW_MARGIN
        else:
            floor = max(self.corrected(estimate), limit or budget)
            ratio = floor * UNSTATED_OVERFLOW_SCALE / estimate
        if limit is not None and 0 < limit < budget:
            ratio *= budget / limit
        factor = _bounded(max(self.factor, ratio))
        boost = min(max(factor / base, 1.0), MAX_FACTOR / MIN_FACTOR)
        return _made(base, self.observations + 1, boost)

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
            "boost": self.boost,
        }

    @classmethod
    def from_dict(cls, data: Any) -> Calibration:
        """The value `to_dict` wrote; ValueError for data of another version or shape (a
        record is untrusted input: every field is checked, none is taken as it comes)."""
        if not isinstance(data, Mapping) or data.get("version") != _RECORD_VERSION:
            raise ValueError(
                f"not a calibration record of version {_RECORD_VERSION}: {type(data).__name__}"
            )
        if set(data) != {"version", "factor", "observations", "boost"}:
            raise ValueError("calibration record: fields this version does not write")
        factor, observations, boost = data["factor"], data["observations"], data["boost"]
        for name, value in (("factor", factor), ("boost", boost)):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(
                    f"calibration record: {name} must be a number, got {type(value).__name__}"
                )
        if isinstance(observations, bool) or not isinstance(observations, int):
            kind = type(observations).__name__
            raise ValueError(f"calibration record: observations must be an int, got {kind}")
        if not (math.isfinite(factor) and math.isfinite(boost)):
            raise ValueError("calibration record: factor and boost must be finite")
        return cls(factor=float(factor), observations=observations, boost=float(boost))


UNCALIBRATED = Calibration()
"""The neutral value: counts are taken as the provider's."""


def _decayed_boost(boost: float) -> float:
    decayed = 1.0 + (boost - 1.0) * OVERFLOW_DECAY
    return 1.0 if decayed < 1.01 else decayed


def _made(base: float, observations: int, boost: float) -> Calibration:
    """The value of `base` (what reports taught) and `boost` (what refusals added)."""
    factor = round(_bounded(base * boost), 6)
    return Calibration(
        factor=factor, observations=observations, boost=round(max(factor / base, 1.0), 6)
    )


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
# OpenAI's documented error code for a request over the window (OpenAI-compatible servers,
# vLLM and others, use it too): `error.code` of the openai SDK's errors.
_OPENAI_OVERFLOW_CODE = "context_length_exceeded"
# langchain-mistralai raises httpx's HTTPStatusError with Mistral's error body: a 400 whose
# JSON `message` says the prompt is too large for the model (Mistral's wording, in full).
_MISTRAL_OVERFLOW = re.compile(
    r"Prompt contains \d+ tokens.*too large for model with \d+ maximum context length", re.S
)


def _context_overflow_types() -> tuple[type[BaseException], ...]:
    import langchain_core.exceptions

    found = getattr(langchain_core.exceptions, "ContextOverflowError", None)
    return (found,) if isinstance(found, type) else ()


def _instance_of(error: BaseException, module: str, name: str) -> bool:
    """Whether `error` is a `module.name` (looked up only where the module is imported:
    an error of a client's class means its module is)."""
    found = getattr(sys.modules.get(module), name, None)
    return isinstance(found, type) and isinstance(error, found)


def _is_refusal_for_length(error: BaseException) -> bool:
    """A refusal for length, by the error's type and the provider's code: LangChain's
    `ContextOverflowError` (langchain-openai, -anthropic, -google-genai raise subclasses of
    it), the openai SDK's errors with OpenAI's code, and the HTTP error langchain-mistralai
    raises with Mistral's error body. Never by words found in any error's message: a proxy
    that mentions a "context window" in an unrelated error is no refusal."""
    if isinstance(error, _context_overflow_types()):
        return True
    if _instance_of(error, "openai", "APIError"):
        return getattr(error, "code", None) == _OPENAI_OVERFLOW_CODE
    if _instance_of(error, "httpx", "HTTPStatusError"):
        return _mistral_refusal(error) is not None
    return False


def _mistral_refusal(error: BaseException) -> str | None:
    """The message of Mistral's error body where `error` (an httpx HTTPStatusError) is
    Mistral's refusal for length, else None."""
    response = getattr(error, "response", None)
    if getattr(response, "status_code", None) != 400:
        return None
    try:
        body = response.json()  # type: ignore[union-attr]
    except (ValueError, AttributeError, UnicodeDecodeError, TypeError):
        return None
    message = body.get("message") if isinstance(body, Mapping) else None
    if isinstance(message, str) and _MISTRAL_OVERFLOW.search(message[:2_000]):
        return message
    return None


def _refusal_in_chain(error: BaseException) -> BaseException | None:
    """The refusal for length `error` is, or was raised from (wrappers re-raise it)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen and len(seen) < 32:
        seen.add(id(current))
        if _is_refusal_for_length(current):
            return current
        current = current.__cause__ or current.__context__
    return None


def overflow_from_error(error: BaseException, *, estimate_tokens: int) -> Overflow | None:
    """The refusal `error` states, or None when `error` is no refusal for length.

    A refusal is recognised by its type and the provider's error code
    (`_is_refusal_for_length`), in `error` or the errors it was raised from; the sizes are
    then read from the refusal's own message where it states them (bounded by the window
    when they are used: `Calibration.observe_overflow`).

    Example:
        >>> from langchain_core.exceptions import ContextOverflowError
        >>> error = ContextOverflowError(
        ...     "Error code: 400 - prompt is too long: 208310 tokens > 200000 maximum"
        ... )
        >>> overflow_from_error(error, estimate_tokens=180_000)
        Overflow(estimate_tokens=180000, reported_tokens=208310, limit_tokens=200000)
        >>> overflow_from_error(ValueError("upstream proxy: invalid context window header"),
        ...                     estimate_tokens=10) is None
        True
    """
    refusal = _refusal_in_chain(error)
    if refusal is None:
        return None
    text = _stated_text(refusal)
    for pattern, reported_group, limit_group in _SIZE_PATTERNS:
        found = pattern.search(text) or pattern.search(text.lower())
        if found:
            return Overflow(
                estimate_tokens=estimate_tokens,
                reported_tokens=int(found.group(reported_group)),
                limit_tokens=int(found.group(limit_group)),
            )
    return Overflow(estimate_tokens=estimate_tokens)


def _stated_text(refusal: BaseException) -> str:
    """The refusal's own message and body, where the provider states its sizes (a long
    one is read at its head: the sizes come first)."""
    parts = [str(refusal)[:4_000]]
    body = getattr(refusal, "body", None)
    if body is not None:
        parts.append(str(body)[:4_000])
    mistral = (
        _mistral_refusal(refusal) if _instance_of(refusal, "httpx", "HTTPStatusError") else None
    )
    if mistral is not None:
        parts.append(mistral[:4_000])
    return "\n".join(parts)


class SharedCalibration:
    """A model's default calibration, learned from the conversations of this process.

    A conversation uses it only until its own history reports a size: from then on its
    calibration is a function of its history alone. The default is the median of the
    latest ratios of at least `SHARED_MIN_CONVERSATIONS` conversations that agree (each
    within `SHARED_AGREEMENT` of it), bounded to [1.0, `SHARED_MAX_FACTOR`], else 1.0: one
    conversation, whatever its replies report, cannot move it. Safe across threads.

    Example:
        >>> shared = SharedCalibration()
        >>> for conversation in ("a", "b"):
        ...     shared.observe(estimate=1_000, reported=1_300, conversation=conversation)
        >>> shared.value.factor  # two conversations are not enough
        1.0
        >>> shared.observe(estimate=1_000, reported=1_250, conversation="c")
        >>> shared.value.factor
        1.3
        >>> shared.observe(estimate=1_000, reported=1, conversation="d")  # no agreement
        >>> shared.value.factor
        1.3
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ratios: OrderedDict[Any, float] = OrderedDict()
        self._value = UNCALIBRATED

    @property
    def value(self) -> Calibration:
        with self._lock:
            return self._value

    def observe(self, *, estimate: int, reported: int, conversation: Any) -> None:
        """The latest ratio `conversation` (any hashable that tells conversations apart)
        observed: it replaces that conversation's earlier one."""
        if estimate <= 0 or reported <= 0:
            return
        with self._lock:
            self._ratios[conversation] = _bounded(reported / estimate)
            self._ratios.move_to_end(conversation)
            while len(self._ratios) > SHARED_CONVERSATIONS_KEPT:
                self._ratios.popitem(last=False)
            self._value = _agreed(list(self._ratios.values()))


def _agreed(ratios: list[float]) -> Calibration:
    """The shared default of conversations' latest `ratios` (see `SharedCalibration`)."""
    if len(ratios) < SHARED_MIN_CONVERSATIONS:
        return UNCALIBRATED
    middle = statistics.median(ratios)
    agreeing = [r for r in ratios if middle / SHARED_AGREEMENT <= r <= middle * SHARED_AGREEMENT]
    if len(agreeing) < SHARED_MIN_CONVERSATIONS:
        return UNCALIBRATED
    factor = min(max(statistics.median(agreeing), 1.0), SHARED_MAX_FACTOR)
    if factor == 1.0:
        return UNCALIBRATED
    return Calibration(factor=round(factor, 6), observations=len(agreeing))


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
