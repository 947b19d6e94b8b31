"""The left-out ranges: which messages' bound reasoning lost its prefix, bounded for a record."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from langchain_context_governance.policy.left_out import MAX_RANGES, LeftOut

edits = st.lists(st.tuples(st.integers(-1, 200), st.integers(0, 201)), max_size=80)


@given(edits=edits)
def test_a_position_an_edit_reached_stays_left_out(edits: list[tuple[int, int]]) -> None:
    left_out = LeftOut()
    reached: set[int] = set()
    for at, call in edits:
        left_out = left_out.edited(at=at, call=call)
        reached.update(range(max(at + 1, 0), call))
        assert all(left_out.covers(position) for position in reached)
    ranges = left_out.ranges
    assert len(ranges) <= MAX_RANGES
    assert all(low < high for low, high in ranges)
    assert all(a[1] < b[0] for a, b in itertools.pairwise(ranges))


def test_ranges_that_meet_merge_and_past_the_cap_the_oldest_merge() -> None:
    left_out = LeftOut().with_range(2, 4).with_range(4, 6)
    assert left_out.ranges == ((2, 6),)
    many = LeftOut()
    for start in range(0, 4 * (MAX_RANGES + 3), 4):
        many = many.with_range(start, start + 1)
    assert len(many.ranges) == MAX_RANGES
    assert many.ranges[0][0] == 0 and many.covers(2)  # merged over the gap: more left out


@pytest.mark.parametrize(
    "data",
    [
        [[3, 2]],
        [[0, 5], [4, 9]],
        [[0, 11]],
        [[-1, 2]],
        [[0, True]],
        [[1, 2, 3]],
        "0-2",
        [[0, 1]] * (MAX_RANGES + 1),
    ],
)
def test_a_record_s_ranges_are_checked(data: object) -> None:
    with pytest.raises(ValueError):
        LeftOut.from_data(data, limit=10)


def test_a_record_s_ranges_read_back() -> None:
    left_out = LeftOut().with_range(1, 3).with_range(5, 9)
    assert LeftOut.from_data(left_out.to_data(), limit=9) == left_out
