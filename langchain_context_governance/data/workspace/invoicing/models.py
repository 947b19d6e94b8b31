"""The invoice and its parts. Plain data: the arithmetic lives in tax.py and totals.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, timedelta
from decimal import Decimal

STANDARD = "standard"
BOOKS = "books"
FOOD = "food"
CATEGORIES = (STANDARD, BOOKS, FOOD)


@dataclass(frozen=True)
class LineItem:
    """One line of an invoice: what was sold, how many, at which unit price."""

    description: str
    quantity: int
    unit_price: Decimal
    category: str = STANDARD

    def __post_init__(self) -> None:
        if self.quantity == 0:
            raise ValueError(f"line {self.description!r}: quantity must not be zero")
        if self.category not in CATEGORIES:
            raise ValueError(
                f"line {self.description!r}: unknown category {self.category!r}, "
                f"expected one of {', '.join(CATEGORIES)}"
            )

    @property
    def net(self) -> Decimal:
        """Unit price times quantity, not rounded."""
        return self.unit_price * self.quantity


@dataclass(frozen=True)
class Customer:
    """Who pays. `country` is an ISO 3166 alpha-2 code; it decides the VAT rate."""

    name: str
    country: str
    address: tuple[str, ...] = ()
    vat_id: str | None = None


@dataclass(frozen=True)
class Discount:
    """Either a percentage of the net amount or a fixed amount, never both."""

    percent: Decimal | None = None
    amount: Decimal | None = None
    reason: str = ""

    def __post_init__(self) -> None:
        if (self.percent is None) == (self.amount is None):
            raise ValueError("a discount is either a percent or an amount")
        if self.percent is not None and not Decimal("0") <= self.percent <= Decimal("100"):
            raise ValueError(f"discount percent must be between 0 and 100, got {self.percent}")


@dataclass
class Invoice:
    """An invoice or, with negative amounts, a credit note."""

    number: str
    customer: Customer
    issued: date
    currency: str = "EUR"
    items: list[LineItem] = field(default_factory=list)
    discount: Discount | None = None
    payment_terms_days: int = 30
    notes: str = ""

    @property
    def due(self) -> date:
        return self.issued + timedelta(days=self.payment_terms_days)

    @property
    def is_credit_note(self) -> bool:
        return sum((item.net for item in self.items), Decimal("0")) < 0

    def add(self, item: LineItem) -> None:
        self.items.append(item)


@dataclass(frozen=True)
class Totals:
    """Everything the bottom of an invoice shows, rounded to cents."""

    net: Decimal
    discount: Decimal
    tax: Decimal
    gross: Decimal
    tax_by_rate: dict[Decimal, Decimal] = field(default_factory=dict)
