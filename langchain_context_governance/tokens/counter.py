"""Token counters for chat requests, with a per-message cache.

`get_token_counter` turns what a user passes as `token_counter` (a name, a function or a
model) into a `MessageTokenCounter`. A counter counts each message once and caches the
result, so counting a growing history again costs only the new messages. Nothing here
touches the network: the tiktoken encoding is taken from a bundled or already cached
file, and counting falls back to an approximation (with a warning) when none exists.
"""

from __future__ import annotations

import heapq
import inspect
import json
import numbers
import sys
import threading
import typing
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias

from langchain_core.language_models import BaseLanguageModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.utils.function_calling import convert_to_openai_tool

from langchain_context_governance._messages import content_fingerprint, content_text_length
from langchain_context_governance._model_classes import package_of, recognised_package
from langchain_context_governance.tokens.encodings import encoding_name_for_model, get_encoding
from langchain_context_governance.tokens.huggingface import Render, is_tokenizer, tokenizer_backend
from langchain_context_governance.tokens.mistral import (
    MistralBackend,
    is_mistral_model,
    mistral_tokenizer,
    tokenizer_for_model,
)

__all__ = [
    "CacheStats",
    "MessageTokenCounter",
    "TokenCounterFallbackWarning",
    "TokenCounterSpec",
    "get_token_counter",
]

TokenCounterSpec: TypeAlias = (
    str | Callable[[list[BaseMessage]], int] | Callable[[BaseMessage], int] | BaseLanguageModel[Any]
)
"""What `token_counter` settings accept: "approximate", "tiktoken", "tiktoken:<model>", a
function or a model."""

COUNTER_NAMES = ("approximate", "tiktoken")

# What "tiktoken" alone counts with: the encoding of every current OpenAI model.
DEFAULT_TIKTOKEN_ENCODING = "o200k_base"
# Their count_tokens methods call the provider's API (langchain-openai's download an
# encoding), so they are never used unasked.
NETWORK_COUNTING_PACKAGES = frozenset(
    {
        "langchain_anthropic",
        "langchain_google_genai",
        "langchain_google_vertexai",
        "langchain_openai",
    }
)
# What a model counts tokens with; langchain-core's defaults of the last two need transformers.
COUNTING_METHODS = ("get_num_tokens_from_messages", "get_num_tokens", "get_token_ids")

# OpenAI's chat accounting, as in langchain-openai's get_num_tokens_from_messages.
# Characters a token holds in langchain-core's `count_tokens_approximately` (its default
# `chars_per_token`): the package's one rough conversion between text and tokens.
APPROXIMATE_CHARS_PER_TOKEN = 4
TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
REPLY_PRIMING_TOKENS = 3
LOW_DETAIL_IMAGE_TOKENS = 85
# langchain-openai downloads an image to measure it; we never do, and charge what a
# 1024x1024 image costs at high detail (4 tiles of 170 plus 85).
UNMEASURED_MEDIA_TOKENS = 765
MEDIA_BLOCK_TYPES = frozenset({"image", "image_url", "file", "audio", "input_audio", "video"})
# langchain-openai leaves these out of the request; tool_use blocks count as tool calls.
UNSENT_BLOCK_TYPES = frozenset({"tool_use", "thinking", "reasoning_content"})

# Tool lists are few per agent (one per bound model), so a small cache is enough.
MAX_TOOL_CACHE_ENTRIES = 64
# Evicting an eighth of the cache at a time keeps eviction cost amortised and small.
EVICTION_FRACTION = 8


class TokenCounterFallbackWarning(RuntimeWarning):
    """A counter could not count as asked and counts approximately instead."""


@dataclass(frozen=True)
class CacheStats:
    """Size and use of a counter's per-message cache.

    `approx_bytes` covers the cache's own keys and entries, not the messages it keeps
    alive (those are usually alive in the history anyway).
    """

    hits: int
    misses: int
    entries: int
    max_entries: int
    approx_bytes: int


class _Backend(Protocol):
    """Counts one message, uncached; `request_overhead` is what an empty request costs."""

    @property
    def name(self) -> str: ...

    @property
    def request_overhead(self) -> int: ...

    def count(self, message: BaseMessage) -> int: ...


@dataclass(frozen=True)
class _ApproximateBackend:
    name: str = "approximate"
    request_overhead: int = 0

    def count(self, message: BaseMessage) -> int:
        return count_tokens_approximately([message])


@dataclass(frozen=True)
class _TiktokenBackend:
    encoding: Any
    name: str
    request_overhead: int = REPLY_PRIMING_TOKENS
    # OpenAI's own tokenizer and chat accounting (see get_token_counter).
    exact: bool = True

    def count(self, message: BaseMessage) -> int:
        encode = self.encoding.encode_ordinary
        tokens = TOKENS_PER_MESSAGE + len(encode(_openai_role(message)))
        tokens += _content_tokens(message.content, encode)
        name = message.name or message.additional_kwargs.get("name")
        # langchain-openai does not send a tool result's name.
        if name and not isinstance(message, ToolMessage):
            tokens += len(encode(str(name))) + TOKENS_PER_NAME
        if isinstance(message, AIMessage):
            tokens += sum(len(encode(text)) for text in _tool_call_texts(message))
        if isinstance(message, ToolMessage):
            tokens += len(encode(message.tool_call_id))
        return tokens


@dataclass(frozen=True)
class _ListCallableBackend:
    """Counts with `f([message]) - f([])`, where `f([])` is the request overhead."""

    function: Callable[[list[BaseMessage]], int]
    name: str
    request_overhead: int

    def count(self, message: BaseMessage) -> int:
        counted = _as_token_count(self.function([message]), self.name)
        return max(0, counted - self.request_overhead)


@dataclass(frozen=True)
class _MessageCallableBackend:
    function: Callable[[BaseMessage], int]
    name: str = "callable"
    request_overhead: int = 0

    def count(self, message: BaseMessage) -> int:
        return _as_token_count(self.function(message), self.name)


def _as_token_count(value: object, source: str) -> int:
    """`value` as a token count; a result that is no count is the counter's error, by name."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(
            f"token_counter ({source}) must return a non-negative int, got "
            f"{type(value).__name__} {value!r}"
            + (" (round it with math.ceil)" if isinstance(value, float) else "")
        )
    if value < 0:
        raise ValueError(f"token_counter ({source}) must return a non-negative int, got {value}")
    return int(value)


def _openai_role(message: BaseMessage) -> str:
    if isinstance(message, ChatMessage):
        return message.role
    if isinstance(message, SystemMessage):
        return str(message.additional_kwargs.get("__openai_role__", "system"))
    if isinstance(message, HumanMessage):
        return "user"
    if isinstance(message, AIMessage):
        return "assistant"
    if isinstance(message, ToolMessage):
        return "tool"
    if isinstance(message, FunctionMessage):
        return "function"
    return message.type


def _content_tokens(
    content: str | list[str | dict[str, Any]], encode: Callable[[str], list[int]]
) -> int:
    if isinstance(content, str):
        return len(encode(content))
    tokens = 0
    for block in content:
        if isinstance(block, str):
            tokens += len(encode(block))
        elif isinstance(block, dict):
            tokens += _block_tokens(block, encode)
    return tokens


def _block_tokens(block: dict[str, Any], encode: Callable[[str], list[int]]) -> int:
    block_type = block.get("type")
    if block_type == "text":
        return len(encode(str(block.get("text") or "")))
    if block_type in UNSENT_BLOCK_TYPES:
        return 0
    if block_type in MEDIA_BLOCK_TYPES:
        return _media_block_tokens(block)
    return len(encode(json.dumps(block, ensure_ascii=False, default=str)))


def _media_block_tokens(block: dict[str, Any]) -> int:
    image_url = block.get("image_url")
    detail = image_url.get("detail") if isinstance(image_url, dict) else block.get("detail")
    return LOW_DETAIL_IMAGE_TOKENS if detail == "low" else UNMEASURED_MEDIA_TOKENS


def _tool_call_texts(message: AIMessage) -> Iterator[str]:
    """Names and JSON arguments of every call the message declares, each call once."""
    seen_ids: set[str] = set()
    for call in message.tool_calls:
        seen_ids.add(call.get("id") or "")
        yield call["name"]
        yield json.dumps(call["args"], ensure_ascii=False, default=str)
    for invalid in message.invalid_tool_calls:
        seen_ids.add(invalid.get("id") or "")
        yield invalid.get("name") or ""
        yield invalid.get("args") or ""
    if isinstance(message.content, list):
        for block in message.content:
            if (
                isinstance(block, dict)
                and block.get("type") == "tool_use"
                and block.get("id") not in seen_ids
            ):
                yield str(block.get("name") or "")
                yield json.dumps(block.get("input") or {}, ensure_ascii=False, default=str)


class _CacheEntry:
    __slots__ = ("last_used", "tokens")

    def __init__(self, tokens: int, last_used: int) -> None:
        self.tokens = tokens
        self.last_used = last_used


# A dict slot, the int key and the entry: no message or content is kept alive.
_BYTES_PER_CACHE_ENTRY = sys.getsizeof(_CacheEntry(0, 0)) + 2 * sys.getsizeof(sys.maxsize) + 24


class _MessageCountCache:
    """Bounded LRU map from a message's content fingerprint to its token count.

    Keyed by `content_fingerprint`, not by object identity: a history reloaded from a
    checkpoint (new objects, same fields) hits the cache, and no message is kept alive.
    A hit only stamps the entry with the current tick, so there is no reordering per
    hit; when full, the least recently used eighth is evicted in one pass. The caller
    holds the lock.
    """

    def __init__(self, max_entries: int) -> None:
        self.max_entries = max_entries
        self.hits = 0
        self.misses = 0
        self._entries: dict[int, _CacheEntry] = {}
        self._tick = 0

    def lookup(self, keys: Sequence[int]) -> list[int | None]:
        self._tick += 1
        tick = self._tick
        found: list[int | None] = []
        for key in keys:
            entry = self._entries.get(key)
            if entry is None:
                found.append(None)
            else:
                entry.last_used = tick
                found.append(entry.tokens)
        misses = found.count(None)
        self.misses += misses
        self.hits += len(found) - misses
        return found

    def store(self, key: int, tokens: int) -> None:
        if key not in self._entries and len(self._entries) >= self.max_entries:
            self._evict_least_recently_used()
        self._entries[key] = _CacheEntry(tokens, self._tick)

    def _evict_least_recently_used(self) -> None:
        count = max(1, self.max_entries // EVICTION_FRACTION)
        oldest = heapq.nsmallest(count, self._entries.items(), key=lambda item: item[1].last_used)
        for key, _ in oldest:
            del self._entries[key]

    def clear(self) -> None:
        self._entries.clear()

    def stats(self) -> CacheStats:
        return CacheStats(
            hits=self.hits,
            misses=self.misses,
            entries=len(self._entries),
            max_entries=self.max_entries,
            approx_bytes=sys.getsizeof(self._entries) + len(self._entries) * _BYTES_PER_CACHE_ENTRY,
        )


class MessageTokenCounter:
    """Counts tokens of messages and caches each message's count.

    Build one with `get_token_counter`. Safe to share across threads. The cache is keyed
    by what is counted (type, name, content, tool calls, tool call id, additional
    kwargs), so an equal message reloaded from a checkpoint is not counted again and an
    edited one is; it holds counts only, never messages.

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> counter = get_token_counter("approximate")
        >>> history = [HumanMessage("hello world")]
        >>> counter.count_messages(history)
        7
        >>> counter.count_messages(history)  # counted from the cache
        7
        >>> counter.cache_stats().hits
        1
    """

    def __init__(
        self,
        backend: _Backend,
        *,
        max_cache_entries: int,
        may_fall_back: bool = False,
        exact_up_to_chars: int | None = None,
    ) -> None:
        """With `may_fall_back`, a backend that raises gives way to approximate counting.
        A message with more text than `exact_up_to_chars` is counted approximately."""
        _validate_max_cache_entries(max_cache_entries)
        self._backend = backend
        self._exact_up_to_chars = exact_up_to_chars
        self._can_fall_back = may_fall_back
        self._lock = threading.Lock()
        self._messages = _MessageCountCache(max_cache_entries)
        self._tools: dict[tuple[int, ...], tuple[tuple[Any, ...], int]] = {}

    @property
    def name(self) -> str:
        """How this counter counts, for reports: "approximate", "tiktoken", ..."""
        return self._backend.name

    @property
    def request_overhead(self) -> int:
        """Tokens a request costs beyond its messages (3 for OpenAI's reply priming)."""
        return self._backend.request_overhead

    @property
    def exact(self) -> bool:
        """Whether this counts with the model's own tokenizer (tiktoken for an OpenAI model,
        mistral_common for a Mistral model it bundles, a local Hugging Face tokenizer).

        Example:
            >>> get_token_counter("tiktoken:gpt-4o").exact, get_token_counter("approximate").exact
            (True, False)
        """
        return bool(getattr(self._backend, "exact", False))

    def count_message(self, message: BaseMessage) -> int:
        """Tokens of one message, from the cache when it was counted before."""
        return self._message_counts([message])[1][0]

    def count_messages(self, messages: Sequence[BaseMessage]) -> int:
        """Tokens of a whole request: `request_overhead` plus each message's count."""
        backend, counts = self._message_counts(messages)
        return backend.request_overhead + sum(counts)

    def count_tools(self, tools: Sequence[Any] | None) -> int:
        """Tokens of the tool definitions sent with a request; 0 for None or no tools.

        Tools (BaseTool, dicts, functions, pydantic classes) are converted to OpenAI tool
        schemas and counted as one system message holding their JSON: an estimate, since
        each provider renders tools its own way. Cached per list of tool objects.
        """
        if not tools:
            return 0
        key = tuple(id(tool) for tool in tools)
        with self._lock:
            backend = self._backend
            cached = self._tools.get(key)
        if cached is not None:
            return cached[1]
        schemas = _tool_schemas(tools)
        count_tools = getattr(backend, "count_tools", None)
        if callable(count_tools):
            # A backend that knows how its provider writes tool definitions counts them so.
            measured: list[int] | None = [_as_token_count(count_tools(schemas), backend.name)]
        else:
            text = json.dumps(schemas, ensure_ascii=False, default=str)
            measured = self._measure(backend, [SystemMessage(text)])
        if measured is None:
            return self.count_tools(tools)
        self._store_tools_count(backend, tools, key, measured[0])
        return measured[0]

    def cache_stats(self) -> CacheStats:
        """Hits, misses and size of the per-message cache."""
        with self._lock:
            return self._messages.stats()

    def clear_cache(self) -> None:
        """Forget every cached count of a message (each is counted again when next
        needed), to free the cache's memory at once.

        Example:
            >>> from langchain_core.messages import HumanMessage
            >>> counter = get_token_counter("approximate")
            >>> _ = counter.count_message(HumanMessage("hello"))
            >>> counter.clear_cache()
            >>> counter.cache_stats().entries
            0
        """
        with self._lock:
            self._messages.clear()

    def _message_counts(self, messages: Sequence[BaseMessage]) -> tuple[_Backend, list[int]]:
        """The backend that counted and each message's count; misses are counted unlocked."""
        keys = [content_fingerprint(message) for message in messages]
        with self._lock:
            backend = self._backend
            found = self._messages.lookup(keys)
        missing = [index for index, tokens in enumerate(found) if tokens is None]
        if not missing:
            return backend, typing.cast(list[int], found)
        measured = self._measure(backend, [messages[index] for index in missing])
        if measured is None:
            return self._message_counts(messages)
        with self._lock:
            # Counts from a backend that was replaced meanwhile must not enter the cache.
            if backend is self._backend:
                for index, tokens in zip(missing, measured, strict=True):
                    self._messages.store(keys[index], tokens)
        for index, tokens in zip(missing, measured, strict=True):
            found[index] = tokens
        return backend, typing.cast(list[int], found)

    def _measure(self, backend: _Backend, messages: Sequence[BaseMessage]) -> list[int] | None:
        """Counts by `backend`, uncached; None when it failed and the counter fell back."""
        try:
            return [self._count_one(backend, message) for message in messages]
        except Exception as error:
            if not self._can_fall_back:
                raise
            self._fall_back_to_approximate(backend, error)
            return None

    def _count_one(self, backend: _Backend, message: BaseMessage) -> int:
        limit = self._exact_up_to_chars
        if limit is not None and content_text_length(message.content) > limit:
            # Far too large to be sent whole: the last resort cuts it, and only the cut
            # copy's count matters. An exact tokenizer would spend seconds and gigabytes
            # on megabytes of text without whitespace to learn just that.
            return count_tokens_approximately([message])
        return backend.count(message)

    def _store_tools_count(
        self, backend: _Backend, tools: Sequence[Any], key: tuple[int, ...], tokens: int
    ) -> None:
        with self._lock:
            if backend is not self._backend:
                return
            if len(self._tools) >= MAX_TOOL_CACHE_ENTRIES:
                del self._tools[next(iter(self._tools))]
            # The tools are kept so that their ids cannot be reused while cached.
            self._tools[key] = (tuple(tools), tokens)

    def _fall_back_to_approximate(self, failed: _Backend, error: Exception) -> None:
        with self._lock:
            if self._backend is not failed:
                return
            self._backend = _ApproximateBackend(name=f"{failed.name} (approximate fallback)")
            self._can_fall_back = False
            self._messages.clear()
            self._tools.clear()
        _warn_model_fallback(failed.name, error)


def _validate_max_cache_entries(max_cache_entries: int) -> None:
    if isinstance(max_cache_entries, bool) or not isinstance(max_cache_entries, int):
        raise ValueError(
            f"max_cache_entries must be an int, got {type(max_cache_entries).__name__}"
        )
    if max_cache_entries < 1:
        raise ValueError(f"max_cache_entries must be >= 1, got {max_cache_entries}")


def _tool_schemas(tools: Sequence[Any]) -> list[dict[str, Any]]:
    schemas = []
    for index, tool in enumerate(tools):
        try:
            schemas.append(convert_to_openai_tool(tool))
        except (ValueError, TypeError, NotImplementedError) as error:
            raise ValueError(f"tools[{index}] cannot be read as a tool: {error}") from error
    return schemas


def _warn_model_fallback(counter_name: str, error: Exception) -> None:
    warnings.warn(
        f"token_counter {counter_name} failed ({error!r}); counting approximately instead.",
        TokenCounterFallbackWarning,
        stacklevel=4,
    )


def get_token_counter(
    spec: TokenCounterSpec,
    *,
    max_cache_entries: int = 100_000,
    exact_up_to_chars: int | None = None,
    render_chat_template: Render | None = None,
) -> MessageTokenCounter:
    """Build a cached token counter from a `token_counter` setting.

    - "approximate": langchain-core's `count_tokens_approximately`, per message.
    - "tiktoken:<model>": exact counting with the encoding OpenAI's `<model>` uses
      (o200k_base for gpt-4o, gpt-4.1, gpt-5 and the o-series, cl100k_base for gpt-4 and
      gpt-3.5; an encoding name works too) and OpenAI's chat accounting (3 tokens per
      message, 1 per name, 3 per request); equals `ChatOpenAI(model=<model>)
      .get_num_tokens_from_messages` on plain-text messages. Tool results also count
      their `tool_call_id`, and an image costs 85 tokens at low detail, else 765 (images
      are never fetched). The encodings are bundled: nothing is downloaded.
    - "tiktoken": the same with o200k_base.
    - "mistral:<model>": exact counting as Mistral's API tokenizes the request, with the
      tokenizer mistral_common bundles for the Mistral model `<model>` (Tekken for NeMo,
      SentencePiece for the older and larger ones; a model newer than those bundled is
      counted with Tekken as an estimate); see tokens/mistral.py. Needs the `mistral` extra.
    - a Hugging Face tokenizer (`tokenizers.Tokenizer`, or a `transformers` tokenizer):
      each message's text by it, plus what the chat template writes around a message of
      its role and once a request (the tokenizer's own template, or `render_chat_template`
      where given); see tokens/huggingface.py.
    - a function over a list of messages, as `trim_messages` accepts: a message costs
      `f([message]) - f([])`, with `f([])` the request overhead (0, and `f([message])`
      per message, when `f([])` raises). A function whose first parameter is annotated
      `BaseMessage` is called with one message instead.
    - a model: its `get_num_tokens_from_messages`, used like such a function, when its
      class counts tokens itself; otherwise approximate. A langchain-openai model counts
      as "tiktoken:<its model name>" (the same counts, without the download), a
      langchain-mistralai model as "mistral:<its model name>", a model holding a local
      tokenizer (ChatHuggingFace's `tokenizer`) with it. If a model's counting raises, the
      counter warns once and counts approximately from then on.

    A function must return a non-negative int; anything else is an error naming it. A
    message with more text than `exact_up_to_chars` characters is counted approximately
    (the governor sets it to what can never be sent whole).

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> counter = get_token_counter(lambda messages: 10 * len(messages) + 2)
        >>> counter.count_messages([HumanMessage("hi"), AIMessage("hello")])
        22
        >>> counter.request_overhead, counter.count_message(HumanMessage("hi"))
        (2, 10)
    """
    _validate_max_cache_entries(max_cache_entries)
    if exact_up_to_chars is not None and exact_up_to_chars < 1:
        raise ValueError(f"exact_up_to_chars must be >= 1 or None, got {exact_up_to_chars}")
    backend, may_fall_back = _backend_for(spec, render_chat_template)
    return MessageTokenCounter(
        backend,
        max_cache_entries=max_cache_entries,
        may_fall_back=may_fall_back,
        exact_up_to_chars=exact_up_to_chars,
    )


def _backend_for(
    spec: TokenCounterSpec, render_chat_template: Render | None = None
) -> tuple[_Backend, bool]:
    """The backend `spec` names, and whether it may fall back to approximate counting."""
    if isinstance(spec, str):
        backend = _named_backend(spec)
        # A tokenizer library that fails on some content gives way to the approximation.
        return backend, isinstance(backend, MistralBackend)
    if isinstance(spec, BaseLanguageModel):
        return _model_backend(spec)
    if is_tokenizer(spec):
        return tokenizer_backend(spec, render=render_chat_template), True
    if callable(spec):
        return _callable_backend(spec), False
    raise TypeError(
        "token_counter must be 'approximate', 'tiktoken', 'mistral:<model>', a function, a "
        f"Hugging Face tokenizer or a language model, got {type(spec).__name__}"
    )


def _named_backend(name: str) -> _Backend:
    if name == "approximate":
        return _ApproximateBackend()
    if name.startswith("mistral:"):
        try:
            choice = tokenizer_for_model(name)
        except ValueError as error:
            raise ValueError(f"token_counter={name!r}: {error}") from error
        mistral_tokenizer(choice.file)  # loaded now: a missing mistral_common is a setting error
        return MistralBackend(choice.file, name=f"mistral_common:{choice.file}", exact=choice.exact)
    if name == "tiktoken" or name.startswith("tiktoken:"):
        model = name.removeprefix("tiktoken").removeprefix(":") or DEFAULT_TIKTOKEN_ENCODING
        try:
            encoding_name = encoding_name_for_model(model)
        except ValueError as error:
            raise ValueError(f"token_counter={name!r}: {error}") from error
        return _TiktokenBackend(get_encoding(encoding_name), name=f"tiktoken:{encoding_name}")
    raise ValueError(
        f"token_counter must be one of {', '.join(map(repr, COUNTER_NAMES))}, "
        f"'tiktoken:<OpenAI model or encoding>', 'mistral:<Mistral model>', a function, a "
        f"Hugging Face tokenizer or a language model; got {name!r}"
    )


def _callable_backend(
    function: Callable[[list[BaseMessage]], int] | Callable[[BaseMessage], int],
) -> _Backend:
    if _takes_one_message(function):
        return _MessageCallableBackend(typing.cast(Callable[[BaseMessage], int], function))
    list_function = typing.cast(Callable[[list[BaseMessage]], int], function)
    return _ListCallableBackend(
        list_function, name="callable", request_overhead=_empty_request_tokens(list_function)
    )


def _takes_one_message(function: Callable[..., Any]) -> bool:
    """True when the first parameter is annotated as a single BaseMessage."""
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        return False
    if not parameters:
        return False
    try:
        hints = typing.get_type_hints(function)
    except Exception:
        hints = {}
    annotation = hints.get(parameters[0].name, parameters[0].annotation)
    if isinstance(annotation, str):
        return annotation == "BaseMessage"
    return isinstance(annotation, type) and issubclass(annotation, BaseMessage)


def _empty_request_tokens(function: Callable[[list[BaseMessage]], int]) -> int:
    """`function([])`, or 0 when the function cannot count an empty list."""
    try:
        empty = function([])
    except Exception:
        return 0
    return _as_token_count(empty, "callable")


def counter_spec_for_model(model: BaseLanguageModel[Any]) -> TokenCounterSpec:
    """How `ContextGovernor.from_model` counts for `model`, never through the network.

    The model's class is recognised as its provider profile is (`_model_classes`: a
    subclass of ChatAnthropic counts as ChatAnthropic). An OpenAI model counts with the
    bundled tiktoken encoding of its name (what its own `get_num_tokens_from_messages`
    would download), a Mistral model with mistral_common's bundled tokenizer, a model
    holding a local tokenizer with it (see `get_token_counter`); a model whose counting
    would call its provider's API or download an encoding (Anthropic, Google, another
    server behind langchain-openai's class) counts approximately; any other model counts
    itself.

    Example:
        >>> from langchain_anthropic import ChatAnthropic
        >>> class TeamModel(ChatAnthropic): ...
        >>> counter_spec_for_model(TeamModel(model="claude-haiku-4-5", api_key="unused"))
        'approximate'
    """
    if _is_langchain_openai(model):
        # Offline in every case: the bundled encoding of its name, else see _model_backend.
        return model
    if recognised_package(type(model)) in NETWORK_COUNTING_PACKAGES:
        return "approximate"
    if _counting_packages(type(model)) & NETWORK_COUNTING_PACKAGES:
        return "approximate"
    return model


def _counting_packages(model_class: type) -> set[str]:
    """The packages of the classes whose counting methods `model_class` runs, langchain-core's
    defaults aside: ChatDeepSeek runs langchain-openai's, which downloads an encoding."""
    packages = set()
    for method in COUNTING_METHODS:
        owner = next(cls for cls in model_class.__mro__ if method in vars(cls))
        if package_of(owner) != "langchain_core":
            packages.add(package_of(owner))
    return packages


def _is_langchain_openai(model: BaseLanguageModel[Any]) -> bool:
    return recognised_package(type(model)) == "langchain_openai"


def _openai_model_name(model: BaseLanguageModel[Any]) -> str | None:
    """The name to pick a tiktoken encoding by, for a langchain-openai model that has one."""
    if not _is_langchain_openai(model):
        return None
    name = getattr(model, "tiktoken_model_name", None) or getattr(model, "model_name", None)
    if not isinstance(name, str):
        return None
    try:
        encoding_name_for_model(name)
    except ValueError:
        return None
    return name


def _model_backend(model: BaseLanguageModel[Any]) -> tuple[_Backend, bool]:
    name = f"model:{type(model).__name__}"
    openai_name = _openai_model_name(model)
    if openai_name is not None and model.custom_get_token_ids is None:
        # Its own counting would fetch the encoding over the network; ours has it bundled.
        return _named_backend(f"tiktoken:{openai_name}"), False
    offline = _offline_spec_for_model(model)
    if offline is not None:
        return _backend_for(offline)
    if type(model).__name__ == "AzureChatOpenAI" and model.custom_get_token_ids is None:
        # An Azure deployment serves an OpenAI model its name does not tell: every current
        # one counts with the default encoding (its own counting needs the model's name).
        return _named_backend("tiktoken"), False
    if _is_langchain_openai(model) and model.custom_get_token_ids is None:
        # Another server behind ChatOpenAI (vLLM, Ollama...): no OpenAI encoding is its
        # tokenizer, and ChatOpenAI's own counting would download one.
        return _ApproximateBackend(name=f"{name} (approximate)"), False
    if not _model_counts_tokens_itself(model):
        return _ApproximateBackend(name=f"{name} (approximate)"), False
    try:
        overhead = _as_token_count(model.get_num_tokens_from_messages([]), name)
    except Exception as error:
        _warn_model_fallback(name, error)
        return _ApproximateBackend(name=f"{name} (approximate fallback)"), False
    return _ListCallableBackend(model.get_num_tokens_from_messages, name, overhead), True


def _offline_spec_for_model(model: BaseLanguageModel[Any]) -> TokenCounterSpec | None:
    """The offline tokenizer a model is counted with: the local tokenizer it holds
    (ChatHuggingFace's), else mistral_common where its name is a Mistral model's (a
    langchain-mistralai model, or Mistral weights served elsewhere); None where neither."""
    tokenizer = getattr(model, "tokenizer", None)
    if tokenizer is not None and is_tokenizer(tokenizer):
        return typing.cast(TokenCounterSpec, tokenizer)
    names = (getattr(model, key, None) for key in ("model_id", "model", "model_name"))
    name = next((found for found in names if isinstance(found, str) and found), None)
    if name is None or not is_mistral_model(name):
        return None
    try:
        import mistral_common  # noqa: F401
    except ImportError:
        warnings.warn(
            f"{type(model).__name__}({name!r}) is counted approximately: install mistral_common "
            '(pip install "langchain-context-governance[mistral]") to count as Mistral does',
            TokenCounterFallbackWarning,
            stacklevel=5,
        )
        return None
    return f"mistral:{name}"


def _model_counts_tokens_itself(model: BaseLanguageModel[Any]) -> bool:
    """False when counting would reach langchain-core's default, which needs transformers."""
    if model.custom_get_token_ids is not None:
        return True
    model_class = type(model)
    return any(
        getattr(model_class, method) is not getattr(BaseLanguageModel, method)
        for method in ("get_num_tokens_from_messages", "get_num_tokens", "get_token_ids")
    )
