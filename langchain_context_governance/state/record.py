"""The governance record: what a conversation's state keeps where the thread lives.

A LangGraph deployment runs several worker processes on one checkpointer, and a thread's
next run usually lands on another worker, or on a restarted one. Most of a
conversation's state is a deterministic function of its history (the repairs, the
compaction replay) and is rebuilt from it; what is not is kept in a small record that
travels with the thread:

- `summary`: the summary model's text for the latest cut, with the cut it belongs to,
  so every worker sends the same text and the next cut summarizes only what is new;
- `previous_request`: digests of the previous request's messages, so the prefix report
  compares with the request the thread really sent last, whichever worker sent it;
- `over_budget_warned`: the over-budget warning is logged once per conversation;
- `reasoning_warned`: so is the warning that reasoning bound to its prefix was left out;
- `truncation_warned`: the newest message whose cut in the current turn was logged, so the
  warning that the current turn alone does not fit is logged once per turn;
- `thread`: a digest of the thread the record was written for, and `history`: how many
  messages it was written for and a digest of their content (`HistoryDigest`), so a
  record is used only for its thread and the very content it describes: everything in
  it that came from messages (the summary, the values the note lists, the counts, the
  decisions) is bound to that content, and a message changed since (a redaction)
  makes the record unusable;
- `calibration`: the token counter's calibration (kept as given, see tokens/);
- `resume`: what the repair stream, the compaction replay and the request rules decided,
  as positions, counts, call-id digests and tool names (`RepairStream.snapshot`,
  `CacheAwareReplay.snapshot`, `ContinuedRepair.snapshot`), so a worker that never saw
  the thread continues from them at the cost of what is new instead of replaying the
  history (a rebuild gives the same decisions, at the cost of the whole history).

It holds no message and no copy of message content: counts, positions, digests, tool
names, and the summary text and the values the note lists. It is plain data
(`to_dict`), so a LangGraph checkpointer stores it as a value of the graph state
(`RECORD_KEY`), and a `BaseStore` as an item. A record of another `RECORD_VERSION`, made
under other settings (`settings_digest`) or for another thread is never read:
`GovernanceRecord.from_dict` says why it cannot be used, and the state is rebuilt from
the history as on first contact.

Digests here are process-independent (BLAKE2b, SHA-256), unlike Python's `hash`, which
every process salts anew: a record written by one worker is read by another.

Example:
    >>> from langchain_core.messages import HumanMessage
    >>> history = [HumanMessage("hi", id="m1")]
    >>> record = GovernanceRecord(settings="s1", history=HistoryMark.of(history))
    >>> data = record.to_dict()
    >>> GovernanceRecord.from_dict(data, settings="s1") == record
    True
    >>> GovernanceRecord.from_dict({**data, "version": 0}, settings="s1")
    Traceback (most recent call last):
    ...
    langchain_context_governance.state.record.UnusableRecord: record version 0, expected 6
    >>> record.history.continued_by([*history, HumanMessage("more")])
    True
    >>> record.history.continued_by([HumanMessage("ho", id="m1")])  # changed in place
    False
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import operator
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from langchain_context_governance._messages import compared_content_length, tool_calls_json
from langchain_context_governance._packing import little_endian
from langchain_context_governance.policy.summary_job import SummaryRecord
from langchain_context_governance.tokens.calibration import Calibration

_ID = operator.attrgetter("id")
_CONTENT = operator.attrgetter("content")

__all__ = [
    "RECORD_KEY",
    "RECORD_READ_ERRORS",
    "RECORD_VERSION",
    "GovernanceRecord",
    "HistoryDigest",
    "HistoryMark",
    "PreviousRequest",
    "UnusableRecord",
    "leading_equal",
    "request_digests",
    "settings_digest",
    "stable_digest",
    "thread_digest",
]

RECORD_KEY = "context_governance"
"""The graph-state key (and store namespace) the record is kept under."""

# Raised whenever the record's layout or meaning changes; a record of another version is
# ignored and the state rebuilt from the history. 2: the `resume` section. 3: the
# replay's compacted counts, a None content digested as "", `truncation_warned`. 4: the
# replay's left-out reasoning and note, `reasoning_warned`. 5: the record carries its
# thread, and the history's content (not ids and lengths) in its digests.
RECORD_VERSION = 6
# Bytes of a request message's digest in the record: the prefix report compares them,
# and so does the request-level repair of the first call on another worker (a leading
# message taken for the previous request's is not checked again), so a false match is
# as unlikely as one of the 64-bit fingerprints a process compares.
_REQUEST_DIGEST_BYTES = 8
_MESSAGE_DIGEST_BYTES = 8
# What a record may hold, beyond which no governor wrote it: messages in a history;
# positions of the repaired history per message (repairs add user turns, bridges and
# backfilled results); messages governance adds to a request beside those (the note's
# turns, placeholders); the default bound on a summary's length.
_MAX_MESSAGES = 1 << 31
_MAX_MADE_A_MESSAGE = 4
_ADDED_A_REQUEST = 1_024
DEFAULT_MAX_SUMMARY_CHARS = 400_000
_RECORD_KEYS = frozenset(
    {
        "version",
        "settings",
        "thread",
        "history",
        "summary",
        "previous_request",
        "over_budget_warned",
        "reasoning_warned",
        "truncation_warned",
        "calibration",
        "resume",
        "serial",
    }
)


# What reading a record's untrusted data can raise: each makes the record unusable (a
# record nested too deep to read, RecursionError, as any other).
RECORD_READ_ERRORS = (
    KeyError,
    TypeError,
    ValueError,
    AttributeError,
    IndexError,
    OverflowError,
    RecursionError,
)


class UnusableRecord(ValueError):
    """A record that cannot be read as this version and these settings would write it."""


def stable_digest(message: BaseMessage) -> int:
    """A digest of what is sent of `message` (and its id), the same in every process.

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> stable_digest(HumanMessage("hi", id="a")) == stable_digest(HumanMessage("hi", id="a"))
        True
        >>> stable_digest(HumanMessage("hi", id="a")) == stable_digest(HumanMessage("hi", id="b"))
        False
    """
    return int.from_bytes(_stable_hash(message, _MESSAGE_DIGEST_BYTES).digest(), "big")


def _stable_hash(message: BaseMessage, size: int) -> Any:
    """BLAKE2b of what is sent of `message` and its id: its text read as it is, the
    rest (tool calls, extra fields, content blocks) as JSON with sorted keys."""
    call_id = message.tool_call_id if isinstance(message, ToolMessage) else None
    head = f"{message.type}\x1f{message.id}\x1f{message.name}\x1f{call_id}\x1f"
    digest = hashlib.blake2b(head.encode("utf-8", "surrogatepass"), digest_size=size)
    content = "" if message.content is None else message.content  # as the governor reads it
    if isinstance(content, str):
        digest.update(b"text\x1f")
        digest.update(content.encode("utf-8", "surrogatepass"))
    else:
        digest.update(b"blocks\x1f" + _json(content))
    if isinstance(message, AIMessage) and (message.tool_calls or message.invalid_tool_calls):
        digest.update(b"\x1ecalls" + tool_calls_json(message).encode("ascii"))
    if message.additional_kwargs:
        digest.update(b"\x1ekwargs" + _json(message.additional_kwargs))
    return digest


def _json(value: Any) -> bytes:
    # ensure_ascii: a lone surrogate is escaped, never an encoding error.
    return json.dumps(value, sort_keys=True, ensure_ascii=True, default=str).encode("ascii")


class HistoryDigest:
    """A process-independent digest of a history's content, grown as the history grows:
    taking in a history at once or call by call gives the same digest.

    Everything `_messages.message_key` tells messages apart by goes in: each message's
    id, class and content (text, or content blocks as JSON), its name, a result's call
    id, an assistant message's tool calls and its extra fields. A message changed in
    place (same id, same length, other text) gives another digest: ids and lengths
    never stand for content. Contents are read as the governor reads them (before they
    are checked: a `None` content as ""), and `all_text` says whether every content
    taken in is text, so the content check has nothing to look at in them. The text is
    hashed with SHA-256, which the processors the package runs on compute in hardware.

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> a, b = HumanMessage("a", id="1"), HumanMessage("bc", id="2")
        >>> def digest(*batches):
        ...     grown = HistoryDigest()
        ...     for batch in batches:
        ...         grown.add(batch)
        ...     return grown.hexdigest()
        >>> digest([a], [b]) == digest([a, b])
        True
        >>> digest([a]) == digest([HumanMessage("x", id="1")])  # same id, class and length
        False
        >>> digest([a]) == digest([b])
        False
    """

    def __init__(self) -> None:
        self._ids = hashlib.blake2b(digest_size=16)
        self._classes = hashlib.blake2b(digest_size=16)
        self._lengths = hashlib.blake2b(digest_size=16)
        self._texts = hashlib.sha256()
        self._extras = hashlib.sha256()
        self._count = 0
        self.all_text = True

    @property
    def count(self) -> int:
        """How many messages were taken in."""
        return self._count

    def copy(self) -> HistoryDigest:
        """An independent copy, to be grown apart from this one."""
        copied = HistoryDigest.__new__(HistoryDigest)
        copied._ids, copied._classes = self._ids.copy(), self._classes.copy()
        copied._lengths, copied._texts = self._lengths.copy(), self._texts.copy()
        copied._extras, copied._count = self._extras.copy(), self._count
        copied.all_text = self.all_text
        return copied

    def add(self, messages: Sequence[BaseMessage]) -> HistoryDigest:
        """Take in `messages`, after those taken in before; returns itself."""
        if not messages:
            return self
        messages = messages if isinstance(messages, list) else list(messages)
        ids = list(map(_ID, messages))
        try:
            # A join is a TypeError where an id is not text (None where a message has none).
            joined = "" if "" in ids else "\x1e".join(ids)
        except TypeError:
            joined = ""
        if not joined:
            joined = "\x1e".join(map(_identity, messages))
        classes = list(map(type, messages))
        names = {cls: cls.__name__ for cls in set(classes)}
        # Each id and class name ends with a separator, whatever the batch it came in.
        self._ids.update((joined + "\x1e").encode("utf-8", "surrogatepass"))
        self._classes.update(("\x1e".join(map(names.__getitem__, classes)) + "\x1e").encode())
        contents = list(map(_CONTENT, messages))
        kinds = set(map(type, contents))
        self.all_text = self.all_text and kinds <= {str}
        length = len if kinds <= {str, list} else compared_content_length
        # From a list: an array made from an iterator grows one element at a time.
        self._lengths.update(little_endian(array("q", list(map(length, contents)))))
        text = kinds <= {str}
        if text:
            self._texts.update("".join(contents).encode("utf-8", "surrogatepass"))
            sizes: list[int | None] = [None] * len(messages)
        else:
            sizes = list(map(self._add_content, contents))
        # One JSON text for the batch, made at once: its items, each followed by ", ", are
        # the same bytes whatever the batches, and each item ends where its JSON value
        # ends, so no text in it can pass for another's.
        self._extras.update(_json(list(map(_extra_fields, messages, sizes)))[1:-1] + b", ")
        self._count += len(messages)
        return self

    def _add_content(self, content: Any) -> int | None:
        """A content's text after those before it (the lengths tell where each ends); a
        content that is not text is its JSON, whose size is returned for the extras."""
        if content is None:
            return None
        if isinstance(content, str):
            self._texts.update(content.encode("utf-8", "surrogatepass"))
            return None
        encoded = _json(content)
        self._texts.update(encoded)
        return len(encoded)

    def hexdigest(self) -> str:
        parts = (self._ids, self._classes, self._lengths, self._texts, self._extras)
        combined = hashlib.blake2b(b"".join(part.digest() for part in parts), digest_size=16)
        return combined.hexdigest()


def _extra_fields(message: BaseMessage, content_size: int | None) -> Any:
    """What the digest reads of `message` besides its id, class and text, as JSON-ready
    data: its name, a result's call id, an assistant message's tool calls, its extra
    fields, and the JSON size of content that is not text (0 where it has none of them).
    Encoded with sorted keys: a message rebuilt from a checkpoint may hold its
    dictionaries' keys in another order."""
    call_id = message.tool_call_id if isinstance(message, ToolMessage) else None
    calls = invalid = None
    if isinstance(message, AIMessage) and (message.tool_calls or message.invalid_tool_calls):
        calls, invalid = message.tool_calls, message.invalid_tool_calls
    kwargs = message.additional_kwargs or None
    fields = (message.name, call_id, calls, invalid, kwargs, content_size)
    return 0 if fields == (None,) * len(fields) else fields


def _identity(message: BaseMessage) -> str:
    """A message's id, or for one without an id a digest of everything sent."""
    if message.id and isinstance(message.id, str):
        return message.id
    return f"\x00{stable_digest(message):x}"


def thread_digest(thread_id: str | None) -> str | None:
    """What a record keeps of the thread it was written for (None: a call without one).

    Example:
        >>> thread_digest("t-1") == thread_digest("t-1") != thread_digest("t-2")
        True
    """
    if thread_id is None:
        return None
    encoded = str(thread_id).encode("utf-8", "surrogatepass")
    return hashlib.blake2b(encoded, digest_size=8, person=b"thread").hexdigest()


def settings_digest(settings: Mapping[str, Any]) -> str:
    """A short digest of the settings that shape requests, kept in every record.

    Example:
        >>> settings_digest({"window": 8000}) == settings_digest({"window": 8000})
        True
        >>> settings_digest({"window": 8000}) == settings_digest({"window": 9000})
        False
    """
    text = json.dumps(
        {"version": RECORD_VERSION, **settings}, sort_keys=True, ensure_ascii=True, default=str
    )
    return hashlib.blake2b(text.encode("ascii"), digest_size=8).hexdigest()


def leading_equal(previous: array[int], current: array[int]) -> int:
    """How many leading fingerprints of `current` are those of `previous`.

    Compared in bulk (a slice of each at a time), so an unchanged request costs no loop
    over its messages.

    Example:
        >>> leading_equal(array("q", [1, 2, 3]), array("q", [1, 2, 4, 5]))
        2
    """
    size = min(len(previous), len(current))
    if previous[:size] == current[:size]:
        return size
    equal, unequal = 0, size
    while unequal - equal > 1:
        middle = (equal + unequal) // 2
        if previous[equal:middle] == current[equal:middle]:
            equal = middle
        else:
            unequal = middle
    return equal


@dataclass(frozen=True)
class HistoryMark:
    """The history a record was written for: its length and a digest of its content
    (`HistoryDigest`), so that what the record carries (the summary, the decisions, the
    values the note lists, the counts) is used only with the very content it came from."""

    count: int
    digest: str

    @classmethod
    def of(cls, messages: Sequence[BaseMessage]) -> HistoryMark:
        return cls(len(messages), HistoryDigest().add(list(messages)).hexdigest())

    def continued_by(self, messages: Sequence[BaseMessage]) -> bool:
        """Whether `messages` begins with the history marked, message for message."""
        if len(messages) < self.count:
            return False
        return HistoryDigest().add(list(messages[: self.count])).hexdigest() == self.digest


@dataclass(frozen=True)
class PreviousRequest:
    """The previous request of a conversation, as one digest per message.

    `digests` are process-independent, 8 bytes a message (what the record carries);
    `local` are the window's own fingerprints where this process made the request
    (cheap to compare, but salted per process).
    """

    digests: bytes
    local: array[int] | None = None

    def __len__(self) -> int:
        return len(self.digests) // _REQUEST_DIGEST_BYTES

    def followed_by(
        self,
        messages: Sequence[BaseMessage],
        local: array[int] | None,
        *,
        unchanged: int | None = None,
    ) -> tuple[PreviousRequest, int | None]:
        """The request of `messages` as the next previous request, and how many of its
        leading messages this one also began with, where only the digests can tell.

        Where both requests have local fingerprints (this process made them), the caller
        compared those (`unchanged`, where it did already): the count is None, and the
        digests of the unchanged messages are reused, so a call costs what changed.
        Otherwise (this request came from a record) every digest is computed once and
        compared.
        """
        size = _REQUEST_DIGEST_BYTES
        if self.local is not None and local is not None:
            if unchanged is None:
                unchanged = leading_equal(self.local, local)
            reused = unchanged * size
            digests = self.digests[:reused] + request_digests(messages[unchanged:])
            return PreviousRequest(digests, local), None
        digests = request_digests(messages)
        unchanged = 0
        for start in range(0, min(len(digests), len(self.digests)), size):
            if digests[start : start + size] != self.digests[start : start + size]:
                break
            unchanged += 1
        return PreviousRequest(digests, local), unchanged


def request_digests(messages: Sequence[BaseMessage]) -> bytes:
    """The process-independent digests of a request's messages, 8 bytes each."""
    return b"".join(_stable_hash(message, _REQUEST_DIGEST_BYTES).digest() for message in messages)


@dataclass(frozen=True)
class GovernanceRecord:
    """What a conversation's state keeps with the thread (see the module doc).

    `serial` is a digest of the record's content: a state knows whether the record it
    is given is the one it wrote last (its own state is then current) or one written
    since by another worker. The same state gives the same record on every worker.
    """

    settings: str
    history: HistoryMark
    thread: str | None = None
    summary: SummaryRecord | None = None
    previous_request: bytes | None = None
    over_budget_warned: bool = False
    truncation_warned: int | None = None
    calibration: Mapping[str, Any] | None = None
    resume: Mapping[str, Any] | None = None
    reasoning_warned: bool = False
    version: int = RECORD_VERSION

    @functools.cached_property
    def serial(self) -> str:
        """A digest of the record's content.

        `resume` is left out: it is what the history and the settings decide, and the
        history is in the content (`history`), so hashing it would cost the history again.
        """
        content = json.dumps(self._content(), sort_keys=True, ensure_ascii=True)
        return hashlib.blake2b(content.encode("ascii"), digest_size=8).hexdigest()

    def to_dict(self) -> dict[str, Any]:
        """The record as JSON- and msgpack-safe data (str, int, bool, None, list, dict)."""
        return {**self._content(), "resume": self.resume, "serial": self.serial}

    def _content(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "version": self.version,
            "settings": self.settings,
            "thread": self.thread,
            "history": {"count": self.history.count, "digest": self.history.digest},
            "over_budget_warned": self.over_budget_warned,
            "reasoning_warned": self.reasoning_warned,
            "truncation_warned": self.truncation_warned,
            "summary": None,
            "previous_request": None,
            "calibration": dict(self.calibration) if self.calibration is not None else None,
        }
        if self.summary is not None:
            data["summary"] = {
                "cut": self.summary.cut,
                "text": self.summary.text,
                "failed_cut": self.summary.failed_cut,
            }
        if self.previous_request is not None:
            data["previous_request"] = base64.b64encode(self.previous_request).decode("ascii")
        return data

    @classmethod
    def from_dict(
        cls,
        data: Any,
        *,
        settings: str,
        thread: str | None = None,
        max_summary_chars: int = DEFAULT_MAX_SUMMARY_CHARS,
    ) -> GovernanceRecord:
        """The record in `data`; `UnusableRecord` says why it cannot be used.

        A record is used only when written by this `RECORD_VERSION` under the same
        request-shaping `settings`, for the same `thread` (`thread_digest` of the call's
        thread id); anything else is rebuilt, never misread. A record is untrusted input
        (the graph state or a store gives it): a key it does not have, a value of another
        kind, a number out of the range the history it marks allows, a summary longer
        than `max_summary_chars` (what the governor's summary model may write) make it
        unusable, before anything is made of them. What `resume` holds is checked by the
        state that takes it up (`RepairStream.restore`, `CacheAwareReplay.restore`,
        `ContinuedRepair.restore`).
        """
        if not isinstance(data, Mapping):
            raise UnusableRecord(f"a record is a mapping, got {type(data).__name__}")
        if data.get("version") != RECORD_VERSION:
            raise UnusableRecord(
                f"record version {_shown(data.get('version'))}, expected {RECORD_VERSION}"
            )
        if data.get("settings") != settings:
            raise UnusableRecord("the record was written under other settings")
        if data.get("thread") != thread:
            raise UnusableRecord("the record was written for another thread")
        if set(data) != _RECORD_KEYS:
            raise UnusableRecord("the record has keys this version does not write")
        try:
            history = data["history"]
            count = _int(history["count"])
            # Positions of the repaired history (which repairs make longer, by a bounded
            # share) and messages of a request (the note's turns added) are bounded by it.
            positions = _MAX_MADE_A_MESSAGE * count + _ADDED_A_REQUEST
            return cls(
                settings=settings,
                thread=thread,
                history=HistoryMark(count, _hex_digest(history["digest"])),
                summary=_summary(data["summary"], positions, max_summary_chars),
                previous_request=_previous_request(data["previous_request"], positions),
                over_budget_warned=_flag(data["over_budget_warned"]),
                reasoning_warned=_flag(data["reasoning_warned"]),
                truncation_warned=_optional_int(data["truncation_warned"], count),
                calibration=_calibration(data["calibration"]),
                resume=_optional_mapping(data["resume"]),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise UnusableRecord(f"the record cannot be read: {error}") from error


def _summary(data: Any, positions: int, max_chars: int) -> SummaryRecord | None:
    if data is None:
        return None
    if not isinstance(data, Mapping) or set(data) != {"cut", "text", "failed_cut"}:
        raise ValueError("a summary of other fields")
    text = data["text"]
    if text is not None and (not isinstance(text, str) or len(text) > max_chars):
        raise ValueError(f"a summary longer than {max_chars} characters")
    return SummaryRecord(
        cut=_int(data["cut"], positions),
        text=text,
        failed_cut=_optional_int(data["failed_cut"], positions),
    )


def _previous_request(text: Any, positions: int) -> bytes | None:
    if text is None:
        return None
    if not isinstance(text, str) or len(text) > (_REQUEST_DIGEST_BYTES * positions + 2) // 3 * 4:
        raise ValueError("a previous request longer than the history allows")
    return _unpack(text)


def _calibration(data: Any) -> Mapping[str, Any] | None:
    if data is None:
        return None
    Calibration.from_dict(data)
    return dict(data)


def _flag(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"expected a flag, got {_shown(value)}")
    return value


def _shown(value: Any) -> str:
    """`value` in a message: a number as it is, anything else by its type (a record's
    value may be text of any length or a list nested thousands deep)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) < 10**20:
        return str(value)
    return type(value).__name__


def _hex_digest(value: Any) -> str:
    if not isinstance(value, str) or len(value) != 32 or value.strip("0123456789abcdef"):
        raise ValueError("expected a history digest")
    return value


def _int(value: Any, limit: int = _MAX_MESSAGES) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= limit:
        raise ValueError(f"expected a count of at most {limit}, got {_shown(value)}")
    return value


def _optional_int(value: Any, limit: int) -> int | None:
    return None if value is None else _int(value, limit)


def _optional_mapping(value: Any) -> Mapping[str, Any] | None:
    if value is not None and not isinstance(value, Mapping):
        raise ValueError(f"expected a mapping, got {type(value).__name__}")
    return value


def _optional_str(value: Any) -> str | None:
    if value is not None and not isinstance(value, str):
        raise ValueError(f"expected text, got {type(value).__name__}")
    return value


def _unpack(text: Any) -> bytes:
    packed = base64.b64decode(str(text), validate=True)
    if len(packed) % _REQUEST_DIGEST_BYTES:
        raise ValueError("the previous request's digests are cut short")
    return packed
