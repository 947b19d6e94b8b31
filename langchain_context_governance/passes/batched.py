"""Compaction and snipping in rare, large steps, so the provider's prompt cache stays warm.

Every edit to a message throws away the provider's prompt cache from that message on.
The seed rules (keep the newest N results whole, slide the window by one iteration per
call) edit a message near the end of the prompt on almost every call. This policy edits
rarely and in batches instead:

- nothing is compacted while the request stays under the high watermark;
- when it crosses the high watermark, the oldest compactable results are compacted,
  oldest first, until the request is under the low watermark; a result once compacted
  stays compacted;
- when compaction alone cannot bring it under the high watermark, the conversation is
  cut in one step, in whole groups, down to the low watermark, and that cut point is
  kept until the high watermark is crossed again.

The decisions are a deterministic function of the history and the settings: the
history is replayed call point by call point (the model was called before every
assistant message, and is called now at the end), so the same history always yields
the same request and a resumed thread rebuilds the same prefix. `BatchedWindow` keeps
the replay state so that a growing history only replays what is new.
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.messages.utils import MessageLikeRepresentation

from langchain_context_governance._messages import (
    as_message_list,
    content_text_length,
    iter_declared_tool_calls,
    message_fingerprint,
)
from langchain_context_governance.passes._dual_use import runnable_when_called_without_messages
from langchain_context_governance.passes.microcompact import (
    DEFAULT_COMPACTABLE_TOOLS,
    compacted_placeholder,
    validate_microcompact_settings,
)
from langchain_context_governance.passes.snip import group_start, validate_max_tokens
from langchain_context_governance.tokens import (
    MessageTokenCounter,
    TokenCounterSpec,
    get_token_counter,
)

# Chosen with benchmarks/ (300-iteration tool loop, 30k budget): edit nothing until the
# request passes 95% of the budget, then compact or cut down to 20%. A late trigger keeps
# requests large, so each call's new tokens are a small share of it; a deep batch makes
# batches rare and leaves mostly placeholders after the edit point, which is what a batch
# costs in cache misses. 0.9/0.5 gave lower hit ratios and higher cost on every seed tried.
DEFAULT_HIGH_WATERMARK = 0.95
DEFAULT_LOW_WATERMARK = 0.2


def validate_watermarks(*, high_watermark: float, low_watermark: float) -> None:
    if not 0 < high_watermark <= 1:
        raise ValueError(f"high_watermark must be in (0, 1], got {high_watermark}")
    if not 0 < low_watermark < high_watermark:
        raise ValueError(
            f"low_watermark must be in (0, high_watermark={high_watermark}), got {low_watermark}"
        )


@dataclass
class _Replay:
    """What the replay learned about the messages so far (append-only, by position)."""

    tokens: array[int] = field(default_factory=lambda: array("q"))
    prints: array[int] = field(default_factory=lambda: array("q"))
    system_indices: list[int] = field(default_factory=list)
    compactable: list[int] = field(default_factory=list)
    compactable_names: dict[int, str] = field(default_factory=dict)
    compacted_tokens: dict[int, int] = field(default_factory=dict)
    tool_names: dict[str, str] = field(default_factory=dict)

    def forget_from(self, index: int, tool_names: int) -> None:
        """Drop what was learned from position `index` on, and tool names past the first ones."""
        del self.tokens[index:]
        del self.prints[index:]
        del self.system_indices[bisect.bisect_left(self.system_indices, index) :]
        del self.compactable[bisect.bisect_left(self.compactable, index) :]
        for learned in (self.compactable_names, self.compacted_tokens):
            for position in [position for position in learned if position >= index]:
                del learned[position]
        for call_id in list(self.tool_names)[tool_names:]:
            del self.tool_names[call_id]


@dataclass
class _Window:
    """The decisions so far: where the request starts and how far compaction got."""

    cut: int = 0
    compacted_count: int = 0
    window_tokens: int = 0
    system_tokens: int = 0
    raw_tokens: int = 0
    pinned: int | None = None
    last_user_before_cut: int | None = None


@dataclass
class WindowPlan:
    """The request the policy chose for the current call."""

    messages: list[BaseMessage]
    compacted: int
    removed: int
    tokens_before: int
    tokens_after: int
    # Leading messages (and their tokens, with the tool definitions) identical to the
    # previous request of this conversation: what a provider's prefix cache can serve.
    # None on the first call the governor sees of a conversation.
    unchanged_prefix_messages: int | None = None
    unchanged_prefix_tokens: int | None = None


# Marks a compacted result in a request's fingerprints.
_COMPACTED = 0x5F3759DF


class BatchedWindow:
    """Replay state of one growing history under the batched policy.

    `plan(history, final=k)` returns the request for a call on `history`, whose first
    `k` messages are the same as on every later call: those are replayed once and kept,
    the rest is replayed for this call only. Positions, counts and fingerprints are
    kept, never the messages themselves. `reset()` forgets the history.
    """

    def __init__(
        self,
        *,
        max_tokens: int,
        counter: MessageTokenCounter,
        tools_tokens: int = 0,
        high_watermark: float = DEFAULT_HIGH_WATERMARK,
        low_watermark: float = DEFAULT_LOW_WATERMARK,
        keep_recent: int = 10,
        min_chars: int = 500,
        compactable_tools: Collection[str] = DEFAULT_COMPACTABLE_TOOLS,
    ) -> None:
        validate_max_tokens(max_tokens)
        validate_watermarks(high_watermark=high_watermark, low_watermark=low_watermark)
        validate_microcompact_settings(keep_recent=keep_recent, min_chars=min_chars)
        self._counter = counter
        self._fixed = counter.request_overhead + tools_tokens
        self._high = int(max_tokens * high_watermark)
        self._low = int(max_tokens * low_watermark)
        self._keep_recent = keep_recent
        self._min_chars = min_chars
        self._compactable_tools = compactable_tools
        self.reset()

    def reset(self) -> None:
        """Forget the history: the next plan replays its history from the start."""
        self._known = 0
        self._last_request: list[int] | None = None
        self._replay = _Replay()
        self._window = _Window()

    def plan(self, history: Sequence[BaseMessage], *, final: int | None = None) -> WindowPlan:
        """The request for a model call on `history` (the full, repaired history).

        The first `final` messages (all by default) must be those of every later call;
        the history read so far must be a prefix of them (else call `reset()` first).
        """
        final = len(history) if final is None else final
        for index in range(self._known, final):
            self._add(history, index, self._window)
        self._known = max(self._known, final)
        tool_names = len(self._replay.tool_names)
        window = replace(self._window)
        for index in range(final, len(history)):
            self._add(history, index, window)
        self._step(history, window, end=len(history))
        plan = self._build(history, window)
        self._replay.forget_from(final, tool_names)
        return plan

    def _add(self, history: Sequence[BaseMessage], index: int, window: _Window) -> None:
        message = history[index]
        if isinstance(message, AIMessage):
            self._step(history, window, end=index)
            for call_id, name in iter_declared_tool_calls(message):
                self._replay.tool_names.setdefault(call_id, name)
        tokens = self._counter.count_message(message)
        self._replay.tokens.append(tokens)
        self._replay.prints.append(message_fingerprint(message))
        window.raw_tokens += tokens
        if isinstance(message, SystemMessage):
            self._replay.system_indices.append(index)
            window.system_tokens += tokens
            return
        window.window_tokens += tokens
        if isinstance(message, ToolMessage):
            self._note_compactable(message, index)

    def _note_compactable(self, message: ToolMessage, index: int) -> None:
        name = message.name or self._replay.tool_names.get(message.tool_call_id, "")
        if name not in self._compactable_tools:
            return
        if content_text_length(message.content) < self._min_chars:
            return
        if message.content == compacted_placeholder(name):
            return
        self._replay.compactable.append(index)
        self._replay.compactable_names[index] = name

    def _total(self, window: _Window) -> int:
        pinned = 0 if window.pinned is None else self._replay.tokens[window.pinned]
        return self._fixed + window.system_tokens + pinned + window.window_tokens

    def _step(self, history: Sequence[BaseMessage], window: _Window, *, end: int) -> None:
        """The decisions at one model call on the first `end` messages."""
        if self._total(window) <= self._high:
            return
        self._compact_oldest(history, window, end=end)
        if self._total(window) > self._high:
            self._cut_groups(history, window, end=end)

    def _compaction_limit(self, end: int) -> int:
        """How many of the compactable results before `end` may be compacted."""
        available = bisect.bisect_left(self._replay.compactable, end)
        return max(available - self._keep_recent, 0)

    def _compact_oldest(self, history: Sequence[BaseMessage], window: _Window, *, end: int) -> None:
        limit = self._compaction_limit(end)
        while window.compacted_count < limit and self._total(window) > self._low:
            index = self._replay.compactable[window.compacted_count]
            window.compacted_count += 1
            if index >= window.cut:
                saved = self._replay.tokens[index] - self._compacted_tokens(history, index)
                window.window_tokens -= saved

    def _compacted_tokens(self, history: Sequence[BaseMessage], index: int) -> int:
        known = self._replay.compacted_tokens.get(index)
        if known is None:
            known = self._counter.count_message(self._compacted_copy(history, index))
            self._replay.compacted_tokens[index] = known
        return known

    def _compacted_copy(self, history: Sequence[BaseMessage], index: int) -> ToolMessage:
        original = history[index]
        assert isinstance(original, ToolMessage)
        name = self._replay.compactable_names[index]
        return original.model_copy(update={"content": compacted_placeholder(name)})

    def _cost(self, history: Sequence[BaseMessage], window: _Window, index: int) -> int:
        if self._is_compacted(window, index):
            return self._compacted_tokens(history, index)
        return self._replay.tokens[index]

    def _is_compacted(self, window: _Window, index: int) -> bool:
        if index not in self._replay.compactable_names:
            return False
        rank = bisect.bisect_left(self._replay.compactable, index)
        return rank < window.compacted_count

    def _cut_groups(self, history: Sequence[BaseMessage], window: _Window, *, end: int) -> None:
        """Cut whole groups from the front, down to the low watermark, newest group kept."""
        newest = group_start(history, end)
        while window.cut < newest and self._total(window) > self._low:
            start = window.cut
            stop = _group_end(history, start, end)
            for index in range(start, stop):
                if isinstance(history[index], SystemMessage):
                    continue
                window.window_tokens -= self._cost(history, window, index)
                if isinstance(history[index], HumanMessage):
                    window.last_user_before_cut = index
            window.cut = stop
            window.pinned = self._pin_for(history, window, end=end)

    def _pin_for(self, history: Sequence[BaseMessage], window: _Window, *, end: int) -> int | None:
        """The user message to pin in front of the cut, unless the kept part opens with one."""
        for index in range(window.cut, end):
            if isinstance(history[index], SystemMessage):
                continue
            if isinstance(history[index], HumanMessage):
                return None
            break
        return window.last_user_before_cut

    def _build(self, history: Sequence[BaseMessage], window: _Window) -> WindowPlan:
        end = len(history)
        origins: list[int] = []
        if window.cut > 0:
            origins.extend(index for index in self._replay.system_indices if index < window.cut)
            if window.pinned is not None:
                origins.append(window.pinned)
        origins.extend(range(window.cut, end))
        first_compacted = bisect.bisect_left(self._replay.compactable, window.cut)
        compacted = set(self._replay.compactable[first_compacted : window.compacted_count])
        output = [
            self._compacted_copy(history, index) if index in compacted else history[index]
            for index in origins
        ]
        prints = [
            self._replay.prints[index] ^ _COMPACTED
            if index in compacted
            else self._replay.prints[index]
            for index in origins
        ]
        tokens_after = self._total(window)
        plan = WindowPlan(
            messages=output,
            compacted=len(compacted),
            removed=end - len(output),
            tokens_before=self._fixed + window.raw_tokens,
            tokens_after=tokens_after,
        )
        if self._last_request is not None:
            unchanged = _leading_equal(self._last_request, prints)
            changed_tokens = sum(
                self._cost(history, window, index) for index in origins[unchanged:]
            )
            plan.unchanged_prefix_messages = unchanged
            plan.unchanged_prefix_tokens = tokens_after - changed_tokens
        self._last_request = prints
        return plan


def _leading_equal(previous: list[int], current: list[int]) -> int:
    """How many leading fingerprints of `current` are those of `previous`."""
    count = 0
    for old, new in zip(previous, current, strict=False):
        if old != new:
            break
        count += 1
    return count


def _group_end(messages: Sequence[BaseMessage], start: int, end: int) -> int:
    """End of the group that begins at `start`: a message and the tool results after it."""
    stop = start + 1
    if isinstance(messages[start], (AIMessage, ToolMessage)):
        while stop < end and isinstance(messages[stop], ToolMessage):
            stop += 1
    return stop


@runnable_when_called_without_messages
def compact_in_batches(
    messages: Sequence[MessageLikeRepresentation],
    *,
    max_tokens: int,
    high_watermark: float = DEFAULT_HIGH_WATERMARK,
    low_watermark: float = DEFAULT_LOW_WATERMARK,
    keep_recent: int = 10,
    min_chars: int = 500,
    compactable_tools: Collection[str] = DEFAULT_COMPACTABLE_TOOLS,
    token_counter: TokenCounterSpec = "approximate",
    tools: Sequence[Any] | None = None,
) -> list[BaseMessage]:
    """Compact and cut the history in rare, large steps that keep the prompt cache warm.

    Nothing changes while the request stays under `high_watermark * max_tokens`. Past
    it, the oldest results of `compactable_tools` (at least `min_chars` long, all but
    the newest `keep_recent`) become one-line placeholders, oldest first, until the
    request is under `low_watermark * max_tokens`; where that is not enough, whole
    groups are cut from the front in one step, with the user request pinned in front.
    Each decision is replayed from the history itself, so the same history always
    gives the same request, and a compacted result stays compacted as the history grows.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
        >>> history = [HumanMessage("audit the repo")]
        >>> for n in range(12):
        ...     call = {"name": "read_file", "args": {}, "id": f"c{n}"}
        ...     result = ToolMessage("x" * 2000, tool_call_id=f"c{n}")
        ...     history += [AIMessage("", tool_calls=[call]), result]
        >>> request = compact_in_batches(history, max_tokens=4_000, keep_recent=2)
        >>> sum("omitted" in str(m.content) for m in request)
        8
    """
    counter = get_token_counter(token_counter)
    window = BatchedWindow(
        max_tokens=max_tokens,
        counter=counter,
        tools_tokens=counter.count_tools(tools),
        high_watermark=high_watermark,
        low_watermark=low_watermark,
        keep_recent=keep_recent,
        min_chars=min_chars,
        compactable_tools=compactable_tools,
    )
    return list(window.plan(as_message_list(messages)).messages)
