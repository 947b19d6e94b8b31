"""The cache-aware replay's state in a record, and back: its snapshot and its restore.

A thread's next call usually lands on another worker (state/record.py). The replay's
state (state/replay_state.py) and its decisions (policy/decisions.py) go in the record's
`resume` as plain data: positions, counts and tool names, its columns packed as text
(`_packing.PackedInts`, continued from call to call so that a growing history packs only
what is new), no message and no fingerprint, which every process salts anew. A worker
that takes it up continues at the cost of what is new instead of replaying the history.

A snapshot read back is untrusted input: every column and number is bounded by the
history it describes before anything is made of it, and checked against the others
(sums, positions, protection classes). What needs the messages themselves is checked by
the replay at its next plan (`CacheAwareReplay._check_restored`).
"""

from __future__ import annotations

import bisect
import itertools
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from langchain_context_governance._packing import PackedInts, as_count, pack_ints
from langchain_context_governance.policy.decisions import (
    NOTE_NONE,
    Decisions,
    KeptGroup,
)
from langchain_context_governance.policy.left_out import LeftOut
from langchain_context_governance.policy.protection import EARLIER_USER, EXCLUDED_TOOL
from langchain_context_governance.state.record import RECORD_READ_ERRORS
from langchain_context_governance.state.replay_state import ReplayLearning
from langchain_context_governance.tokens.calibration import Calibration

__all__ = ["ReplayColumns", "RestoredReplay", "restore_replay", "snapshot_replay"]

# The decisions that are numbers, flags or None (the others are converted one by one).
_PLAIN_DECISIONS = tuple(
    item.name
    for item in fields(Decisions)
    if item.name not in ("kept_groups", "calibration", "note_values", "left_out")
)
_DECISION_KEYS = frozenset(item.name for item in fields(Decisions))
_FLAG_DECISIONS = frozenset({"task_pinned", "pinned_kept"})
_OPTIONAL_DECISIONS = frozenset({"pinned", "last_user_before_cut"})

# What a replay section of a record may hold, beyond which it is no snapshot this replay
# wrote: a message's tokens, a tool name's characters.
_MAX_MESSAGE_TOKENS = 1 << 40
_MAX_NAME_CHARS = 1_024


class _NameTable:
    """Tool names numbered in the order they first come, so a record carries each once."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self._numbers: dict[str, int] = {}

    def take_up(self, names: Any) -> None:
        """Number `names` (a snapshot's list of them) first, in their order."""
        if not isinstance(names, list):
            raise ValueError(f"expected a list of tool names, got {type(names).__name__}")
        for name in names:
            self.index(str(name))

    def index(self, name: str) -> int:
        number = self._numbers.get(name)
        if number is None:
            number = self._numbers[name] = len(self.names)
            self.names.append(name)
        return number


@dataclass
class ReplayColumns:
    """The replay's columns as its snapshot packs them, packed as they grow, and the tool
    names they number."""

    # Numbered in the order they come in the column, so that the same replay gives the
    # same snapshot whatever calls it was made in.
    result_names: _NameTable = field(default_factory=lambda: _NameTable())
    tokens: PackedInts = field(default_factory=lambda: PackedInts("i"))
    system_indices: PackedInts = field(default_factory=lambda: PackedInts("i"))
    compactable: PackedInts = field(default_factory=lambda: PackedInts("i"))
    compactable_names: PackedInts = field(default_factory=lambda: PackedInts("i"))
    excluded: PackedInts = field(default_factory=lambda: PackedInts("i"))
    users: PackedInts = field(default_factory=lambda: PackedInts("i"))
    added: PackedInts = field(default_factory=lambda: PackedInts("i"))


def snapshot_replay(
    packed: ReplayColumns,
    replay: ReplayLearning,
    decisions: Decisions,
    *,
    fixed: int,
    known: int,
    sent_compacted: Sequence[int],
    offloading: bool,
) -> dict[str, Any]:
    """The replay's decisions at its `known` final positions as plain data a record
    carries, its columns packed by `packed` (which keeps them for the next snapshot);
    `sent_compacted`: the positions the latest request sent compacted, whose counts it
    carries."""
    return {
        "fixed": fixed,
        "known": known,
        "tokens": packed.tokens.pack(replay.tokens),
        "system_indices": packed.system_indices.pack(replay.system_indices),
        "compactable": packed.compactable.pack(replay.compactable),
        # In the order of `compactable`, as they were learned.
        "compactable_names": packed.compactable_names.pack(
            replay.compactable_names.values(), packed.result_names.index
        ),
        "result_names": list(packed.result_names.names),
        "excluded": packed.excluded.pack(replay.excluded),
        "users": packed.users.pack(replay.users),
        "added": packed.added.pack(replay.added),
        "tool_names": list(replay.tool_names),
        "compacted_tokens": _sent_compacted_tokens(replay, sent_compacted, known),
        "task": [
            replay.task,
            replay.task_fits,
            replay.task_cut,
            replay.task_copied,
            replay.task_tokens,
        ],
        "decisions": {
            **{name: getattr(decisions, name) for name in _PLAIN_DECISIONS},
            "kept_groups": [[g.start, g.stop, g.tokens, g.why] for g in decisions.kept_groups],
            "calibration": decisions.calibration.to_dict(),
            "note_values": decisions.note_values,
            "left_out": decisions.left_out.to_data(),
        },
        # Only where on, so a record of a replay that does not offload is as it was.
        **({"offload": True} if offloading else {}),
    }


def _sent_compacted_tokens(
    replay: ReplayLearning, sent_compacted: Sequence[int], known: int
) -> list[str]:
    """What the placeholders of the latest request's compacted results at final
    positions cost, as two packed columns (positions, tokens): a replay restored from
    them neither copies nor counts those results again."""
    counted = replay.compacted_tokens
    positions = [index for index in sent_compacted if index < known]
    return [pack_ints(positions, "i"), pack_ints(map(counted.__getitem__, positions), "i")]


@dataclass(frozen=True)
class RestoredReplay:
    """A replay's state taken up from its snapshot: the final positions it describes,
    the fixed tokens of its calls, whether it offloads, what it learned and decided, and
    its columns packed as the snapshot had them (the next snapshot continues them)."""

    known: int
    fixed: int
    offloading: bool
    replay: ReplayLearning
    decisions: Decisions
    packed: ReplayColumns


def restore_replay(
    data: Mapping[str, Any],
    *,
    final: int,
    max_note_values_tokens: int,
    max_note_values_chars: int,
) -> RestoredReplay | None:
    """The state in `data` (a `snapshot_replay` of at most `final` positions), each column
    and number bounded by the history it describes and checked against the others; None
    where it cannot be read. `max_note_values_tokens` and `max_note_values_chars`: the
    most the replay's policy lets the values its note lists take."""
    packed = ReplayColumns()
    try:
        known = _bounded_count(data["known"], final)
        replay = _restored_replay(data, packed, known)
        decisions = _restored_decisions(
            data["decisions"],
            replay,
            known,
            max_note_values_tokens=max_note_values_tokens,
            max_note_values_chars=max_note_values_chars,
        )
        fixed = _bounded_count(data["fixed"], _MAX_MESSAGE_TOKENS)
        offloading = data.get("offload") is True
        replay.compacted_tokens = _restored_compacted_tokens(data["compacted_tokens"], replay)
    except RECORD_READ_ERRORS:
        return None
    return RestoredReplay(known, fixed, offloading, replay, decisions, packed)


def _restored_replay(data: Mapping[str, Any], packed: ReplayColumns, known: int) -> ReplayLearning:
    """The replay's learning in `data` (a snapshot) of `known` final positions, with
    `packed` continued from it; a ValueError where anything in it is out of range."""
    packed.result_names.take_up(_names(data["result_names"], known))
    # Read only (the columns kept are lists): as written, not widened.
    compactable = _positions(
        _column(packed.compactable, data["compactable"], limit=known, wide=False), known
    )
    result_names = packed.result_names.names
    compactable_names = _column(
        packed.compactable_names, data["compactable_names"], limit=known, wide=False
    )
    if len(compactable_names) != len(compactable) or any(
        not 0 <= number < len(result_names) for number in compactable_names
    ):
        raise ValueError("the compactable results' names are not in the table")
    tokens = _column(packed.tokens, data["tokens"], limit=known)
    if len(tokens) != known or (
        tokens and not 0 <= min(tokens) <= max(tokens) <= _MAX_MESSAGE_TOKENS
    ):
        raise ValueError("the counts do not match the positions read")
    system_indices = _positions(
        _column(packed.system_indices, data["system_indices"], limit=known, wide=False), known
    )
    excluded = _positions(
        _column(packed.excluded, data["excluded"], limit=known, wide=False), known
    )
    users = _positions(_column(packed.users, data["users"], limit=known, wide=False), known)
    added = _positions(_column(packed.added, data["added"], limit=known, wide=False), known)
    kinds = [set(system_indices), set(compactable), set(excluded), set(users), set(added)]
    if sum(map(len, kinds)) != len(set().union(*kinds)):
        raise ValueError("a position in two columns")
    task, task_fits, task_cut, task_copied, task_tokens = data["task"]
    if task is not None and as_count(task) not in kinds[3]:
        raise ValueError("the task is no user message")
    return ReplayLearning(
        tokens=tokens,
        # Unknown here (salted per process): zeros, found when read.
        prints=array("q", bytes(8 * len(tokens))),
        prints_unknown_below=len(tokens),
        system_indices=system_indices,
        compactable=compactable,
        compactable_names=dict(
            zip(compactable, map(result_names.__getitem__, compactable_names), strict=True)
        ),
        excluded=excluded,
        users=users,
        added=added,
        tool_names=dict.fromkeys(_names(data["tool_names"], known)),
        task=task,
        task_fits=_flag(task_fits),
        task_cut=_flag(task_cut),
        task_copied=_flag(task_copied),
        task_tokens=_bounded_count(task_tokens, _MAX_MESSAGE_TOKENS),
    )


def _restored_compacted_tokens(data: Any, replay: ReplayLearning) -> dict[int, int]:
    """The placeholder counts a snapshot carries (`snapshot_replay`), each of a
    compactable result at a position read (the latest request may have compacted results
    the final decisions have not yet); a ValueError where they are not."""
    limit = len(replay.compactable)
    positions_column, tokens_column = data
    positions = _column(PackedInts("i"), positions_column, limit=limit).tolist()
    tokens = _column(PackedInts("i"), tokens_column, limit=limit).tolist()
    compactable = replay.compactable
    ranks = [bisect.bisect_left(compactable, position) for position in positions]
    if (
        len(positions) != len(tokens)
        or not all(0 <= count <= _MAX_MESSAGE_TOKENS for count in tokens)
        or any(rank >= limit for rank in ranks)
        or [compactable[rank] for rank in ranks] != positions
    ):
        raise ValueError("the compacted counts are not of compactable results")
    return dict(zip(positions, tokens, strict=True))


def _restored_decisions(
    data: Mapping[str, Any],
    replay: ReplayLearning,
    known: int,
    *,
    max_note_values_tokens: int,
    max_note_values_chars: int,
) -> Decisions:
    """The decisions in `data` (a snapshot's), each bounded by the replay's learning of the
    `known` positions it describes and consistent with it (sums, protection classes); a
    ValueError where not. Those that need the history are checked at the first plan
    (`CacheAwareReplay._check_restored`)."""
    if set(data) != _DECISION_KEYS:
        raise ValueError("decisions this replay does not make")
    plain: dict[str, Any] = {}
    for name in _PLAIN_DECISIONS:
        value = data[name]
        if name in _FLAG_DECISIONS:
            plain[name] = _flag(value)
        elif value is None and name in _OPTIONAL_DECISIONS:
            plain[name] = None
        else:
            plain[name] = _bounded_count(value, _MAX_MESSAGE_TOKENS * max(known, 1))
    decisions = Decisions(
        **plain,
        kept_groups=_restored_kept_groups(data["kept_groups"], replay, plain["cut"]),
        calibration=Calibration.from_dict(data["calibration"]),
        note_values=_text(data["note_values"], max_note_values_chars),
        left_out=LeftOut.from_data(data["left_out"], limit=known + 1),
    )
    tokens = replay.tokens
    users = replay.users
    groups = decisions.kept_groups
    latest = bisect.bisect_left(users, decisions.cut) - 1
    if not (
        decisions.cut <= known
        and decisions.compacted_count <= len(replay.compactable)
        and decisions.raw_tokens == sum(tokens)
        and decisions.system_tokens == sum(tokens[index] for index in replay.system_indices)
        and decisions.history_tokens <= decisions.raw_tokens - decisions.system_tokens
        and decisions.last_user_before_cut == (users[latest] if latest >= 0 else None)
        and decisions.pinned in (None, decisions.last_user_before_cut)
        and (
            not decisions.task_pinned
            or (replay.task is not None and replay.task < decisions.cut and replay.task_fits)
        )
        and decisions.kept_tokens == sum(group.tokens for group in groups)
        and decisions.kept_excluded_tokens
        == sum(group.tokens for group in groups if group.why == EXCLUDED_TOOL)
        and decisions.kept_messages == sum(group.stop - group.start for group in groups)
        and decisions.pinned_kept
        == (decisions.pinned is not None and any(g.start == decisions.pinned for g in groups))
        and decisions.readmit_tokens <= decisions.raw_tokens
        and decisions.rules_tokens == 0
        and 0 <= decisions.note_variant <= NOTE_NONE
        and decisions.note_values_tokens <= max_note_values_tokens
        and bool(decisions.note_values) == (decisions.note_values_tokens > 0)
    ):
        raise ValueError("decisions inconsistent with the history they describe")
    return decisions


def _restored_kept_groups(data: Any, replay: ReplayLearning, cut: int) -> tuple[KeptGroup, ...]:
    """The groups kept before the cut: within it, in order, apart, each of its class (a
    user message, or a call with a result of an excluded tool), each costing at most what
    its messages do."""
    if not isinstance(data, list) or len(data) > cut:
        raise ValueError("more kept groups than messages before the cut")
    groups: list[KeptGroup] = []
    after = 0
    users, excluded = set(replay.users), replay.excluded
    for start, stop, tokens, why in data:
        group = KeptGroup(as_count(start), as_count(stop), as_count(tokens), why)
        raw = sum(replay.tokens[group.start : group.stop])
        first_excluded = bisect.bisect_left(excluded, group.start)
        of_its_class = (
            group.start in users
            if why == EARLIER_USER
            else why == EXCLUDED_TOOL
            and first_excluded < len(excluded)
            and excluded[first_excluded] < group.stop
        )
        if not (after <= group.start < group.stop <= cut and group.tokens <= raw and of_its_class):
            raise ValueError("a kept group out of the history before the cut")
        after = group.stop
        groups.append(group)
    return tuple(groups)


def _column(column: PackedInts, text: Any, *, limit: int, wide: bool = True) -> array[int]:
    """`column.take_up(text)`, where `text` holds at most `limit` integers: its length is
    checked before anything is decoded, so a record cannot make a replay allocate more
    than its history is worth."""
    if not isinstance(text, str) or len(text) > 8 + (8 * limit + 2) // 3 * 4:
        raise ValueError("a column longer than the history it describes")
    values = column.take_up(text, wide=wide)
    if len(values) > limit:
        raise ValueError("a column longer than the history it describes")
    return values


def _positions(values: array[int], known: int) -> list[int]:
    """Positions in the order the replay learns them: ascending, each once, below `known`."""
    positions = values.tolist()
    if positions and (
        positions[0] < 0
        or positions[-1] >= known
        or any(b <= a for a, b in itertools.pairwise(positions))
    ):
        raise ValueError("positions out of order or out of the history")
    return positions


def _names(value: Any, limit: int) -> list[str]:
    if (
        not isinstance(value, list)
        or len(value) > limit
        or not all(isinstance(name, str) and len(name) <= _MAX_NAME_CHARS for name in value)
    ):
        raise ValueError("tool names that are not a short list of short names")
    return value


def _text(value: Any, limit: int) -> str:
    if not isinstance(value, str) or len(value) > limit:
        raise ValueError(f"expected text of at most {limit} characters")
    return value


def _flag(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"expected a flag, got {type(value).__name__}")
    return value


def _bounded_count(value: Any, limit: int) -> int:
    count = as_count(value)
    if count > limit:
        raise ValueError(f"a count of {count} where at most {limit} is possible")
    return count
