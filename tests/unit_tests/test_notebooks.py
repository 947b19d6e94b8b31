"""The notebooks are what scripts/build_notebooks.py writes, and call a provider only when
this project's own variable names a model: an API key in the environment is not enough."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import nbformat
import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableLambda

from langchain_context_governance import ContextGovernor, validate_messages

ROOT = Path(__file__).resolve().parents[2]


def build_notebooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "build_notebooks", ROOT / "scripts/build_notebooks.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


BUILDER = build_notebooks()


@pytest.mark.parametrize("name", sorted(BUILDER.NOTEBOOKS))
def test_each_committed_notebook_holds_the_generator_s_cells(name: str) -> None:
    committed = nbformat.read(ROOT / "notebooks" / name, as_version=4)
    built = BUILDER.build(BUILDER.NOTEBOOKS[name])
    assert [cell.source for cell in committed.cells] == [cell.source for cell in built.cells]
    assert all(
        "Traceback" not in str(output) and output.get("name") != "stderr"
        for cell in committed.cells
        for output in cell.get("outputs", [])
    ), f"{name} was saved with an error or a warning in its outputs"


def real_chat_model(monkeypatch: pytest.MonkeyPatch, **environment: str) -> Any:
    monkeypatch.delenv(BUILDER.REAL_MODEL_VARIABLE, raising=False)
    for variable, value in environment.items():
        monkeypatch.setenv(variable, value)
    namespace: dict[str, Any] = {}
    exec(BUILDER.CHOOSE_MODEL, namespace)
    return namespace["real_chat_model"]()


def test_an_api_key_alone_never_makes_a_notebook_call_a_provider(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert real_chat_model(monkeypatch, OPENAI_API_KEY="sk-set-in-the-shell") is None
    assert real_chat_model(monkeypatch, ANTHROPIC_API_KEY="sk-ant-set-in-the-shell") is None


def test_the_project_s_variable_names_the_real_model(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("langchain_openai")
    model = real_chat_model(
        monkeypatch,
        CONTEXT_GOVERNANCE_NOTEBOOK_REAL_MODEL="openai:gpt-4o-mini",
        OPENAI_API_KEY="sk-never-used",
    )
    assert type(model).__name__ == "ChatOpenAI" and model.model_name == "gpt-4o-mini"


class BadRequestError(Exception):
    """A stand-in for a real client's 400 (langchain-openai raises openai.BadRequestError)."""


def refuse_an_illegal_request(messages: list[BaseMessage]) -> AIMessage:
    if validate_messages(messages):
        raise BadRequestError("Error code: 400 - messages with role 'tool' must be a response")
    return AIMessage("money.py rounds each line.")


def test_the_quickstart_handles_a_real_client_s_error_not_only_the_scripted_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    cells = BUILDER.NOTEBOOKS["01_quickstart_lcel.ipynb"]
    [cell] = [cell.source for cell in cells if "model.invoke(history)" in cell.source]
    history = [
        HumanMessage("read a.py"),
        AIMessage("", tool_calls=[{"name": "read_file", "args": {}, "id": "call_1"}]),
        HumanMessage("sorry, I restarted"),
    ]
    real_model = RunnableLambda(refuse_an_illegal_request)
    namespace = {
        "real_chat_model": lambda: real_model,
        "ScriptedChatModel": None,
        "AIMessage": AIMessage,
        "history": history,
        "governor": ContextGovernor(),
    }
    exec(cell, namespace)
    printed = capsys.readouterr().out
    assert "BadRequestError: Error code: 400" in printed
    assert "answer: money.py rounds each line." in printed
