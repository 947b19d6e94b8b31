"""Money amounts: Decimal everywhere, rounded once, to cents, when shown or stored."""

from __future__ import annotations

from collections.abc import Iterable
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation

CENT = Decimal("0.01")

# Symbols that go right before the digits; other currencies get their code and a space.
CURRENCY_SYMBOLS = {
    "EUR": "€",
    "USD": "$",
    "GBP": "£",
    "CHF": "CHF ",
}


class MoneyError(ValueError):
    """An amount that cannot be read or a currency we do not invoice in."""


def to_decimal(value: Decimal | int | str) -> Decimal:
    """Read an amount exactly; floats are refused because 0.1 is not 0.1."""
    if isinstance(value, float):
        raise MoneyError(f"amounts must not be floats, got {value!r}")
    try:
        return Decimal(value)
    except InvalidOperation as error:
        raise MoneyError(f"not an amount: {value!r}") from error


def round_money(amount: Decimal) -> Decimal:
    """Round to cents, half up: 0.125 becomes 0.13, as on paper invoices."""
    return amount.quantize(CENT, rounding=ROUND_HALF_EVEN)


def sum_money(amounts: Iterable[Decimal]) -> Decimal:
    """Add amounts without rounding; round the result once, where it is shown."""
    total = Decimal("0")
    for amount in amounts:
        total += amount
    return total


def split_evenly(amount: Decimal, parts: int) -> list[Decimal]:
    """Split a rounded amount into `parts` instalments that add up to it exactly.

    The first instalments carry the leftover cents: 100.00 in 3 parts is
    33.34, 33.33, 33.33.
    """
    if parts < 1:
        raise MoneyError(f"parts must be at least 1, got {parts}")
    cents = int(round_money(amount) / CENT)
    base, leftover = divmod(cents, parts)
    return [(base + (1 if index < leftover else 0)) * CENT for index in range(parts)]


def currency_symbol(currency: str) -> str:
    """The prefix printed before an amount in `currency`."""
    if len(currency) != 3 or not currency.isalpha() or not currency.isupper():
        raise MoneyError(f"currency must be a three-letter ISO code, got {currency!r}")
    return CURRENCY_SYMBOLS.get(currency, f"{currency} ")


def format_money(amount: Decimal, currency: str) -> str:
    """Format an amount for people: symbol, thousands separators, two decimals."""
    symbol = currency_symbol(currency)
    return f"{symbol}{round_money(amount):,.2f}"
