"""VAT: which rate applies to a line, and how much tax a line carries."""

from __future__ import annotations

from decimal import Decimal

from invoicing.models import BOOKS, FOOD, STANDARD, Customer, LineItem

EU_COUNTRIES = frozenset(
    {
        "AT",
        "BE",
        "BG",
        "CY",
        "CZ",
        "DE",
        "DK",
        "EE",
        "ES",
        "FI",
        "FR",
        "GR",
        "HR",
        "HU",
        "IE",
        "IT",
        "LT",
        "LU",
        "LV",
        "MT",
        "NL",
        "PL",
        "PT",
        "RO",
        "SE",
        "SI",
        "SK",
    }
)

# Rates we invoice with today; other EU countries are refused until someone checks them.
STANDARD_RATES = {
    "DE": Decimal("0.19"),
    "FR": Decimal("0.20"),
    "NL": Decimal("0.21"),
    "AT": Decimal("0.20"),
    "BE": Decimal("0.21"),
}

REDUCED_RATES = {
    "DE": {BOOKS: Decimal("0.07"), FOOD: Decimal("0.07")},
    "FR": {BOOKS: Decimal("0.055"), FOOD: Decimal("0.055")},
    "NL": {BOOKS: Decimal("0.09"), FOOD: Decimal("0.09")},
}

ZERO = Decimal("0")


class UnknownTaxRate(LookupError):
    """A country inside the EU for which no rate is configured."""


def rate_for(customer: Customer, category: str = STANDARD) -> Decimal:
    """The VAT rate for a line of `category` sold to `customer`.

    Exports outside the EU are zero-rated; EU customers with a VAT id are
    reverse-charged, so we charge no VAT either.
    """
    country = customer.country.upper()
    if country not in EU_COUNTRIES:
        return ZERO
    if customer.vat_id and country != "DE":
        return ZERO
    if country not in STANDARD_RATES:
        raise UnknownTaxRate(f"no VAT rate configured for {country}")
    reduced = REDUCED_RATES.get(country, {})
    return reduced.get(category, STANDARD_RATES[country])


def tax_for_item(item: LineItem, customer: Customer) -> Decimal:
    """Tax on one line, not rounded: rate times the line's net amount."""
    return item.unit_price * rate_for(customer, item.category)


def tax_by_rate(items: list[LineItem], customer: Customer) -> dict[Decimal, Decimal]:
    """Tax grouped by rate, for the summary at the bottom of the invoice."""
    grouped: dict[Decimal, Decimal] = {}
    for item in items:
        rate = rate_for(customer, item.category)
        grouped[rate] = grouped.get(rate, ZERO) + tax_for_item(item, customer)
    return grouped
