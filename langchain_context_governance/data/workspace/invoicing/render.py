"""Invoices for people: plain text for e-mail, Markdown for the wiki, HTML for print.

All three renderers share the same blocks (header, addresses, lines, totals, payment)
so an amount can never be shown one way in the text and another way in the HTML.
"""

from __future__ import annotations

import html
import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal

from invoicing.models import Invoice, LineItem, Totals
from invoicing.money import format_money
from invoicing.totals import compute_totals

SELLER_NAME = "Kestrel Data Consulting GmbH"
SELLER_ADDRESS = ("Lindenstraße 14", "10969 Berlin", "Germany")
SELLER_VAT_ID = "DE298765432"
BANK_IBAN = "DE89 3704 0044 0532 0130 00"
BANK_BIC = "COBADEFFXXX"

TEXT_WIDTH = 72
DESCRIPTION_WIDTH = 36
DATE_FORMAT = "%d %B %Y"


@dataclass(frozen=True)
class Row:
    """One rendered line item: every cell already formatted as text."""

    description: str
    quantity: str
    unit_price: str
    amount: str


@dataclass(frozen=True)
class Summary:
    """The totals block as label and formatted amount pairs, in display order."""

    lines: tuple[tuple[str, str], ...]


def title_for(invoice: Invoice) -> str:
    """'Invoice' or 'Credit note', followed by the number."""
    kind = "Credit note" if invoice.is_credit_note else "Invoice"
    return f"{kind} {invoice.number}"


def rows_for(invoice: Invoice) -> list[Row]:
    """Format every line item of `invoice`."""
    return [row_for(item, invoice.currency) for item in invoice.items]


def row_for(item: LineItem, currency: str) -> Row:
    return Row(
        description=item.description,
        quantity=str(item.quantity),
        unit_price=format_money(item.unit_price, currency),
        amount=format_money(item.net, currency),
    )


def summary_for(invoice: Invoice, totals: Totals) -> Summary:
    """Label and amount for every line of the totals block.

    The discount line only appears when there is a discount, and the tax is shown
    per rate when more than one rate applies.
    """
    currency = invoice.currency
    lines: list[tuple[str, str]] = [("Net", format_money(totals.net, currency))]
    if totals.discount:
        reason = invoice.discount.reason if invoice.discount else ""
        label = f"Discount ({reason})" if reason else "Discount"
        lines.append((label, format_money(-totals.discount, currency)))
    if len(totals.tax_by_rate) > 1:
        for rate, amount in sorted(totals.tax_by_rate.items(), reverse=True):
            lines.append((f"VAT {format_rate(rate)}", format_money(amount, currency)))
    else:
        rate = next(iter(totals.tax_by_rate), Decimal("0"))
        lines.append((f"VAT {format_rate(rate)}", format_money(totals.tax, currency)))
    lines.append(("Total", format_money(totals.gross, currency)))
    return Summary(lines=tuple(lines))


def format_rate(rate: Decimal) -> str:
    """0.19 -> '19%', 0.055 -> '5.5%'."""
    percent = (rate * 100).normalize()
    return f"{percent:f}%"


def payment_lines(invoice: Invoice) -> list[str]:
    """How and until when to pay; a credit note is refunded instead."""
    if invoice.is_credit_note:
        return ["The amount will be refunded to your account within 14 days."]
    return [
        f"Please pay by {invoice.due.strftime(DATE_FORMAT)}.",
        f"IBAN {BANK_IBAN}, BIC {BANK_BIC}",
        f"Reference: {invoice.number}",
    ]


def reverse_charge_note(invoice: Invoice) -> str | None:
    """The legally required note when the customer accounts for the VAT."""
    customer = invoice.customer
    if customer.vat_id and customer.country.upper() != "DE":
        return f"Reverse charge: VAT is due by the recipient ({customer.vat_id})."
    return None


def render_text(invoice: Invoice, *, width: int = TEXT_WIDTH) -> str:
    """A fixed-width plain-text invoice, suitable for the body of an e-mail."""
    totals = compute_totals(invoice)
    out: list[str] = []
    out.append(title_for(invoice))
    out.append("=" * len(title_for(invoice)))
    out.append("")
    out.append(f"Issued: {invoice.issued.strftime(DATE_FORMAT)}")
    if not invoice.is_credit_note:
        out.append(f"Due:    {invoice.due.strftime(DATE_FORMAT)}")
    out.append("")
    out.extend(address_columns(invoice, width=width))
    out.append("")
    out.extend(text_table(rows_for(invoice), width=width))
    out.append("")
    for label, amount in summary_for(invoice, totals).lines:
        out.append(f"{label:>{width - 16}} {amount:>15}")
    note = reverse_charge_note(invoice)
    if note:
        out.append("")
        out.extend(textwrap.wrap(note, width))
    out.append("")
    out.extend(payment_lines(invoice))
    if invoice.notes:
        out.append("")
        out.extend(textwrap.wrap(invoice.notes, width))
    return "\n".join(out) + "\n"


def address_columns(invoice: Invoice, *, width: int) -> list[str]:
    """Seller on the left, customer on the right, padded to the same height."""
    left = [SELLER_NAME, *SELLER_ADDRESS, f"VAT {SELLER_VAT_ID}"]
    customer = invoice.customer
    right = [customer.name, *customer.address]
    if customer.vat_id:
        right.append(f"VAT {customer.vat_id}")
    height = max(len(left), len(right))
    left += [""] * (height - len(left))
    right += [""] * (height - len(right))
    column = width // 2
    return [f"{a:<{column}}{b}".rstrip() for a, b in zip(left, right, strict=True)]


def text_table(rows: Sequence[Row], *, width: int) -> list[str]:
    """Line items as a fixed-width table; long descriptions wrap inside their column."""
    amount_width = max([len("Amount"), *(len(row.amount) for row in rows)])
    price_width = max([len("Unit price"), *(len(row.unit_price) for row in rows)])
    quantity_width = max([len("Qty"), *(len(row.quantity) for row in rows)])
    description_width = max(
        DESCRIPTION_WIDTH, width - amount_width - price_width - quantity_width - 6
    )
    header = (
        f"{'Description':<{description_width}}  {'Qty':>{quantity_width}}"
        f"  {'Unit price':>{price_width}}  {'Amount':>{amount_width}}"
    )
    out = [header, "-" * len(header)]
    for row in rows:
        wrapped = textwrap.wrap(row.description, description_width) or [""]
        out.append(
            f"{wrapped[0]:<{description_width}}  {row.quantity:>{quantity_width}}"
            f"  {row.unit_price:>{price_width}}  {row.amount:>{amount_width}}"
        )
        out.extend(f"{line:<{description_width}}".rstrip() for line in wrapped[1:])
    return out


def render_markdown(invoice: Invoice) -> str:
    """A Markdown invoice with a pipe table, for the internal wiki."""
    totals = compute_totals(invoice)
    out = [f"# {title_for(invoice)}", ""]
    out.append(f"- **Issued:** {invoice.issued.strftime(DATE_FORMAT)}")
    if not invoice.is_credit_note:
        out.append(f"- **Due:** {invoice.due.strftime(DATE_FORMAT)}")
    out.append(f"- **Customer:** {markdown_escape(invoice.customer.name)}")
    out.append("")
    out.append("| Description | Qty | Unit price | Amount |")
    out.append("|---|---:|---:|---:|")
    for row in rows_for(invoice):
        out.append(
            f"| {markdown_escape(row.description)} | {row.quantity} "
            f"| {row.unit_price} | {row.amount} |"
        )
    out.append("")
    for label, amount in summary_for(invoice, totals).lines:
        strong = label == "Total"
        out.append(f"**{label}:** **{amount}**" if strong else f"{label}: {amount}")
        out.append("")
    note = reverse_charge_note(invoice)
    if note:
        out.append(f"> {note}")
        out.append("")
    out.extend(f"{line}  " for line in payment_lines(invoice))
    return "\n".join(out).rstrip() + "\n"


def markdown_escape(text: str) -> str:
    """Escape the characters that would break a table cell or start emphasis."""
    for char in ("\\", "|", "*", "_", "`"):
        text = text.replace(char, f"\\{char}")
    return text


def render_html(invoice: Invoice) -> str:
    """A self-contained HTML page; every value from the invoice is escaped."""
    totals = compute_totals(invoice)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        f"<title>{html.escape(title_for(invoice))}</title>",
        f"<style>{HTML_STYLE}</style>",
        "</head>",
        "<body>",
        f"<h1>{html.escape(title_for(invoice))}</h1>",
        '<div class="addresses">',
        html_address("From", [SELLER_NAME, *SELLER_ADDRESS, f"VAT {SELLER_VAT_ID}"]),
        html_address("To", customer_lines(invoice)),
        "</div>",
        html_dates(invoice),
        html_table(rows_for(invoice)),
        html_summary(summary_for(invoice, totals)),
    ]
    note = reverse_charge_note(invoice)
    if note:
        parts.append(f'<p class="note">{html.escape(note)}</p>')
    parts.append('<p class="payment">')
    parts.append("<br>\n".join(html.escape(line) for line in payment_lines(invoice)))
    parts.append("</p>")
    if invoice.notes:
        parts.append(f'<p class="notes">{html.escape(invoice.notes)}</p>')
    parts += ["</body>", "</html>"]
    return "\n".join(parts) + "\n"


def customer_lines(invoice: Invoice) -> list[str]:
    customer = invoice.customer
    lines = [customer.name, *customer.address]
    if customer.vat_id:
        lines.append(f"VAT {customer.vat_id}")
    return lines


def html_address(heading: str, lines: Iterable[str]) -> str:
    body = "<br>".join(html.escape(line) for line in lines)
    return f"<address><strong>{html.escape(heading)}</strong><br>{body}</address>"


def html_dates(invoice: Invoice) -> str:
    items = [f"<dt>Issued</dt><dd>{invoice.issued.strftime(DATE_FORMAT)}</dd>"]
    if not invoice.is_credit_note:
        items.append(f"<dt>Due</dt><dd>{invoice.due.strftime(DATE_FORMAT)}</dd>")
    return f'<dl class="dates">{"".join(items)}</dl>'


def html_table(rows: Sequence[Row]) -> str:
    head = (
        '<tr><th>Description</th><th class="num">Qty</th>'
        '<th class="num">Unit price</th><th class="num">Amount</th></tr>'
    )
    body = "\n".join(
        f'<tr><td>{html.escape(row.description)}</td><td class="num">{row.quantity}</td>'
        f'<td class="num">{html.escape(row.unit_price)}</td>'
        f'<td class="num">{html.escape(row.amount)}</td></tr>'
        for row in rows
    )
    return f"<table>\n<thead>{head}</thead>\n<tbody>\n{body}\n</tbody>\n</table>"


def html_summary(summary: Summary) -> str:
    rows = []
    for label, amount in summary.lines:
        css = ' class="total"' if label == "Total" else ""
        rows.append(
            f'<tr{css}><th>{html.escape(label)}</th><td class="num">{html.escape(amount)}</td></tr>'
        )
    return '<table class="summary">\n' + "\n".join(rows) + "\n</table>"


HTML_STYLE = """
body { font-family: system-ui, sans-serif; max-width: 48rem; margin: 2rem auto; }
h1 { font-size: 1.6rem; border-bottom: 2px solid #333; padding-bottom: .3rem; }
.addresses { display: flex; justify-content: space-between; margin: 1.5rem 0; }
address { font-style: normal; line-height: 1.4; }
dl.dates { display: grid; grid-template-columns: max-content auto; gap: .2rem 1rem; }
table { width: 100%; border-collapse: collapse; margin: 1rem 0; }
th, td { padding: .35rem .5rem; border-bottom: 1px solid #ddd; text-align: left; }
.num { text-align: right; font-variant-numeric: tabular-nums; }
table.summary { width: auto; margin-left: auto; }
tr.total th, tr.total td { font-weight: bold; border-top: 2px solid #333; }
p.note { font-size: .9rem; color: #555; }
@media print { body { margin: 0; } }
""".strip()
