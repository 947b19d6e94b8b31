"""Customers and invoices shared by the tests. Dates are fixed so output is stable."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest
from invoicing.models import BOOKS, Customer, Invoice, LineItem


@pytest.fixture
def berlin_customer() -> Customer:
    return Customer(
        name="Hansen & Söhne KG",
        country="DE",
        address=("Schillerstraße 3", "04109 Leipzig"),
    )


@pytest.fixture
def dutch_business() -> Customer:
    return Customer(
        name="Van Dijk Logistiek B.V.",
        country="NL",
        address=("Keizersgracht 221", "1016 DV Amsterdam"),
        vat_id="NL859123456B01",
    )


@pytest.fixture
def us_customer() -> Customer:
    return Customer(
        name="Bluefin Analytics Inc.",
        country="US",
        address=("500 Market St", "San Francisco, CA 94105"),
    )


@pytest.fixture
def workshop_invoice(berlin_customer: Customer) -> Invoice:
    """Two days of workshop plus six course books: two VAT rates on one invoice."""
    return Invoice(
        number="INV-2024-0042",
        customer=berlin_customer,
        issued=date(2024, 3, 4),
        items=[
            LineItem("Data pipeline workshop (2 days)", 2, Decimal("1450.00")),
            LineItem("Course book: Practical Data Engineering", 6, Decimal("42.50"), BOOKS),
        ],
    )
