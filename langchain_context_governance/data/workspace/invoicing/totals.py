"""Net, discount, tax and gross of an invoice, rounded once at the end."""

from __future__ import annotations

from decimal import Decimal

from invoicing.models import Discount, Invoice, Totals
from invoicing.money import round_money, sum_money
from invoicing.tax import tax_by_rate

ZERO = Decimal("0")
HUNDRED = Decimal("100")


def discount_amount(net: Decimal, discount: Discount | None) -> Decimal:
    """How much a discount takes off `net`; never more than `net` itself."""
    if discount is None or net <= ZERO:
        return ZERO
    if discount.percent is not None:
        return min(net, net * discount.percent / HUNDRED)
    assert discount.amount is not None
    return min(net, discount.amount)


def compute_totals(invoice: Invoice) -> Totals:
    """The totals block of an invoice.

    The discount is taken off the net amount before tax, and the tax of each rate
    shrinks by the same proportion.
    """
    net = sum_money(item.net for item in invoice.items)
    grouped = tax_by_rate(invoice.items, invoice.customer)
    tax = sum_money(grouped.values())
    discount = discount_amount(net + tax, invoice.discount)
    share = (net - discount) / net if net else ZERO
    tax = tax * share
    return Totals(
        net=round_money(net),
        discount=round_money(discount),
        tax=round_money(tax),
        gross=round_money(net - discount + tax),
        tax_by_rate={rate: round_money(amount * share) for rate, amount in grouped.items()},
    )
