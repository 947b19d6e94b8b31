"""Integers as compact text, for state a record carries (state/record.py).

A record is plain data (JSON- and msgpack-safe), written on every call: columns of
integers (positions, counts, call-id digests) go in it as base64 of little-endian
integers, and `PackedInts` keeps a growing column's text so that writing it again costs
only what was added.

Example:
    >>> unpack_ints(pack_ints([1, 2, 300], "i")).tolist()
    [1, 2, 300]
"""

from __future__ import annotations

import base64
import sys
from array import array
from collections.abc import Callable, Collection, Iterable, Reversible
from itertools import islice
from typing import Any

__all__ = ["PackedInts", "as_count", "little_endian", "pack_ints", "unpack_ints"]


def pack_ints(values: Iterable[int], typecode: str = "q") -> str:
    """Integers as text a record carries: base64 of little-endian integers of `typecode`
    ("i": 4 bytes, "q": 8), after its letter; 8 bytes where a value does not fit in 4.

    Example:
        >>> pack_ints([3, -1, 70_000], "i")
        'i:AwAAAP////9wEQEA'
        >>> unpack_ints(pack_ints([3, -1, 70_000], "i")).tolist()
        [3, -1, 70000]
    """
    return PackedInts(typecode).pack(values if isinstance(values, Collection) else list(values))


class PackedInts:
    """A column of integers that only grows, packed as `pack_ints` packs it at the cost of
    what was added since the last `pack`: a record written on every call costs the new
    positions, not the history. A column that shrank since is packed anew.

    What is kept is the text itself, once: the base64 of every whole three bytes so far
    (base64 turns three bytes into four characters, so text made of such groups only grows
    at its end), then that of the one or two bytes after them (`_tail`), which the next
    `pack` makes again with what was added.
    """

    __slots__ = ("_count", "_packed", "_tail", "_typecode", "_wanted", "_whole")

    def __init__(self, typecode: str = "q") -> None:
        if typecode not in ("i", "q"):
            raise ValueError(f"typecode must be 'i' or 'q', got {typecode!r}")
        self._wanted = typecode
        self._start_over(typecode)

    def _start_over(self, typecode: str) -> None:
        self._typecode, self._count, self._tail = typecode, 0, b""
        self._packed = f"{typecode}:"
        # Where the text of the tail's bytes starts in the packed text.
        self._whole = len(self._packed)

    def pack(self, values: Collection[Any], number: Callable[[Any], int] | None = None) -> str:
        """`values` (the column now: what it held at the last call, and more) packed,
        each as `number(value)` where given (it must number a value the same way on
        every call)."""
        if len(values) < self._count:
            self._start_over(self._wanted)
        if len(values) == self._count:
            return self._packed
        if isinstance(values, (array, list)):
            new: Iterable[Any] = values[self._count :]
        elif isinstance(values, Reversible):
            # A dict or one of its views: walked from its end, so only what was added is
            # read (from the start, every call would walk the whole column).
            new = list(islice(reversed(values), len(values) - self._count))[::-1]
        else:
            new = islice(values, self._count, None)
        if number is not None:
            new = map(number, new)
        try:
            added = self._tail + little_endian(array(self._typecode, new))
        except OverflowError:
            self._start_over("q")
            return self.pack(values, number)
        whole = len(added) - len(added) % 3
        head = self._packed[: self._whole] + base64.b64encode(added[:whole]).decode("ascii")
        self._tail, self._count, self._whole = added[whole:], len(values), len(head)
        self._packed = head + base64.b64encode(self._tail).decode("ascii")
        return self._packed

    def take_up(self, text: Any, *, wide: bool = True) -> array[int]:
        """The integers of `text` (a column's `pack`), and this column continued from them:
        the next `pack` of them and more adds only the more. `wide`: see `unpack_ints`."""
        values = unpack_ints(text, wide=wide)
        # One or two bytes after the whole groups are four characters ending in "=".
        self._whole = len(text) - 4 if text.endswith("=") else len(text)
        self._tail = base64.b64decode(text[self._whole :])
        self._typecode, self._count, self._packed = text[0], len(values), text
        return values


def unpack_ints(text: Any, *, wide: bool = True) -> array[int]:
    """The integers `pack_ints` wrote, as 8-byte integers (as written where not `wide`:
    for a caller that only reads them, never appends); a ValueError where `text` is not
    such data.

    Example:
        >>> unpack_ints("i:AwAAAA==").typecode, unpack_ints("i:AwAAAA==", wide=False).typecode
        ('q', 'i')
    """
    if not isinstance(text, str) or text[:2] not in ("i:", "q:"):
        raise ValueError(f"expected packed integers, got {_shown(text)}")
    narrow = array(text[0])
    narrow.frombytes(base64.b64decode(text[2:], validate=True))
    if sys.byteorder != "little":
        narrow.byteswap()
    # From a list: an array made from an array reads it one element at a time.
    return narrow if not wide or narrow.typecode == "q" else array("q", narrow.tolist())


def _shown(value: Any) -> str:
    """`value` in an error message: a number as it is, anything else by its type (a value
    read from a record may be text of any length or a list nested thousands deep)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) < 10**20:
        return str(value)
    return type(value).__name__


def little_endian(values: array[int]) -> bytes:
    if sys.byteorder != "little":
        values = array(values.typecode, values)
        values.byteswap()
    return values.tobytes()


def as_count(value: Any) -> int:
    """`value` where it is a count (an int >= 0, not a bool); a ValueError naming it where not."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"expected a count, got {_shown(value)}")
    return value
