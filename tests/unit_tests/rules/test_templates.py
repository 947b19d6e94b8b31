"""Chat templates as a source of rules, against real vendor templates (tests/fixtures)."""

from __future__ import annotations

import builtins
import json
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given, settings
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    convert_to_openai_messages,
)
from langchain_core.messages.tool import InvalidToolCall, invalid_tool_call
from langchain_core.tools import tool
from typer.testing import CliRunner

from langchain_context_governance import ContextGovernor
from langchain_context_governance.cli import EXIT_BAD_INPUT, EXIT_BROKEN_RULES, app
from langchain_context_governance.rules import templates
from langchain_context_governance.rules.templates import (
    RENDER_TIME_LIMIT_SECONDS,
    ChatTemplateLimitExceeded,
    _compile,
    render_chat_template,
    rules_for_chat_template,
)
from langchain_context_governance.rules.validate import validate_messages
from tests.builders import ai_calls, call, result
from tests.strategies import histories

TEMPLATES = Path(__file__).parents[2] / "fixtures" / "chat_templates"


def template(name: str) -> str:
    return (TEMPLATES / f"{name}.jinja").read_text(encoding="utf-8")


# What probing each real template finds, with the vendor's own error for one shape.
PROBED: dict[str, tuple[tuple[str, ...], str]] = {
    "meta-llama-Llama-3.1-8B-Instruct": (
        ("one-tool-call-per-message",),
        "This model only supports single tool-calls at once!",
    ),
    "meta-llama-Llama-3.2-3B-Instruct": (
        ("one-tool-call-per-message",),
        "This model only supports single tool-calls at once!",
    ),
    "mistralai-Mistral-Nemo-Instruct-2407": (
        (
            "system-not-first",
            "one-leading-system-message",
            "no-user-after-tool-results",
            "nine-character-tool-call-ids",
        ),
        "conversation roles must alternate user/assistant/user/assistant",
    ),
    "Mistral-Small-3.2-24B-Instruct-2506": (
        (
            "system-not-first",
            "one-leading-system-message",
            "no-user-after-tool-results",
            "nine-character-tool-call-ids",
        ),
        "conversation roles must alternate user/assistant/user/assistant",
    ),
    "Qwen3.5-4B": (
        ("system-not-first", "one-leading-system-message", "no-invalid-tool-calls"),
        "System message must be at the beginning.",
    ),
    "Qwen-Qwen2.5-7B-Instruct": ((), ""),
    "google-gemma-2-2b-it": (("no-system-role", "no-tool-role"), "System role not supported"),
    # Read only with transformers' {% generation %} tag.
    "LFM2.5-8B-A1B": (("no-invalid-tool-calls",), "has no attribute 'items'"),
    "poolside-Laguna-S-2.1": (("no-invalid-tool-calls",), "has no attribute 'items'"),
    "poolside-Laguna-XS-2.1": (("no-invalid-tool-calls",), "has no attribute 'items'"),
    "poolside-Laguna-XS.2": (("no-invalid-tool-calls",), "has no attribute 'items'"),
    # Tool-use templates: they render only with a tool list.
    "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use": ((), ""),
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use": ((), ""),
    "CohereForAI-c4ai-command-r-plus-tool_use": ((), ""),
    # Needs llama.cpp's `functions` variable.
    "fireworks-ai-llama-3-firefunction-v2": ((), ""),
    # llama.cpp's own: prints `tools | map(...)` (a generator in Python's Jinja) with tojson.
    "llama-cpp-deepseek-r1": ((), ""),
}
# The profile that covers each template family without probing.
PROFILE_OF = {
    "meta-llama-Llama-3.1-8B-Instruct": "llama3",
    "meta-llama-Llama-3.2-3B-Instruct": "llama3",
    "mistralai-Mistral-Nemo-Instruct-2407": "mistral_template",
    "Mistral-Small-3.2-24B-Instruct-2506": "mistral_template",
    "Qwen3.5-4B": "qwen",
    "Qwen-Qwen2.5-7B-Instruct": "qwen",
    "google-gemma-2-2b-it": "gemma",
}


def bad_json_call(call_id: str) -> InvalidToolCall:
    return invalid_tool_call(name="search", args="{oops", id=call_id, error="bad JSON")


# A shape each template rejects, to show the vendor's wording reaches the violation.
REJECTED_SHAPE: dict[str, list[BaseMessage]] = {
    "one-tool-call-per-message": [
        HumanMessage("two"),
        ai_calls(call("aB3dE5gH1"), call("Zy9xW7vU2")),
        result("aB3dE5gH1"),
        result("Zy9xW7vU2"),
    ],
    "system-not-first": [
        HumanMessage("hi"),
        AIMessage("hello"),
        SystemMessage("late"),
        HumanMessage("bye"),
    ],
    "no-system-role": [SystemMessage("s"), HumanMessage("hi")],
    "no-invalid-tool-calls": [
        HumanMessage("search"),
        AIMessage("", invalid_tool_calls=[bad_json_call("aB3dE5gH1")]),
        result("aB3dE5gH1"),
    ],
}


def test_every_template_fixture_is_checked_here() -> None:
    assert {path.stem for path in TEMPLATES.glob("*.jinja")} == set(PROBED)


@pytest.mark.parametrize("name", list(PROBED))
def test_probing_a_real_template_finds_the_rules_it_needs(name: str) -> None:
    rules, _ = PROBED[name]
    assert rules_for_chat_template(template(name)) == rules


@pytest.mark.parametrize("name", [n for n in PROBED if PROBED[n][0]])
def test_the_templates_own_error_is_reported_as_a_violation(name: str) -> None:
    rules, wording = PROBED[name]
    shape = REJECTED_SHAPE.get(rules[0], REJECTED_SHAPE["system-not-first"])
    violations = validate_messages(shape, chat_template=template(name))
    [rendered] = [v for v in violations if v.rule == "chat-template"]
    assert rendered.index == -1 and wording in rendered.message
    governed = ContextGovernor(chat_template=template(name)).invoke(shape)
    assert validate_messages(governed, chat_template=template(name)) == []


@pytest.mark.parametrize("name", list(PROFILE_OF))
def test_the_profile_of_each_template_family_renders_the_shapes_it_rejects(name: str) -> None:
    for rule in ("one-tool-call-per-message", "system-not-first", "no-system-role"):
        shape = REJECTED_SHAPE[rule]
        governed = ContextGovernor(provider=PROFILE_OF[name]).invoke(shape)
        render_chat_template(template(name), governed)


@pytest.mark.parametrize("name", list(PROBED))
def test_governed_histories_render_and_raw_ones_often_do_not(name: str) -> None:
    text = template(name)
    governor = ContextGovernor(chat_template=text)
    raw_failures: list[bool] = []

    # Derandomized: the share of raw failures is asserted, so it must not vary by run.
    @settings(max_examples=60, database=None, derandomize=True)
    @given(history=histories())
    def governed_history_renders(history: list[BaseMessage]) -> None:
        assume(history)  # an empty request has nothing to render or govern
        raw_failures.append(any(v.rule == "chat-template" for v in _template_check(history, text)))
        governed = governor.invoke(history)
        assume(governed)  # only orphan results: nothing is left to send
        assert validate_messages(governed, chat_template=text) == []

    governed_history_renders()
    rules = set(PROBED[name][0])
    if rules - {"no-invalid-tool-calls"}:
        # The template rejects shapes random agent histories often have.
        assert sum(raw_failures) >= len(raw_failures) // 10 > 0
    elif rules:
        # Arguments that are not JSON are rarer.
        assert sum(raw_failures) > 0


def _template_check(history: list[BaseMessage], text: str) -> list[Any]:
    # The raw history is only rendered: the profile checks would flag it anyway.
    from langchain_context_governance.rules.templates import chat_template_violation

    violation = chat_template_violation(text, history)
    return [] if violation is None else [violation]


def test_a_template_is_probed_once_per_text() -> None:
    text = template("Qwen3.5-4B")
    ContextGovernor(chat_template=text)
    before = rules_for_chat_template.cache_info()
    ContextGovernor(chat_template=text, provider="mistral")
    after = rules_for_chat_template.cache_info()
    assert after.hits == before.hits + 1 and after.misses == before.misses


def test_a_template_that_rejects_a_plain_conversation_is_a_value_error() -> None:
    refuses = "{{ raise_exception('no conversations here') }}"
    with pytest.raises(ValueError, match=r"canonical legal conversation.*no conversations here"):
        ContextGovernor(chat_template=refuses)


def test_a_template_that_is_not_jinja_is_a_value_error_naming_the_setting() -> None:
    with pytest.raises(ValueError, match="chat_template cannot be read as a Jinja template"):
        validate_messages([HumanMessage("hi")], chat_template="{% for m in messages %}")


def test_rendering_follows_transformers(monkeypatch: pytest.MonkeyPatch) -> None:
    text = (
        "{% for m in messages %}{% if m.role == 'tool' %}{% continue %}{% endif %}"
        "{{ m.role }}:{{ m.tool_calls | tojson if m.tool_calls is defined else m.content }}\n"
        "{% endfor %}{{ bos_token }}{{ add_generation_prompt }}{{ strftime_now('%Y') | length }}"
    )
    request = [
        HumanMessage("<hi>"),
        ai_calls(call("aB3dE5gH1", "grep", q="é")),
        result("aB3dE5gH1"),
    ]
    rendered = render_chat_template(text, request)
    # Function-format calls with parsed arguments; tojson leaves non-ASCII as it is.
    calls = [
        {
            "id": "aB3dE5gH1",
            "type": "function",
            "function": {"name": "grep", "arguments": {"q": "é"}},
        }
    ]
    assert rendered == f"user:<hi>\nassistant:{json.dumps(calls, ensure_ascii=False)}\n<s>True4"


def test_missing_jinja2_is_an_import_error_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_import = builtins.__import__

    def without_jinja(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith("jinja2"):
            raise ImportError("No module named 'jinja2'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", without_jinja)
    with pytest.raises(ImportError, match=r"langchain-context-governance\[templates\]"):
        _compile("{{ messages }} not compiled before")


def test_cli_check_with_a_chat_template(tmp_path: Path) -> None:
    source = tmp_path / "in.json"
    parallel = REJECTED_SHAPE["one-tool-call-per-message"]
    source.write_text(json.dumps(convert_to_openai_messages(parallel)), encoding="utf-8")
    llama = TEMPLATES / "meta-llama-Llama-3.1-8B-Instruct.jinja"
    runner = CliRunner()

    plain = runner.invoke(app, ["check", str(source)])
    with_template = runner.invoke(app, ["check", str(source), "--chat-template", str(llama)])
    missing = runner.invoke(app, ["check", str(source), "--chat-template", str(tmp_path / "x")])

    assert plain.exit_code == 0
    assert with_template.exit_code == EXIT_BROKEN_RULES
    assert "single tool-calls" in with_template.stdout
    assert "parallel-tool-calls" in with_template.stdout
    assert missing.exit_code == EXIT_BAD_INPUT and "--chat-template" in missing.stderr


def test_from_model_probes_the_chat_template_of_the_models_tokenizer() -> None:
    from langchain_context_governance.testing import ScriptedChatModel

    class Tokenizer:
        chat_template = template("meta-llama-Llama-3.1-8B-Instruct")

    class LocalModel(ScriptedChatModel):
        tokenizer: Any = Tokenizer()

    governor = ContextGovernor.from_model(LocalModel([]), context_window_tokens=32_000)
    assert governor.chat_template == Tokenizer.chat_template
    governed = governor.invoke(REJECTED_SHAPE["one-tool-call-per-message"])
    assert [m.type for m in governed] == ["human", "ai", "tool", "ai", "tool"]
    plain = ContextGovernor.from_model(ScriptedChatModel([]), context_window_tokens=32_000)
    assert plain.chat_template is None


def test_the_generation_tag_renders_its_body_in_a_scope_of_its_own() -> None:
    text = (
        "{% set outer = 'kept' %}{% for m in messages %}{% generation %}"
        "{% set outer = 'inner' %}[{{ m.content }}]{% endgeneration %}{% endfor %}{{ outer }}"
    )
    assert render_chat_template(text, [HumanMessage("a"), AIMessage("b")]) == "[a][b]kept"


def test_a_tool_use_template_renders_with_a_stand_in_tool_or_the_requests_tools() -> None:
    hermes = template("NousResearch-Hermes-3-Llama-3.1-8B-tool_use")

    @tool
    def grep(pattern: str) -> str:
        """Return the lines that match `pattern`."""
        return pattern

    plain = render_chat_template(hermes, [HumanMessage("hi")])
    with_tools = render_chat_template(hermes, [HumanMessage("hi")], tools=[grep])
    assert '"name": "search"' in plain and "grep" not in plain
    assert '"name": "grep"' in with_tools and '"name": "search"' not in with_tools
    # An Anthropic definition reads too (an Anthropic request body's tools).
    anthropic_tool = {"name": "lookup", "description": "Look up.", "input_schema": {}}
    assert '"name": "lookup"' in render_chat_template(
        hermes, [HumanMessage("hi")], tools=[anthropic_tool]
    )


def test_validate_renders_with_the_requests_tools() -> None:
    refuses_grep = (
        "{% for t in tools %}{% if t.function.name == 'grep' %}"
        "{{ raise_exception('grep is not allowed') }}{% endif %}{% endfor %}"
        "{% for m in messages %}{{ m.content }}{% endfor %}"
    )
    grep_tool = {"type": "function", "function": {"name": "grep", "parameters": {}}}
    request = [HumanMessage("hi")]
    assert validate_messages(request, chat_template=refuses_grep) == []  # a stand-in tool
    [violation] = validate_messages(request, chat_template=refuses_grep, tools=[grep_tool])
    assert violation.rule == "chat-template" and "grep is not allowed" in violation.message


def test_a_tool_that_is_no_definition_is_named_by_its_position() -> None:
    with pytest.raises(ValueError, match=r"tools\[1\] is not a tool definition"):
        render_chat_template(
            "{{ tools }}", [HumanMessage("hi")], tools=[{"name": "a", "parameters": {}}, 3]
        )


def test_llama_cpps_variables_and_generators_printed_as_json() -> None:
    firefunction = render_chat_template(
        template("fireworks-ai-llama-3-firefunction-v2"), [HumanMessage("hi")]
    )
    assert '"name": "search"' in firefunction  # llama.cpp's `functions` text
    mapped = "{{ tools | map(attribute='function') | map(attribute='name') | tojson }}"
    assert render_chat_template(mapped, [HumanMessage("hi")]) == '["search"]'


# Templates that would hang or fill memory without the render limits.
ENDLESS_LOOPS = {
    "nested ranges": (
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
    ),
    "loops with no call in them": (
        "{% set s = 'a' * 100000 %}{% for a in s %}{% for b in s %}{% endfor %}{% endfor %}"
    ),
    "a loop filter with no body": (
        "{% set s = 'a' * 100000 %}"
        "{% for a in s %}{% for b in s if false %}{% endfor %}{% endfor %}"
    ),
    "an exponential macro": (
        "{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(60) }}"
    ),
}
HUGE_OUTPUTS = {
    "200 MB in chunks": "{% for i in range(100000) %}{{ 'x' * 2000 }}{% endfor %}",
    "200 MB in one value": "{{ 'x' * 200000000 }}",
    "a width of 200 million": "{{ 'x' | center(200000000) }}",
    "doubling a text": (
        "{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}"
        "{% endfor %}{{ ns.s }}"
    ),
    "a power": "{{ 7 ** 100000000 }}",
}


def test_a_template_that_never_ends_raises_at_the_time_limit() -> None:
    # One at the real limit, through the governor's constructor, which probes the template.
    started = time.monotonic()
    with pytest.raises(ValueError, match=r"chat_template, .*more than 2 s to render"):
        ContextGovernor(chat_template=ENDLESS_LOOPS["nested ranges"])
    assert time.monotonic() - started < RENDER_TIME_LIMIT_SECONDS + 1.0


@pytest.mark.parametrize("text", list(ENDLESS_LOOPS.values()), ids=list(ENDLESS_LOOPS))
def test_every_way_of_never_ending_is_bounded(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(templates, "RENDER_TIME_LIMIT_SECONDS", 0.2)
    started = time.monotonic()
    with pytest.raises(ChatTemplateLimitExceeded, match=r"more than 0.2 s to render"):
        render_chat_template(text, [HumanMessage("hi")])
    assert time.monotonic() - started < 1.0


@pytest.mark.parametrize("text", list(HUGE_OUTPUTS.values()), ids=list(HUGE_OUTPUTS))
def test_a_template_that_renders_too_much_raises_at_the_size_limit(text: str) -> None:
    started = time.monotonic()
    with pytest.raises(ChatTemplateLimitExceeded, match=r"1,000,000 .*size limit of one render"):
        validate_messages([HumanMessage("hi")], chat_template=text)
    assert time.monotonic() - started < 1.0


def test_cli_check_bounds_the_chat_template_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(templates, "RENDER_TIME_LIMIT_SECONDS", 0.2)
    source = tmp_path / "in.json"
    source.write_text(json.dumps([{"role": "user", "content": "hi"}]), encoding="utf-8")
    endless = tmp_path / "endless.jinja"
    endless.write_text(ENDLESS_LOOPS["nested ranges"], encoding="utf-8")
    huge = tmp_path / "huge.jinja"
    huge.write_text(HUGE_OUTPUTS["200 MB in chunks"], encoding="utf-8")

    for path, limit in ((endless, "more than 0.2 s"), (huge, "1,000,000 characters")):
        checked = CliRunner().invoke(app, ["check", str(source), "--chat-template", str(path)])
        assert checked.exit_code == EXIT_BAD_INPUT
        assert f"--chat-template {path}" in checked.stderr and limit in checked.stderr
