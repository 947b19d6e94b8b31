"""Invoices for a small consultancy: line items, VAT, discounts and rendering."""

from invoicing.models import Customer, Discount, Invoice, LineItem, Totals
from invoicing.money import format_money, round_money
from invoicing.render import render_html, render_markdown, render_text
from invoicing.totals import compute_totals

__all__ = [
    "Customer",
    "Discount",
    "Invoice",
    "LineItem",
    "Totals",
    "compute_totals",
    "format_money",
    "render_html",
    "render_markdown",
    "render_text",
    "round_money",
]

__version__ = "0.4.0"
