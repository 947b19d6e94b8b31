"""The `context-governance` command: govern a transcript, check it, or watch the offline demo.

The commands only read options, call the package and print; the work happens in
`ContextGovernor`, `validate_messages`, the transcript readers and `demo`. Bad input ends
in one line on stderr naming the file and the message index, and exit code 2. A FILE of
`-` is read from stdin, and `-o -` writes to stdout.
"""

from __future__ import annotations

import io
import json
import os
import stat
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, BinaryIO, get_args

import typer
from langchain_core.messages import AIMessage, BaseMessage
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from langchain_context_governance import __version__
from langchain_context_governance.anthropic_messages import legal_prefill
from langchain_context_governance.demo import DEFAULT_WINDOW_TOKENS, run_demo_in_terminal
from langchain_context_governance.governor import ContextGovernor
from langchain_context_governance.model_settings import chat_model_from_string
from langchain_context_governance.policy.compaction import DEFAULT_KEEP_RECENT
from langchain_context_governance.report import GovernanceReport
from langchain_context_governance.rules.templates import (
    ChatTemplateLimitExceeded,
    rules_for_chat_template,
)
from langchain_context_governance.rules.validate import PROVIDERS, Violation, validate_messages
from langchain_context_governance.tokens.counter import COUNTER_NAMES
from langchain_context_governance.tokens.encodings import encoding_name_for_model
from langchain_context_governance.tracing import report_as_dict
from langchain_context_governance.transcripts import (
    Transcript,
    TranscriptError,
    TranscriptFormat,
    decode_transcript,
    dump_transcript,
    parse_transcript,
)

__all__ = ["app", "main"]

EXIT_BROKEN_RULES = 1
EXIT_BAD_INPUT = 2

STANDARD_STREAM = "-"
"""A FILE or `--output` of `-` means stdin or stdout."""

DEFAULT_MAX_INPUT_MB = 256
"""The most a command reads; a transcript of 10,000 long messages is a few dozen MB."""
BYTES_PER_MB = 1024 * 1024

DEFAULT_MAX_OUTPUT = ContextGovernor.model_fields["max_output_tokens"].default
DEFAULT_SAFETY_BUFFER = ContextGovernor.model_fields["safety_buffer"].default
DEFAULT_COMPACTION = ContextGovernor.model_fields["compaction"].default
COMPACTIONS: tuple[str, ...] = get_args(ContextGovernor.model_fields["compaction"].annotation)
# Formats that are a conversation as stored, not a request: their final answer stays.
STORED_FORMATS: frozenset[TranscriptFormat] = frozenset(
    {"openai-json", "openai-jsonl", "langchain"}
)
# The rules an input is checked against unless --provider says otherwise.
PROVIDER_OF_FORMAT: dict[TranscriptFormat, str] = {"anthropic-request": "anthropic"}

app = typer.Typer(
    name="context-governance",
    help="Keep a tool-calling agent's requests legal for the provider and inside the window.",
    no_args_is_help=True,
    add_completion=False,
    # Bad input is reported in one line; a traceback would bury it.
    pretty_exceptions_enable=False,
)

FileArgument = Annotated[
    Path,
    typer.Argument(
        help="A transcript: OpenAI messages as a JSON array or JSONL, an OpenAI or Anthropic "
        "request body, or LangChain's messages_to_dict form; - reads stdin.",
        show_default=False,
    ),
]


def _default(text: str) -> str:
    """A help suffix in typer's own "[default: ...]" form, safe from rich markup."""
    return escape(f"[default: {text}]")


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"context-governance {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    show_version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_show_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Keep a tool-calling agent's requests legal for the provider and inside the window."""


def _one_of(choices: tuple[str, ...]) -> Callable[[str], str]:
    def check_choice(value: str) -> str:
        if value not in choices:
            raise typer.BadParameter(f"{value!r} is not one of {', '.join(choices)}")
        return value

    return check_choice


def _provider_or_auto(value: str | None) -> str | None:
    return None if value is None else _one_of(PROVIDERS)(value)


ProviderOption = Annotated[
    str | None,
    typer.Option(
        "--provider",
        callback=_provider_or_auto,
        help=f"Whose rules the request must satisfy: {', '.join(PROVIDERS)}. "
        + _default("anthropic for an Anthropic request body, else openai"),
        show_default=False,
    ),
]


MaxInputOption = Annotated[
    int,
    typer.Option(
        "--max-input-mb",
        min=1,
        help="The most the command reads, in megabytes; a larger input is refused.",
    ),
]


class BadInput(Exception):
    """Input the command cannot use; the message is the one line the user sees."""


@dataclass(frozen=True)
class ModelLimits:
    """A model's context window and output reservation from LangChain's model profiles."""

    context_window_tokens: int
    max_output_tokens: int | None


def _stderr() -> Console:
    return Console(stderr=True, soft_wrap=True)


def _fail(message: str) -> typer.Exit:
    typer.echo(message, err=True)
    return typer.Exit(code=EXIT_BAD_INPUT)


def _read_transcript(path: Path, *, max_input_mb: int) -> Transcript:
    """The transcript at `path`, or on stdin for `-`; any unreadable input is BadInput.

    At most `max_input_mb` megabytes are read: more (or a device such as /dev/zero,
    which never ends) is refused before it fills the memory.
    """
    source = "<stdin>" if str(path) == STANDARD_STREAM else str(path)
    try:
        if str(path) == STANDARD_STREAM:
            data = _read_at_most(_stdin_bytes(max_input_mb), max_input_mb, source)
        else:
            with path.open("rb") as stream:
                data = _read_at_most(stream, max_input_mb, source)
        return parse_transcript(decode_transcript(data, source=source), source=source)
    except TranscriptError as error:
        raise BadInput(str(error)) from error
    except OSError as error:
        raise BadInput(f"{source}: cannot be read: {error.strerror or error}") from error


def _stdin_bytes(max_input_mb: int) -> BinaryIO:
    if hasattr(sys.stdin, "buffer"):
        return sys.stdin.buffer
    # A text stream (an embedding program's): a character is at least one byte.
    text = sys.stdin.read(max_input_mb * BYTES_PER_MB + 1)
    return io.BytesIO(text.encode("utf-8", "surrogatepass"))


def _read_at_most(stream: BinaryIO, max_input_mb: int, source: str) -> bytes:
    limit = max_input_mb * BYTES_PER_MB
    data = stream.read(limit + 1)
    if len(data) > limit:
        raise BadInput(
            f"{source}: larger than {max_input_mb:,} MB, the most the command reads "
            "(raise --max-input-mb to read more)"
        )
    return data


def _provider_for(transcript: Transcript, provider: str | None) -> str:
    return provider or PROVIDER_OF_FORMAT.get(transcript.format, "openai")


def model_limits(model_name: str, *, source: str = "--model") -> ModelLimits:
    """The window and output reservation LangChain's model profile gives `model_name`.

    The chat model is built (`chat_model_from_string`) only to read its `profile`;
    nothing is sent. Needs `langchain` and the provider's integration package. `source`
    names where the name came from, in the error.

    Example:
        >>> model_limits("gpt-4o-mini")  # doctest: +SKIP
        ModelLimits(context_window_tokens=128000, max_output_tokens=16384)
    """
    try:
        model = chat_model_from_string(model_name)
    except ImportError as error:
        raise BadInput(f"{source} {model_name}: {error}; or pass --window") from error
    except ValueError as error:
        raise BadInput(
            f"{source} {model_name}: {error}. Name a model LangChain knows (for example "
            "openai:gpt-4o-mini), or pass --window N instead"
        ) from error
    profile: dict[str, Any] = dict(getattr(model, "profile", None) or {})
    window = profile.get("max_input_tokens")
    if not window:
        raise BadInput(
            f"{source} {model_name}: LangChain's model profiles give no context window for "
            "this model; pass --window"
        )
    output = profile.get("max_output_tokens")
    return ModelLimits(int(window), int(output) if output else None)


def build_governor(
    *,
    window: int | None,
    max_output: int | None,
    model_name: str | None,
    counter: str,
    keep_recent: int,
    provider: str,
    safety_buffer: int = DEFAULT_SAFETY_BUFFER,
    tools: Sequence[Any] | None = None,
    exclude_tools: Sequence[str] = (),
    compaction: str = DEFAULT_COMPACTION,
    pin_task: bool = True,
    model_source: str = "--model",
) -> ContextGovernor:
    """A governor from the command's options; explicit options win over the model profile.

    `tools` are the request body's tool definitions; they count against the budget. With
    `--model`, "tiktoken" counts with the encoding of that model where it is an OpenAI
    model's, else with o200k_base.
    """
    if counter == "tiktoken" and model_name is not None and _has_encoding(model_name):
        counter = f"tiktoken:{model_name}"
    settings: dict[str, Any] = {
        "token_counter": counter,
        "keep_recent": keep_recent,
        "provider": provider,
        "safety_buffer": safety_buffer,
        "tools": list(tools) if tools else None,
        "exclude_tools": frozenset(exclude_tools),
        "compaction": compaction,
        "pin_task": pin_task,
    }
    if model_name is not None:
        limits = model_limits(model_name, source=model_source)
        settings["context_window_tokens"] = limits.context_window_tokens
        if limits.max_output_tokens is not None:
            settings["max_output_tokens"] = limits.max_output_tokens
    if window is not None:
        settings["context_window_tokens"] = window
    if max_output is not None:
        settings["max_output_tokens"] = max_output
    try:
        governor = ContextGovernor(**settings)
        governor.count_tokens([])  # reads the tool definitions now, to name a bad one
    except ValueError as error:
        raise BadInput(f"{_settings_named(error)}: {_first_error_line(error)}") from error
    return governor


def _has_encoding(model_name: str) -> bool:
    try:
        encoding_name_for_model(model_name.split(":", 1)[-1])
    except ValueError:
        return False
    return True


def _settings_named(error: ValueError) -> str:
    text = _first_error_line(error)
    if "tools[" in text:
        return "the request's tools"
    if "token_counter" in text:
        return "--counter"
    if "exclude_tools" in text:
        return "--exclude-tools"
    return "--window/--max-output/--safety-buffer"


def _first_error_line(error: Exception) -> str:
    # Pydantic wraps our own message in a multi-line validation error; keep its core.
    errors = getattr(error, "errors", None)
    if callable(errors):
        details = errors()
        if details:
            return str(details[0].get("msg", error)).removeprefix("Value error, ")
    return str(error).splitlines()[0]


def report_table(report: GovernanceReport, *, title: str, kept_after: int = 0) -> Table:
    """The report as a table: messages each pass changed, then tokens against the budget.

    `kept_after` is the number of final messages written after the governed ones as they
    were (a stored conversation's final answer, an Anthropic body's prefill).
    """
    table = Table(title=title, title_justify="left")
    table.add_column("pass")
    table.add_column("messages changed", justify="right")
    for name, changed in report.changes.items():
        table.add_row(name, str(changed))
    table.add_section()
    table.add_row("messages", f"{report.messages_before:,} -> {report.messages_after:,}")
    table.add_row("tokens", f"{report.tokens_before:,} -> {report.tokens_after:,}")
    if report.budget is None:
        table.add_row("budget", "none: no window given (--window or --model), repairs only")
    else:
        verdict = "within budget" if report.within_budget else "OVER BUDGET"
        table.add_row("budget", f"{report.budget:,}, {verdict}")
    if kept_after:
        noun = "message" if kept_after == 1 else "messages"
        table.add_row("kept after", f"{kept_after} final {noun}, unchanged (not counted)")
    if report.fell_back:
        table.add_row("fallback", "yes: only the minimal repair ran (see the log)")
    return table


def write_atomically(path: Path, text: str) -> None:
    """Write `text` to `path` in one step: a reader never sees a half-written file.

    The file gets the mode a plain `open(path, "w")` would give it: an existing file's
    mode, else 0o666 less the umask (the temporary file is created 0o600).
    """
    directory = path.resolve().parent
    mode = _mode_for(path)
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _mode_for(path: Path) -> int:
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def _write_output(output: Path | None, text: str) -> None:
    if output is None or str(output) == STANDARD_STREAM:
        sys.stdout.write(text)
    else:
        write_atomically(output, text)


def _governed_text(
    transcript: Transcript, governor: ContextGovernor
) -> tuple[str, GovernanceReport, int]:
    messages, kept = _split_final_messages(transcript)
    result = governor.govern(messages)
    try:
        text = dump_transcript(
            [*result.messages, *kept], format=transcript.format, request=transcript.request
        )
    except ValueError as error:
        raise BadInput(f"cannot write the governed transcript: {error}") from error
    return text, result.report, len(kept)


def _split_final_messages(
    transcript: Transcript,
) -> tuple[list[BaseMessage], list[BaseMessage]]:
    """The messages to govern or check, and the final ones kept as they are.

    Those are an Anthropic body's prefill (the start of Claude's answer, not a turn) and a
    stored conversation's final answer (its closing assistant messages without tool
    calls: the next request adds a user turn after them). A request ends on a user turn,
    so the governor would drop them, and the rules would call them a trailing turn.
    """
    messages = transcript.messages
    if transcript.format in STORED_FORMATS:
        start = len(messages)
        while start > 0 and _is_an_answer(messages[start - 1]):
            start -= 1
        # A conversation of answers only has nothing else to govern.
        start = start if start > 0 else len(messages)
        return messages[:start], messages[start:]
    if transcript.format != "anthropic-request":
        return messages, []
    prefill = legal_prefill(messages, transcript.request)
    if prefill is None:
        return messages, []
    return messages[:-1], [prefill]


def _is_an_answer(message: BaseMessage) -> bool:
    return (
        isinstance(message, AIMessage) and not message.tool_calls and not message.invalid_tool_calls
    )


@app.command()
def govern(
    file: FileArgument,
    window: Annotated[
        int | None,
        typer.Option(
            "--window",
            min=1,
            help="Context window in tokens. " + _default("none: repairs only"),
        ),
    ] = None,
    max_output: Annotated[
        int | None,
        typer.Option(
            "--max-output",
            min=0,
            help="Tokens kept free for the reply. "
            + _default(f"{DEFAULT_MAX_OUTPUT}, or the --model profile's"),
            show_default=False,
        ),
    ] = None,
    safety_buffer: Annotated[
        int,
        typer.Option(
            "--safety-buffer",
            min=0,
            help="Tokens kept free beyond the reply, for what counting misses (provider framing, "
            "counter error).",
        ),
    ] = DEFAULT_SAFETY_BUFFER,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            help="Take the window and output reservation from LangChain's profile of this "
            "model, e.g. gpt-4o-mini or openai:gpt-4.1. "
            + _default('a request body\'s "model", where neither --model nor --window is given'),
            show_default=False,
        ),
    ] = None,
    counter: Annotated[
        str,
        typer.Option(
            "--counter",
            callback=_one_of(COUNTER_NAMES),
            help=f"How tokens are counted: {', '.join(COUNTER_NAMES)} (exact, with the "
            "encoding of --model, else o200k_base).",
        ),
    ] = "approximate",
    keep_recent: Annotated[
        int,
        typer.Option(
            "--keep-recent",
            min=0,
            help="Newest tool results never compacted (both compaction modes).",
        ),
    ] = DEFAULT_KEEP_RECENT,
    exclude_tools: Annotated[
        list[str] | None,
        typer.Option(
            "--exclude-tools",
            help="Tools whose results are never compacted and whose calls are kept across "
            "cuts while they fit (repeat it, or separate names with commas).",
            show_default=False,
        ),
    ] = None,
    compaction: Annotated[
        str,
        typer.Option(
            "--compaction",
            callback=_one_of(COMPACTIONS),
            help=f"How older results give way: {', '.join(COMPACTIONS)}.",
        ),
    ] = DEFAULT_COMPACTION,
    pin_task: Annotated[
        bool,
        typer.Option(
            "--pin-task/--no-pin-task",
            help="Keep the first user message (the task) after the system messages in every "
            "request.",
        ),
    ] = True,
    provider: ProviderOption = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output", "-o", help="Write here instead of stdout; - is stdout.", show_default=False
        ),
    ] = None,
    report_json: Annotated[
        bool, typer.Option("--report-json", help="Write the report to stderr as JSON.")
    ] = False,
    max_input_mb: MaxInputOption = DEFAULT_MAX_INPUT_MB,
) -> None:
    """Write the governed transcript, in the input's format; the report goes to stderr.

    The tool definitions of a request body count against the budget and are written back;
    a request body's "model" sizes the window as --model does, where neither --model nor
    --window is given. A stored conversation's final answer is written back after the
    governed messages, as it was.
    """
    try:
        transcript = _read_transcript(file, max_input_mb=max_input_mb)
        settings: dict[str, Any] = {
            "max_output": max_output,
            "counter": counter,
            "keep_recent": keep_recent,
            "provider": _provider_for(transcript, provider),
            "safety_buffer": safety_buffer,
            "tools": _request_tools(transcript),
            "exclude_tools": _tool_names(exclude_tools),
            "compaction": compaction,
            "pin_task": pin_task,
        }
        notice = None
        if model is None and window is None and _body_model(transcript) is not None:
            governor, notice = _governor_for_the_body_model(transcript, settings)
        else:
            governor = build_governor(window=window, model_name=model, **settings)
        text, report, kept_after = _governed_text(transcript, governor)
        _write_output(output, text)
    except BadInput as error:
        raise _fail(str(error)) from None
    except RecursionError:
        raise _fail(f"{file}: the transcript is nested too deeply to govern") from None
    except OSError as error:
        raise _fail(f"{output}: {error.strerror or error}") from None
    except (ValueError, TypeError) as error:
        text = _first_error_line(error)
        raise _fail(f"{_tools_or(file, text)}: {text}") from None
    if report_json:
        # stderr holds the JSON alone: a notice is one of its fields.
        report_dict = {**report_as_dict(report), "kept_after": kept_after, "notice": notice}
        typer.echo(json.dumps(report_dict, indent=2), err=True)
    else:
        if notice is not None:
            typer.echo(notice, err=True)
        table = report_table(report, title=f"Context governance of {file}", kept_after=kept_after)
        _stderr().print(table)


def _tools_or(file: Path, error_text: str) -> str:
    """What an error is about: the request's tool definitions, or else the file."""
    return "the request's tools" if "tools[" in error_text else str(file)


def _tool_names(options: list[str] | None) -> list[str]:
    """`--exclude-tools a,b --exclude-tools c` as ["a", "b", "c"]."""
    return [name.strip() for option in options or () for name in option.split(",") if name.strip()]


def _body_model(transcript: Transcript) -> str | None:
    model = transcript.request.get("model")
    return model if isinstance(model, str) and model.strip() else None


def _governor_for_the_body_model(
    transcript: Transcript, settings: dict[str, Any]
) -> tuple[ContextGovernor, str | None]:
    """Sized for the request body's model, as with --model; where LangChain does not know
    it, repairs only, with the one line that says so (an unknown model is no error in a
    request)."""
    model = _body_model(transcript)
    try:
        governor = build_governor(
            window=None, model_name=model, model_source='the body\'s "model"', **settings
        )
    except BadInput as error:
        notice = f"{error}; without one, repairs only"
        return build_governor(window=None, model_name=None, **settings), notice
    return governor, None


def _request_tools(transcript: Transcript) -> list[Any] | None:
    tools = transcript.request.get("tools")
    if tools is None:
        return None
    if not isinstance(tools, list):
        raise BadInput("the request's 'tools' must be a JSON array")
    return tools


def violation_line(file: Path, violation: Violation, transcript: Transcript | None = None) -> str:
    """One broken rule as `FILE: message I: rule: words` (`request` for the whole request).

    I is the file's own number of the message (an Anthropic body's turn, `system` for its
    system prompt); the rule's words keep the index of the message list checked.
    """
    if violation.index < 0:
        where = "request"
    else:
        number = violation.index if transcript is None else transcript.number_of(violation.index)
        where = "system" if number is None else f"message {number}"
    return f"{file}: {where}: {violation.rule}: {violation.message}"


ChatTemplateOption = Annotated[
    Path | None,
    typer.Option(
        "--chat-template",
        help="A model's Jinja chat template: also check what it needs and that it renders.",
    ),
]


def _probed_chat_template(path: Path) -> str:
    """The template's text, probed once here so that its errors name the option."""
    try:
        template = path.read_text(encoding="utf-8")
        rules_for_chat_template(template)
    except OSError as error:
        raise _fail(f"--chat-template {path}: {error.strerror or error}") from None
    except (UnicodeDecodeError, ValueError, ImportError) as error:
        raise _fail(f"--chat-template {path}: {error}") from None
    return template


@app.command()
def check(
    file: FileArgument,
    provider: ProviderOption = None,
    chat_template: ChatTemplateOption = None,
    max_input_mb: MaxInputOption = DEFAULT_MAX_INPUT_MB,
) -> None:
    """List every rule the transcript breaks; exit 1 when it breaks any, 0 when clean.

    A stored conversation's final answer is not checked: the next request adds a user
    turn after it.
    """
    try:
        transcript = _read_transcript(file, max_input_mb=max_input_mb)
    except BadInput as error:
        raise _fail(str(error)) from None
    provider = _provider_for(transcript, provider)
    template = None if chat_template is None else _probed_chat_template(chat_template)
    messages, _ = _split_final_messages(transcript)
    try:
        violations = validate_messages(
            messages,
            provider=provider,
            chat_template=template,
            tools=_request_tools(transcript),
        )
    except BadInput as error:
        raise _fail(str(error)) from None
    except ChatTemplateLimitExceeded as error:
        raise _fail(f"--chat-template {chat_template}: {error}") from None
    except RecursionError:
        raise _fail(f"{file}: the transcript is nested too deeply to check") from None
    except (ValueError, TypeError) as error:  # e.g. a tool definition no template can take
        text = _first_error_line(error)
        raise _fail(f"{_tools_or(file, text)}: {text}") from None
    for violation in violations:
        typer.echo(violation_line(file, violation, transcript))
    count = len(violations)
    if count:
        noun = "rule" if count == 1 else "rules"
        typer.echo(f"{file}: {count} broken {noun} for provider {provider!r}", err=True)
        raise typer.Exit(code=EXIT_BROKEN_RULES)
    typer.echo(
        f"{file}: {len(transcript.messages)} messages, no broken rules for provider {provider!r}"
    )


@app.command()
def demo(
    steps: Annotated[
        int | None,
        typer.Option("--steps", min=1, help="Stop the task after this many tool steps."),
    ] = None,
    window: Annotated[
        int, typer.Option("--window", min=1, help="The scripted model's context window.")
    ] = DEFAULT_WINDOW_TOKENS,
    chart: Annotated[
        Path, typer.Option("--chart", help="Where to write the PNG chart (needs matplotlib).")
    ] = Path("context-governance-demo.png"),
    no_chart: Annotated[bool, typer.Option("--no-chart", help="Do not write the chart.")] = False,
) -> None:
    """Run an offline tool-calling agent through a long task under a small window."""
    try:
        run_demo_in_terminal(
            steps=steps,
            context_window_tokens=window,
            chart_path=None if no_chart else chart,
        )
    except ValueError as error:
        raise _fail(f"demo: {_first_error_line(error)}") from None


def main() -> None:
    """Entry point of the `context-governance` console script."""
    app(prog_name="context-governance")
