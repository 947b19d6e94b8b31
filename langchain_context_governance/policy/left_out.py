"""The history positions whose bound reasoning an edit put behind a changed prefix.

A thinking block (Anthropic) or a reasoning item (OpenAI) is valid only while everything
before it is what the model saw when it made it. Where a call point's request differs from
the one before it at position `e` (a result compacted, the front after a cut rebuilt, a
late system message moved to the front), every message made by an earlier call at a
position after `e` now sits behind a prefix it was not made after. Those positions are kept
here as half-open ranges, one field of the policy's decisions (`policy/decisions.py`);
validity is lost for good (a later request is never assumed to have come back to an old
prefix). What a request does with them is state/binding.py's.

The ranges travel in the record, bounded: past `MAX_RANGES` the two oldest are merged
(which only leaves out more, never less).

Example:
    >>> left_out = LeftOut()
    >>> left_out = left_out.edited(at=4, call=9)  # call 9's request changed position 4
    >>> [left_out.covers(position) for position in (3, 4, 5, 8, 9)]
    [False, False, True, True, False]
    >>> left_out.edited(at=-1, call=12).ranges
    ((0, 12),)
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["MAX_RANGES", "LeftOut"]

# Ranges a record carries at most; an agent that edits in many places between bound
# messages (the last resort on every call) merges its oldest ones instead.
MAX_RANGES = 32


@dataclass(frozen=True)
class LeftOut:
    """Sorted, disjoint, half-open ranges of history positions whose bound reasoning is
    invalid. Immutable: the replay copies its decisions for the current call cheaply."""

    ranges: tuple[tuple[int, int], ...] = ()

    def covers(self, position: int) -> bool:
        """Whether the message at `position` lost the prefix its reasoning was made after."""
        index = bisect.bisect_right(self.ranges, (position, float("inf"))) - 1
        return index >= 0 and self.ranges[index][0] <= position < self.ranges[index][1]

    def edited(self, *, at: int, call: int) -> LeftOut:
        """The ranges after the request of the call on the first `call` messages changed
        position `at` (-1: before every message): messages `at + 1` to `call - 1` lost it."""
        return self.with_range(at + 1, call)

    def with_range(self, start: int, stop: int) -> LeftOut:
        """The ranges with `[start, stop)` added, merged with those it meets."""
        start = max(start, 0)
        if stop <= start:
            return self
        kept: list[tuple[int, int]] = []
        for low, high in self.ranges:
            if high < start or low > stop:
                kept.append((low, high))
            else:
                start, stop = min(start, low), max(stop, high)
        kept.append((start, stop))
        kept.sort()
        while len(kept) > MAX_RANGES:
            (low, _), (_, high) = kept[0], kept[1]
            kept[:2] = [(low, high)]
        return LeftOut(tuple(kept))

    def below(self, position: int) -> LeftOut:
        """The ranges cut at `position`: what is known of the messages before it."""
        ranges = [(low, min(high, position)) for low, high in self.ranges if low < position]
        return LeftOut(tuple(ranges))

    def to_data(self) -> list[list[int]]:
        """The ranges as plain data, for a record."""
        return [[low, high] for low, high in self.ranges]

    @classmethod
    def from_data(cls, data: Any, *, limit: int) -> LeftOut:
        """The ranges in `data` (`to_data`), each within the first `limit` positions; a
        ValueError where they are not sorted, disjoint, bounded ranges."""
        if not isinstance(data, Sequence) or len(data) > MAX_RANGES:
            raise ValueError("the left-out ranges are not a short list")
        ranges: list[tuple[int, int]] = []
        # A record is untrusted: what it holds is named by its type, never shown (it may be
        # text of any length, or a list nested thousands deep, which has no repr).
        for item in data:
            if not isinstance(item, Sequence) or len(item) != 2:
                raise ValueError(f"a left-out range is a pair, got a {type(item).__name__}")
            low, high = item
            if not all(isinstance(v, int) and not isinstance(v, bool) for v in (low, high)):
                raise ValueError("a left-out range holds positions, got other values")
            if not 0 <= low < high <= limit or (ranges and low <= ranges[-1][1]):
                raise ValueError("a left-out range is out of order or out of bounds")
            ranges.append((low, high))
        return cls(tuple(ranges))
