from decimal import Decimal

import pytest
from invoicing.models import BOOKS, Customer, Invoice, LineItem
from invoicing.tax import UnknownTaxRate, rate_for, tax_by_rate, tax_for_item


def test_standard_rate_germany(berlin_customer: Customer) -> None:
    assert rate_for(berlin_customer) == Decimal("0.19")


def test_reduced_rate_for_books_in_france() -> None:
    paris = Customer(name="Librairie du Canal", country="FR")
    assert rate_for(paris, BOOKS) == Decimal("0.055")


def test_exports_are_zero_rated(us_customer: Customer) -> None:
    assert rate_for(us_customer) == Decimal("0")


def test_reverse_charge_for_eu_business(dutch_business: Customer) -> None:
    assert rate_for(dutch_business) == Decimal("0")


def test_unknown_eu_rate_raises() -> None:
    warsaw = Customer(name="Wisła Software", country="PL")
    with pytest.raises(UnknownTaxRate, match="PL"):
        rate_for(warsaw)


def test_tax_uses_quantity(berlin_customer: Customer) -> None:
    item = LineItem("Code review (hours)", 3, Decimal("100.00"))
    assert tax_for_item(item, berlin_customer) == Decimal("57.00")


def test_tax_by_rate_groups_lines(workshop_invoice: Invoice) -> None:
    grouped = tax_by_rate(workshop_invoice.items, workshop_invoice.customer)
    assert grouped == {Decimal("0.19"): Decimal("551.00"), Decimal("0.07"): Decimal("17.85")}
