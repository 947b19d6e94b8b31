"""The sandbox chat templates render in: transformers' dialect, bounded in time and size.

Imported only where a template is rendered, since jinja2 is an optional dependency (the
`templates` extra). The environment is transformers' (`apply_chat_template`): Jinja's
immutable sandbox with `trim_blocks` and `lstrip_blocks`, the loop controls extension,
the `{% generation %}` tag, the `tojson` filter that leaves HTML characters alone,
`raise_exception` and `strftime_now`.

A chat template is code from a model repository, and one render must not hang or fill
the memory of the agent that probes it: every loop iteration, call, attribute or item
lookup, filter and operator checks the render's deadline, values a template makes are
held to the render's size limit, and the output is counted chunk by chunk. The limits
hold only inside `render_within_limits`.

Example:
    >>> template = compile_chat_template("{% for m in messages %}{{ m }}{% endfor %}")
    >>> render_within_limits(template, {"messages": ["a", "b"]}, seconds=2.0, characters=10)
    'ab'
"""

from __future__ import annotations

import functools
import itertools
import json
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.compiler import CodeGenerator, Frame
from jinja2.ext import Extension, loopcontrols
from jinja2.parser import Parser
from jinja2.runtime import Context, Macro
from jinja2.sandbox import ImmutableSandboxedEnvironment

from langchain_context_governance.rules.templates import ChatTemplateLimitExceeded

__all__ = ["compile_chat_template", "render_within_limits"]

# The operators that can make a large value out of small ones (`%` formats with a width).
_SIZE_OPERATORS = frozenset({"+", "*", "**", "%"})
_SIZED_TYPES = (str, list, tuple, dict, set, frozenset)
# A number's decimal digits per bit, to measure `a ** b` before computing it.
_DIGITS_PER_BIT = 0.302


@dataclass(frozen=True)
class _Limits:
    deadline: float
    seconds: float
    characters: int


_LIMITS: ContextVar[_Limits | None] = ContextVar("chat_template_render_limits", default=None)


def _check_time() -> None:
    limits = _LIMITS.get()
    if limits is not None and time.monotonic() > limits.deadline:
        raise ChatTemplateLimitExceeded(
            f"the chat template took more than {limits.seconds:g} s to render "
            f"(the time limit of one render)"
        )


def _too_large(size: float, limits: _Limits) -> ChatTemplateLimitExceeded:
    return ChatTemplateLimitExceeded(
        f"the chat template made a value of {size:,.0f} characters or items, more than the "
        f"{limits.characters:,} a render may produce (the size limit of one render)"
    )


def _checked_size(value: Any) -> Any:
    limits = _LIMITS.get()
    if limits is not None and isinstance(value, _SIZED_TYPES) and len(value) > limits.characters:
        raise _too_large(len(value), limits)
    return value


def _check_operands(operator: str, left: Any, right: Any) -> None:
    """Refuse `text * n` or `a ** b` too large to make, before making it."""
    limits = _LIMITS.get()
    if limits is None:
        return
    if operator == "*":
        for sequence, times in ((left, right), (right, left)):
            repeated = isinstance(sequence, _SIZED_TYPES) and isinstance(times, int)
            if repeated and len(sequence) * times > limits.characters:
                raise _too_large(len(sequence) * times, limits)
    if operator == "**" and isinstance(left, int) and isinstance(right, int) and right > 0:
        digits = right * abs(left).bit_length() * _DIGITS_PER_BIT
        if digits > limits.characters:
            raise _too_large(digits, limits)


def _check_widths(*parameters: Iterable[Any]) -> None:
    """Refuse a filter parameter (a width, a count) larger than a render may produce:
    `center`, `indent` or `wordwrap` would make the value before its size is seen."""
    limits = _LIMITS.get()
    if limits is None:
        return
    for parameter in itertools.chain(*parameters):
        if isinstance(parameter, int) and parameter > limits.characters:
            raise _too_large(parameter, limits)


def _bounded_filter(function: Callable[..., Any]) -> Callable[..., Any]:
    """`function` checking the deadline and the size of its result.

    The wrapper takes the context, which also keeps Jinja from running the filter on
    constants at compile time, outside every limit; it hands on what `function` asks for.
    """
    passes = getattr(getattr(function, "jinja_pass_arg", None), "name", None)

    @jinja2.pass_context
    def bounded(context: Context, *args: Any, **kwargs: Any) -> Any:
        _check_time()
        _check_widths(args[1:], kwargs.values())
        if passes == "context":
            args = (context, *args)
        elif passes == "eval_context":
            args = (context.eval_ctx, *args)
        elif passes == "environment":
            args = (context.environment, *args)
        return _checked_size(function(*args, **kwargs))

    return bounded


class _BoundedCodeGenerator(CodeGenerator):
    """Jinja's code generator, with every loop iterating through the render's deadline check
    (a loop body can be free of calls, and a `{% for %}` filter runs without a body) and
    every `~` concatenation held to the size limit."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._loop_iterables: set[int] = set()

    def visit_For(self, node: nodes.For, frame: Frame) -> None:
        self._loop_iterables.add(id(node.iter))
        super().visit_For(node, frame)

    def visit(self, node: nodes.Node, *args: Any, **kwargs: Any) -> Any:
        if id(node) not in self._loop_iterables:
            return super().visit(node, *args, **kwargs)
        self.write("environment.iterate_within_limits(")
        super().visit(node, *args, **kwargs)
        self.write(")")
        return None

    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        self.write("environment.checked_size(")
        super().visit_Concat(node, frame)
        self.write(")")


class _GenerationTag(Extension):
    """transformers' `{% generation %}...{% endgeneration %}`: it marks the assistant's own
    text for training masks; rendering a prompt passes its body through unchanged."""

    tags = {"generation"}  # noqa: RUF012 (Jinja's own attribute)

    def parse(self, parser: Parser) -> nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        # A call block, as in transformers: the body is its own scope.
        call = self.call_method("_render_body")
        return nodes.CallBlock(call, [], [], body).set_lineno(lineno)

    def _render_body(self, caller: Macro) -> str:
        return str(caller())


class _BoundedEnvironment(ImmutableSandboxedEnvironment):
    """The immutable sandbox whose hooks check the deadline and the size of what they make."""

    code_generator_class = _BoundedCodeGenerator
    intercepted_binops = _SIZE_OPERATORS

    def call(self, context: Context, obj: Any, /, *args: Any, **kwargs: Any) -> Any:
        _check_time()
        return _checked_size(super().call(context, obj, *args, **kwargs))

    def getattr(self, obj: Any, attribute: str) -> Any:
        _check_time()
        return super().getattr(obj, attribute)

    def getitem(self, obj: Any, argument: str | Any) -> Any:
        _check_time()
        return super().getitem(obj, argument)

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        _check_time()
        _check_operands(operator, left, right)
        return _checked_size(super().call_binop(context, operator, left, right))

    def iterate_within_limits(self, iterable: Iterable[Any]) -> Iterator[Any]:
        for item in iterable:
            _check_time()
            yield item

    def checked_size(self, value: Any) -> Any:
        return _checked_size(value)


def _raise_exception(message: str) -> None:
    raise jinja2.exceptions.TemplateError(message)


def _tojson(
    value: Any,
    ensure_ascii: bool = False,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    # transformers' own filter: unlike jinja2's, it does not escape HTML characters.
    return json.dumps(
        value,
        ensure_ascii=ensure_ascii,
        indent=indent,
        separators=separators,
        sort_keys=sort_keys,
        default=_listed,
    )


def _listed(value: Any) -> list[Any]:
    """Jinja's `map` and `select` make generators, where llama.cpp's Jinja makes lists; the
    templates llama.cpp ships print them with `tojson` (llama-cpp-deepseek-r1.jinja)."""
    if isinstance(value, Iterator):
        return list(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _strftime_now(date_format: str) -> str:
    return datetime.now().strftime(date_format)


@functools.lru_cache(maxsize=1)
def _environment() -> _BoundedEnvironment:
    environment = _BoundedEnvironment(
        trim_blocks=True,
        lstrip_blocks=True,
        extensions=[loopcontrols, _GenerationTag],
        # Constant folding would run filters at compile time, outside every limit.
        optimized=False,
    )
    environment.filters["tojson"] = _tojson
    environment.filters = {
        name: _bounded_filter(function) for name, function in environment.filters.items()
    }
    environment.globals["raise_exception"] = _raise_exception
    environment.globals["strftime_now"] = _strftime_now
    return environment


def compile_chat_template(chat_template: str) -> jinja2.Template:
    """The template compiled in the bounded sandbox; Jinja's own error when it is not Jinja."""
    return _environment().from_string(chat_template)


def render_within_limits(
    template: jinja2.Template, context: Mapping[str, Any], *, seconds: float, characters: int
) -> str:
    """Render `template`; ChatTemplateLimitExceeded past `seconds` or `characters`."""
    limits = _Limits(time.monotonic() + seconds, seconds, characters)
    token = _LIMITS.set(limits)
    try:
        chunks: list[str] = []
        size = 0
        for chunk in template.generate(**context):
            size += len(chunk)
            if size > characters:
                raise ChatTemplateLimitExceeded(
                    f"the chat template rendered more than {characters:,} characters "
                    f"(the size limit of one render)"
                )
            chunks.append(chunk)
        return "".join(chunks)
    finally:
        _LIMITS.reset(token)
