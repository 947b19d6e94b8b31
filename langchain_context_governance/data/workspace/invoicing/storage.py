"""Invoices as JSON files, one per invoice, amounts stored as strings.

Format version 2 (since 0.3.0) never stores floats: `"unit_price": "19.99"`.
Version 1 files, which did, are still read, and converted through `str` so that
19.99 stays 19.99 instead of becoming 19.989999999999998436805981327779591083526611328125.
"""

from __future__ import annotations

import json
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any

from invoicing.models import Customer, Discount, Invoice, LineItem

FORMAT_VERSION = 2


class StorageError(ValueError):
    """A file that is not an invoice we wrote, with the reason."""


def invoice_to_dict(invoice: Invoice) -> dict[str, Any]:
    """A JSON-ready dict; every amount is a string."""
    data: dict[str, Any] = {
        "format": FORMAT_VERSION,
        "number": invoice.number,
        "issued": invoice.issued.isoformat(),
        "currency": invoice.currency,
        "payment_terms_days": invoice.payment_terms_days,
        "customer": {
            "name": invoice.customer.name,
            "country": invoice.customer.country,
            "address": list(invoice.customer.address),
            "vat_id": invoice.customer.vat_id,
        },
        "items": [
            {
                "description": item.description,
                "quantity": item.quantity,
                "unit_price": str(item.unit_price),
                "category": item.category,
            }
            for item in invoice.items
        ],
        "notes": invoice.notes,
    }
    if invoice.discount is not None:
        data["discount"] = {
            "percent": none_or_str(invoice.discount.percent),
            "amount": none_or_str(invoice.discount.amount),
            "reason": invoice.discount.reason,
        }
    return data


def invoice_from_dict(data: dict[str, Any]) -> Invoice:
    """Read a dict written by `invoice_to_dict`, of format 1 or 2."""
    version = data.get("format", 1)
    if version not in (1, 2):
        raise StorageError(f"unknown format version {version!r}")
    try:
        customer = Customer(
            name=data["customer"]["name"],
            country=data["customer"]["country"],
            address=tuple(data["customer"].get("address", ())),
            vat_id=data["customer"].get("vat_id"),
        )
        items = [
            LineItem(
                description=item["description"],
                quantity=int(item["quantity"]),
                unit_price=amount(item["unit_price"]),
                category=item.get("category", "standard"),
            )
            for item in data["items"]
        ]
        discount = None
        if data.get("discount"):
            discount = Discount(
                percent=none_or_amount(data["discount"].get("percent")),
                amount=none_or_amount(data["discount"].get("amount")),
                reason=data["discount"].get("reason", ""),
            )
        return Invoice(
            number=data["number"],
            customer=customer,
            issued=date.fromisoformat(data["issued"]),
            currency=data.get("currency", "EUR"),
            items=items,
            discount=discount,
            payment_terms_days=int(data.get("payment_terms_days", 30)),
            notes=data.get("notes", ""),
        )
    except KeyError as error:
        raise StorageError(f"missing field {error.args[0]!r}") from error


def amount(value: str | int | float) -> Decimal:
    # Format 1 stored floats; going through str keeps the digits people typed.
    return Decimal(str(value))


def none_or_amount(value: str | int | float | None) -> Decimal | None:
    return None if value is None else amount(value)


def none_or_str(value: Decimal | None) -> str | None:
    return None if value is None else str(value)


def save_invoice(invoice: Invoice, directory: Path) -> Path:
    """Write `<number>.json` into `directory` and return its path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{invoice.number}.json"
    text = json.dumps(invoice_to_dict(invoice), indent=2, ensure_ascii=False)
    path.write_text(text + "\n", encoding="utf-8")
    return path


def load_invoice(path: Path) -> Invoice:
    """Read one invoice file; errors name the file."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise StorageError(f"{path}: not JSON: {error}") from error
    try:
        return invoice_from_dict(data)
    except StorageError as error:
        raise StorageError(f"{path}: {error}") from error


def load_all(directory: Path) -> list[Invoice]:
    """Every invoice in `directory`, ordered by number."""
    return sorted(
        (load_invoice(path) for path in directory.glob("*.json")),
        key=lambda invoice: invoice.number,
    )
