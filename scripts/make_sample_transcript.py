"""Write the bundled sample transcript: a seeded, made-up coding-agent session.

The agent works in the bundled workspace (``langchain_context_governance/data/workspace``,
a small ``invoicing`` package whose tests fail after a refactor). It runs the tests, reads
and greps the code, fixes three bugs, is interrupted once, and then handles a follow-up
request. Every tool result is computed from the workspace as the agent's own writes
left it, so a read after a write shows the write, ``git diff`` shows exactly the edits,
and the test logs (modelled on real pytest output) fail exactly while a bug is present.

The workspace files are the committed source of truth; this script only reads them.
Running it again writes the same bytes:

    python scripts/make_sample_transcript.py [--output DIR]
"""

from __future__ import annotations

import argparse
import ast
import difflib
import fnmatch
import hashlib
import json
import random
import re
import shlex
import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
)
from langchain_core.messages.tool import tool_call

from langchain_context_governance.transcripts import dump_transcript

SEED = 20240304
DATA_DIR = Path(__file__).resolve().parent.parent / "langchain_context_governance" / "data"
WORKSPACE_DIR = DATA_DIR / "workspace"
TRANSCRIPT_NAME = "sample_transcript.json"

# pytest's terminal width when it does not write to a terminal.
WIDTH = 80

Call = tuple[str, dict[str, Any]]


# --------------------------------------------------------------------------- workspace


class Workspace:
    """The project as the agent sees it: the bundled files plus the agent's writes."""

    def __init__(self, files: dict[str, str]) -> None:
        self.original = dict(files)
        self.files = dict(files)

    @classmethod
    def from_directory(cls, root: Path) -> Workspace:
        files = {
            path.relative_to(root).as_posix(): path.read_text(encoding="utf-8")
            for path in sorted(root.rglob("*"))
            if path.is_file() and not _is_build_artifact(path.relative_to(root))
        }
        return cls(files)

    def changed_paths(self) -> list[str]:
        return sorted(path for path in self.files if self.files[path] != self.original.get(path))

    def directories(self) -> list[str]:
        return sorted({path.rsplit("/", 1)[0] for path in self.files if "/" in path})


def _is_build_artifact(relative: Path) -> bool:
    return any(part.startswith(".") or part == "__pycache__" for part in relative.parts)


@dataclass(frozen=True)
class Bug:
    """A bug of the refactor: present while ``buggy`` is in the file, fixed by ``fixed``."""

    path: str
    buggy: str
    fixed: str
    failing: tuple[str, ...]

    def is_present(self, workspace: Workspace) -> bool:
        return self.buggy in workspace.files.get(self.path, "")

    def fix(self, workspace: Workspace) -> str:
        return workspace.files[self.path].replace(self.buggy, self.fixed)


MONEY_TESTS = "tests/test_money.py::"
NEGATIVE_FORMAT_TESTS = (
    MONEY_TESTS + "test_format_negative_amounts[-1450-EUR--\\u20ac1,450.00]",
    MONEY_TESTS + "test_format_negative_amounts[-0.125-USD--$0.13]",
    MONEY_TESTS + "test_format_negative_amounts[-250-CHF--CHF 250.00]",
)
MIXED_RATES = "tests/test_totals.py::test_mixed_rates_share_the_discount"

BUGS = {
    "rounding": Bug(
        path="invoicing/money.py",
        buggy="ROUND_HALF_EVEN",
        fixed="ROUND_HALF_UP",
        failing=(
            MONEY_TESTS + "test_round_half_up[0.125-0.13]",
            MONEY_TESTS + "test_round_half_up[2.345-2.35]",
            MONEY_TESTS + "test_round_half_up[1.005-1.01]",
            MONEY_TESTS + "test_round_half_up[-0.125--0.13]",
            "tests/test_render.py::test_rounding_in_rendered_amounts",
            MIXED_RATES,
        ),
    ),
    "tax": Bug(
        path="invoicing/tax.py",
        buggy="return item.unit_price * rate_for(customer, item.category)",
        fixed="return item.net * rate_for(customer, item.category)",
        failing=(
            "tests/test_render.py::test_text_totals_block",
            "tests/test_tax.py::test_tax_uses_quantity",
            "tests/test_tax.py::test_tax_by_rate_groups_lines",
            "tests/test_totals.py::test_totals_without_discount",
            MIXED_RATES,
        ),
    ),
    "discount": Bug(
        path="invoicing/totals.py",
        buggy="discount = discount_amount(net + tax, invoice.discount)",
        fixed="discount = discount_amount(net, invoice.discount)",
        failing=(
            "tests/test_totals.py::test_percentage_discount_before_tax",
            "tests/test_totals.py::test_discount_never_exceeds_net",
            MIXED_RATES,
        ),
    ),
    "negative_format": Bug(
        path="invoicing/money.py",
        buggy='''    """Format an amount for people: symbol, thousands separators, two decimals."""
    symbol = currency_symbol(currency)
    return f"{symbol}{round_money(amount):,.2f}"
''',
        fixed='''    """Format an amount for people: symbol, thousands separators, two decimals.

    A negative amount, as on a credit note, has its sign before the symbol: -€1,450.00.
    """
    symbol = currency_symbol(currency)
    rounded = round_money(amount)
    sign = "-" if rounded < 0 else ""
    return f"{sign}{symbol}{abs(rounded):,.2f}"
''',
        failing=NEGATIVE_FORMAT_TESTS,
    ),
}

NEGATIVE_FORMAT_TEST = """

@pytest.mark.parametrize(
    ("amount", "currency", "expected"),
    [
        ("-1450", "EUR", "-€1,450.00"),
        ("-0.125", "USD", "-$0.13"),
        ("-250", "CHF", "-CHF 250.00"),
    ],
)
def test_format_negative_amounts(amount: str, currency: str, expected: str) -> None:
    assert format_money(Decimal(amount), currency) == expected
"""

CHANGELOG_ENTRY = (
    "- Fix: rounding is half up again (0.125 -> 0.13), as documented.\n"
    "- Fix: VAT is charged on each line's net amount, quantity included.\n"
    "- Fix: discounts are taken off the net amount before tax.\n"
    "- Change: negative amounts (credit notes) show the sign before the currency"
    " symbol: -€1,450.00.\n"
)


# --------------------------------------------------------------------------- pytest


@dataclass(frozen=True)
class CollectedTest:
    path: str
    function: str
    params: tuple[tuple[str, Any], ...]
    param_id: str

    @property
    def name(self) -> str:
        return f"{self.function}[{self.param_id}]" if self.params else self.function

    @property
    def nodeid(self) -> str:
        return f"{self.path}::{self.name}"


@dataclass(frozen=True)
class Failure:
    """How pytest reports one failing test: argument line, failing line, E lines."""

    arguments: str
    failing_line: str
    explanation: tuple[str, ...]


WORKSHOP = (
    "workshop_invoice = Invoice(number='INV-2024-0042', customer=Customer(name='Hansen & "
    "Söhne KG', country='DE', address=('Schillerstraße 3',...ineering', quantity=6, "
    "unit_price=Decimal('42.50'), category='books')], discount=None, payment_terms_days=30, "
    "notes='')"
)
WORKSHOP_DISCOUNTED = (
    "workshop_invoice = Invoice(number='INV-2024-0042', customer=Customer(name='Hansen & "
    "Söhne KG', country='DE', address=('Schillerstraße 3',...oks')], discount=Discount("
    "percent=Decimal('10'), amount=None, reason='early booking'), payment_terms_days=30, "
    "notes='')"
)
BERLIN = (
    "berlin_customer = Customer(name='Hansen & Söhne KG', country='DE', address=("
    "'Schillerstraße 3', '04109 Leipzig'), vat_id=None)"
)
US_CUSTOMER = (
    "us_customer = Customer(name='Bluefin Analytics Inc.', country='US', address=("
    "'500 Market St', 'San Francisco, CA 94105'), vat_id=None)"
)
TEXT_0077 = (
    "'Invoice INV-2024-0077\\n=====================\\n\\nIssued: 15 April 2024\\nDue:    15 "
    "May 2024\\n\\nKestrel Data Consulting...   $10.12\\n\\nPlease pay by 15 May 2024.\\nIBAN "
    "DE89 3704 0044 0532 0130 00, BIC COBADEFFXXX\\nReference: INV-2024-0077\\n'"
)


def _rounding_failure(value: str, expected: str, got: str) -> Failure:
    return Failure(
        arguments="",
        failing_line="assert round_money(Decimal(value)) == Decimal(expected)",
        explanation=(
            f"AssertionError: assert Decimal('{got}') == Decimal('{expected}')",
            f" +  where Decimal('{got}') = round_money(Decimal('{value}'))",
            f" +    where Decimal('{value}') = Decimal('{value}')",
            f" +  and   Decimal('{expected}') = Decimal('{expected}')",
        ),
    )


def _negative_format_failure(got: str, expected: str, got_marker: str) -> Failure:
    return Failure(
        arguments="",
        failing_line="assert format_money(Decimal(amount), currency) == expected",
        explanation=(
            f"AssertionError: assert '{got}' == '{expected}'",
            "  ",
            f"  - {expected}",
            "  ?  -",
            f"  + {got}",
            f"  ? {got_marker}",
        ),
    )


def _totals_discount_failure(arguments: str, totals: str) -> Failure:
    return Failure(
        arguments=arguments,
        failing_line='assert totals.discount == Decimal("100.00")',
        explanation=(
            "AssertionError: assert Decimal('119.00') == Decimal('100.00')",
            f" +  where Decimal('119.00') = {totals}.discount",
            " +  and   Decimal('100.00') = Decimal('100.00')",
        ),
    )


def _mixed_rates_failure(discount: str, totals: str) -> Failure:
    return Failure(
        arguments=WORKSHOP_DISCOUNTED,
        failing_line='assert totals.discount == Decimal("315.50")',
        explanation=(
            f"AssertionError: assert Decimal('{discount}') == Decimal('315.50')",
            f" +  where Decimal('{discount}') = {totals}.discount",
            " +  and   Decimal('315.50') = Decimal('315.50')",
        ),
    )


FAILURES: dict[str, Failure] = {
    MONEY_TESTS + "test_round_half_up[0.125-0.13]": _rounding_failure("0.125", "0.13", "0.12"),
    MONEY_TESTS + "test_round_half_up[2.345-2.35]": _rounding_failure("2.345", "2.35", "2.34"),
    MONEY_TESTS + "test_round_half_up[1.005-1.01]": _rounding_failure("1.005", "1.01", "1.00"),
    MONEY_TESTS + "test_round_half_up[-0.125--0.13]": _rounding_failure("-0.125", "-0.13", "-0.12"),
    NEGATIVE_FORMAT_TESTS[0]: _negative_format_failure("€-1,450.00", "-€1,450.00", "+"),
    NEGATIVE_FORMAT_TESTS[1]: _negative_format_failure("$-0.13", "-$0.13", "+"),
    NEGATIVE_FORMAT_TESTS[2]: _negative_format_failure("CHF -250.00", "-CHF 250.00", "    +"),
    "tests/test_render.py::test_text_totals_block": Failure(
        arguments=WORKSHOP,
        failing_line='assert "€3,723.85" in text',
        explanation=(
            "AssertionError: assert '€3,723.85' in 'Invoice INV-2024-0042\\n================="
            "====\\n\\nIssued: 04 March 2024\\nDue:    03 April 2024\\n\\nKestrel Data Consulti..."
            ",433.48\\n\\nPlease pay by 03 April 2024.\\nIBAN DE89 3704 0044 0532 0130 00, BIC "
            "COBADEFFXXX\\nReference: INV-2024-0042\\n'",
        ),
    ),
    "tests/test_render.py::test_rounding_in_rendered_amounts": Failure(
        arguments=US_CUSTOMER,
        failing_line='assert "$10.13" in render_text(invoice)',
        explanation=(
            f"AssertionError: assert '$10.13' in {TEXT_0077}",
            f" +  where {TEXT_0077} = render_text(Invoice(number='INV-2024-0077', customer="
            "Customer(name='Bluefin Analytics Inc.', country='US', address=('500 Market St..."
            "ered', quantity=1, unit_price=Decimal('10.125'), category='standard')], discount="
            "None, payment_terms_days=30, notes=''))",
        ),
    ),
    "tests/test_tax.py::test_tax_uses_quantity": Failure(
        arguments=BERLIN,
        failing_line='assert tax_for_item(item, berlin_customer) == Decimal("57.00")',
        explanation=(
            "AssertionError: assert Decimal('19.0000') == Decimal('57.00')",
            " +  where Decimal('19.0000') = tax_for_item(LineItem(description='Code review "
            "(hours)', quantity=3, unit_price=Decimal('100.00'), category='standard'), Customer("
            "name='Hansen & Söhne KG', country='DE', address=('Schillerstraße 3', '04109 "
            "Leipzig'), vat_id=None))",
            " +  and   Decimal('57.00') = Decimal('57.00')",
        ),
    ),
    "tests/test_tax.py::test_tax_by_rate_groups_lines": Failure(
        arguments=WORKSHOP,
        failing_line='assert grouped == {Decimal("0.19"): Decimal("551.00"), Decimal("0.07"): '
        'Decimal("17.85")}',
        explanation=(
            "AssertionError: assert {Decimal('0.1...mal('2.9750')} == {Decimal('0.1...imal"
            "('17.85')}",
            "  ",
            "  Differing items:",
            "  {Decimal('0.19'): Decimal('275.5000')} != {Decimal('0.19'): Decimal('551.00')}",
            "  {Decimal('0.07'): Decimal('2.9750')} != {Decimal('0.07'): Decimal('17.85')}",
            "  Use -v to get more diff",
        ),
    ),
    "tests/test_totals.py::test_totals_without_discount": Failure(
        arguments=WORKSHOP,
        failing_line="assert (totals.net, totals.tax, totals.gross) == (",
        explanation=(
            "AssertionError: assert (Decimal('315...al('3433.48')) == (Decimal('315...al("
            "'3723.85'))",
            "  ",
            "  At index 1 diff: Decimal('278.48') != Decimal('568.85')",
            "  Use -v to get more diff",
        ),
    ),
    "tests/test_totals.py::test_percentage_discount_before_tax": _totals_discount_failure(
        BERLIN,
        "Totals(net=Decimal('1000.00'), discount=Decimal('119.00'), tax=Decimal('167.39'), "
        "gross=Decimal('1048.39'), tax_by_rate={Decimal('0.19'): Decimal('167.39')})",
    ),
    "tests/test_totals.py::test_discount_never_exceeds_net": _totals_discount_failure(
        BERLIN,
        "Totals(net=Decimal('100.00'), discount=Decimal('119.00'), tax=Decimal('-3.61'), "
        "gross=Decimal('-22.61'), tax_by_rate={Decimal('0.19'): Decimal('-3.61')})",
    ),
    MIXED_RATES: _mixed_rates_failure(
        "343.35",
        "Totals(net=Decimal('3155.00'), discount=Decimal('343.35'), tax=Decimal('248.17'), "
        "gross=Decimal('3059.82'), tax_by_rate={Decimal('0.19'): Decimal('245.52'), "
        "Decimal('0.07'): Decimal('2.65')})",
    ),
}

# With the tax fixed, the discount bug takes 10% of a larger gross amount.
MIXED_RATES_AFTER_TAX_FIX = _mixed_rates_failure(
    "372.39",
    "Totals(net=Decimal('3155.00'), discount=Decimal('372.39'), tax=Decimal('501.71'), "
    "gross=Decimal('3284.32'), tax_by_rate={Decimal('0.19'): Decimal('485.97'), "
    "Decimal('0.07'): Decimal('15.74')})",
)


def collect_tests(workspace: Workspace) -> list[CollectedTest]:
    """Every test in the workspace, in pytest's order: by file, then as written."""
    cases: list[CollectedTest] = []
    for path in sorted(workspace.files):
        if path.startswith("tests/test_") and path.endswith(".py"):
            cases.extend(_tests_in_file(path, workspace.files[path]))
    return cases


def _tests_in_file(path: str, source: str) -> list[CollectedTest]:
    cases: list[CollectedTest] = []
    for node in ast.parse(source).body:
        if not isinstance(node, ast.FunctionDef) or not node.name.startswith("test_"):
            continue
        parametrize = _parametrize_arguments(node)
        if parametrize is None:
            cases.append(CollectedTest(path, node.name, (), ""))
            continue
        names, rows = parametrize
        for row in rows:
            values = row if isinstance(row, tuple) else (row,)
            param_id = "-".join(_param_id(value) for value in values)
            cases.append(
                CollectedTest(path, node.name, tuple(zip(names, values, strict=True)), param_id)
            )
    return cases


def _parametrize_arguments(node: ast.FunctionDef) -> tuple[tuple[str, ...], list[Any]] | None:
    for decorator in node.decorator_list:
        if (
            isinstance(decorator, ast.Call)
            and isinstance(decorator.func, ast.Attribute)
            and decorator.func.attr == "parametrize"
        ):
            names = ast.literal_eval(decorator.args[0])
            if isinstance(names, str):
                names = tuple(name.strip() for name in names.split(","))
            return tuple(names), list(ast.literal_eval(decorator.args[1]))
    return None


def _param_id(value: Any) -> str:
    # pytest escapes non-ASCII characters in ids.
    return str(value).encode("unicode_escape").decode("ascii")


def failing_tests(workspace: Workspace) -> list[str]:
    return [nodeid for bug in BUGS.values() if bug.is_present(workspace) for nodeid in bug.failing]


def failure_for(nodeid: str, workspace: Workspace) -> Failure:
    if nodeid == MIXED_RATES and not BUGS["tax"].is_present(workspace):
        return MIXED_RATES_AFTER_TAX_FIX
    return FAILURES[nodeid]


def separator(char: str, title: str) -> str:
    """pytest's section line: the title centred between runs of ``char``."""
    fill = char * max((WIDTH - len(title) - 2) // 2, 1)
    line = f"{fill} {title} {fill}"
    return line + char if len(line) < WIDTH else line


def with_progress(text: str, percent: int) -> str:
    progress = f"[{percent:3d}%]"
    return text + " " * max(WIDTH - len(text) - len(progress), 1) + progress


def run_pytest(workspace: Workspace, args: list[str], rng: random.Random) -> tuple[str, int]:
    """Output and exit code of ``python -m pytest ARGS`` in the workspace's current state."""
    quiet = "-q" in args
    keyword = args[args.index("-k") + 1] if "-k" in args else None
    targets = [arg for arg in args if not arg.startswith("-") and arg != keyword]
    collected = collect_tests(workspace)
    selected = [case for case in collected if _is_selected(case, targets, keyword)]
    deselected = len(collected) - len(selected)
    duration = rng.uniform(0.28, 0.95)
    if "--collect-only" in args:
        lines = [case.nodeid for case in selected]
        return "\n".join([*lines, "", f"{len(selected)} tests collected in {duration:.2f}s"]), 0
    failing = set(failing_tests(workspace))
    outcomes = ["F" if case.nodeid in failing else "." for case in selected]
    out: list[str] = []
    if not quiet:
        out += _session_header(len(collected), deselected, show_testpaths=not targets)
        out += _progress_by_file(selected, outcomes)
    else:
        out.append(with_progress("".join(outcomes), 100))
    failed = [case for case, outcome in zip(selected, outcomes, strict=True) if outcome == "F"]
    if failed:
        out.append(separator("=", "FAILURES"))
        for case in failed:
            out += _failure_report(case, workspace)
        out.append(separator("=", "short test summary info"))
        out += [_summary_line(case, workspace) for case in failed]
    counts = [f"{len(failed)} failed"] if failed else []
    counts.append(f"{len(selected) - len(failed)} passed")
    if deselected:
        counts.append(f"{deselected} deselected")
    final = f"{', '.join(counts)} in {duration:.2f}s"
    out.append(final if quiet else separator("=", final))
    return "\n".join(out), 1 if failed else 0


def _is_selected(case: CollectedTest, targets: list[str], keyword: str | None) -> bool:
    if targets and not any(
        case.nodeid == target or case.nodeid.startswith(f"{target}::") or case.path == target
        for target in targets
    ):
        return False
    if keyword is None:
        return True
    # pytest matches -k against the names of the test and of its module.
    return any(word.strip() in case.nodeid for word in keyword.split(" or "))


def _session_header(collected: int, deselected: int, *, show_testpaths: bool) -> list[str]:
    items = f"collected {collected} items"
    if deselected:
        items += f" / {deselected} deselected / {collected - deselected} selected"
    lines = [
        separator("=", "test session starts"),
        "platform linux -- Python 3.11.9, pytest-8.3.3, pluggy-1.5.0",
        "rootdir: /workspace",
        "configfile: pyproject.toml",
    ]
    if show_testpaths:
        lines.append("testpaths: tests")
    return [*lines, items, ""]


def _progress_by_file(selected: list[CollectedTest], outcomes: list[str]) -> list[str]:
    lines: list[str] = []
    done = 0
    for path in dict.fromkeys(case.path for case in selected):
        marks = "".join(
            outcome for case, outcome in zip(selected, outcomes, strict=True) if case.path == path
        )
        done += len(marks)
        lines.append(with_progress(f"{path} {marks}", done * 100 // len(selected)))
    return [*lines, ""]


def _failure_report(case: CollectedTest, workspace: Workspace) -> list[str]:
    failure = failure_for(case.nodeid, workspace)
    source_lines, failing_lineno = _test_source(case, workspace, failure.failing_line)
    arguments = failure.arguments or ", ".join(f"{name} = {value!r}" for name, value in case.params)
    return [
        separator("_", case.name),
        "",
        arguments,
        "",
        *source_lines,
        *(f"E       {line}" for line in failure.explanation),
        "",
        f"{case.path}:{failing_lineno}: AssertionError",
    ]


def _test_source(
    case: CollectedTest, workspace: Workspace, failing_line: str
) -> tuple[list[str], int]:
    """The test's source up to the failing line, marked with '>' as pytest does."""
    source = workspace.files[case.path]
    node = next(
        node
        for node in ast.parse(source).body
        if isinstance(node, ast.FunctionDef) and node.name == case.function
    )
    first = min([node.lineno, *(decorator.lineno for decorator in node.decorator_list)])
    lines = source.splitlines()
    for lineno in range(node.lineno, (node.end_lineno or node.lineno) + 1):
        if lines[lineno - 1].strip() == failing_line:
            shown = [f"    {line}".rstrip() for line in lines[first - 1 : lineno - 1]]
            return [*shown, f">   {lines[lineno - 1]}"], lineno
    raise ValueError(f"{case.nodeid}: no line {failing_line!r}")


def _summary_line(case: CollectedTest, workspace: Workspace) -> str:
    line = f"FAILED {case.nodeid}"
    message = failure_for(case.nodeid, workspace).explanation[0]
    available = WIDTH - len(line)
    if available < len(" - ..."):
        return line
    if len(" - ") + len(message) > available:
        message = message[: available - len(" - ...")] + "..."
    return f"{line} - {message}"


# --------------------------------------------------------------------------- git and shell

GIT_LOG = """\
3f9c2e1 (HEAD -> main, origin/main) Apply discounts in compute_totals
b71d04a Compute tax per line in tax.tax_for_item
e2a6c93 Move rounding into money.round_money
8c04f5b Add HTML rendering
51d9e70 Release 0.3.2
a9e3b12 Fix CHF spacing for Swiss invoices
0f7d2c8 Honour payment_terms_days in the due date
6b1e4aa Wrap long descriptions instead of cutting them"""

# The refactor commits, each of which brought in one of the bugs.
COMMITS = {
    "e2a6c93": (
        "rounding",
        "e2a6c93b0d51f7a2c49e8e6b1d3f0a7c2b9d4e15",
        "Tue Feb 27 16:42:11 2024 +0100",
        "Move rounding into money.round_money",
        "Totals, tax and render each rounded on their own; now they all call\n"
        "    money.round_money, so an amount is rounded the same way everywhere.",
    ),
    "b71d04a": (
        "tax",
        "b71d04a9c3e2f18d7a60b5c4e9f1a2d3c8b7e6f0",
        "Wed Feb 28 10:05:37 2024 +0100",
        "Compute tax per line in tax.tax_for_item",
        "compute_totals no longer knows about rates; it asks tax.tax_by_rate,\n"
        "    which sums tax_for_item over the lines.",
    ),
    "3f9c2e1": (
        "discount",
        "3f9c2e17a8b4d6c0e5f2a1b9d8c7e6f5a4b3c2d1",
        "Wed Feb 28 15:58:02 2024 +0100",
        "Apply discounts in compute_totals",
        "Discount handling moves out of render.py; the tax of each rate shrinks\n"
        "    by the discount's share.",
    ),
}


def git_blob_id(text: str) -> str:
    data = text.encode("utf-8")
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()[:7]


def unified_diff(path: str, before: str, after: str) -> list[str]:
    hunks = difflib.unified_diff(
        before.splitlines(), after.splitlines(), f"a/{path}", f"b/{path}", lineterm=""
    )
    return [
        f"diff --git a/{path} b/{path}",
        f"index {git_blob_id(before)}..{git_blob_id(after)} 100644",
        *hunks,
    ]


def git_diff(workspace: Workspace, paths: list[str], *, stat: bool) -> str:
    changed = [path for path in workspace.changed_paths() if not paths or path in paths]
    if not stat:
        return "\n".join(
            line
            for path in changed
            for line in unified_diff(path, workspace.original.get(path, ""), workspace.files[path])
        )
    rows = []
    added_total = removed_total = 0
    for path in changed:
        diff = unified_diff(path, workspace.original.get(path, ""), workspace.files[path])[4:]
        added = sum(1 for line in diff if line.startswith("+"))
        removed = sum(1 for line in diff if line.startswith("-"))
        added_total += added
        removed_total += removed
        rows.append((path, added, removed))
    width = max(len(path) for path, _, _ in rows)
    lines = [f" {path:<{width}} | {a + r:>2} {'+' * a}{'-' * r}" for path, a, r in rows]
    lines.append(
        f" {plural(len(rows), 'file')} changed, {plural(added_total, 'insertion')}(+), "
        f"{plural(removed_total, 'deletion')}(-)"
    )
    return "\n".join(lines)


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def git_status(workspace: Workspace) -> str:
    head = "On branch main\nYour branch is up to date with 'origin/main'.\n"
    changed = workspace.changed_paths()
    if not changed:
        return head + "\nnothing to commit, working tree clean"
    modified = "\n".join(f"\tmodified:   {path}" for path in changed)
    return (
        f"{head}\nChanges not staged for commit:\n"
        '  (use "git add <file>..." to update what will be committed)\n'
        '  (use "git restore <file>..." to discard changes in working directory)\n'
        f"{modified}\n\n"
        'no changes added to commit (use "git add" and/or "git commit -a")'
    )


def git_show(workspace: Workspace, short: str) -> str:
    bug_name, full, date, subject, body = COMMITS[short]
    bug = BUGS[bug_name]
    after = workspace.original[bug.path]
    before = after.replace(bug.buggy, bug.fixed)
    header = [
        f"commit {full}",
        "Author: Jonas Weber <jonas.weber@kestrel-data.de>",
        f"Date:   {date}",
        "",
        f"    {subject}",
        "",
        f"    {body}",
        "",
    ]
    return "\n".join([*header, *unified_diff(bug.path, before, after)])


PYTHON_SNIPPETS = {
    "from decimal import Decimal, ROUND_HALF_EVEN, ROUND_HALF_UP; "
    "print([str(Decimal(v).quantize(Decimal('0.01'), r)) for v in ('0.125', '2.345', '1.005') "
    "for r in (ROUND_HALF_EVEN, ROUND_HALF_UP)])": (
        "['0.12', '0.13', '2.34', '2.35', '1.00', '1.01']"
    ),
    "from decimal import Decimal; "
    "print(Decimal('1450.00') * 2 * Decimal('0.19'), Decimal('1450.00') * Decimal('0.19'))": (
        "551.0000 275.5000"
    ),
    "from decimal import Decimal; net, tax = Decimal('1000.00'), Decimal('190.00'); "
    "print(net * 10 / 100, (net + tax) * 10 / 100)": "100.00 119.00",
    "from decimal import Decimal; "
    "print(format(Decimal('-1450'), ',.2f'), format(abs(Decimal('-1450')), ',.2f'))": (
        "-1,450.00 1,450.00"
    ),
}


def run_command(workspace: Workspace, command: str, rng: random.Random) -> tuple[str, int]:
    """Output and exit code of a shell command the sample agent runs."""
    words = shlex.split(command)
    if words[:3] == ["python", "-m", "pytest"]:
        return run_pytest(workspace, words[3:], rng)
    if words[:2] == ["python", "-c"]:
        return PYTHON_SNIPPETS[words[2]], 0
    if words == ["git", "status"]:
        return git_status(workspace), 0
    if words[:2] == ["git", "diff"]:
        stat = "--stat" in words
        paths = [word for word in words[2:] if not word.startswith("-")]
        return git_diff(workspace, paths, stat=stat), 0
    if words[:3] == ["git", "log", "--oneline"]:
        return GIT_LOG, 0
    if words[:2] == ["git", "show"]:
        return git_show(workspace, words[2]), 0
    if words[:2] == ["ruff", "check"]:
        return "All checks passed!", 0
    if words[:2] == ["mypy", "invoicing"]:
        count = sum(1 for path in workspace.files if re.fullmatch(r"invoicing/\w+\.py", path))
        return f"Success: no issues found in {count} source files", 0
    if words[:2] == ["wc", "-l"]:
        return word_counts(workspace, words[2:]), 0
    raise ValueError(f"the sample agent has no output for {command!r}")


def word_counts(workspace: Workspace, patterns: list[str]) -> str:
    paths = [
        path
        for path in sorted(workspace.files)
        if any(fnmatch.fnmatch(path, pattern) for pattern in patterns)
    ]
    counts = [(workspace.files[path].count("\n"), path) for path in paths]
    total = sum(count for count, _ in counts)
    return "\n".join([*(f"{count:>5} {path}" for count, path in counts), f"{total:>5} total"])


# --------------------------------------------------------------------------- tools


def read_file(workspace: Workspace, args: dict[str, Any]) -> str:
    path = args["path"]
    if path not in workspace.files:
        return f"Error: {path} does not exist. Use list_dir to see what is there."
    lines = workspace.files[path].splitlines()
    start = args.get("offset", 1)
    end = min(len(lines), start + args["limit"] - 1) if "limit" in args else len(lines)
    numbered = [f"{number:>6}\t{lines[number - 1]}" for number in range(start, end + 1)]
    if start > 1 or end < len(lines):
        numbered.append(f"... (lines {start}-{end} of {len(lines)})")
    return "\n".join(numbered)


def grep(workspace: Workspace, args: dict[str, Any]) -> str:
    pattern = re.compile(args["pattern"])
    root = args.get("path", ".").strip("/")
    include = args.get("include", "*")
    matches = [
        f"{path}:{number}:{line}"
        for path in sorted(workspace.files)
        if (root == "." or path.startswith(f"{root}/") or path == root)
        and fnmatch.fnmatch(path.rsplit("/", 1)[-1], include)
        for number, line in enumerate(workspace.files[path].splitlines(), 1)
        if pattern.search(line)
    ]
    return "\n".join(matches) if matches else "No matches found."


def list_dir(workspace: Workspace, args: dict[str, Any]) -> str:
    root = args["path"].strip("/")
    prefix = "" if root in ("", ".") else f"{root}/"
    directories = sorted(
        {
            path[len(prefix) :].split("/", 1)[0] + "/"
            for path in workspace.files
            if path.startswith(prefix) and "/" in path[len(prefix) :]
        }
    )
    files = [
        f"{path[len(prefix) :]:<28}{len(workspace.files[path].encode('utf-8')):>7} bytes"
        for path in sorted(workspace.files)
        if path.startswith(prefix) and "/" not in path[len(prefix) :]
    ]
    return "\n".join([*directories, *files])


def write_file(workspace: Workspace, args: dict[str, Any]) -> str:
    workspace.files[args["path"]] = args["content"]
    size = len(args["content"].encode("utf-8"))
    return f"Wrote {size:,} bytes to {args['path']}."


def run_tool(workspace: Workspace, call: Call, rng: random.Random) -> str:
    name, args = call
    if name == "exec":
        output, code = run_command(workspace, args["command"], rng)
        return f"{output}\n\n[exit code: {code}]"
    tools: dict[str, Callable[[Workspace, dict[str, Any]], str]] = {
        "read_file": read_file,
        "grep": grep,
        "list_dir": list_dir,
        "write_file": write_file,
    }
    return tools[name](workspace, args)


# --------------------------------------------------------------------------- the session

SYSTEM_PROMPT = """\
You are a careful software engineer working in a Python repository checked out at \
/workspace. You act through tools and you see nothing else of the machine.

Tools:
- list_dir(path): the entries of a directory, with file sizes.
- read_file(path, offset?, limit?): a file with line numbers; offset and limit select lines.
- grep(pattern, path?, include?): lines matching a Python regular expression, as \
path:line:text.
- exec(command): run a shell command in /workspace (no network). Output and exit code \
come back together.
- write_file(path, content): replace a whole file.

How to work:
1. Understand before you change anything: run the tests, read the failing tests and the \
code they exercise, and look at recent history when something used to work.
2. Prefer the smallest change that fixes the cause, not the symptom. Do not weaken or \
delete tests to make them pass; if a test looks wrong, say so and ask.
3. You may call several tools at once when the calls do not depend on each other.
4. After every change run the affected tests, and the whole suite before you finish.
5. Finish with a short summary: what was wrong, what you changed (files and functions), \
and anything you noticed but left alone.

Keep your messages short. The user reads the summary, not every step."""

FIRST_TASK = """\
The test suite has been red since last week's refactor of the invoice code. Please fix \
the failing tests in the invoicing module. Keep the changes small, and don't edit the \
tests unless one is clearly wrong (tell me if you think so)."""

RESTART = "sorry, I had to restart, please continue"

FOLLOW_UP = """\
Thanks, that's great. One more thing while you're in there: credit notes print amounts \
like €-1,450.00 and accounting wants -€1,450.00 (sign before the currency symbol). Can \
you change that, add a test for it, and add a line to the CHANGELOG?"""

FIRST_SUMMARY = """\
All 33 tests pass now. The refactor had introduced three bugs:

1. **Rounding** (`invoicing/money.py`): `round_money` used `ROUND_HALF_EVEN`, while its \
docstring and the README say half up (0.125 -> 0.13). Switched to `ROUND_HALF_UP`. This \
fixed the four `test_round_half_up` cases and `test_rounding_in_rendered_amounts`.
2. **Tax ignored the quantity** (`invoicing/tax.py`): `tax_for_item` multiplied the rate \
by `item.unit_price` instead of `item.net`, so a line of 2 x 1,450.00 was taxed like one \
unit. Fixed; this was behind the tax, totals and rendered-total failures.
3. **Discount taken off the gross amount** (`invoicing/totals.py`): `compute_totals` \
passed `net + tax` to `discount_amount`, so a 10% discount was 10% of the gross and the \
"never more than the net" cap didn't hold. It now passes `net`.

No tests were changed. `ruff check` and `mypy invoicing` are clean. One thing I noticed \
and left alone: `storage.amount` still accepts floats from format-1 files (through \
`str`, which is the documented intent)."""

FINAL_ANSWER = """\
Done. Negative amounts now read `-€1,450.00`:

- `invoicing/money.py`: `format_money` rounds first, then puts the sign in front of the \
currency symbol and formats the absolute value. This also covers the discount line in \
the totals block, which is rendered as a negative amount.
- `tests/test_money.py`: new `test_format_negative_amounts` for EUR, USD (including \
half-up rounding of -0.125) and CHF.
- `CHANGELOG.md`: entries under 0.4.0 for the three refactor fixes and the new sign \
position.

All 36 tests pass, and ruff and mypy are clean. Everything is uncommitted; `git diff` \
shows the five changed files."""


@dataclass(frozen=True)
class Focus:
    """What the agent looks at while it works on one problem."""

    files: tuple[str, ...]
    patterns: tuple[str, ...]
    test_runs: tuple[str, ...]
    commands: tuple[str, ...]


def snippet(code: str) -> str:
    # The snippets hold no double quotes, so this is how a person would type them.
    return f'python -c "{code}"'


SNIPPETS = list(PYTHON_SNIPPETS)

FOCUS = {
    "orient": Focus(
        files=(
            "README.md",
            "pyproject.toml",
            "CHANGELOG.md",
            "invoicing/__init__.py",
            "invoicing/models.py",
            "tests/conftest.py",
        ),
        patterns=("def compute_totals", "round_money", "class Invoice", "^from invoicing"),
        test_runs=("python -m pytest --collect-only -q",),
        commands=("git log --oneline -n 8", "git status", "wc -l invoicing/*.py tests/*.py"),
    ),
    "rounding": Focus(
        files=(
            "invoicing/money.py",
            "tests/test_money.py",
            "invoicing/render.py",
            "invoicing/totals.py",
            "tests/test_render.py",
        ),
        patterns=("round_money", "ROUND_HALF", "quantize", "format_money\\(", "CENT", "half"),
        test_runs=(
            "python -m pytest -q tests/test_money.py",
            "python -m pytest -q -k round_half_up",
            "python -m pytest -q tests/test_render.py",
            "python -m pytest -q -k rounding",
        ),
        commands=(
            "git show e2a6c93 -- invoicing/money.py",
            snippet(SNIPPETS[0]),
            "git log --oneline -n 8",
        ),
    ),
    "tax": Focus(
        files=(
            "invoicing/tax.py",
            "tests/test_tax.py",
            "invoicing/models.py",
            "tests/conftest.py",
            "invoicing/totals.py",
        ),
        patterns=(
            "tax_for_item",
            "unit_price",
            "def net",
            "rate_for\\(",
            "REDUCED_RATES",
            "vat_id",
        ),
        test_runs=(
            "python -m pytest -q tests/test_tax.py",
            "python -m pytest -q -k 'tax or totals'",
            "python -m pytest tests/test_totals.py",
            "python -m pytest -q tests/test_tax.py::test_tax_uses_quantity",
        ),
        commands=(
            "git show b71d04a -- invoicing/tax.py",
            snippet(SNIPPETS[1]),
            "git diff",
            "git status",
        ),
    ),
    "discount": Focus(
        files=(
            "invoicing/totals.py",
            "tests/test_totals.py",
            "invoicing/models.py",
            "invoicing/render.py",
            "README.md",
        ),
        patterns=("discount_amount", "Discount\\(", "share", "reason", "HUNDRED", "percent"),
        test_runs=(
            "python -m pytest -q tests/test_totals.py",
            "python -m pytest -q -k discount",
            "python -m pytest -q " + MIXED_RATES,
        ),
        commands=(
            "git show 3f9c2e1 -- invoicing/totals.py",
            snippet(SNIPPETS[2]),
            "git diff",
            "git diff --stat",
        ),
    ),
    "credit_notes": Focus(
        files=(
            "invoicing/money.py",
            "invoicing/render.py",
            "tests/test_money.py",
            "tests/test_render.py",
            "invoicing/storage.py",
            "invoicing/models.py",
            "CHANGELOG.md",
        ),
        patterns=("format_money", "is_credit_note", "Credit note", "-totals.discount", "refund"),
        test_runs=(
            "python -m pytest -q tests/test_money.py",
            "python -m pytest -q -k 'credit or negative'",
            "python -m pytest -q tests/test_render.py",
            "python -m pytest -q",
        ),
        commands=(snippet(SNIPPETS[3]), "git diff --stat", "git status", "git diff"),
    ),
}

READ_TEXTS = (
    "Let me look at `{path}`.",
    "Reading `{path}`.",
    "I'll check `{path}` again before changing anything.",
    "Let me re-read `{path}` with the failures in mind.",
)
PARALLEL_READ_TEXTS = ("Reading {paths} side by side.", "Let me read {paths}.")
GREP_TEXTS = (
    "Where else is `{pattern}` used?",
    "Searching for `{pattern}`.",
    "Let me find every occurrence of `{pattern}`.",
)
RUN_TEXTS = ("Running `{command}`.", "Let me check with `{command}`.", "Checking `{command}`.")

# Agents re-read a file once it has left their attention, not right after reading it.
REREAD_AFTER = 12
# Draws of an exploration turn before taking a repeated one; the pools are large enough
# that this only matters at the end of a long phase.
MAX_DRAWS = 20


def sentence(rng: random.Random, templates: Sequence[str], **values: str) -> str:
    """Half of the agent's calls come with a short remark, as real sessions do."""
    if rng.random() < 0.5:
        return ""
    return rng.choice(templates).format(**values)


class Session:
    """Builds the transcript: messages, call ids and tool results in step."""

    def __init__(self, workspace: Workspace, rng: random.Random) -> None:
        self.workspace = workspace
        self.rng = rng
        self.messages: list[BaseMessage] = [SystemMessage(SYSTEM_PROMPT)]
        self.turn = 0
        self.last_seen: dict[str, int] = {}

    def call_id(self) -> str:
        alphabet = string.ascii_letters + string.digits
        return "call_" + "".join(self.rng.choice(alphabet) for _ in range(24))

    def user(self, text: str) -> None:
        self.messages.append(HumanMessage(text))

    def answer(self, text: str) -> None:
        self.messages.append(AIMessage(text))

    def step(self, text: str, *calls: Call, answered: bool = True) -> None:
        """One assistant turn with its tool calls and, unless interrupted, their results."""
        tool_calls: list[ToolCall] = [
            tool_call(name=name, args=args, id=self.call_id()) for name, args in calls
        ]
        self.messages.append(AIMessage(text, tool_calls=tool_calls))
        self._remember(calls)
        if not answered:
            return
        for call, declared in zip(calls, tool_calls, strict=True):
            result = run_tool(self.workspace, call, self.rng)
            self.messages.append(
                ToolMessage(result, tool_call_id=declared["id"], name=declared["name"])
            )

    def _remember(self, calls: Sequence[Call]) -> None:
        self.turn += 1
        for name, args in calls:
            if name == "write_file":
                # After a write, every read, search and test run may say something new.
                self.last_seen.clear()
            else:
                self.last_seen[call_key((name, args))] = self.turn

    def is_fresh(self, calls: Sequence[Call]) -> bool:
        """False for a call that would tell the agent nothing new yet."""
        for call in calls:
            last = self.last_seen.get(call_key(call))
            if last is not None and (call[0] != "read_file" or self.turn - last < REREAD_AFTER):
                return False
        return True

    def explore(self, focus: Focus, turns: int) -> None:
        """Turns of reading, searching and test runs around the current problem."""
        for _ in range(turns):
            for _ in range(MAX_DRAWS):
                text, calls = self._exploration(focus)
                if self.is_fresh(calls):
                    break
            self.step(text, *calls)

    def _exploration(self, focus: Focus) -> tuple[str, list[Call]]:
        rng = self.rng
        kind = rng.choices(
            ("read", "reads", "range", "grep", "test", "command", "list"),
            weights=(22, 24, 6, 18, 16, 10, 4),
        )[0]
        if kind == "read":
            path = rng.choice(focus.files)
            return sentence(rng, READ_TEXTS, path=path), [read(path)]
        if kind == "reads":
            paths = rng.sample(focus.files, min(len(focus.files), rng.choice((2, 2, 3))))
            shown = ", ".join(f"`{path}`" for path in paths)
            return sentence(rng, PARALLEL_READ_TEXTS, paths=shown), [read(p) for p in paths]
        if kind == "range":
            path = rng.choice(focus.files)
            total = self.workspace.files[path].count("\n")
            offset = rng.randrange(1, max(2, total - 20), 20)
            return "", [read(path, offset=offset, limit=rng.choice((40, 60, 80)))]
        if kind == "grep":
            pattern = rng.choice(focus.patterns)
            return sentence(rng, GREP_TEXTS, pattern=pattern), [search(pattern)]
        if kind in ("test", "command"):
            command = rng.choice(focus.test_runs if kind == "test" else focus.commands)
            # Nobody repeats a long one-liner in prose.
            text = sentence(rng, RUN_TEXTS, command=command) if len(command) < 50 else ""
            return text, [shell(command)]
        directory = rng.choice([".", *self.workspace.directories()])
        return "", [("list_dir", {"path": directory})]

    def fix(self, text: str, bug: Bug) -> None:
        self.step(text, write(bug.path, bug.fix(self.workspace)))


def call_key(call: Call) -> str:
    return json.dumps(call, sort_keys=True)


def read(path: str, *, offset: int | None = None, limit: int | None = None) -> Call:
    args: dict[str, Any] = {"path": path}
    if offset is not None and limit is not None:
        args |= {"offset": offset, "limit": limit}
    return ("read_file", args)


def search(pattern: str, path: str = ".") -> Call:
    return ("grep", {"pattern": pattern, "path": path})


def shell(command: str) -> Call:
    return ("exec", {"command": command})


def write(path: str, content: str) -> Call:
    return ("write_file", {"path": path, "content": content})


def build_session(workspace: Workspace, rng: random.Random) -> list[BaseMessage]:
    """The whole made-up session, in the order it happened."""
    session = Session(workspace, rng)
    session.user(FIRST_TASK)
    orient(session)
    fix_rounding(session)
    fix_tax(session)
    fix_discount(session)
    session.user(FOLLOW_UP)
    handle_credit_notes(session)
    return session.messages


def orient(session: Session) -> None:
    session.step(
        "I'll start by getting an overview of the repository.",
        ("list_dir", {"path": "."}),
        read("README.md"),
    )
    session.step("", read("invoicing/invoice.py"))
    session.step(
        "There is no `invoice.py`; the invoice code is the `invoicing` package.",
        ("list_dir", {"path": "invoicing"}),
        ("list_dir", {"path": "tests"}),
    )
    session.explore(FOCUS["orient"], 7)
    session.step("Let me run the whole suite to see what fails.", shell("python -m pytest"))


def fix_rounding(session: Session) -> None:
    session.step(
        "12 failures in four files. Several compare rounded amounts that are off by one cent "
        "(0.12 instead of 0.13), which looks like half-even rounding; others look like tax "
        "being computed per unit. Let me read the money and tax modules and their tests.",
        read("invoicing/money.py"),
        read("invoicing/tax.py"),
        read("tests/test_money.py"),
    )
    session.explore(FOCUS["rounding"], 12)
    session.step("", shell("git log --oneline -n 8"))
    session.step(
        "The three most recent commits are the refactor. Let me see what the rounding "
        "commit changed.",
        shell("git show e2a6c93 -- invoicing/money.py"),
        search("ROUND_HALF"),
    )
    session.explore(FOCUS["rounding"], 14)
    session.fix(
        "`round_money` says half up in its docstring and in the README, but the refactor "
        "switched it to `ROUND_HALF_EVEN`. Switching it back.",
        BUGS["rounding"],
    )
    session.step("", shell("python -m pytest -q tests/test_money.py"))
    session.step("The money tests pass. Now the whole suite:", shell("python -m pytest -q"))


def fix_tax(session: Session) -> None:
    session.step(
        "7 failures left: the tax tests and every total that depends on tax or discounts. "
        "`tax_for_item` multiplies the rate by `unit_price`; let me check the model and "
        "the tax tests.",
        read("invoicing/models.py"),
        read("tests/test_tax.py"),
    )
    session.explore(FOCUS["tax"], 18)
    session.fix(
        "`LineItem.net` is unit price times quantity, and the docstring of `tax_for_item` "
        "says 'rate times the line's net amount'. The refactor used `unit_price`, so every "
        "line was taxed as a single unit.",
        BUGS["tax"],
    )
    session.step("", shell("python -m pytest -q tests/test_tax.py"))
    session.explore(FOCUS["tax"], 7)
    session.step(
        "Tax tests pass. Running the full suite.", shell("python -m pytest -q"), answered=False
    )
    session.user(RESTART)
    session.step(
        "No problem. I had fixed rounding in `money.py` and the tax base in `tax.py`; "
        "re-running the suite to see where we are.",
        shell("python -m pytest -q"),
    )


def fix_discount(session: Session) -> None:
    session.step(
        "3 failures left, all about discounts.",
        read("invoicing/totals.py"),
        read("tests/test_totals.py"),
    )
    session.explore(FOCUS["discount"], 22)
    session.fix(
        "`compute_totals` passes `net + tax` to `discount_amount`, so a 10% discount takes "
        "10% of the gross amount (119.00 instead of 100.00) and the cap at the net amount "
        "does not hold. The docstring says the discount comes off the net before tax.",
        BUGS["discount"],
    )
    session.step("", shell("python -m pytest -q"))
    session.step(
        "All green. Checking lint, types and the final diff.",
        shell("ruff check invoicing tests"),
        shell("mypy invoicing"),
        shell("git diff"),
    )
    session.answer(FIRST_SUMMARY)


def handle_credit_notes(session: Session) -> None:
    session.step(
        "Let me see where amounts are formatted.",
        search("def format_money"),
        search("format_money\\("),
    )
    session.explore(FOCUS["credit_notes"], 14)
    test_file = session.workspace.files["tests/test_money.py"]
    session.step(
        "I'll add the test first, so we see it fail.",
        write("tests/test_money.py", test_file + NEGATIVE_FORMAT_TEST),
    )
    session.step("", shell("python -m pytest -q tests/test_money.py"))
    session.explore(FOCUS["credit_notes"], 12)
    session.fix(
        "The sign comes from formatting the rounded amount after the symbol. I'll round "
        "first, take the sign, and format the absolute value.",
        BUGS["negative_format"],
    )
    session.step("", shell("python -m pytest -q"))
    session.step("", read("CHANGELOG.md"))
    changelog = session.workspace.files["CHANGELOG.md"]
    heading = "## 0.4.0 (unreleased)\n\n"
    session.step(
        "Adding the fixes and the new sign position to the unreleased section.",
        write("CHANGELOG.md", changelog.replace(heading, heading + CHANGELOG_ENTRY)),
    )
    session.step(
        "",
        shell("ruff check invoicing tests"),
        shell("mypy invoicing"),
        shell("git diff --stat"),
    )
    session.answer(FINAL_ANSWER)


def write_sample(output: Path) -> Path:
    """Build the session from the bundled workspace and write it into ``output``."""
    workspace = Workspace.from_directory(WORKSPACE_DIR)
    messages = build_session(workspace, random.Random(SEED))
    output.mkdir(parents=True, exist_ok=True)
    path = output / TRANSCRIPT_NAME
    path.write_text(dump_transcript(messages, format="openai-json"), encoding="utf-8")
    return path


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--output",
        type=Path,
        default=DATA_DIR,
        help=f"directory to write {TRANSCRIPT_NAME} into (default: the package data)",
    )
    path = write_sample(parser.parse_args(argv).output)
    print(f"wrote {path} ({path.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
