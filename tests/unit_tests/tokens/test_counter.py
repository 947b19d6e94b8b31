"""Token counters: what each spec counts, the per-message cache, and the offline fallbacks."""

from __future__ import annotations

import dataclasses
import threading
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.tools import tool

from langchain_context_governance import ContextGovernor
from langchain_context_governance.tokens import counter as tokens
from langchain_context_governance.tokens import encodings
from langchain_context_governance.tokens.counter import (
    TokenCounterFallbackWarning,
    get_token_counter,
)
from langchain_context_governance.tokens.encodings import (
    encoding_name_for_model,
    get_encoding,
    write_tiktoken_cache,
)

PLAIN_CONVERSATIONS: list[list[BaseMessage]] = [
    [HumanMessage("hello")],
    [SystemMessage("You are a careful assistant."), HumanMessage("What is 2 + 2?")],
    [
        SystemMessage("Answer in French.", name="rules"),
        HumanMessage("Good morning, how are you?", name="alice"),
        AIMessage("Bonjour ! Je vais bien, merci."),
        HumanMessage("And the weather? Ünïcödé, emoji 😀, 中文 text.", name="bob"),
    ],
    [
        HumanMessage("line one\nline two\n\n  indented\ttabbed"),
        AIMessage("Here is code:\n```python\nprint('hi')\n```", name="helper"),
        HumanMessage(""),
        AIMessage("   "),
        HumanMessage("a" * 3000 + " then some ordinary words" * 20),
    ],
]


@pytest.fixture(scope="module")
def o200k() -> Any:
    return get_encoding("o200k_base")


def refuse_downloads(monkeypatch: pytest.MonkeyPatch) -> None:
    def read_local_file_only(blobpath: str) -> bytes:
        if "://" in blobpath:
            raise AssertionError(f"tried to download {blobpath}")
        with open(blobpath, "rb") as file:
            return file.read()

    monkeypatch.setattr("tiktoken.load.read_file", read_local_file_only)


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> Any:
    """An empty tiktoken cache directory, and any download attempt fails the test."""
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    refuse_downloads(monkeypatch)
    return tmp_path


@pytest.fixture
def tiktoken_cache_of_bundled_files(no_network: Any) -> Any:
    """tiktoken itself (and so ChatOpenAI) loads both encodings offline, from our files."""
    write_tiktoken_cache(no_network)
    return no_network


class CallLog:
    """A list token counter (10 per message, 2 per request) that records its calls."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self._lock = threading.Lock()

    def __call__(self, messages: list[BaseMessage]) -> int:
        with self._lock:
            self.calls.append([str(message.content) for message in messages])
        return 2 + 10 * len(messages)


class CountingChatModel(FakeListChatModel):
    """A model whose class counts tokens itself: 4 per request, 1 per content char."""

    def get_num_tokens_from_messages(
        self, messages: list[BaseMessage], tools: Sequence[Any] | None = None
    ) -> int:
        return 4 + sum(len(str(message.content)) for message in messages)


class OfflineFailingChatModel(FakeListChatModel):
    """A model whose counting raises for messages, like a tokenizer it cannot download."""

    def get_num_tokens_from_messages(
        self, messages: list[BaseMessage], tools: Sequence[Any] | None = None
    ) -> int:
        if messages:
            raise OSError("cannot download the tokenizer")
        return 3


def growing_history(length: int) -> Iterator[list[BaseMessage]]:
    history: list[BaseMessage] = []
    for index in range(length):
        history = [*history, HumanMessage(f"message {index}")]
        yield history


# --- approximate -----------------------------------------------------------------------


def test_approximate_counts_like_langchain_per_message() -> None:
    counter = get_token_counter("approximate")
    messages = PLAIN_CONVERSATIONS[2]
    assert counter.name == "approximate"
    assert counter.request_overhead == 0
    for message in messages:
        assert counter.count_message(message) == count_tokens_approximately([message])
    assert counter.count_messages(messages) == count_tokens_approximately(messages)


# --- tiktoken --------------------------------------------------------------------------

OPENAI_MODELS = ["gpt-4", "gpt-3.5-turbo", "gpt-4o", "gpt-4.1-mini", "gpt-5", "o3-mini"]


@pytest.mark.parametrize("model_name", OPENAI_MODELS)
@pytest.mark.parametrize("messages", PLAIN_CONVERSATIONS)
def test_tiktoken_equals_chat_openai_on_plain_text(
    messages: list[BaseMessage], model_name: str, tiktoken_cache_of_bundled_files: Any
) -> None:
    langchain_openai = pytest.importorskip("langchain_openai")
    model = langchain_openai.ChatOpenAI(model=model_name, api_key="sk-test-not-used")
    counter = get_token_counter(f"tiktoken:{model_name}")
    assert counter.name == f"tiktoken:{encoding_name_for_model(model_name)}"
    assert counter.request_overhead == 3
    assert counter.count_messages(messages) == model.get_num_tokens_from_messages(messages)


@pytest.mark.parametrize(
    ("model_name", "encoding_name"),
    [
        ("gpt-4o", "o200k_base"),
        ("gpt-4o-mini-2024-07-18", "o200k_base"),
        ("gpt-4.1", "o200k_base"),
        ("gpt-4.5-preview", "o200k_base"),
        ("gpt-5-mini", "o200k_base"),
        ("o1", "o200k_base"),
        ("o3-mini", "o200k_base"),
        ("o4-mini", "o200k_base"),
        ("openai:gpt-4o", "o200k_base"),
        ("ft:gpt-4o-mini:org::abc", "o200k_base"),
        ("gpt-4", "cl100k_base"),
        ("gpt-4-turbo", "cl100k_base"),
        ("gpt-3.5-turbo-0125", "cl100k_base"),
        ("cl100k_base", "cl100k_base"),
    ],
)
def test_encoding_is_picked_from_the_model_name(model_name: str, encoding_name: str) -> None:
    assert encoding_name_for_model(model_name) == encoding_name
    counter = get_token_counter(f"tiktoken:{model_name}")
    assert counter.name == f"tiktoken:{encoding_name}"


def test_tiktoken_alone_counts_with_o200k(o200k: Any) -> None:
    counter = get_token_counter("tiktoken")
    assert counter.name == "tiktoken:o200k_base"
    text = "the encodings differ: ünïcödé 中文 and emoji 😀"
    assert counter.count_message(HumanMessage(text)) == 3 + 1 + len(o200k.encode_ordinary(text))
    cl100k = get_token_counter("tiktoken:gpt-4").count_message(HumanMessage(text))
    assert cl100k == 3 + 1 + len(get_encoding("cl100k_base").encode_ordinary(text))
    assert cl100k != counter.count_message(HumanMessage(text))


def test_tiktoken_for_an_unknown_model_names_the_setting() -> None:
    with pytest.raises(ValueError, match="token_counter='tiktoken:claude-3-5-sonnet'"):
        get_token_counter("tiktoken:claude-3-5-sonnet")


@pytest.mark.parametrize("encoding_name", ["o200k_base", "cl100k_base"])
def test_bundled_encodings_equal_tiktokens_own(
    encoding_name: str, tiktoken_cache_of_bundled_files: Any
) -> None:
    from tiktoken_ext import openai_public

    theirs = getattr(openai_public, encoding_name)()
    ours = get_encoding(encoding_name)
    assert ours._pat_str == theirs["pat_str"]
    assert ours._special_tokens == theirs["special_tokens"]
    assert ours._mergeable_ranks == theirs["mergeable_ranks"]


def test_loading_a_bundled_encoding_writes_nothing(no_network: Any) -> None:
    encodings._load.cache_clear()
    try:
        assert get_encoding("cl100k_base").encode_ordinary("hello world") == [15339, 1917]
    finally:
        encodings._load.cache_clear()
    assert list(no_network.iterdir()) == []


def test_a_bundled_file_with_the_wrong_hash_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    bundled = encodings._BUNDLED["cl100k_base"]
    monkeypatch.setitem(
        encodings._BUNDLED, "cl100k_base", dataclasses.replace(bundled, sha256="0" * 64)
    )
    encodings._load.cache_clear()
    try:
        with pytest.raises(ValueError, match="sha256"):
            get_encoding("cl100k_base")
    finally:
        encodings._load.cache_clear()


def test_chat_openai_as_counter_never_downloads(no_network: Any) -> None:
    langchain_openai = pytest.importorskip("langchain_openai")
    model = langchain_openai.ChatOpenAI(model="gpt-4o", api_key="sk-test-not-used")
    model_counter = get_token_counter(model)
    messages = PLAIN_CONVERSATIONS[2]
    assert model_counter.name == "tiktoken:o200k_base"
    assert model_counter.count_messages(messages) == get_token_counter(
        "tiktoken:gpt-4o"
    ).count_messages(messages)


def test_tiktoken_counts_tool_call_names_arguments_and_ids(o200k: Any) -> None:
    counter = get_token_counter("tiktoken")
    encoded = o200k.encode_ordinary
    args = {"pattern": "def main", "path": "src/ünï"}
    plain = AIMessage("Let me look.")
    calling = AIMessage(
        "Let me look.", tool_calls=[{"name": "grep", "args": args, "id": "call_abc123"}]
    )
    assert counter.count_message(calling) == (
        counter.count_message(plain)
        + len(encoded("grep"))
        + len(encoded('{"pattern": "def main", "path": "src/ünï"}'))
    )
    result = ToolMessage("3 matches", tool_call_id="call_abc123")
    # 3 per message, the role "tool", the content and the call id.
    assert counter.count_message(result) == (
        3 + len(encoded("tool")) + len(encoded("3 matches")) + len(encoded("call_abc123"))
    )


def test_tiktoken_counts_an_anthropic_tool_use_block_once(o200k: Any) -> None:
    counter = get_token_counter("tiktoken")
    call = {"name": "grep", "args": {"q": "x"}, "id": "toolu_1"}
    tool_use = {"type": "tool_use", "id": "toolu_1", "name": "grep", "input": {"q": "x"}}
    text = {"type": "text", "text": "Searching."}
    parsed = AIMessage([text, tool_use], tool_calls=[call])
    unparsed = AIMessage([text, tool_use])
    from_tool_calls = AIMessage([text], tool_calls=[call])
    assert counter.count_message(parsed) == counter.count_message(from_tool_calls)
    assert counter.count_message(unparsed) == counter.count_message(from_tool_calls)
    assert counter.count_message(parsed) > counter.count_message(AIMessage([text]))


def test_tiktoken_counts_text_blocks_and_images_without_fetching(o200k: Any) -> None:
    counter = get_token_counter("tiktoken")
    as_text = HumanMessage("describe this picture")
    as_block = HumanMessage([{"type": "text", "text": "describe this picture"}])
    assert counter.count_message(as_block) == counter.count_message(as_text)
    low = HumanMessage(
        [
            {"type": "text", "text": "describe this picture"},
            {
                "type": "image_url",
                "image_url": {"url": "https://example.invalid/a.png", "detail": "low"},
            },
        ]
    )
    unsized = HumanMessage(
        [
            {"type": "text", "text": "describe this picture"},
            {"type": "image", "url": "https://example.invalid/a.png"},
        ]
    )
    base = counter.count_message(as_text)
    assert counter.count_message(low) == base + tokens.LOW_DETAIL_IMAGE_TOKENS
    assert counter.count_message(unsized) == base + tokens.UNMEASURED_MEDIA_TOKENS


def test_tiktoken_counts_special_token_text_as_plain_text(o200k: Any) -> None:
    counter = get_token_counter("tiktoken")
    message = HumanMessage("before <|endoftext|> after")
    expected = 3 + 1 + len(o200k.encode_ordinary("before <|endoftext|> after"))
    assert counter.count_message(message) == expected


def test_encoding_is_loaded_once_across_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    reads: list[str] = []
    real_read = encodings._bundled_bytes

    def read(bundled: Any) -> bytes:
        reads.append(bundled.name)
        return real_read(bundled)

    monkeypatch.setattr(encodings, "_bundled_bytes", read)
    encodings._load.cache_clear()
    barrier = threading.Barrier(8)
    results: list[Any] = []

    def load() -> None:
        barrier.wait()
        results.append(get_encoding("cl100k_base"))

    threads = [threading.Thread(target=load) for _ in range(8)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        encodings._load.cache_clear()
    assert reads == ["cl100k_base"]
    assert all(result is results[0] for result in results)


# --- settings --------------------------------------------------------------------------


def test_unknown_name_raises_value_error_naming_the_setting() -> None:
    with pytest.raises(ValueError, match="token_counter") as raised:
        get_token_counter("exact")
    assert "'approximate'" in str(raised.value)
    assert "'tiktoken'" in str(raised.value)
    assert "'exact'" in str(raised.value)


def test_unsupported_type_raises_type_error_naming_the_setting() -> None:
    with pytest.raises(TypeError, match="token_counter"):
        get_token_counter(42)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [0, -5, True, 2.5])
def test_max_cache_entries_is_validated(value: Any) -> None:
    with pytest.raises(ValueError, match="max_cache_entries"):
        get_token_counter("approximate", max_cache_entries=value)


# --- callables -------------------------------------------------------------------------


def test_callable_costs_its_difference_from_an_empty_request() -> None:
    log = CallLog()
    counter = get_token_counter(log)
    assert counter.name == "callable"
    assert counter.request_overhead == 2
    assert counter.count_message(HumanMessage("a")) == 10
    assert counter.count_messages([HumanMessage("b"), HumanMessage("c")]) == 22


def test_callable_is_called_once_per_new_message_on_a_growing_history() -> None:
    log = CallLog()
    counter = get_token_counter(log)
    for history in growing_history(6):
        assert counter.count_messages(history) == 2 + 10 * len(history)
        assert counter.count_messages(history) == 2 + 10 * len(history)
    assert log.calls == [[]] + [[f"message {index}"] for index in range(6)]


def test_callable_failing_on_an_empty_list_has_no_overhead() -> None:
    def strict_counter(messages: list[BaseMessage]) -> int:
        if not messages:
            raise ValueError("nothing to count")
        return 7 * len(messages)

    counter = get_token_counter(strict_counter)
    assert counter.request_overhead == 0
    assert counter.count_messages([HumanMessage("a"), HumanMessage("b")]) == 14


def test_callable_over_one_message_is_detected_from_its_annotation() -> None:
    seen: list[BaseMessage] = []

    def per_message(message: BaseMessage) -> int:
        seen.append(message)
        return len(str(message.content))

    counter = get_token_counter(per_message)
    first, second = HumanMessage("four"), HumanMessage("sixsix")
    assert counter.request_overhead == 0
    assert counter.count_messages([first, second]) == 10
    assert seen == [first, second]


@pytest.mark.parametrize(
    ("result", "error", "words"),
    [
        (1.5, TypeError, "got float 1.5 (round it with math.ceil)"),
        (2.0, TypeError, "got float 2.0"),
        ("many", TypeError, "got str 'many'"),
        (None, TypeError, "got NoneType None"),
        (True, TypeError, "got bool True"),
        (-3, ValueError, "must return a non-negative int, got -3"),
    ],
)
def test_a_counter_result_that_is_no_token_count_is_an_error_naming_the_counter(
    result: Any, error: type[Exception], words: str
) -> None:
    def per_message(message: BaseMessage) -> Any:
        return result

    counter = get_token_counter(per_message)
    with pytest.raises(error, match="token_counter \\(callable\\)") as raised:
        counter.count_message(HumanMessage("x"))
    assert words in str(raised.value)


def test_a_list_counter_negative_on_the_empty_request_is_an_error() -> None:
    with pytest.raises(ValueError, match="token_counter \\(callable\\) must return a non-negative"):
        get_token_counter(lambda messages: 5 * len(messages) - 2)


def test_a_list_counter_returning_numpy_like_integers_counts() -> None:
    class Tokens(int):
        """An int subclass, as numpy or tokenizer libraries return."""

    counter = get_token_counter(lambda messages: Tokens(2 + 3 * len(messages)))
    assert counter.count_messages([HumanMessage("a")]) == 5


# --- models ----------------------------------------------------------------------------


def test_model_that_counts_tokens_itself_is_used() -> None:
    counter = get_token_counter(CountingChatModel(responses=["ok"]))
    assert counter.name == "model:CountingChatModel"
    assert counter.request_overhead == 4
    assert counter.count_messages([HumanMessage("abc"), AIMessage("de")]) == 9


def test_model_without_its_own_counting_counts_approximately() -> None:
    counter = get_token_counter(FakeListChatModel(responses=["ok"]))
    messages = PLAIN_CONVERSATIONS[1]
    assert counter.name == "model:FakeListChatModel (approximate)"
    assert counter.count_messages(messages) == count_tokens_approximately(messages)


def test_model_whose_counting_fails_warns_once_and_counts_approximately() -> None:
    counter = get_token_counter(OfflineFailingChatModel(responses=["ok"]))
    assert counter.request_overhead == 3
    messages = PLAIN_CONVERSATIONS[2]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = counter.count_messages(messages)
        second = counter.count_messages([*messages, HumanMessage("more")])
        tools_tokens = counter.count_tools([{"type": "function", "function": {"name": "f"}}])
    fallback_warnings = [w for w in caught if issubclass(w.category, TokenCounterFallbackWarning)]
    assert len(fallback_warnings) == 1
    assert "cannot download the tokenizer" in str(fallback_warnings[0].message)
    assert counter.name == "model:OfflineFailingChatModel (approximate fallback)"
    assert counter.request_overhead == 0
    assert first == count_tokens_approximately(messages)
    assert second == count_tokens_approximately([*messages, HumanMessage("more")])
    assert tools_tokens > 0


def test_model_failing_on_an_empty_request_falls_back_when_built() -> None:
    class AlwaysFailing(FakeListChatModel):
        def get_num_tokens_from_messages(
            self, messages: list[BaseMessage], tools: Sequence[Any] | None = None
        ) -> int:
            raise RuntimeError("no tokenizer offline")

    with pytest.warns(TokenCounterFallbackWarning, match="no tokenizer offline"):
        counter = get_token_counter(AlwaysFailing(responses=["ok"]))
    assert counter.name == "model:AlwaysFailing (approximate fallback)"
    assert counter.count_message(HumanMessage("hi")) == count_tokens_approximately(
        [HumanMessage("hi")]
    )


def test_counts_from_a_replaced_backend_do_not_enter_the_cache() -> None:
    measuring = threading.Event()
    release = threading.Event()

    class SlowThenFailingModel(FakeListChatModel):
        def get_num_tokens_from_messages(
            self, messages: list[BaseMessage], tools: Sequence[Any] | None = None
        ) -> int:
            if any(message.content == "fail" for message in messages):
                raise OSError("tokenizer gone")
            if messages:
                measuring.set()
                release.wait(timeout=30)
            return 1000 * len(messages)

    counter = get_token_counter(SlowThenFailingModel(responses=["ok"]))
    slow = HumanMessage("slow")
    worker = threading.Thread(target=counter.count_message, args=(slow,))
    worker.start()
    assert measuring.wait(timeout=30)
    with pytest.warns(TokenCounterFallbackWarning):
        counter.count_message(HumanMessage("fail"))
    release.set()
    worker.join()
    assert counter.count_message(slow) == count_tokens_approximately([slow])


# --- the cache -------------------------------------------------------------------------


def test_unchanged_messages_are_served_from_the_cache() -> None:
    counter = get_token_counter("approximate")
    messages = PLAIN_CONVERSATIONS[2]
    total = counter.count_messages(messages)
    assert counter.count_messages(messages) == total
    stats = counter.cache_stats()
    assert (stats.misses, stats.hits, stats.entries) == (4, 4, 4)
    assert stats.max_entries == 100_000
    assert stats.approx_bytes > 0


def test_an_edited_copy_is_recounted() -> None:
    log = CallLog()
    counter = get_token_counter(log)
    original = HumanMessage("short")
    counter.count_message(original)
    edited = original.model_copy(update={"content": "a much longer content now"})
    counter.count_message(edited)
    counter.count_message(original)
    assert log.calls[1:] == [["short"], ["a much longer content now"]]


@pytest.mark.parametrize(
    "edit",
    [
        lambda message: setattr(message, "content", "replaced"),
        lambda message: message.content.append({"type": "text", "text": "more"}),
        lambda message: setattr(message, "name", "renamed"),
        lambda message: message.tool_calls.append({"name": "g", "args": {}, "id": "c2"}),
        lambda message: setattr(message, "tool_calls", []),
    ],
    ids=[
        "content-reassigned",
        "content-appended",
        "name",
        "tool-call-appended",
        "tool-calls-reset",
    ],
)
def test_in_place_edits_are_recounted(edit: Any) -> None:
    counter = get_token_counter("approximate")
    message = AIMessage(
        [{"type": "text", "text": "calling"}],
        tool_calls=[{"name": "f", "args": {"q": 1}, "id": "c1"}],
    )
    counter.count_message(message)
    edit(message)
    counter.count_message(message)
    assert counter.cache_stats().misses == 2


def test_counting_leaves_messages_untouched(mutation_guard: Any) -> None:
    messages = mutation_guard.watch(
        [
            SystemMessage("rules"),
            AIMessage("", tool_calls=[{"name": "f", "args": {"q": 1}, "id": "c1"}]),
            ToolMessage("done", tool_call_id="c1"),
        ]
    )
    for spec in ("approximate", "tiktoken", CallLog()):
        get_token_counter(spec).count_messages(messages)


def test_cache_keeps_at_most_max_entries_and_evicts_the_least_recently_used() -> None:
    log = CallLog()
    counter = get_token_counter(log, max_cache_entries=3)
    first, second, third, fourth = (HumanMessage(f"m{index}") for index in range(4))
    for message in (first, second, third, first):
        counter.count_message(message)
    counter.count_message(fourth)
    assert counter.cache_stats().entries == 3
    log.calls.clear()
    for message in (first, third, fourth):
        counter.count_message(message)
    assert log.calls == []
    counter.count_message(second)
    assert log.calls == [["m1"]]
    assert counter.cache_stats().entries == 3


def test_bound_holds_for_long_histories() -> None:
    counter = get_token_counter("approximate", max_cache_entries=50)
    history = [HumanMessage(f"message {index}") for index in range(500)]
    total = counter.count_messages(history)
    assert total == count_tokens_approximately(history)
    assert counter.count_messages(history) == total
    assert counter.cache_stats().entries <= 50


def test_counter_is_safe_to_share_across_threads() -> None:
    log = CallLog()
    counter = get_token_counter(log, max_cache_entries=64)
    shared = [HumanMessage(f"shared {index}") for index in range(40)]
    errors: list[str] = []
    barrier = threading.Barrier(6)

    def work(worker: int) -> None:
        own = [HumanMessage(f"worker {worker} message {index}") for index in range(40)]
        barrier.wait()
        for round_number in range(30):
            history = shared + own[: round_number + 1]
            if counter.count_messages(history) != 2 + 10 * len(history):
                errors.append(f"worker {worker} round {round_number}")

    threads = [threading.Thread(target=work, args=(worker,)) for worker in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    stats = counter.cache_stats()
    assert errors == []
    assert stats.entries <= 64
    assert stats.hits + stats.misses == 6 * sum(40 + n + 1 for n in range(30))


# --- tools -----------------------------------------------------------------------------


@tool
def search_files(pattern: str, path: str = ".") -> str:
    """Search files under a path for a regular expression."""
    return f"{pattern} in {path}"


def read_file(path: str) -> str:
    """Read a text file."""
    return path


def test_tools_are_counted_and_cached() -> None:
    log = CallLog()
    counter = get_token_counter(log)
    tools_list = [search_files, read_file, {"type": "function", "function": {"name": "noop"}}]
    assert counter.count_tools(tools_list) == 10
    assert counter.count_tools(list(tools_list)) == 10
    assert len(log.calls) == 2  # the empty request, then the tools once
    assert "search_files" in log.calls[1][0]
    assert "Read a text file." in log.calls[1][0]
    assert counter.cache_stats().entries == 0


@pytest.mark.parametrize("spec", ["approximate", "tiktoken"])
def test_tool_count_grows_with_the_tools(spec: str) -> None:
    counter = get_token_counter(spec)
    assert counter.count_tools(None) == 0
    assert counter.count_tools([]) == 0
    one = counter.count_tools([search_files])
    assert one > 0
    assert counter.count_tools([search_files, read_file]) > one


def test_a_tool_that_cannot_be_converted_names_its_index() -> None:
    counter = get_token_counter("approximate")
    with pytest.raises(ValueError, match=r"tools\[1\]"):
        counter.count_tools([search_files, 42])


# --- what cannot be sent whole ---------------------------------------------------------


def test_a_message_with_more_text_than_the_limit_is_counted_approximately() -> None:
    counted: list[int] = []

    def per_message(message: BaseMessage) -> int:
        counted.append(len(str(message.content)))
        return len(str(message.content))

    counter = tokens.get_token_counter(per_message, exact_up_to_chars=1_000)
    huge = ToolMessage("x" * 50_000, tool_call_id="c1")
    assert counter.count_message(huge) == count_tokens_approximately([huge])
    assert counter.count_message(HumanMessage("y" * 1_000)) == 1_000
    assert counted == [1_000]


def test_the_governor_never_encodes_a_result_it_must_cut() -> None:
    encoded: list[int] = []

    def per_message(message: BaseMessage) -> int:
        encoded.append(len(str(message.content)))
        return count_tokens_approximately([message])

    governor = ContextGovernor(context_window_tokens=8_000, token_counter=per_message)
    call = {"name": "cat", "args": {}, "id": "c1", "type": "tool_call"}
    history = [
        HumanMessage("dump the blob"),
        AIMessage("", tool_calls=[call]),
        ToolMessage("QUJD" * 250_000, tool_call_id="c1"),
    ]
    result = governor.govern(history)
    assert result.report.within_budget
    assert max(encoded) < 8_000 * 4
    assert len(str(result.messages[-1].content)) < 8_000 * 4


def test_exact_up_to_chars_is_validated() -> None:
    with pytest.raises(ValueError, match="exact_up_to_chars must be >= 1"):
        tokens.get_token_counter("approximate", exact_up_to_chars=0)


def test_langchain_openai_models_without_a_known_openai_name_count_offline_without_a_warning():
    from langchain_openai import AzureChatOpenAI, ChatOpenAI

    azure = AzureChatOpenAI(
        azure_deployment="my-deployment",
        api_version="2024-10-21",
        azure_endpoint="https://example.invalid",
        api_key="unused",
    )
    served_elsewhere = ChatOpenAI(
        model="llama3.1:8b", base_url="http://127.0.0.1:9/v1", api_key="unused"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # An Azure deployment is an OpenAI model: the default encoding.
        assert get_token_counter(azure).name == "tiktoken:o200k_base"
        # Another server's model has its own tokenizer: an estimate, never a download.
        assert get_token_counter(served_elsewhere).name == "model:ChatOpenAI (approximate)"


def test_tiktoken_counters_are_exact_and_the_approximation_is_not() -> None:
    """The docstring of `exact` says tiktoken for an OpenAI model is exact."""
    assert get_token_counter("tiktoken:gpt-4o").exact
    assert get_token_counter("tiktoken").exact
    assert not get_token_counter("approximate").exact


def counting_refused(*args: Any, **kwargs: Any) -> int:
    raise AssertionError("the model's own counting (a network call) was used")


def test_a_subclass_of_chat_anthropic_counts_as_chat_anthropic_never_through_its_api(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A team's subclass gets the profile of ChatAnthropic, and so its offline counting."""
    langchain_anthropic = pytest.importorskip("langchain_anthropic")
    from langchain_context_governance import ContextGovernor

    team_model = type("TeamClaude", (langchain_anthropic.ChatAnthropic,), {"__module__": "team"})
    monkeypatch.setattr(
        langchain_anthropic.ChatAnthropic, "get_num_tokens_from_messages", counting_refused
    )
    governor = ContextGovernor.from_model(team_model(model="claude-haiku-4-5", api_key="unused"))
    assert governor.provider == "anthropic"
    assert governor.counter.name == "approximate"
    assert governor.count_tokens([HumanMessage("hello")]) > 0


def test_another_integration_on_chat_openai_s_class_counts_approximately_offline(
    no_network: Any,
) -> None:
    """ChatDeepSeek runs langchain-openai's counting, which would download an encoding."""
    langchain_openai = pytest.importorskip("langchain_openai")
    from langchain_context_governance import ContextGovernor

    deepseek = type(
        "ChatDeepSeek", (langchain_openai.ChatOpenAI,), {"__module__": "langchain_deepseek.chat"}
    )
    model = deepseek(model="deepseek-chat", api_key="unused", base_url="http://127.0.0.1:9/v1")
    governor = ContextGovernor.from_model(model, context_window_tokens=64_000)
    assert governor.provider == "strict"
    assert governor.counter.name == "approximate"
    assert governor.count_tokens([HumanMessage("hello")]) > 0
