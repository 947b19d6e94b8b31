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

from langchain_context_governance import ContextGovernor, GovernanceReport, model_settings
from langchain_context_governance.model_settings import provider_for_model, settings_for_model


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


# --- the provider profile, picked from the model -----------------------------------------


def fake_model_class(module: str, name: str, base: type = object) -> type:
    """A class as an integration package we do not install would define it."""
    return type(name, (base,), {"__module__": module})


def bedrock(model_id: str) -> Any:
    model = fake_model_class("langchain_aws.chat_models.bedrock_converse", "ChatBedrockConverse")()
    model.model_id = model_id
    return model


def hugging_face(chat_template: str | None) -> Any:
    model = fake_model_class("langchain_huggingface.chat_models.huggingface", "ChatHuggingFace")()
    model.tokenizer = type("Tokenizer", (), {"chat_template": chat_template})()
    return model


@pytest.mark.parametrize(
    ("model", "provider"),
    [
        (lambda: bedrock("anthropic.claude-3-5-sonnet-20240620-v1:0"), "anthropic"),
        (lambda: bedrock("us.anthropic.claude-sonnet-4-5-20250929-v1:0"), "anthropic"),
        (lambda: bedrock("mistral.mistral-large-2407-v1:0"), "mistral"),
        (lambda: bedrock("meta.llama3-1-70b-instruct-v1:0"), "strict"),
        (lambda: bedrock("amazon.nova-pro-v1:0"), "strict"),
        (
            lambda: fake_model_class("langchain_community.chat_models.zhipuai", "ChatZhipuAI")(),
            "glm",
        ),
        (
            lambda: fake_model_class("langchain_google_vertexai.chat_models", "ChatVertexAI")(),
            "gemini",
        ),
        (
            lambda: fake_model_class(
                "langchain_google_vertexai.model_garden", "ChatAnthropicVertex"
            )(),
            "anthropic",
        ),
        (lambda: hugging_face(None), "strict"),
    ],
)
def test_the_profile_of_packages_that_are_not_installed(model: Any, provider: str) -> None:
    assert provider_for_model(model()).provider == provider


def test_a_tokenizer_chat_template_is_the_model_s_rules() -> None:
    template = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
    choice = provider_for_model(hugging_face(template))
    assert choice.provider == "openai"
    settings = settings_for_model(hugging_face(template))  # type: ignore[arg-type]
    assert (settings["provider"], settings["chat_template"]) == ("openai", template)


@pytest.fixture
def offline_openai(monkeypatch: pytest.MonkeyPatch) -> Any:
    langchain_openai = pytest.importorskip("langchain_openai")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_BASE", raising=False)
    return langchain_openai


def test_chat_openai_is_openai_on_openai_s_api_and_strict_on_another_server(
    offline_openai: Any,
) -> None:
    chat_openai = offline_openai.ChatOpenAI
    assert provider_for_model(chat_openai(model="gpt-4o", api_key="sk-x")).provider == "openai"
    local = chat_openai(model="qwen3", api_key="x", base_url="http://localhost:8000/v1")
    assert provider_for_model(local).provider == "strict"
    assert "localhost" in provider_for_model(local).reason
    template = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
    assert provider_for_model(local, chat_template=template).provider == "openai"
    zhipu = chat_openai(
        model="glm-4.6", api_key="x", base_url="https://open.bigmodel.cn/api/paas/v4"
    )
    assert provider_for_model(zhipu).provider == "glm"
    azure = offline_openai.AzureChatOpenAI(
        azure_endpoint="https://example.openai.azure.com",
        api_key="x",
        api_version="2024-10-21",
        azure_deployment="gpt-4o",
    )
    assert provider_for_model(azure).provider == "openai"


def test_another_integration_built_on_chat_openai_is_not_taken_for_openai(
    offline_openai: Any,
) -> None:
    """ChatDeepSeek and others subclass langchain-openai's classes but talk to other APIs."""
    deepseek = fake_model_class(
        "langchain_deepseek.chat_models", "ChatDeepSeek", offline_openai.ChatOpenAI
    )
    model = deepseek(model="deepseek-chat", api_key="x")
    assert provider_for_model(model).provider == "strict"
    mine = fake_model_class("my_agent.models", "MyChatOpenAI", offline_openai.ChatOpenAI)
    assert provider_for_model(mine(model="gpt-4o", api_key="x")).provider == "openai"


def test_from_model_picks_the_profile_and_explicit_provider_wins() -> None:
    anthropic = pytest.importorskip("langchain_anthropic")
    model = anthropic.ChatAnthropic(model_name="claude-sonnet-4-5", api_key="x", stop=None)
    governor = ContextGovernor.from_model(model.bind_tools([]))
    assert governor.provider == "anthropic"
    assert governor.profile.name == "anthropic"
    assert governor.govern([HumanMessage("hi")]).report.profile == "anthropic"
    assert "profile anthropic" in str(governor.govern([HumanMessage("hi")]).report)
    assert ContextGovernor.from_model(model, provider="strict").provider == "strict"


def strict_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if record.levelno == logging.WARNING and "'strict' profile" in record.getMessage()
    ]


def test_an_unknown_model_class_gets_strict_and_one_warning_per_model(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A team's own model class: the strict profile rewrites its requests, said at WARNING."""
    unknown = fake_model_class("someone_elses_sdk.chat", "ChatSomething")
    model = unknown()
    with caplog.at_level(logging.WARNING, logger="langchain_context_governance"):
        for _ in range(3):
            settings = settings_for_model(model)  # type: ignore[arg-type]
    assert settings["provider"] == "strict"
    [said] = strict_warnings(caplog)
    assert "someone_elses_sdk.chat.ChatSomething" in said
    assert "renames every tool-call id that is not 9 letters or digits" in said
    assert "provider=" in said
    with caplog.at_level(logging.WARNING, logger="langchain_context_governance"):
        settings_for_model(unknown())  # type: ignore[arg-type]
    assert len(strict_warnings(caplog)) == 2


def test_a_governor_for_a_model_of_one_s_own_class_warns_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class TeamChatModel(GenericFakeChatModel):
        pass

    model = TeamChatModel(messages=iter([]), profile={"max_input_tokens": 20_000})
    with caplog.at_level(logging.WARNING, logger="langchain_context_governance"):
        governor = ContextGovernor.from_model(model)
        governor.govern([HumanMessage("hi")])
    assert governor.provider == "strict"
    [said] = strict_warnings(caplog)
    assert "TeamChatModel" in said


def test_a_provider_given_to_settings_for_model_is_taken_without_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    model = fake_model_class("someone_elses_sdk.chat", "ChatSomething")()
    with caplog.at_level(logging.WARNING, logger="langchain_context_governance"):
        settings = settings_for_model(model, provider="openai")  # type: ignore[arg-type]
    assert settings["provider"] == "openai"
    assert strict_warnings(caplog) == []


def test_a_configurable_model_gets_strict_and_a_warning_that_says_why(
    caplog: pytest.LogCaptureFixture,
) -> None:
    chat_models = pytest.importorskip("langchain.chat_models")
    pytest.importorskip("langchain_openai")
    model = chat_models.init_chat_model(
        "openai:gpt-4o", configurable_fields=("model",), api_key="unused"
    )
    with caplog.at_level(logging.WARNING, logger="langchain_context_governance"):
        governor = ContextGovernor.from_model(model, context_window_tokens=128_000)
    assert governor.provider == "strict"
    [said] = strict_warnings(caplog)
    assert "configurable_fields" in said and "provider=" in said


def test_an_output_limit_as_large_as_the_window_reserves_a_quarter_of_it(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ChatMistralAI's profile lists 262,144 tokens of output for a 262,144-token window."""
    monkeypatch.setattr(model_settings, "_logged", set())
    mistralai = pytest.importorskip("langchain_mistralai")
    model = mistralai.ChatMistralAI(model="mistral-large-latest", api_key="x")
    window = model.profile["max_input_tokens"]
    assert model.profile["max_output_tokens"] >= window
    with caplog.at_level(logging.INFO, logger="langchain_context_governance"):
        governor = ContextGovernor.from_model(model)
    assert governor.provider == "mistral"
    assert governor.max_output_tokens == window // 4
    assert governor.budget == window - window // 4 - governor.safety_buffer
    [said] = [r.getMessage() for r in caplog.records if "a quarter of the window" in r.getMessage()]
    # The line holds whatever the caller passes: it names the setting that overrides it.
    assert "where max_output_tokens=N is not given" in said
    chosen = ContextGovernor.from_model(model, max_output_tokens=8_000)
    assert chosen.max_output_tokens == 8_000


def test_a_latest_alias_without_a_profile_is_refused_naming_the_setting_to_pass() -> None:
    """The notebooks' helper used claude-3-5-haiku-latest: LangChain has no profile for it."""
    anthropic = pytest.importorskip("langchain_anthropic")
    model = anthropic.ChatAnthropic(model="claude-3-5-haiku-latest", api_key="unused")
    with pytest.raises(ValueError, match=r"'claude-3-5-haiku-latest'.*context_window_tokens=N"):
        ContextGovernor.from_model(model)
    governor = ContextGovernor.from_model(model, context_window_tokens=200_000)
    assert governor.provider == "anthropic" and governor.context_window_tokens == 200_000


def azure(offline_openai: Any, deployment: str) -> Any:
    return offline_openai.AzureChatOpenAI(
        azure_endpoint="https://example.openai.azure.com",
        api_key="unused",
        api_version="2024-10-21",
        azure_deployment=deployment,
    )


def test_an_azure_deployment_is_resolved_by_a_model_name_or_refused_naming_the_setting(
    offline_openai: Any,
) -> None:
    assert ContextGovernor.from_model(azure(offline_openai, "gpt-4o")).context_window_tokens
    with pytest.raises(
        ValueError, match=r"azure_deployment='team-prod-4'.*pass context_window_tokens=N"
    ):
        ContextGovernor.from_model(azure(offline_openai, "team-prod-4"))
    governor = ContextGovernor.from_model(
        azure(offline_openai, "team-prod-4"), context_window_tokens=128_000
    )
    assert governor.provider == "openai" and governor.counter.name == "tiktoken:o200k_base"
