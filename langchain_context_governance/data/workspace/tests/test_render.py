from datetime import date
from decimal import Decimal

from invoicing.models import Customer, Invoice, LineItem
from invoicing.render import render_html, render_markdown, render_text


def test_text_title_and_dates(workshop_invoice: Invoice) -> None:
    text = render_text(workshop_invoice)
    assert text.startswith("Invoice INV-2024-0042\n=====================\n")
    assert "Issued: 04 March 2024" in text
    assert "Due:    03 April 2024" in text


def test_text_totals_block(workshop_invoice: Invoice) -> None:
    text = render_text(workshop_invoice)
    assert "VAT 19%" in text
    assert "VAT 7%" in text
    assert "€3,723.85" in text


def test_rounding_in_rendered_amounts(us_customer: Customer) -> None:
    invoice = Invoice(
        number="INV-2024-0077",
        customer=us_customer,
        issued=date(2024, 4, 15),
        currency="USD",
        items=[LineItem("Hosting, metered", 1, Decimal("10.125"))],
    )
    assert "$10.13" in render_text(invoice)


def test_markdown_escapes_pipes(workshop_invoice: Invoice) -> None:
    workshop_invoice.add(LineItem("Support | priority", 1, Decimal("90.00")))
    assert "Support \\| priority" in render_markdown(workshop_invoice)


def test_html_escapes_customer_name() -> None:
    invoice = Invoice(
        number="INV-2024-0051",
        customer=Customer(name="Smith & <Sons>", country="GB"),
        issued=date(2024, 3, 20),
        currency="GBP",
        items=[LineItem("Audit", 1, Decimal("600"))],
    )
    page = render_html(invoice)
    assert "Smith &amp; &lt;Sons&gt;" in page
    assert "<Sons>" not in page


def test_credit_note_title_and_refund(berlin_customer: Customer) -> None:
    invoice = Invoice(
        number="CN-2024-0003",
        customer=berlin_customer,
        issued=date(2024, 6, 1),
        items=[LineItem("Cancelled workshop day", -1, Decimal("1450.00"))],
    )
    text = render_text(invoice)
    assert text.startswith("Credit note CN-2024-0003")
    assert "refunded" in text
    assert "Due:" not in text


def test_reverse_charge_note(dutch_business: Customer) -> None:
    invoice = Invoice(
        number="INV-2024-0060",
        customer=dutch_business,
        issued=date(2024, 4, 2),
        items=[LineItem("Data audit", 1, Decimal("2400.00"))],
    )
    assert "Reverse charge" in render_text(invoice)
