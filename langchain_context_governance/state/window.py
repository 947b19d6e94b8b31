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
from collections.abc import Callable, Collection, Sequence
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
from langchain_context_governance._reasoning import thinking_tool_loop_start
from langchain_context_governance.passes._budget import validate_max_tokens
from langchain_context_governance.passes._dual_use import runnable_when_called_without_messages
from langchain_context_governance.passes.alternation import merge_turns
from langchain_context_governance.passes.cut_note import (
    attach_cut_note,
    cut_note,
    cut_note_position,
)
from langchain_context_governance.passes.microcompact import (
    DEFAULT_PLACEHOLDER,
    ResultCompaction,
    validate_microcompact_settings,
)
from langchain_context_governance.passes.snip import (
    group_start,
    is_task_candidate,
    pinned_task_copy,
)
from langchain_context_governance.state.made import MadeMessages
from langchain_context_governance.tokens.calibration import (
    UNCALIBRATED,
    Calibration,
    Overflow,
    SharedCalibration,
    overflows_of,
    reported_input_tokens,
)
from langchain_context_governance.tokens.counter import (
    MessageTokenCounter,
    TokenCounterSpec,
    get_token_counter,
)

# Chosen with benchmarks/ (27 real agent runs replayed call by call, and a 300-iteration
# tool loop with a 30k budget over 5 seeds; trade-off table in benchmarks/README.md): edit
# nothing until the request passes 95% of the budget, then compact or cut down to 30%. A
# late trigger keeps requests large, so each call's new tokens are a small share of it; a
# deep batch makes batches rare. 0.3 keeps more of the conversation after a cut than 0.2
# (62% against 61% of the budget filled with original content on the real runs) at the
# same hit ratio; 0.5 cost 0.63x ClearToolUsesEdit on the real runs, over the 0.6 target.
DEFAULT_HIGH_WATERMARK = 0.95
DEFAULT_LOW_WATERMARK = 0.3
# Newest compactable results a batch leaves whole. The batch happens only when the high
# watermark is crossed, and results that arrive after it stay whole until the next one, so
# a small number costs the model little; 3 instead of 10 compacts enough in one batch that
# cuts are rarer: hit ratio 94.3% against 93.4% on the real runs, 96.0% against 94.0% on
# the loop's worst seed, and cost 0.58x against 0.61x ClearToolUsesEdit (low watermark 0.2).
DEFAULT_KEEP_RECENT = 3


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
    # The conversation's first user message (the task), whether it is cut to its share of
    # the budget when pinned, and what pinning it costs.
    task: int | None = None
    task_fits: bool = False
    task_cut: bool = False
    task_tokens: int = 0
    note_tokens: dict[int, int] = field(default_factory=dict)

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
        if self.task is not None and self.task >= index:
            self.task, self.task_fits, self.task_cut, self.task_tokens = None, False, False, 0


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
    task_pinned: bool = False
    # Learned from the sizes the provider reported for the replies so far.
    calibration: Calibration = UNCALIBRATED


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
    # Where the kept part of the history begins, and how many earlier non-system
    # messages the request leaves out (the cut note says so); 0 and 0 before any cut.
    cut: int = 0
    omitted: int = 0
    task_pinned: bool = False
    # The factor the thresholds were compared with (`tokens_after` is uncorrected).
    calibration: Calibration = UNCALIBRATED


# Marks a compacted result in a request's fingerprints.
_COMPACTED = 0x5F3759DF


class BatchedWindow:
    """Replay state of one growing history under the batched policy.

    `plan(history, final=k)` returns the request for a call on `history`, whose first
    `k` messages are the same as on every later call: those are replayed once and kept,
    the rest is replayed for this call only. Positions, counts and fingerprints are
    kept, never the messages themselves (but a task cut to its share). `reset()`
    forgets the history.
    """

    def __init__(
        self,
        *,
        max_tokens: int,
        counter: MessageTokenCounter,
        tools_tokens: int = 0,
        high_watermark: float = DEFAULT_HIGH_WATERMARK,
        low_watermark: float = DEFAULT_LOW_WATERMARK,
        keep_recent: int = DEFAULT_KEEP_RECENT,
        min_chars: int = 500,
        compaction: ResultCompaction | None = None,
        pin_task: bool = True,
        shared_calibration: SharedCalibration | None = None,
    ) -> None:
        """`shared_calibration`: the model's default, used until the history reports a size."""
        validate_max_tokens(max_tokens)
        validate_watermarks(high_watermark=high_watermark, low_watermark=low_watermark)
        validate_microcompact_settings(keep_recent=keep_recent, min_chars=min_chars)
        self._counter = counter
        self._fixed = counter.request_overhead + tools_tokens
        self._high = int(max_tokens * high_watermark)
        self._low = int(max_tokens * low_watermark)
        self._keep_recent = keep_recent
        self._min_chars = min_chars
        self._compaction = compaction if compaction is not None else ResultCompaction()
        self._pin_task = pin_task
        self._max_tokens = max_tokens
        self._shared_calibration = shared_calibration
        self.reset()

    def reset(self) -> None:
        """Forget the history: the next plan replays its history from the start."""
        self._known = 0
        self._last_request: list[int] | None = None
        self._task_copies = MadeMessages()
        self._replay = _Replay()
        self._window = _Window()

    def plan(
        self,
        history: Sequence[BaseMessage],
        *,
        final: int | None = None,
        summary_for: Callable[[int], str | None] | None = None,
        overflows: Sequence[Overflow] = (),
    ) -> WindowPlan:
        """The request for a model call on `history` (the full, repaired history).

        The first `final` messages (all by default) must be those of every later call;
        the history read so far must be a prefix of them (else call `reset()` first).
        Where the request leaves earlier messages out, a note at the cut says how many;
        `summary_for(cut)` (a summary of them, made once per cut by the caller, or None)
        goes into that note. The budget reserves room for the plain note only: a note
        with a summary that would take the request over the high watermark is left out.
        `overflows`: the provider refused this call's request for its length (a retry).
        """
        final = len(history) if final is None else final
        for index in range(self._known, final):
            self._add(history, index, self._window)
        self._known = max(self._known, final)
        tool_names = len(self._replay.tool_names)
        window = replace(self._window)
        for index in range(final, len(history)):
            self._add(history, index, window)
        self._call(history, window, end=len(history), overflows=overflows)
        summary = summary_for(window.cut) if summary_for is not None and window.cut else None
        plan = self._build(history, window, summary=summary)
        self._replay.forget_from(final, tool_names)
        return plan

    @property
    def previous_request(self) -> list[int] | None:
        """Fingerprints of the previous request, for the prefix report (None before one)."""
        return self._last_request

    @previous_request.setter
    def previous_request(self, prints: list[int] | None) -> None:
        self._last_request = prints

    def _add(self, history: Sequence[BaseMessage], index: int, window: _Window) -> None:
        message = history[index]
        if isinstance(message, AIMessage):
            self._call(history, window, end=index, overflows=overflows_of(message))
            self._observe_reported_size(message, window)
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
        if self._replay.task is None and is_task_candidate(message):
            self._note_task(message, index)
        window.window_tokens += tokens
        if isinstance(message, ToolMessage):
            self._note_compactable(message, index)

    def _note_task(self, message: BaseMessage, index: int) -> None:
        """The task pinned after a cut: verbatim where it fits its share, else cut to it."""
        self._replay.task = index
        copy = pinned_task_copy(message, self._max_tokens, self._counter)
        if copy is not None:
            self._replay.task_fits = True
            self._replay.task_cut = copy is not message
            self._replay.task_tokens = self._counter.count_message(copy)

    def _task_message(self, history: Sequence[BaseMessage]) -> BaseMessage:
        assert self._replay.task is not None
        task = self._replay.task
        message = history[task]
        if not self._replay.task_cut:
            return message
        # Cut again from the history's message, kept only while that message lives: the
        # replay keeps no copy of the task.
        copy = self._task_copies.get(0, (task,), history)
        if copy is None:
            copy = pinned_task_copy(message, self._max_tokens, self._counter)
            assert copy is not None
            self._task_copies.put(0, (task,), history, copy)
        return copy

    def _note_compactable(self, message: ToolMessage, index: int) -> None:
        name = message.name or self._replay.tool_names.get(message.tool_call_id, "")
        if not self._compaction.applies_to(name):
            return
        if content_text_length(message.content) < self._min_chars:
            return
        if message.content == self._compaction.placeholder_for(name):
            return
        self._replay.compactable.append(index)
        self._replay.compactable_names[index] = name

    def _task_pinned(self, window: _Window) -> bool:
        return window.task_pinned

    def _omitted(self, window: _Window) -> int:
        """Non-system messages before the cut that the request leaves out."""
        systems = bisect.bisect_left(self._replay.system_indices, window.cut)
        pins = int(self._task_pinned(window)) + int(window.pinned is not None)
        return window.cut - systems - pins

    def _note_tokens(self, omitted: int) -> int:
        if omitted <= 0:
            return 0
        known = self._replay.note_tokens.get(omitted)
        if known is None:
            known = self._counter.count_message(HumanMessage(cut_note(omitted)))
            self._replay.note_tokens[omitted] = known
        return known

    def _total(self, window: _Window, *, note: bool = True) -> int:
        pinned = 0 if window.pinned is None else self._replay.tokens[window.pinned]
        if self._task_pinned(window):
            pinned += self._replay.task_tokens
        if note:
            pinned += self._note_tokens(self._omitted(window))
        return self._fixed + window.system_tokens + pinned + window.window_tokens

    def _calibration(self, window: _Window) -> Calibration:
        """The conversation's own calibration, or the model's default before its first."""
        if window.calibration.observations or self._shared_calibration is None:
            return window.calibration
        return self._shared_calibration.value

    def _corrected_total(self, window: _Window, *, note: bool = True) -> int:
        """The request's tokens as the provider counts them: what thresholds compare."""
        return self._calibration(window).corrected(self._total(window, note=note))

    def _call(
        self,
        history: Sequence[BaseMessage],
        window: _Window,
        *,
        end: int,
        overflows: Sequence[Overflow] = (),
    ) -> None:
        """The decisions at one model call, and again after each refusal for length."""
        self._step(history, window, end=end)
        for overflow in overflows:
            calibration = self._calibration(window)
            window.calibration = calibration.observe_overflow(overflow, budget=self._max_tokens)
            self._step(history, window, end=end)

    def _observe_reported_size(self, message: AIMessage, window: _Window) -> None:
        """Learn from the provider's count of the request that produced `message`.

        Skipped where the estimate is over the budget: the last resort then shortened
        the request, so the estimate is not of what was sent.
        """
        reported = reported_input_tokens(message)
        if reported is None:
            return
        estimate = self._total(window)
        if self._calibration(window).corrected(estimate) > self._max_tokens:
            return
        window.calibration = window.calibration.observe(estimate=estimate, reported=reported)
        if window is self._window and self._shared_calibration is not None:
            self._shared_calibration.observe(estimate=estimate, reported=reported)

    def _step(self, history: Sequence[BaseMessage], window: _Window, *, end: int) -> None:
        """The decisions at one model call on the first `end` messages."""
        if self._corrected_total(window) <= self._high:
            return
        self._compact_oldest(history, window, end=end)
        if self._corrected_total(window) > self._high:
            self._cut_groups(history, window, end=end)

    def _compaction_limit(self, end: int) -> int:
        """How many of the compactable results before `end` may be compacted."""
        available = bisect.bisect_left(self._replay.compactable, end)
        return max(available - self._keep_recent, 0)

    def _compact_oldest(self, history: Sequence[BaseMessage], window: _Window, *, end: int) -> None:
        limit = self._compaction_limit(end)
        while window.compacted_count < limit and self._corrected_total(window) > self._low:
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
        placeholder = self._compaction.placeholder_for(self._replay.compactable_names[index])
        return original.model_copy(update={"content": placeholder})

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
        messages = history
        newest = group_start(messages, end)
        # A tool loop that opens with a thinking block is cut whole or not at all (where
        # an earlier call point cut its opening already, nothing is left to keep whole).
        loop = thinking_tool_loop_start(messages, end)
        if loop is not None and loop >= window.cut:
            newest = min(newest, loop)
        while window.cut < newest and self._corrected_total(window) > self._low:
            start = window.cut
            stop = _group_end(messages, start, end)
            for index in range(start, stop):
                if isinstance(messages[index], SystemMessage):
                    continue
                window.window_tokens -= self._cost(history, window, index)
                if isinstance(messages[index], HumanMessage):
                    window.last_user_before_cut = index
            window.cut = stop
            self._pin_for(history, window, end=end)
        if window.task_pinned and self._corrected_total(window, note=False) > self._max_tokens:
            # The task is left out where it is what keeps the request over budget (the
            # note too: it is left out of a request it does not fit).
            without_task = replace(window)
            self._pin_for(history, without_task, end=end, pin_task=False)
            if self._corrected_total(without_task, note=False) <= self._max_tokens:
                window.task_pinned, window.pinned = False, without_task.pinned

    def _pin_for(
        self,
        history: Sequence[BaseMessage],
        window: _Window,
        *,
        end: int,
        pin_task: bool = True,
    ) -> None:
        """The user messages to pin in front of the cut.

        The task, verbatim where it fits its share of the budget and cut to it where
        not; and the latest user message before the cut, whole, unless the kept part
        opens with a user message. Where that latest one is an oversized task, it is
        pinned whole as before (the last resort cuts it where the request is too large),
        so that governing the request again pins it the same way.
        """
        messages = history
        latest = window.last_user_before_cut
        for index in range(window.cut, end):
            if isinstance(messages[index], SystemMessage):
                continue
            if isinstance(messages[index], HumanMessage):
                latest = None
            break
        task = self._replay.task
        pinnable = pin_task and self._pin_task and self._replay.task_fits
        pinnable = pinnable and task is not None and task < window.cut
        if pinnable and latest is not None and latest == task and self._replay.task_cut:
            # An oversized task that is also the latest user message is pinned whole.
            pinnable = False
        window.task_pinned = pinnable
        window.pinned = None if pinnable and latest == task else latest

    def _build(
        self, history: Sequence[BaseMessage], window: _Window, *, summary: str | None
    ) -> WindowPlan:
        end = len(history)
        replay = self._replay
        output: list[BaseMessage] = []
        costs: list[int] = []
        prints: list[int] = []
        if window.cut > 0:
            for index in replay.system_indices:
                if index >= window.cut:
                    break
                output.append(history[index])
                costs.append(replay.tokens[index])
                prints.append(replay.prints[index])
            if self._task_pinned(window):
                task = self._task_message(history)
                output.append(task)
                costs.append(replay.task_tokens)
                prints.append(message_fingerprint(task))
            if window.pinned is not None:
                output.append(history[window.pinned])
                costs.append(replay.tokens[window.pinned])
                prints.append(replay.prints[window.pinned])
        first_compacted = bisect.bisect_left(replay.compactable, window.cut)
        compacted = set(replay.compactable[first_compacted : window.compacted_count])
        for index in range(window.cut, end):
            if index in compacted:
                output.append(self._compacted_copy(history, index))
                costs.append(self._compacted_tokens(history, index))
                prints.append(replay.prints[index] ^ _COMPACTED)
            else:
                output.append(history[index])
                costs.append(replay.tokens[index])
                prints.append(replay.prints[index])
        omitted = self._omitted(window)
        calibration = self._calibration(window)
        if omitted > 0:
            output, costs, prints = self._with_cut_note(
                output, costs, prints, omitted, summary, calibration
            )
        if window.cut > 0:
            self._merge_pinned_user_turns(output, costs, prints)
        tokens_after = self._fixed + sum(costs)
        plan = WindowPlan(
            messages=output,
            compacted=len(compacted),
            removed=omitted,
            tokens_before=self._fixed + window.raw_tokens,
            tokens_after=tokens_after,
            cut=window.cut,
            omitted=omitted,
            task_pinned=self._task_pinned(window),
            calibration=calibration,
        )
        if self._last_request is not None:
            unchanged = _leading_equal(self._last_request, prints)
            plan.unchanged_prefix_messages = unchanged
            plan.unchanged_prefix_tokens = max(tokens_after - sum(costs[unchanged:]), 0)
        self._last_request = prints
        return plan

    def _merge_pinned_user_turns(
        self, output: list[BaseMessage], costs: list[int], prints: list[int]
    ) -> None:
        """Merge the user turns that meet at the front after a cut (the task, the latest user
        message, the kept part's first), as role alternation would on every call: merged
        here, once per cut, the request needs no repair and keeps its prefix."""
        position = cut_note_position(output)
        while (
            position + 1 < len(output)
            and isinstance(output[position], HumanMessage)
            and isinstance(output[position + 1], HumanMessage)
        ):
            merged = merge_turns(output[position], output.pop(position + 1))
            output[position] = merged
            del costs[position + 1], prints[position + 1]
            costs[position] = self._counter.count_message(merged)
            prints[position] = message_fingerprint(merged)

    def _with_cut_note(
        self,
        output: list[BaseMessage],
        costs: list[int],
        prints: list[int],
        omitted: int,
        summary: str | None,
        calibration: Calibration,
    ) -> tuple[list[BaseMessage], list[int], list[int]]:
        """The request with the note at the cut, where it fits under the high watermark.

        The decisions reserve a whole message for the plain note; the request counts
        what it really costs where it is appended to a user message. A note with a
        summary that does not fit gives way to the plain note, and a plain note that
        would take the request over the high watermark (a tiny budget) is left out.
        """
        notes = [cut_note(omitted, summary)] if summary else []
        notes.append(cut_note(omitted))
        position = cut_note_position(output)
        for note in notes:
            noted = attach_cut_note(output, note)
            noted_costs = list(costs)
            noted_prints = list(prints)
            carrier = noted[position]
            if len(noted) > len(output):
                noted_costs.insert(position, self._counter.count_message(carrier))
                noted_prints.insert(position, message_fingerprint(carrier))
            else:
                noted_costs[position] = self._counter.count_message(carrier)
                noted_prints[position] = message_fingerprint(carrier)
            if calibration.corrected(self._fixed + sum(noted_costs)) <= self._high:
                return noted, noted_costs, noted_prints
        return output, costs, prints


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
    keep_recent: int = DEFAULT_KEEP_RECENT,
    min_chars: int = 500,
    compactable_tools: Collection[str] | None = None,
    exclude_tools: Collection[str] = (),
    placeholder: str = DEFAULT_PLACEHOLDER,
    pin_task: bool = True,
    token_counter: TokenCounterSpec = "approximate",
    tools: Sequence[Any] | None = None,
) -> list[BaseMessage]:
    """Compact and cut the history in rare, large steps that keep the prompt cache warm.

    Nothing changes while the request stays under `high_watermark * max_tokens`. Past
    it, the oldest results of compactable tools (every tool but `exclude_tools`, or only
    `compactable_tools` where given; at least `min_chars` long, all but the newest
    `keep_recent`) become `placeholder`, oldest first, until the request is under
    `low_watermark * max_tokens`; where that is not enough, whole groups are cut from
    the front in one step. After a cut the conversation's first user message (the task,
    cut to a quarter of `max_tokens` where larger) is pinned right after the system
    messages when `pin_task`, the latest user message before the cut where the kept part
    does not open with one, and a note at the cut says how many messages were left out.
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
        >>> sum("Output cleared" in str(m.content) for m in request)
        6
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
        compaction=ResultCompaction(
            compactable_tools=compactable_tools,
            exclude_tools=exclude_tools,
            placeholder=placeholder,
        ),
        pin_task=pin_task,
    )
    return list(window.plan(as_message_list(messages)).messages)
