from decimal import Decimal

import pytest
from invoicing.money import (
    MoneyError,
    currency_symbol,
    format_money,
    round_money,
    split_evenly,
    to_decimal,
)


def test_to_decimal_reads_strings_exactly() -> None:
    assert to_decimal("19.99") == Decimal("19.99")


def test_to_decimal_refuses_floats() -> None:
    with pytest.raises(MoneyError, match="floats"):
        to_decimal(19.99)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("0.125", "0.13"),
        ("2.345", "2.35"),
        ("1.005", "1.01"),
        ("0.124", "0.12"),
        ("-0.125", "-0.13"),
    ],
)
def test_round_half_up(value: str, expected: str) -> None:
    assert round_money(Decimal(value)) == Decimal(expected)


def test_split_evenly_carries_leftover_cents() -> None:
    parts = split_evenly(Decimal("100.00"), 3)
    assert parts == [Decimal("33.34"), Decimal("33.33"), Decimal("33.33")]
    assert sum(parts) == Decimal("100.00")


def test_split_evenly_refuses_zero_parts() -> None:
    with pytest.raises(MoneyError, match="at least 1"):
        split_evenly(Decimal("10"), 0)


@pytest.mark.parametrize(
    ("amount", "currency", "expected"),
    [
        ("1234.5", "EUR", "€1,234.50"),
        ("19.99", "USD", "$19.99"),
        ("250", "CHF", "CHF 250.00"),
        ("7.5", "SEK", "SEK 7.50"),
    ],
)
def test_format_money(amount: str, currency: str, expected: str) -> None:
    assert format_money(Decimal(amount), currency) == expected


def test_currency_must_be_iso_code() -> None:
    with pytest.raises(MoneyError, match="three-letter"):
        currency_symbol("euro")
