"""Chat templates as a source of rules: render a request the way a serving stack would.

Open-weight models served by vLLM, llama.cpp, Ollama, LM Studio or TGI turn the request
into a prompt with the model's Jinja chat template, and a template that does not like
the conversation raises (Llama 3.1: "This model only supports single tool-calls at
once!"; Qwen3.5: "System message must be at the beginning."). Rendering here follows
transformers' `apply_chat_template` (`rules/_bounded_jinja.py`): a sandboxed environment
with `trim_blocks` and `lstrip_blocks`, the loop controls extension, the `{% generation %}`
tag, `raise_exception`, `tojson` and `strftime_now`, OpenAI-style message dicts with tool
calls in the function format (their arguments parsed, as vLLM passes them), `tools` (the
request's, or stand-ins: tool-use templates such as Hermes 3's render nothing without
them), `add_generation_prompt=True`, bos/eos tokens, and the `functions` and `datetime`
variables llama.cpp adds for FireFunction v2.

A template is code from a model repository: one render may take at most
`RENDER_TIME_LIMIT_SECONDS` and produce at most `RENDER_SIZE_LIMIT_CHARACTERS`, else
`ChatTemplateLimitExceeded` (a ValueError naming the limit) is raised.

`rules_for_chat_template` probes a template once with small canonical conversations, each
showing one shape, and names the rules whose repairs make the shapes it rejects render.
Needs jinja2 (`pip install 'langchain-context-governance[templates]'`).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.tool import invalid_tool_call
from langchain_core.utils.function_calling import convert_to_openai_tool

# Defined in `errors`, beside the package's other errors, so that the sandbox raising it
# (rules/_bounded_jinja.py) need not import this module, which imports the sandbox.
from langchain_context_governance.errors import ChatTemplateLimitExceeded
from langchain_context_governance.rules.table import Violation, rules_named, run_repairs

if TYPE_CHECKING:
    from jinja2 import Template

__all__ = [
    "RENDER_SIZE_LIMIT_CHARACTERS",
    "RENDER_TIME_LIMIT_SECONDS",
    "ChatTemplateLimitExceeded",
    "chat_template_violation",
    "render_chat_template",
    "rules_for_chat_template",
]

_MISSING_JINJA = (
    "chat templates need jinja2; install it with "
    "`pip install 'langchain-context-governance[templates]'`"
)
# Special tokens templates print; their values do not change what a template accepts.
_SPECIAL_TOKENS = {"bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>"}
# Ids every template accepts (Mistral's want exactly 9 letters or digits).
_ID_1, _ID_2 = "aB3dE5gH1", "Zy9xW7vU2"

RENDER_TIME_LIMIT_SECONDS = 2.0
"""How long one render of a chat template may take; a vendor template takes milliseconds."""
RENDER_SIZE_LIMIT_CHARACTERS = 1_000_000
"""How many characters one render may produce (and how large a value it may make)."""

# The tool the canonical conversations call, and what a request without tools renders
# with: tool-use templates (Hermes 2 Pro, Hermes 3, Command R+) need a tool list.
_STAND_IN_TOOL = "search"


@functools.lru_cache(maxsize=32)
def _compile(chat_template: str) -> Template:
    try:
        import jinja2

        from langchain_context_governance.rules._bounded_jinja import compile_chat_template
    except ImportError as error:
        raise ImportError(_MISSING_JINJA) from error
    try:
        return compile_chat_template(chat_template)
    except jinja2.TemplateSyntaxError as error:
        raise ValueError(
            f"chat_template cannot be read as a Jinja template: {error} (line {error.lineno})"
        ) from error


def _text(content: str | list[str | dict[str, Any]]) -> str:
    """Text parts joined by newlines, as vLLM passes content to a string-content template."""
    if isinstance(content, str):
        return content
    parts = [
        block if isinstance(block, str) else str(block.get("text") or "")
        for block in content
        if isinstance(block, str) or block.get("type") == "text"
    ]
    return "\n".join(parts)


def _arguments(arguments: Any) -> Any:
    if not isinstance(arguments, str):
        return arguments
    try:
        return json.loads(arguments)
    except json.JSONDecodeError:
        return arguments


def _template_message(message: BaseMessage) -> dict[str, Any]:
    if isinstance(message, SystemMessage):
        return {"role": "system", "content": _text(message.content)}
    if isinstance(message, ToolMessage):
        return {
            "role": "tool",
            "content": _text(message.content),
            "tool_call_id": message.tool_call_id,
            "name": message.name,
        }
    if isinstance(message, AIMessage):
        entry: dict[str, Any] = {"role": "assistant", "content": _text(message.content)}
        # The way langchain-openai sends them: invalid calls as calls too.
        calls = [*message.tool_calls, *message.invalid_tool_calls]
        if calls:
            entry["tool_calls"] = [
                {
                    "id": call.get("id"),
                    "type": "function",
                    "function": {
                        "name": call.get("name") or "",
                        "arguments": _arguments(call.get("args")),
                    },
                }
                for call in calls
            ]
        return entry
    role = "user" if isinstance(message, HumanMessage) else message.type
    return {"role": role, "content": _text(message.content)}


def _stand_in_tool(name: str) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": f"The {name} tool.",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string", "description": "What to look for."}},
                "required": ["query"],
            },
        },
    }


def _tool_definitions(
    messages: Sequence[BaseMessage], tools: Sequence[Any] | None
) -> list[dict[str, Any]]:
    """The request's tools in the function format, else one stand-in per tool name called
    (or one stand-in tool): a tool-use template renders nothing without tools."""
    if tools:
        definitions = []
        for position, tool in enumerate(tools):
            try:
                definitions.append(convert_to_openai_tool(tool))
            except (ValueError, TypeError, KeyError, AttributeError) as error:
                raise ValueError(f"tools[{position}] is not a tool definition: {error}") from error
        return definitions
    names = {
        call.get("name") or ""
        for message in messages
        if isinstance(message, AIMessage)
        for call in [*message.tool_calls, *message.invalid_tool_calls]
    }
    return [_stand_in_tool(name) for name in sorted(names or {_STAND_IN_TOOL})]


def render_chat_template(
    chat_template: str, messages: Sequence[BaseMessage], *, tools: Sequence[Any] | None = None
) -> str:
    """The prompt `chat_template` makes of `messages`; raises the template's own error.

    `tools` are the request's tool definitions (any form LangChain's
    `convert_to_openai_tool` reads); without them the template gets one stand-in
    definition per tool name the messages call, or one stand-in tool. A render that
    takes longer than `RENDER_TIME_LIMIT_SECONDS` or produces more than
    `RENDER_SIZE_LIMIT_CHARACTERS` raises `ChatTemplateLimitExceeded` (a ValueError).

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> template = "{% for m in messages %}[{{ m.role }}] {{ m.content }}\\n{% endfor %}"
        >>> render_chat_template(template, [HumanMessage("hi")])
        '[user] hi\\n'
    """
    from langchain_context_governance.rules._bounded_jinja import render_within_limits

    definitions = _tool_definitions(messages, tools)
    context = {
        "messages": [_template_message(message) for message in messages],
        "tools": definitions,
        "add_generation_prompt": True,
        **_SPECIAL_TOKENS,
        **_llama_cpp_extras(definitions),
    }
    return render_within_limits(
        _compile(chat_template),
        context,
        seconds=RENDER_TIME_LIMIT_SECONDS,
        characters=RENDER_SIZE_LIMIT_CHARACTERS,
    )


def _llama_cpp_extras(tools: list[dict[str, Any]]) -> dict[str, str]:
    """What llama.cpp passes beside the standard variables (common/chat.cpp, FireFunction
    v2's handler): the tools as indented JSON text, and the date."""
    return {
        "functions": json.dumps(tools, indent=2),
        "datetime": datetime.now().strftime("%b %d %Y %H:%M:%S GMT"),
    }


def _render_error(
    chat_template: str, messages: Sequence[BaseMessage], tools: Sequence[Any] | None = None
) -> str | None:
    _compile(chat_template)  # not Jinja, or no jinja2: a setting error, raised as such
    try:
        render_chat_template(chat_template, messages, tools=tools)
    except ChatTemplateLimitExceeded:
        raise  # the template's cost, not the request's shape
    except Exception as error:  # the template's own error, whatever its type
        return f"{type(error).__name__}: {error}"
    return None


def chat_template_violation(
    chat_template: str, messages: Sequence[BaseMessage], *, tools: Sequence[Any] | None = None
) -> Violation | None:
    """The template's error for `messages` (sent with `tools`) as a violation, or None when
    it renders. A render past the limits raises `ChatTemplateLimitExceeded`."""
    error = _render_error(chat_template, messages, tools)
    if error is None:
        return None
    return Violation(-1, "chat-template", f"The chat template rejects the request: {error}")


def _call(call_id: str, name: str = "search") -> dict[str, Any]:
    return {"name": name, "args": {"query": "x"}, "id": call_id, "type": "tool_call"}


@dataclass(frozen=True)
class _Shape:
    """A canonical conversation showing one shape, and the rules that make it render.

    `turns_on` None: the conversation is legal everywhere; a template that rejects it
    cannot be used.
    """

    name: str
    messages: tuple[BaseMessage, ...]
    turns_on: tuple[str, ...] | None


_SHAPES: tuple[_Shape, ...] = (
    _Shape(
        "a plain conversation",
        (HumanMessage("Hi."), AIMessage("Hello."), HumanMessage("Bye.")),
        None,
    ),
    _Shape(
        "a system message",
        (
            SystemMessage("Be brief."),
            HumanMessage("Hi."),
            AIMessage("Hello."),
            HumanMessage("Bye."),
        ),
        ("no-system-role",),
    ),
    _Shape(
        "a tool call and its result",
        (
            HumanMessage("Search."),
            AIMessage("", tool_calls=[_call(_ID_1)]),
            ToolMessage("found", tool_call_id=_ID_1, name="search"),
            AIMessage("Found it."),
            HumanMessage("Thanks."),
        ),
        ("no-tool-role",),
    ),
    _Shape(
        "a late system message",
        (
            HumanMessage("Hi."),
            AIMessage("Hello."),
            SystemMessage("Be brief."),
            HumanMessage("Bye."),
        ),
        ("system-not-first",),
    ),
    _Shape(
        "two system messages",
        (SystemMessage("Be brief."), SystemMessage("Be kind."), HumanMessage("Hi.")),
        ("one-leading-system-message",),
    ),
    _Shape(
        "a user message after tool results",
        (
            HumanMessage("Search."),
            AIMessage("", tool_calls=[_call(_ID_1)]),
            ToolMessage("found", tool_call_id=_ID_1, name="search"),
            HumanMessage("Faster."),
        ),
        ("no-user-after-tool-results",),
    ),
    _Shape(
        "parallel tool calls",
        (
            HumanMessage("Search twice."),
            AIMessage("", tool_calls=[_call(_ID_1), _call(_ID_2)]),
            ToolMessage("one", tool_call_id=_ID_1, name="search"),
            ToolMessage("two", tool_call_id=_ID_2, name="search"),
        ),
        ("one-tool-call-per-message",),
    ),
    _Shape("an assistant message first", (AIMessage("Hello."), HumanMessage("Hi.")), ()),
    _Shape("two user messages in a row", (HumanMessage("Hi."), HumanMessage("Still there?")), ()),
    _Shape(
        "empty content",
        (HumanMessage("Hi."), AIMessage(""), HumanMessage("Hello?")),
        ("non-empty-content",),
    ),
    _Shape(
        "an invalid tool call (arguments that are not JSON)",
        (
            HumanMessage("Search."),
            AIMessage(
                "",
                invalid_tool_calls=[
                    invalid_tool_call(name="search", args="{oops", id=_ID_1, error="bad JSON")
                ],
            ),
            ToolMessage("Error: arguments are not JSON", tool_call_id=_ID_1, name="search"),
        ),
        ("no-invalid-tool-calls",),
    ),
    _Shape(
        "a tool-call id that is not 9 letters or digits",
        (
            HumanMessage("Search."),
            AIMessage("", tool_calls=[_call("call_0")]),
            ToolMessage("found", tool_call_id="call_0", name="search"),
        ),
        ("nine-character-tool-call-ids",),
    ),
)


@functools.lru_cache(maxsize=32)
def rules_for_chat_template(chat_template: str) -> tuple[str, ...]:
    """The rules whose repairs make every canonical shape render through `chat_template`.

    Each canonical conversation is rendered after the repairs of the rules found so far;
    where the template rejects it, the rules for its shape are added and it must then
    render. Cached by template text: a template is probed once per process. Raises
    ValueError when the template is not Jinja, when it rejects even a plain
    conversation, when a shape still fails after its repairs, or when one render takes
    longer or produces more than the render limits (`ChatTemplateLimitExceeded`).

    Example:
        >>> gemma_like = (
        ...     "{% if messages[0]['role'] == 'system' %}"
        ...     "{{ raise_exception('System role not supported') }}{% endif %}"
        ...     "{% for m in messages %}{{ m['content'] }}{% endfor %}"
        ... )
        >>> rules_for_chat_template(gemma_like)
        ('no-system-role',)
    """
    rules: list[str] = []
    for shape in _SHAPES:
        try:
            _probe_shape(chat_template, shape, rules)
        except ChatTemplateLimitExceeded as error:
            raise ChatTemplateLimitExceeded(
                f"chat_template, rendering {shape.name}: {error}"
            ) from error
    return tuple(rules)


def _probe_shape(chat_template: str, shape: _Shape, rules: list[str]) -> None:
    """Render `shape` after the repairs of `rules`; add its rules to `rules` where needed."""
    messages = list(shape.messages)
    governed, _ = run_repairs(rules_named("openai", rules), messages)
    error = _render_error(chat_template, governed)
    if error is None:
        return
    if shape.turns_on is None:
        raise ValueError(
            f"chat_template fails to render even a canonical legal conversation "
            f"({shape.name}): {error}"
        )
    rules.extend(name for name in shape.turns_on if name not in rules)
    governed, _ = run_repairs(rules_named("openai", rules), messages)
    error = _render_error(chat_template, governed)
    if error is not None:
        raise ValueError(
            f"chat_template rejects {shape.name} even after the repairs "
            f"{', '.join(shape.turns_on) or 'every profile runs'}: {error}"
        )
