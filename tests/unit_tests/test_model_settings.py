"""Settings fail loudly: unknown keywords, a model with no window, a model named by a string."""

from __future__ import annotations

import logging
import subprocess
import sys
import warnings
from typing import Any

import pytest
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import HumanMessage, SystemMessage

from langchain_context_governance import ContextGovernor, GovernanceReport


def windowless_model() -> GenericFakeChatModel:
    return GenericFakeChatModel(messages=iter([]), profile={"max_output_tokens": 1_000})


@pytest.mark.parametrize(
    ("typo", "meant"),
    [
        ("contex_window_tokens", "context_window_tokens"),
        ("max_ouput_tokens", "max_output_tokens"),
        ("tokencounter", "token_counter"),
    ],
)
def test_an_unknown_setting_raises_and_names_the_close_match(typo: str, meant: str) -> None:
    with pytest.raises(TypeError, match=f"unknown setting '{typo}'; did you mean '{meant}'"):
        ContextGovernor(**{typo: 100})
    model = GenericFakeChatModel(messages=iter([]), profile={"max_input_tokens": 20_000})
    with pytest.raises(TypeError, match=f"from_model got an unknown setting '{typo}'.*'{meant}'"):
        ContextGovernor.from_model(model, **{typo: 100})


def test_an_unknown_setting_without_a_close_match_lists_the_settings() -> None:
    with pytest.raises(TypeError, match=r"unknown setting 'zzz'; known: .*context_window_tokens"):
        ContextGovernor(zzz=1)


def test_from_model_without_a_window_asks_for_one() -> None:
    with pytest.raises(ValueError, match="pass context_window_tokens=N"):
        ContextGovernor.from_model(windowless_model())
    governor = ContextGovernor.from_model(windowless_model(), context_window_tokens=9_000)
    assert governor.budget == 9_000 - 1_000 - governor.safety_buffer


def test_from_model_with_an_explicit_none_window_warns_and_never_trims() -> None:
    with pytest.warns(UserWarning, match="never trims"):
        governor = ContextGovernor.from_model(windowless_model(), context_window_tokens=None)
    assert governor.budget is None


def test_from_model_reads_a_provider_model_string_without_the_network(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    pytest.importorskip("langchain_openai")
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)

    def no_download(blobpath: str) -> bytes:
        raise AssertionError(f"tried to read {blobpath}")

    monkeypatch.setattr("tiktoken.load.read_file", no_download)
    governor = ContextGovernor.from_model("openai:gpt-4o-mini", max_output_tokens=2_000)
    assert governor.context_window_tokens is not None
    assert governor.context_window_tokens > 100_000
    assert governor.counter.name == "tiktoken:o200k_base"
    governor.govern([HumanMessage("counted offline")])


def test_from_model_chat_openai_counts_with_its_own_encoding(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    langchain_openai = pytest.importorskip("langchain_openai")
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))

    def no_download(blobpath: str) -> bytes:
        raise AssertionError(f"tried to read {blobpath}")

    monkeypatch.setattr("tiktoken.load.read_file", no_download)
    model = langchain_openai.ChatOpenAI(model="gpt-3.5-turbo", api_key="sk-not-used")
    governor = ContextGovernor.from_model(model, context_window_tokens=16_000)
    assert governor.counter.name == "tiktoken:cl100k_base"


def test_from_model_string_without_langchain_says_what_to_install() -> None:
    code = (
        "import sys; sys.modules['langchain'] = None; sys.modules['langchain.chat_models'] = None\n"
        "from langchain_context_governance import ContextGovernor\n"
        "try:\n"
        "    ContextGovernor.from_model('openai:gpt-4o')\n"
        "except ImportError as error:\n"
        "    print(error)\n"
    )
    printed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert "init_chat_model" in printed
    assert "[agents]" in printed


def test_an_over_budget_request_is_logged_once_per_conversation(
    caplog: pytest.LogCaptureFixture,
) -> None:
    governor = ContextGovernor(context_window_tokens=600, max_output_tokens=100, safety_buffer=0)
    system = SystemMessage("rules " * 800)
    first = [system, HumanMessage("first question")]
    with caplog.at_level(logging.WARNING, logger="langchain_context_governance"):
        report = governor.govern(first, thread_id="a").report
        governor.govern([*first, HumanMessage("again")], thread_id="a")
        governor.govern([system, HumanMessage("another conversation")], thread_id="b")
    warned = [record for record in caplog.records if record.levelno == logging.WARNING]
    assert not report.within_budget
    assert len(warned) == 2
    assert f"{report.tokens_after} tokens for a budget of 500" in warned[0].getMessage()


def test_a_request_within_budget_logs_no_warning(caplog: pytest.LogCaptureFixture) -> None:
    governor = ContextGovernor(context_window_tokens=6_000)
    with caplog.at_level(logging.WARNING, logger="langchain_context_governance"):
        governor.govern([HumanMessage("hi")])
    assert not caplog.records


def test_the_report_reads_in_one_line() -> None:
    report = GovernanceReport(
        tokens_before=12_000,
        tokens_after=7_500,
        budget=7_000,
        changes={"microcompact": 3, "snip_history": 0},
        messages_before=40,
        messages_after=31,
    )
    assert str(report) == (
        "tokens 12,000 -> 7,500 (budget 7,000 OVER BUDGET), messages 40 -> 31; microcompact=3"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert "\n" not in str(ContextGovernor().govern([HumanMessage("hi")]).report)
