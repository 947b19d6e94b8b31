from datetime import date
from decimal import Decimal

from invoicing.models import Customer, Discount, Invoice, LineItem
from invoicing.totals import compute_totals


def make_invoice(customer: Customer, *items: LineItem, discount: Discount | None = None) -> Invoice:
    return Invoice(
        number="INV-2024-0100",
        customer=customer,
        issued=date(2024, 5, 2),
        items=list(items),
        discount=discount,
    )


def test_totals_without_discount(workshop_invoice: Invoice) -> None:
    totals = compute_totals(workshop_invoice)
    assert (totals.net, totals.tax, totals.gross) == (
        Decimal("3155.00"),
        Decimal("568.85"),
        Decimal("3723.85"),
    )


def test_percentage_discount_before_tax(berlin_customer: Customer) -> None:
    invoice = make_invoice(
        berlin_customer,
        LineItem("Architecture review", 1, Decimal("1000.00")),
        discount=Discount(percent=Decimal("10"), reason="returning customer"),
    )
    totals = compute_totals(invoice)
    assert totals.discount == Decimal("100.00")
    assert totals.tax == Decimal("171.00")
    assert totals.gross == Decimal("1071.00")


def test_discount_never_exceeds_net(berlin_customer: Customer) -> None:
    invoice = make_invoice(
        berlin_customer,
        LineItem("Follow-up call", 1, Decimal("100.00")),
        discount=Discount(amount=Decimal("150.00"), reason="voucher"),
    )
    totals = compute_totals(invoice)
    assert totals.discount == Decimal("100.00")
    assert totals.gross == Decimal("0.00")


def test_no_tax_for_exports(us_customer: Customer) -> None:
    invoice = make_invoice(us_customer, LineItem("Remote training", 2, Decimal("800.00")))
    totals = compute_totals(invoice)
    assert totals.tax == Decimal("0.00")
    assert totals.gross == Decimal("1600.00")


def test_mixed_rates_share_the_discount(workshop_invoice: Invoice) -> None:
    workshop_invoice.discount = Discount(percent=Decimal("10"), reason="early booking")
    totals = compute_totals(workshop_invoice)
    assert totals.discount == Decimal("315.50")
    assert totals.tax_by_rate == {
        Decimal("0.19"): Decimal("495.90"),
        Decimal("0.07"): Decimal("16.07"),
    }
    assert totals.tax == Decimal("511.97")
    assert totals.gross == Decimal("3351.47")
