"""The sandbox chat templates render in: transformers' dialect, bounded in time and size.

Imported only where a template is rendered, since jinja2 is an optional dependency (the
`templates` extra). The environment is transformers' (`apply_chat_template`): Jinja's
immutable sandbox with `trim_blocks` and `lstrip_blocks`, the loop controls extension,
the `{% generation %}` tag, the `tojson` filter that leaves HTML characters alone,
`raise_exception` and `strftime_now`.

A chat template is code from a model repository, and one render must not hang or fill
the memory of the agent that probes it: every loop iteration, call, attribute or item
lookup, filter and operator checks the render's deadline, values a template makes are
held to the render's size limit, and the output is counted chunk by chunk. What can make
a large value out of small ones is measured before it runs, never after: repetition, a
padding width (`center`, `ljust`, `rjust`, `zfill`, `indent`), `replace`, `join`,
`expandtabs`, the widths of `%` and `format` specifications, and `tojson` with an
indent (encoded piece by piece, the size and the deadline checked between pieces).
Jinja's `urlize` (a regular expression per word: seconds on a long text, in one call)
and `lipsum` (text made to order) are left out: no chat template uses them. The limits
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
import re
import string
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

from langchain_context_governance.errors import ChatTemplateLimitExceeded

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


# A `%` conversion's width and precision, `*` where an argument gives them.
_PRINTF_SPEC = re.compile(r"%(?:\([^)]*\))?[#0\- +]*(\*|\d+)?(?:\.(\*|\d+))?[hlL]?[a-zA-Z%]")
# A `format` specification's width and precision.
_FORMAT_SPEC = re.compile(r"(?:.?[<>=^])?[+\- ]?[z#]?0?(\d+)?[,_]?(?:\.(\d+))?")
# Filters no chat template uses that run long or make text to order.
_LEFT_OUT_FILTERS = frozenset({"urlize"})
_LEFT_OUT_GLOBALS = frozenset({"lipsum"})


def _check_predicted(size: float) -> None:
    """Refuse to make a value of `size` characters or items, past the size limit."""
    limits = _LIMITS.get()
    if limits is not None and size > limits.characters:
        raise _too_large(size, limits)


def _number(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _check_printf(template: str, arguments: Any) -> None:
    """Refuse `template % arguments` where a width or a precision is larger than a render
    may produce (`%999999999d`, or `%*d` with a large argument)."""
    given = list(arguments) if isinstance(arguments, tuple) else [arguments]
    stars = iter(given)
    for found in _PRINTF_SPEC.finditer(template[: _checked_length(template)]):
        for part in found.groups():
            if part == "*":
                _check_predicted(_number(next(stars, 0)))
            elif part:
                _check_predicted(int(part) if len(part) < 12 else float("inf"))


def _check_format_specs(template: str, arguments: Iterable[Any]) -> None:
    """Refuse `template.format(...)` where a field's width or precision is larger than a
    render may produce; a width given by an argument (`{:{}}`) is measured as given."""
    for found in string.Formatter().parse(template[: _checked_length(template)]):
        spec = found[2] or ""
        if "{" in spec:
            for argument in arguments:
                _check_predicted(_number(argument))
            continue
        matched = _FORMAT_SPEC.match(spec)
        for part in matched.groups() if matched else ():
            if part:
                _check_predicted(int(part) if len(part) < 12 else float("inf"))


def _checked_length(text: str) -> int:
    _check_predicted(len(text))
    return len(text)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _predicted_replace(text: str, old: Any, new: Any, count: Any = None) -> None:
    if not (isinstance(old, str) and isinstance(new, str)):
        return
    found = len(text) + 1 if not old else text.count(old)
    if isinstance(count, int) and count >= 0:
        found = min(found, count)
    _check_predicted(len(text) + found * (len(new) - len(old)))


def _predicted_join(items: Any, separator: Any = "") -> list[Any] | None:
    """`items` as a list, where joining them would stay within the limit (None where they
    are not a sequence to measure)."""
    if not isinstance(items, (list, tuple)):
        return None
    size = len(items) * len(separator) if isinstance(separator, str) else 0
    for item in items:
        _check_time()
        size += len(item) if isinstance(item, str) else len(str(item))
        _check_predicted(size)
    return list(items)


def _check_str_method(method: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> None:
    """Refuse a call of a text method that would make a value larger than a render may
    produce, before it runs."""
    text = _text(getattr(method, "__self__", None))
    name = getattr(method, "__name__", "")
    if text is None:
        return
    values = [*args, *kwargs.values()]
    if name in ("center", "ljust", "rjust", "zfill"):
        _check_predicted(_number(values[0]) if values else 0)
    elif name == "expandtabs":
        tabsize = _number(values[0]) if values else 8
        _check_predicted(len(text) + text.count("\t") * tabsize)
    elif name == "replace" and len(args) >= 2:
        _predicted_replace(text, *args[:3])
    elif name == "join" and args:
        _predicted_join(args[0], text)


def _check_filter(name: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> tuple[Any, ...]:
    """Refuse a filter call that would make a value larger than a render may produce,
    before it runs; returns its arguments (a generator `join` measured, as a list)."""
    value = args[0] if args else None
    text = _text(value)
    if name == "replace" and text is not None and len(args) >= 3:
        _predicted_replace(text, *args[1:4])
    elif name == "join" and value is not None:
        separator = args[1] if len(args) > 1 else kwargs.get("d", "")
        items = value if isinstance(value, (list, tuple)) else None
        if items is None and isinstance(value, Iterable) and not isinstance(value, (str, dict)):
            items = list(itertools.islice(value, (_limits_characters() or 0) + 1))
            _check_predicted(len(items))
        if items is not None:
            _predicted_join(items, separator)
            args = (items, *args[1:])
    elif name == "indent" and text is not None:
        width = args[1] if len(args) > 1 else kwargs.get("width", 4)
        pad = len(width) if isinstance(width, str) else _number(width)
        _check_predicted(len(text) + (text.count("\n") + 1) * pad)
    elif name == "format" and text is not None:
        _check_printf(text, tuple(args[1:]) or dict(kwargs))
    elif name == "wordwrap" and text is not None:
        width = max(_number(args[1] if len(args) > 1 else kwargs.get("width", 79)), 1)
        wrap = args[3] if len(args) > 3 else kwargs.get("wrapstring")
        lines = len(text) // width + text.count("\n") + 1
        _check_predicted(len(text) + lines * (len(wrap) if isinstance(wrap, str) else 1))
    elif name in ("string", "pprint") and value is not None:
        _check_rendered(value)
    return args


def _check_rendered(value: Any) -> Any:
    """Refuse to write `value` as text where that text would be larger than a render may
    produce: a list of a thousand references to a list of a thousand texts is small, its
    text is not. The structure is walked until the limit, never further."""
    limits = _LIMITS.get()
    if limits is None or isinstance(value, str):
        return value
    size = 0
    pending: list[Any] = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            size += len(item) + 4
        elif isinstance(item, Mapping):
            pending.extend(item.keys())
            pending.extend(item.values())
            size += 2
        elif isinstance(item, (list, tuple, set, frozenset)):
            pending.extend(item)
            size += 2
        else:
            size += 8
        if size > limits.characters:
            raise _too_large(size, limits)
    return value


def _limits_characters() -> int | None:
    limits = _LIMITS.get()
    return None if limits is None else limits.characters


def _check_widths(*parameters: Iterable[Any]) -> None:
    """Refuse a filter parameter (a width, a count) larger than a render may produce:
    `center`, `indent` or `wordwrap` would make the value before its size is seen."""
    limits = _LIMITS.get()
    if limits is None:
        return
    for parameter in itertools.chain(*parameters):
        if isinstance(parameter, int) and parameter > limits.characters:
            raise _too_large(parameter, limits)


def _bounded_filter(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    """`function` (the filter `name`) checking the deadline, the size of what it would make
    before it runs (`_check_filter`), and the size of its result.

    The wrapper takes the context, which also keeps Jinja from running the filter on
    constants at compile time, outside every limit; it hands on what `function` asks for.
    """
    passes = getattr(getattr(function, "jinja_pass_arg", None), "name", None)

    @jinja2.pass_context
    def bounded(context: Context, *args: Any, **kwargs: Any) -> Any:
        _check_time()
        _check_widths(args[1:], kwargs.values())
        args = _check_filter(name, args, kwargs)
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
        # Jinja's own `str_join` (the sandbox never autoescapes), with each operand's text
        # measured before it is made, and the result's size checked.
        self.write("environment.concat_within_limits((")
        for argument in node.nodes:
            self.visit(argument, frame)
            self.write(", ")
        self.write("))")


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
        _check_str_method(obj, args, kwargs)
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
        if operator == "%" and isinstance(left, str):
            _check_printf(left, right)
        return _checked_size(super().call_binop(context, operator, left, right))

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        """The sandbox's `str.format` (and `format_map`), with the widths of the fields
        measured before the text is made."""
        wrapped = super().wrap_str_format(value)
        if wrapped is None:
            return None
        template, keyword_only = value.__self__, value.__name__ == "format_map"

        def bounded(*args: Any, **kwargs: Any) -> str:
            given = [*args, *kwargs.values()]
            if keyword_only and args and isinstance(args[0], Mapping):
                given = list(args[0].values())
            _check_format_specs(template, given)
            return wrapped(*args, **kwargs)

        return bounded

    def iterate_within_limits(self, iterable: Iterable[Any]) -> Iterator[Any]:
        for item in iterable:
            _check_time()
            yield item

    def checked_size(self, value: Any) -> Any:
        return _checked_size(value)

    def concat_within_limits(self, values: tuple[Any, ...]) -> str:
        for value in values:
            _check_rendered(value)
        return str(_checked_size("".join(map(str, values))))


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
    encoder = json.JSONEncoder(
        ensure_ascii=ensure_ascii,
        indent=indent,
        separators=separators,
        sort_keys=sort_keys,
        default=_listed,
    )
    if _LIMITS.get() is None:
        return encoder.encode(value)
    # Piece by piece: an indent makes text of a size no parameter tells beforehand.
    pieces: list[str] = []
    size = 0
    for count, piece in enumerate(encoder.iterencode(value)):
        size += len(piece)
        _check_predicted(size)
        if count % 1_024 == 0:
            _check_time()
        pieces.append(piece)
    return "".join(pieces)


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
        # Every value a template prints is measured before it is made text.
        finalize=_check_rendered,
        extensions=[loopcontrols, _GenerationTag],
        # Constant folding would run filters at compile time, outside every limit.
        optimized=False,
    )
    environment.filters["tojson"] = _tojson
    environment.filters = {
        name: _bounded_filter(name, function)
        for name, function in environment.filters.items()
        if name not in _LEFT_OUT_FILTERS
    }
    for name in _LEFT_OUT_GLOBALS:
        environment.globals.pop(name, None)
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
