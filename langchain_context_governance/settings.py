"""Every setting of `ContextGovernor`, documented under its field, and the one `validate`.

`ContextGovernor`, `ContextGovernor.from_model` and `ContextGovernanceMiddleware` take
these keywords; the README's settings table is checked against the docstrings here
(`tests/unit_tests/test_settings.py`). A misspelt keyword is a TypeError naming the
setting it resembles, or the one that means the same (`max_tokens` is `max_input_tokens`).
The proportions the policies are built with are not settings: they are in `tuning.py`.

Example:
    >>> settings = GovernorSettings(max_input_tokens=6_000)
    >>> settings.input_budget()
    6000
    >>> GovernorSettings(context_window_tokens=8_000, max_output_tokens=1_000).input_budget()
    5976
    >>> GovernorSettings(max_tokens=6_000)
    Traceback (most recent call last):
    ...
    TypeError: GovernorSettings got an unknown setting 'max_tokens'; did you mean 'max_input_tokens'?
"""  # noqa: E501

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from langchain_core.runnables import Runnable
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel, ConfigDict, model_validator

from langchain_context_governance.policy.compaction import (
    DEFAULT_KEEP_RECENT,
    DEFAULT_MIN_CHARS,
    DEFAULT_PLACEHOLDER,
    ResultCompaction,
)
from langchain_context_governance.policy.watermarks import validate_watermarks
from langchain_context_governance.rules.validate import PROVIDERS
from langchain_context_governance.state.conversation import DEFAULT_MAX_CONVERSATIONS
from langchain_context_governance.state.summary import DEFAULT_SUMMARY_PROMPT
from langchain_context_governance.tuning import DEFAULT_HIGH_WATERMARK, DEFAULT_LOW_WATERMARK

__all__ = [
    "DEFAULT_SUMMARY_TIMEOUT",
    "SAME_MEANING",
    "GovernorSettings",
    "reject_unknown_settings",
    "validate_settings",
]

# Seconds the summary model gets before the cut keeps its plain note.
DEFAULT_SUMMARY_TIMEOUT = 60.0
# What the governor calls on a `store`: LangGraph's BaseStore (offload writes in batches).
_STORE_VERBS = ("get", "put", "aget", "aput")
_OFFLOAD_STORE_VERBS = ("batch", "abatch")

SAME_MEANING: Mapping[str, str] = {
    # trim_messages' name for the input budget, and the one of a model's constructor.
    "max_tokens": "max_input_tokens",
    "max_context_tokens": "context_window_tokens",
    "context_window": "context_window_tokens",
    "max_completion_tokens": "max_output_tokens",
}
"""Names other LangChain tools use, and this package's setting with the same meaning."""


class GovernorSettings(BaseModel):
    """The settings of a governor: the budget, compaction, cuts, rules, counting, state.

    Input budget: `max_input_tokens` where given; else `context_window_tokens -
    max_output_tokens - safety_buffer`; the smaller of the two where both are given.
    """

    model_config = ConfigDict(
        arbitrary_types_allowed=True, extra="forbid", use_attribute_docstrings=True
    )

    context_window_tokens: int | None = None
    """The model's context window. With neither it nor `max_input_tokens` there is no
    budget: repairs only, no compaction, no cut, no truncation. `from_model` reads it from
    the model's profile."""

    max_input_tokens: int | None = None
    """The input budget itself, as LangChain's model profiles and `trim_messages`
    (`max_tokens`) give it: the request (messages and tool definitions) may take this many
    tokens. Where `context_window_tokens` is given too, the smaller budget holds."""

    max_output_tokens: int = 4096
    """Tokens reserved in the window for the answer. `from_model` reads the model's
    `max_tokens` or its profile's `max_output_tokens`."""

    safety_buffer: int = 1024
    """Tokens reserved in the window for counting error: budget = window - output -
    buffer."""

    keep_recent: int = DEFAULT_KEEP_RECENT
    """Newest results of compactable tools that compaction leaves whole (with
    `cache_aware`, results that arrive after a step stay whole until the next one; with
    `keep_recent`, on every call)."""

    min_chars: int = DEFAULT_MIN_CHARS
    """Results shorter than this many characters are never compacted."""

    compactable_tools: frozenset[str] | None = None
    """`None`: results of every tool but `exclude_tools` may be compacted by age and size;
    a set: only those tools' results (`DEFAULT_COMPACTABLE_TOOLS` is the seed's list)."""

    exclude_tools: frozenset[str] = frozenset()
    """Tools whose results are never compacted (memory, plans, receipts, anything the
    agent cannot obtain again); their calls are kept across cuts while they fit."""

    placeholder: str = DEFAULT_PLACEHOLDER
    """What a compacted result becomes; `{tool_name}` is filled in."""

    pin_task: bool = True
    """Keep the conversation's first user message right after the system messages in every
    request (without it, it is kept across cuts like any earlier user message)."""

    on_over_budget: Literal["truncate", "warn", "raise"] = "truncate"
    """`"truncate"`: cut text as a last resort, and send with one warning where even that
    cannot fit; `"warn"`: no truncation, a warning when over budget; `"raise"`: truncate,
    and raise `ContextBudgetExceeded` where it cannot fit."""

    token_counter: Any = "approximate"
    """`"approximate"`, `"tiktoken:<model>"`, `"tiktoken"`, `"mistral:<model>"`, a Hugging
    Face tokenizer, a callable over a message list, or a chat model; `from_model` picks the
    model's own where it needs no network."""

    tools: Sequence[Any] | None = None
    """Tool definitions sent with every request; they count against the budget
    (`govern(..., tools=...)` gives a call's own; `from_model` takes those bound with
    `bind_tools`)."""

    provider: str = "openai"
    """The provider profile whose rules every request satisfies; `from_model` and the
    middleware pick it from the model's class."""

    chat_template: str | None = None
    """The model's Jinja chat template; the repairs its shapes need are added to the
    profile's."""

    compaction: Literal["cache_aware", "keep_recent"] = "cache_aware"
    """`"cache_aware"`: compact and cut in rare, large steps (prompt-cache friendly);
    `"keep_recent"`: compact all but the newest `keep_recent` results on every call, then
    cut."""

    high_watermark: float = DEFAULT_HIGH_WATERMARK
    """Share of the room history has above which the cache-aware policy compacts and cuts;
    in (0, 1]."""

    low_watermark: float = DEFAULT_LOW_WATERMARK
    """Share of that room down to which it compacts or cuts; in (0, `high_watermark`)."""

    max_conversations: int = DEFAULT_MAX_CONVERSATIONS
    """Conversation states kept in the process, least recently used dropped."""

    summary_model: Any = None
    """A chat model, or a `"provider:model"` string, that summarizes what each cut drops,
    once per cut; needs a budget and `compaction="cache_aware"`."""

    summary_prompt: str = DEFAULT_SUMMARY_PROMPT
    """The instructions given to `summary_model`."""

    summary_timeout: float | None = DEFAULT_SUMMARY_TIMEOUT
    """Seconds the summary model gets before the cut keeps its plain note; `None`: no
    limit."""

    store: Any = None
    """A LangGraph `BaseStore` that keeps each thread's governance record, for plain calls
    on several workers."""

    offload: bool = False
    """Keep what leaves a request (a compacted result, a truncated text, the messages a cut
    drops) in the thread's store, and show the handle that reads it back with the
    `read_context` tool (`read_context_tool()`; docs/offload.md). Needs a thread; on by
    default in the create_agent middleware."""

    overflow_retries: int = 1
    """How often the middleware (and `with_overflow_recovery`) governs again and retries
    after the provider refuses a request for its length."""

    name: str | None = "ContextGovernor"
    """The name of the governor's run in LangSmith and callback handlers."""

    @model_validator(mode="before")
    @classmethod
    def _reject_unknown_settings(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            reject_unknown_settings(data, cls.model_fields, where=cls.__name__)
        return data

    def model_post_init(self, context: Any, /) -> None:
        validate_settings(self)

    def input_budget(self) -> int | None:
        """Tokens a request may take, or None without a window or an input budget."""
        budgets = [
            budget
            for budget in (self._window_budget(), self.max_input_tokens)
            if budget is not None
        ]
        return min(budgets) if budgets else None

    def result_compaction(self) -> ResultCompaction:
        """The compaction settings as the policy reads them (validated on the way)."""
        return ResultCompaction(
            keep_recent=self.keep_recent,
            min_chars=self.min_chars,
            compactable_tools=self.compactable_tools,
            exclude_tools=self.exclude_tools,
            placeholder=self.placeholder,
        )

    def _window_budget(self) -> int | None:
        if self.context_window_tokens is None:
            return None
        return self.context_window_tokens - self.max_output_tokens - self.safety_buffer


def reject_unknown_settings(given: Iterable[str], known: Iterable[str], *, where: str) -> None:
    """Raise TypeError for the first name in `given` that is not in `known`, naming the
    setting that means the same (`SAME_MEANING`) or the one it resembles.

    >>> reject_unknown_settings(["contex_window_tokens"], ["context_window_tokens"],
    ...     where="ContextGovernor")
    Traceback (most recent call last):
    ...
    TypeError: ContextGovernor got an unknown setting 'contex_window_tokens'; did you mean 'context_window_tokens'?
    """  # noqa: E501
    known_names = sorted(known)
    for name in given:
        if name in known_names:
            continue
        same = SAME_MEANING.get(name)
        close = [same] if same in known_names else difflib.get_close_matches(name, known_names, 1)
        hint = f"did you mean {close[0]!r}?" if close else f"known: {', '.join(known_names)}"
        raise TypeError(f"{where} got an unknown setting {name!r}; {hint}")


def validate_settings(settings: GovernorSettings) -> None:
    """Raise ValueError naming the first setting that is out of range or contradicts another."""
    _validate_budget(settings)
    if settings.compaction not in ("cache_aware", "keep_recent"):
        raise ValueError(
            f"compaction must be 'cache_aware' or 'keep_recent', got {settings.compaction!r}"
        )
    validate_watermarks(
        high_watermark=settings.high_watermark, low_watermark=settings.low_watermark
    )
    settings.result_compaction()
    _validate_summary(settings)
    _validate_tools(settings.tools)
    store = settings.store
    if store is not None and not all(hasattr(store, verb) for verb in _STORE_VERBS):
        raise ValueError(
            f"store must be a LangGraph BaseStore ({', '.join(_STORE_VERBS)}), "
            f"got {type(store).__name__}"
        )
    if settings.offload and store is not None:
        missing = [verb for verb in _OFFLOAD_STORE_VERBS if not hasattr(store, verb)]
        if missing:
            raise ValueError(
                f"offload keeps content in the store: store must have {', '.join(missing)} "
                f"(a LangGraph BaseStore), got {type(store).__name__}"
            )
    if settings.max_conversations < 1:
        raise ValueError(f"max_conversations must be >= 1, got {settings.max_conversations}")
    if settings.overflow_retries < 0:
        raise ValueError(f"overflow_retries must be >= 0, got {settings.overflow_retries}")
    if settings.on_over_budget not in ("truncate", "warn", "raise"):
        raise ValueError(
            f"on_over_budget must be 'truncate', 'warn' or 'raise', got {settings.on_over_budget!r}"
        )
    both = set(settings.compactable_tools or ()) & set(settings.exclude_tools)
    if both:
        raise ValueError(f"tools both in compactable_tools and in exclude_tools: {sorted(both)}")
    if settings.provider not in PROVIDERS:
        known = ", ".join(repr(name) for name in PROVIDERS)
        raise ValueError(f"provider must be one of {known}, got {settings.provider!r}")


def _validate_budget(settings: GovernorSettings) -> None:
    window = settings.context_window_tokens
    if window is not None and window <= 0:
        raise ValueError(f"context_window_tokens must be > 0 or None, got {window}")
    if settings.max_input_tokens is not None and settings.max_input_tokens <= 0:
        raise ValueError(f"max_input_tokens must be > 0 or None, got {settings.max_input_tokens}")
    if settings.max_output_tokens < 0:
        raise ValueError(f"max_output_tokens must be >= 0, got {settings.max_output_tokens}")
    if settings.safety_buffer < 0:
        raise ValueError(f"safety_buffer must be >= 0, got {settings.safety_buffer}")
    budget = settings._window_budget()
    if budget is not None and budget <= 0:
        raise ValueError(
            "input budget = context_window_tokens - max_output_tokens - safety_buffer must be "
            f"> 0, got {window} - {settings.max_output_tokens} - {settings.safety_buffer} = "
            f"{budget}"
        )
    if window is None and settings.max_input_tokens is not None:
        # Without a window they reserve nothing: never a setting silently ignored.
        ignored = sorted({"max_output_tokens", "safety_buffer"} & settings.model_fields_set)
        if ignored:
            raise ValueError(
                f"{' and '.join(ignored)} reserve room in context_window_tokens; with "
                "max_input_tokens alone they do nothing: pass context_window_tokens too, or "
                "leave them out"
            )


def _validate_tools(tools: Sequence[Any] | None) -> None:
    """Each tool definition readable as LangChain reads it for the provider, at
    construction rather than at the first call."""
    if tools is None:
        return
    if isinstance(tools, (str, bytes, Mapping)):
        raise ValueError(f"tools must be a list of tool definitions, got {type(tools).__name__}")
    for index, tool in enumerate(tools):
        try:
            convert_to_openai_tool(tool)
        except (ValueError, TypeError, NotImplementedError) as error:
            raise ValueError(f"tools[{index}] cannot be read as a tool: {error}") from None


def _validate_summary(settings: GovernorSettings) -> None:
    if settings.summary_model is not None:
        if not isinstance(settings.summary_model, (Runnable, str)):
            raise ValueError(
                "summary_model must be a chat model (a Runnable) or a 'provider:model' "
                f"string, got {type(settings.summary_model).__name__}"
            )
        if settings.input_budget() is None or settings.compaction != "cache_aware":
            raise ValueError(
                "summary_model summarizes what a cut drops: it needs a budget "
                "(context_window_tokens or max_input_tokens) and compaction='cache_aware'"
            )
    if not settings.summary_prompt.strip():
        raise ValueError("summary_prompt must not be empty")
    timeout = settings.summary_timeout
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0
    ):
        raise ValueError(
            f"summary_timeout must be a number of seconds > 0 or None, got {timeout!r}"
        )
