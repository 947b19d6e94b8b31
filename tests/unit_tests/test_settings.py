"""Settings: one home (settings.py), documented per field, checked against the README table."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from langchain_context_governance import ContextGovernor
from langchain_context_governance.settings import SAME_MEANING, GovernorSettings
from langchain_context_governance.testing import ScriptedChatModel

README = Path(__file__).resolve().parents[2] / "README.md"


def _readme_settings_table() -> dict[str, str]:
    """The settings table of the README: each setting's name and its default as written
    (a setting listed twice fails)."""
    text = README.read_text(encoding="utf-8")
    table = text[text.index("| setting | default | meaning |") :]
    rows: dict[str, str] = {}
    for line in table.splitlines()[2:]:
        if not line.startswith("|"):
            break
        name, default = (cell.strip() for cell in line.strip("|").split("|")[:2])
        assert name.strip("`") not in rows, f"{name} is listed twice"
        rows[name.strip("`")] = default.strip("`")
    return rows


def test_every_setting_has_a_docstring() -> None:
    undocumented = [
        name for name, info in GovernorSettings.model_fields.items() if not info.description
    ]
    assert undocumented == []


def test_the_readme_table_lists_every_setting_and_no_other() -> None:
    assert sorted(_readme_settings_table()) == sorted(GovernorSettings.model_fields)


def test_the_readme_table_gives_each_plain_default_as_it_is() -> None:
    rows = _readme_settings_table()
    for name, info in GovernorSettings.model_fields.items():
        default, written = info.default, rows[name]
        if isinstance(default, bool) or default is None:
            assert written == repr(default), name
        elif isinstance(default, (int, float)):
            assert float(written.replace("_", "").replace(",", "")) == default, name
        elif isinstance(default, str) and written.startswith('"'):
            assert written == f'"{default}"', name


def test_max_input_tokens_sets_the_input_budget_directly() -> None:
    assert ContextGovernor(max_input_tokens=6_000).budget == 6_000
    both = ContextGovernor(context_window_tokens=20_000, max_input_tokens=6_000)
    assert both.budget == 6_000
    assert ContextGovernor(context_window_tokens=8_000, max_input_tokens=6_000).budget == 2_880


def test_max_input_tokens_alone_with_an_output_reserve_names_what_does_nothing() -> None:
    with pytest.raises(ValueError, match="max_output_tokens reserve room in context_window"):
        ContextGovernor(max_input_tokens=6_000, max_output_tokens=1_000)


@pytest.mark.parametrize(("given", "meant"), sorted(SAME_MEANING.items()))
def test_a_name_other_tools_use_points_to_the_setting_that_means_the_same(
    given: str, meant: str
) -> None:
    with pytest.raises(TypeError, match=f"did you mean '{meant}'"):
        ContextGovernor(**{given: 1_000})


def test_from_model_takes_max_input_tokens_for_a_model_without_a_window() -> None:
    model = ScriptedChatModel([AIMessage("done")])
    governor = ContextGovernor.from_model(model, max_input_tokens=3_000)
    assert governor.budget == 3_000


def test_max_input_tokens_budget_is_what_the_request_fits() -> None:
    calls = [{"name": "read_file", "args": {"n": n}, "id": f"c{n}"} for n in range(20)]
    history: list = [HumanMessage("read them all")]
    for call in calls:
        history += [
            AIMessage("", tool_calls=[call]),
            ToolMessage("x" * 2_000, tool_call_id=call["id"]),
        ]
    governor = ContextGovernor(max_input_tokens=3_000)
    report = governor.govern(history).report
    assert report.budget == 3_000
    assert report.tokens_before > 3_000 >= report.tokens_after


def test_the_middleware_takes_the_same_names() -> None:
    pytest.importorskip("langchain.agents")
    from langchain_context_governance import ContextGovernanceMiddleware

    middleware = ContextGovernanceMiddleware(max_input_tokens=5_000)
    assert middleware.governor.budget == 5_000
    with pytest.raises(
        TypeError,
        match="ContextGovernanceMiddleware got an unknown setting 'max_tokens'; "
        "did you mean 'max_input_tokens'",
    ):
        ContextGovernanceMiddleware(max_tokens=5_000)


@pytest.mark.parametrize(
    ("tools", "said"),
    [("read_file", "tools must be a list"), ([1, 2], "tools[0] cannot be read as a tool")],
)
def test_tools_that_are_no_tool_definitions_are_named_at_construction(
    tools: object, said: str
) -> None:
    with pytest.raises(ValueError, match=said.replace("[", r"\[")):
        ContextGovernor(context_window_tokens=8_000, tools=tools)
