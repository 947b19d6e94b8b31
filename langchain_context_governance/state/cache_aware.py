"""The replay that makes the cache-aware policy incremental, and its plan of a request.

The policy edits rarely and in large steps, so the provider's prompt cache stays warm: when
a call edits (policy/edit_trigger.py), between which watermarks (policy/watermarks.py),
compacting the oldest results (policy/batch_compaction.py) and cutting whole groups, kept
by protection class (policy/cut.py). Its decisions (policy/decisions.py) are a
deterministic function of the history and the settings: the history is replayed call
point by call point (the model was called before every assistant message, and is called
now at the end), so the same history always yields the same request and a resumed thread
rebuilds the same prefix. Each call point's edits say which earlier messages' reasoning
they put behind a changed prefix (`Decisions.left_out`).

`CacheAwareReplay` decides nothing: it keeps the replay state so that a growing history
only replays what is new, feeds the policy through a read-only view of it
(`HistoryView`, state/replay_view.py), which counts the note at a cut with `NoteSizing`
(state/note_sizing.py; which note a cut sends is policy/note_at_cut.py's, and which edits
change the request's front policy/front_edits.py's), and hands the decisions to the
request assembly (state/request_assembly.py), which makes the request and decides
nothing either.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.messages.utils import MessageLikeRepresentation

from langchain_context_governance import tuning
from langchain_context_governance._added import (
    added_kind,
    without_added_parts,
)
from langchain_context_governance._messages import (
    as_message_list,
    iter_declared_tool_calls,
    message_fingerprint,
)
from langchain_context_governance.offload.items import answered_call
from langchain_context_governance.offload.kept import (
    Offload,
)
from langchain_context_governance.passes._dual_use import runnable_when_called_without_messages
from langchain_context_governance.policy.budget import validate_max_tokens
from langchain_context_governance.policy.compaction import (
    DEFAULT_KEEP_RECENT,
    DEFAULT_MIN_CHARS,
    DEFAULT_PLACEHOLDER,
    ResultCompaction,
)
from langchain_context_governance.policy.cut import excluded_groups_newest_first, pin_for
from langchain_context_governance.policy.decisions import Decisions
from langchain_context_governance.policy.edit_trigger import decide_call
from langchain_context_governance.policy.front_edits import first_compacted_edit, front_key
from langchain_context_governance.policy.left_out import LeftOut
from langchain_context_governance.policy.note_at_cut import (
    is_brief,
    note_variant,
    omitted_count,
    summary_room,
)
from langchain_context_governance.policy.task import is_task_candidate, pinned_task_copy
from langchain_context_governance.policy.view import CacheAwareSettings
from langchain_context_governance.policy.watermarks import validate_watermarks
from langchain_context_governance.state.note_sizing import NoteSizing
from langchain_context_governance.state.record import leading_equal
from langchain_context_governance.state.replay_codec import (
    ReplayColumns,
    restore_replay,
    snapshot_replay,
)
from langchain_context_governance.state.replay_state import ReplayLearning
from langchain_context_governance.state.replay_view import HistoryView
from langchain_context_governance.state.request_assembly import (
    RequestAssembly,
    RequestOrigins,
)
from langchain_context_governance.tokens.calibration import (
    UNCALIBRATED,
    Calibration,
    Overflow,
    SharedCalibration,
    overflows_of,
    reported_input_tokens,
)
from langchain_context_governance.tokens.counter import (
    APPROXIMATE_CHARS_PER_TOKEN,
    MessageTokenCounter,
    TokenCounterSpec,
    get_token_counter,
)

# What governance added that is no message of the conversation: the note at an earlier cut
# and its data turn (`_added.py`), in a request governed again.
_OUTSIDE_THE_CONVERSATION = frozenset({"cut-note", "cut-data"})


@dataclass
class CompactionPlan:
    """The request the policy chose for the current call, and what it left out and why."""

    def reasoning_candidates(self) -> Iterator[int] | None:
        """The request indices whose bound reasoning may have lost its prefix (those made
        from positions `reasoning_left_out` covers), or None where the origins cannot say."""
        if not isinstance(self.origins, RequestOrigins):
            return None
        origins = self.origins
        return (
            index
            for low, high in self.reasoning_left_out.ranges
            for index in origins.indices_between(low, high)
        )

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
    # History positions of the results sent compacted, and of the messages before the
    # cut that were sent anyway, with their protection class.
    compacted_positions: tuple[int, ...] = ()
    kept: tuple[tuple[int, str], ...] = ()
    # For each message of the request, the history positions it was made from (several
    # for user turns joined at the front, none for the note).
    origins: Sequence[tuple[int, ...]] = ()
    # The factor the thresholds were compared with (`tokens_after` is uncorrected).
    calibration: Calibration = UNCALIBRATED
    # A fingerprint of each message of the request (equal fingerprints, equal messages).
    fingerprints: array[int] | None = None
    # The history positions whose bound reasoning is no longer behind the prefix it was
    # made after (policy/left_out.py); the governor leaves it out of the request.
    reasoning_left_out: LeftOut = field(default_factory=LeftOut)
    # After a cut that has no summary yet: the most tokens a summary of it can take and
    # still be sent (the note with it under the high watermark); 0 where none can.
    summary_room: int = 0


class CacheAwareReplay:
    """Replay state of one growing history under the cache-aware policy.

    `plan(history, fixed_tokens=..., final=k)` returns the request for a call on
    `history`, whose first `k` messages are the same as on every later call: those are
    replayed once and kept, the rest is replayed for this call only. `fixed_tokens` are
    this call's tokens outside the messages (request overhead and tool definitions); a
    call with other fixed tokens replays the history anew. Positions, counts and
    fingerprints are kept, never the messages themselves; what the request is made of
    them is the assembly's (`RequestAssembly`). `start_over()` forgets the history.
    """

    def __init__(
        self,
        *,
        max_tokens: int,
        counter: MessageTokenCounter,
        high_watermark: float = tuning.DEFAULT_HIGH_WATERMARK,
        low_watermark: float = tuning.DEFAULT_LOW_WATERMARK,
        compaction: ResultCompaction | None = None,
        pin_task: bool = True,
        shared_calibration: SharedCalibration | None = None,
    ) -> None:
        """`shared_calibration`: the model's default, used until the history reports a size."""
        validate_max_tokens(max_tokens)
        validate_watermarks(high_watermark=high_watermark, low_watermark=low_watermark)
        self._counter = counter
        self._settings = CacheAwareSettings(
            max_tokens=max_tokens,
            high_share=high_watermark,
            low_share=low_watermark,
            pin_task=pin_task,
            compaction=compaction if compaction is not None else ResultCompaction(),
        )
        self._shared_calibration = shared_calibration
        # What tells this conversation's reports apart from others' in the shared default.
        self._conversation = object()
        self._last_request: array[int] | None = None
        self._assembly = RequestAssembly(
            counter=counter, compaction=self._settings.compaction, max_tokens=max_tokens
        )
        self._sizing = NoteSizing(counter=counter, assembly=self._assembly)
        # Where the plans keep what leaves their requests (offload/), during a plan:
        # placeholders and the note show handles then (`NoteSizing.offloading`), and their
        # counts differ.
        self._offload: Offload | None = None
        self._summary_for: Callable[[int], str | None] | None = None
        self.start_over()

    def start_over(self) -> None:
        """Forget the history: the next plan replays its history from the start."""
        self._known = 0
        self._replay = ReplayLearning()
        self._packed = ReplayColumns()
        self._decisions = Decisions()
        self._assembly.start_over()
        # The positions the latest request sent compacted (their counts go in a snapshot).
        self._sent_compacted: tuple[int, ...] = ()
        # Taken up from a snapshot, and not yet checked against a history.
        self._restored = False

    def snapshot(self) -> dict[str, Any]:
        """The replay's decisions at its final positions as plain data a record carries
        (positions, counts and tool names; no message, no fingerprint, which
        every process salts anew): a replay on another worker continues from them with
        `restore`, where the same messages are read."""
        return snapshot_replay(
            self._packed,
            self._replay,
            self._decisions,
            fixed=self._sizing.fixed,
            known=self._known,
            sent_compacted=self._sent_compacted,
            offloading=self._sizing.offloading,
        )

    def restore(self, data: Mapping[str, Any], *, final: int) -> bool:
        """Continue from another replay's `snapshot` of at most `final` positions (the
        caller checked that the history is the one it was made of); False, and started
        over, where `data` cannot be read.

        A snapshot is untrusted input (it comes from a record): every column and number is
        bounded by the history it describes before anything is made of it, and checked
        against the others (sums, positions, protection classes); what needs the history
        itself is checked at the next `plan`, which starts over where it fails. So a
        record that was not written by a replay of this history costs a replay from the
        start, never more, and never another request.
        """
        self.start_over()
        restored = restore_replay(
            data,
            final=final,
            # A cut reserves at most NOTE_VALUES_MAX_TOKENS for the values, and the data
            # turn's frame beside them.
            max_note_values_tokens=2 * tuning.NOTE_VALUES_MAX_TOKENS,
            max_note_values_chars=tuning.NOTE_VALUES_MAX_TOKENS * APPROXIMATE_CHARS_PER_TOKEN,
        )
        if restored is None:
            return False
        self._known, self._sizing.fixed = restored.known, restored.fixed
        self._sizing.offloading = restored.offloading
        self._replay, self._decisions = restored.replay, restored.decisions
        self._packed = restored.packed
        self._restored = True
        return True

    def _check_restored(self, history: Sequence[BaseMessage]) -> bool:
        """Whether what `restore` took up holds for `history`: the positions are of
        messages of their kind, and the decisions that need the messages (what the
        history from the cut costs, what is pinned) are the ones the replay makes."""
        self._restored = False
        replay, decisions, known = self._replay, self._decisions, self._known
        if len(history) < known:
            return False
        kinds_hold = (
            all(isinstance(history[i], SystemMessage) for i in replay.system_indices)
            and all(is_task_candidate(history[i]) for i in replay.users)
            and all(
                self._result_name(history, i) == replay.compactable_names[i]
                for i in replay.compactable
            )
            and all(
                self._result_name(history, i) in self._settings.compaction.exclude_tools
                for i in replay.excluded
            )
        )
        if not kinds_hold or not self._task_holds(history):
            return False
        systems = set(replay.system_indices)
        view = self._view(history)
        history_tokens = sum(
            view.cost(decisions, index)
            for index in range(decisions.cut, known)
            if index not in systems
        )
        pins = replace(decisions)
        if decisions.cut:
            pin_for(view, pins, end=known)
        omitted = omitted_count(view, decisions)
        values_tokens = (
            view.data_tokens(omitted, decisions.note_values, brief=is_brief(view, decisions))
            if decisions.note_values and omitted > 0
            else decisions.note_values_tokens
        )
        return (
            history_tokens == decisions.history_tokens
            and self._readmit_holds(history)
            and (pins.task_pinned, pins.pinned, pins.pinned_kept)
            == (decisions.task_pinned, decisions.pinned, decisions.pinned_kept)
            and values_tokens == decisions.note_values_tokens
        )

    def plan(
        self,
        history: Sequence[BaseMessage],
        *,
        fixed_tokens: int = 0,
        final: int | None = None,
        summary_for: Callable[[int], str | None] | None = None,
        overflows: Sequence[Overflow] = (),
        same_objects: bool = False,
        rules_tokens: int = 0,
        offload: Offload | None = None,
    ) -> CompactionPlan:
        """The request for a model call on `history` (the full, repaired history).

        The first `final` messages (all by default) must be those of every later call;
        the history read so far must be a prefix of them (else call `start_over()` first).
        Where the request leaves earlier messages out, a note at the cut says how many;
        `summary_for(cut)` (a summary of them, made once per cut by the caller, or None)
        goes into that note. The budget reserves room for the plain note only: a note
        with a summary that would take the request over the high watermark is left out.
        `overflows`: the provider refused this call's request for its length (a retry).
        `same_objects`: the messages read before are the very objects of the previous
        call, so what was sent of them then is sent again as it was, and only what is new
        is added to the request.
        `rules_tokens`: what the provider rules that need the whole request add to this
        call's request (known from a first plan of it), counted at this call only.
        `offload`: where what leaves the request is kept (offload/); its placeholders
        and the note at a cut then show the handles to read it back with.
        """
        if self._restored and not self._check_restored(history):
            self.start_over()
        if fixed_tokens != self._sizing.fixed or (offload is not None) != self._sizing.offloading:
            # The thresholds of every earlier call point depend on them, and on what a
            # placeholder costs.
            self._sizing.fixed = fixed_tokens
            self._sizing.offloading = offload is not None
            self.start_over()
        self._offload = offload
        try:
            return self._plan(
                history,
                final=final,
                summary_for=summary_for,
                overflows=overflows,
                same_objects=same_objects,
                rules_tokens=rules_tokens,
            )
        finally:
            self._offload = None

    def _plan(
        self,
        history: Sequence[BaseMessage],
        *,
        final: int | None,
        summary_for: Callable[[int], str | None] | None,
        overflows: Sequence[Overflow],
        same_objects: bool,
        rules_tokens: int,
    ) -> CompactionPlan:
        self._summary_for = summary_for
        final = len(history) if final is None else final
        for index in range(self._known, final):
            self._add(history, index, self._decisions)
        self._known = max(self._known, final)
        tool_names = len(self._replay.tool_names)
        decisions = replace(self._decisions)
        for index in range(final, len(history)):
            self._add(history, index, decisions)
        decisions.rules_tokens = rules_tokens
        view = self._view(history)
        self._call(view, decisions, end=len(history), overflows=overflows)
        summary = view.summary(decisions.cut)
        if not same_objects:
            # What was made of the previous call's objects is not this call's.
            self._assembly.forget_objects()
        plan = self._plan_of(history, decisions, summary=summary, final=final)
        self._replay.forget_from(final, tool_names)
        return plan

    @property
    def fixed_tokens(self) -> int:
        """The fixed tokens of the calls this replay plans (see `plan`)."""
        return self._sizing.fixed

    @property
    def previous_request(self) -> array[int] | None:
        """Fingerprints of the previous request, for the prefix report (None before one)."""
        return self._last_request

    @previous_request.setter
    def previous_request(self, prints: array[int] | None) -> None:
        self._last_request = prints

    def _add(self, history: Sequence[BaseMessage], index: int, decisions: Decisions) -> None:
        message = history[index]
        if isinstance(message, AIMessage):
            view = self._view(history)
            self._call(view, decisions, end=index, overflows=overflows_of(message))
            self._observe_reported_size(view, message, decisions)
            for _, name in iter_declared_tool_calls(message):
                self._replay.tool_names.setdefault(name)
        tokens = self._counter.count_message(message)
        self._replay.tokens.append(tokens)
        self._replay.prints.append(message_fingerprint(message))
        decisions.raw_tokens += tokens
        if isinstance(message, SystemMessage):
            if index > len(self._replay.system_indices):
                # A system message after the conversation started goes to the front where
                # a profile moves it there (Anthropic's `system`): what came before it
                # changes place.
                decisions.left_out = decisions.left_out.edited(at=-1, call=index)
            self._replay.system_indices.append(index)
            decisions.system_tokens += tokens
            return
        if added_kind(message) in _OUTSIDE_THE_CONVERSATION:
            self._replay.added.append(index)
        if is_task_candidate(message):
            self._replay.users.append(index)
            if self._replay.task is None:
                self._note_task(message, index)
        decisions.history_tokens += tokens
        if isinstance(message, ToolMessage):
            self._note_tool_result(history, message, index)

    def _note_task(self, message: BaseMessage, index: int) -> None:
        """The task pinned after a cut: the user's words only (a note stored with them by
        an earlier cut is left out), verbatim where they fit their share, else cut to it."""
        assert isinstance(message, HumanMessage)
        words = without_added_parts(message)
        if words is None:
            return
        self._replay.task = index
        copy = pinned_task_copy(words, self._settings.max_tokens, self._counter)
        if copy is not None:
            self._replay.task_fits = True
            self._replay.task_cut = copy is not words
            self._replay.task_copied = copy is not message
            self._replay.task_tokens = self._counter.count_message(copy)

    def _readmit_holds(self, history: Sequence[BaseMessage]) -> bool:
        """Whether what the newest excluded group left out costs (`readmit_tokens`) is of
        a group left out: none where every excluded group before the cut is kept, at most
        what its messages cost where one is not."""
        decisions = self._decisions
        kept = {group.start for group in decisions.kept_groups}
        left_out = next(
            (
                group
                for group in excluded_groups_newest_first(self._view(history), decisions)
                if group.start not in kept
            ),
            None,
        )
        if left_out is None:
            return decisions.readmit_tokens == 0
        raw = sum(self._replay.tokens[left_out.start : left_out.stop])
        return 0 < decisions.readmit_tokens <= raw

    def _task_holds(self, history: Sequence[BaseMessage]) -> bool:
        """Whether the task taken up from a snapshot is the one `_note_task` finds in
        `history`, pinned as it would pin it."""
        replay = self._replay
        found = ReplayLearning()
        for index in replay.users:
            if found.task is not None or (replay.task is not None and index > replay.task):
                break
            self._replay = found
            try:
                self._note_task(history[index], index)
            finally:
                self._replay = replay
        taken = (replay.task, replay.task_fits, replay.task_cut, replay.task_copied)
        made = (found.task, found.task_fits, found.task_cut, found.task_copied)
        return taken == made and replay.task_tokens == found.task_tokens

    @staticmethod
    def _result_name(history: Sequence[BaseMessage], index: int) -> str | None:
        """The tool of the result at `index` (None where it is no result)."""
        message = history[index]
        if not isinstance(message, ToolMessage):
            return None
        return answered_call(history, index)[0]

    def _note_tool_result(
        self, history: Sequence[BaseMessage], message: ToolMessage, index: int
    ) -> None:
        name = answered_call(history, index)[0]
        if self._settings.compaction.is_excluded(name):
            self._replay.excluded.append(index)
            return
        if not self._settings.compaction.may_compact(message, name):
            return
        self._replay.compactable.append(index)
        self._replay.compactable_names[index] = name

    def _call(
        self,
        view: HistoryView,
        decisions: Decisions,
        *,
        end: int,
        overflows: Sequence[Overflow] = (),
    ) -> None:
        """The decisions at one model call, and again after each refusal for length; where
        they change the request before earlier messages, those messages' bound reasoning
        is left out from now on (`Decisions.left_out`). A call the provider answered
        without a refusal before it lets what earlier refusals added to the calibration
        decay (`Calibration.decayed`)."""
        if not overflows and decisions.calibration.boost != 1.0:
            decisions.calibration = decisions.calibration.decayed()
        front, compacted = front_key(view, decisions), decisions.compacted_count
        decide_call(view, decisions, end=end)
        for overflow in overflows:
            calibration = view.calibration(decisions)
            decisions.calibration = calibration.observe_overflow(
                overflow, budget=self._settings.max_tokens
            )
            decide_call(view, decisions, end=end)
        variant = note_variant(view, decisions, end=end)
        if front_key(view, decisions) != front or variant != decisions.note_variant:
            decisions.left_out = decisions.left_out.edited(at=-1, call=end)
        else:
            edited = first_compacted_edit(view, decisions, before=compacted)
            if edited is not None:
                decisions.left_out = decisions.left_out.edited(at=edited, call=end)
        decisions.note_variant = variant
        if view.corrected_total(decisions) > self._settings.max_tokens:
            # The last resort shortens this call's request: its answer was made after a
            # prefix no later request is known to send again.
            decisions.left_out = decisions.left_out.with_range(end, end + 1)

    def _observe_reported_size(
        self, view: HistoryView, message: AIMessage, decisions: Decisions
    ) -> None:
        """Learn from the provider's count of the request that produced `message`.

        Skipped where the estimate is over the budget: the last resort then shortened
        the request, so the estimate is not of what was sent.
        """
        reported = reported_input_tokens(message)
        if reported is None:
            return
        estimate = view.total(decisions)
        if view.calibration(decisions).corrected(estimate) > self._settings.max_tokens:
            return
        decisions.calibration = decisions.calibration.observe(estimate=estimate, reported=reported)
        if decisions is self._decisions and self._shared_calibration is not None:
            self._shared_calibration.observe(
                estimate=estimate, reported=reported, conversation=self._conversation
            )

    def _plan_of(
        self,
        history: Sequence[BaseMessage],
        decisions: Decisions,
        *,
        summary: str | None,
        final: int,
    ) -> CompactionPlan:
        """The plan of the decisions: the request the assembly makes of them (after a cut,
        the front with the note, then the history from the cut), what it leaves out and
        why, and how much of the previous request it sends again."""
        view = self._view(history)
        omitted = omitted_count(view, decisions)
        # A cut that leaves nothing out (everything before it is protected) is no cut:
        # the history goes as it is, so governing the request again changes nothing.
        start = decisions.cut if omitted > 0 else 0
        request = self._assembly.build(
            history,
            self._replay,
            decisions,
            start=start,
            omitted=omitted,
            summary=summary,
            brief=start > 0 and is_brief(view, decisions),
            final=final,
            offload=self._offload,
        )
        prints, costs, compacted = request.prints, request.costs, request.compacted
        tokens_after = self._sizing.fixed + sum(costs)
        self._sent_compacted = compacted
        plan = CompactionPlan(
            messages=request.messages,
            compacted=len(compacted),
            removed=omitted if start > 0 else 0,
            tokens_before=self._sizing.fixed + decisions.raw_tokens,
            tokens_after=tokens_after,
            cut=start,
            omitted=omitted if start > 0 else 0,
            task_pinned=decisions.task_pinned and start > 0,
            compacted_positions=compacted,
            kept=request.kept,
            origins=request.origins,
            calibration=view.calibration(decisions),
            fingerprints=prints,
            reasoning_left_out=decisions.left_out,
        )
        if start > 0 and summary is None and self._summary_for is not None:
            plan.summary_room = summary_room(view, decisions, omitted=omitted)
        if self._last_request is not None:
            unchanged = leading_equal(self._last_request, prints)
            plan.unchanged_prefix_messages = unchanged
            plan.unchanged_prefix_tokens = max(tokens_after - sum(costs[unchanged:]), 0)
        self._last_request = prints
        return plan

    def _view(self, history: Sequence[BaseMessage]) -> HistoryView:
        """The policy's view of `history` and of what this replay learned of it."""
        return HistoryView(
            history,
            settings=self._settings,
            learning=self._replay,
            sizing=self._sizing,
            assembly=self._assembly,
            offload=self._offload,
            shared_calibration=self._shared_calibration,
            summary_for=self._summary_for,
        )


@runnable_when_called_without_messages
def compact_in_batches(
    messages: Sequence[MessageLikeRepresentation],
    *,
    max_tokens: int,
    high_watermark: float = tuning.DEFAULT_HIGH_WATERMARK,
    low_watermark: float = tuning.DEFAULT_LOW_WATERMARK,
    keep_recent: int = DEFAULT_KEEP_RECENT,
    min_chars: int = DEFAULT_MIN_CHARS,
    compactable_tools: Collection[str] | None = None,
    exclude_tools: Collection[str] = (),
    placeholder: str = DEFAULT_PLACEHOLDER,
    pin_task: bool = True,
    token_counter: TokenCounterSpec = "approximate",
    tools: Sequence[Any] | None = None,
) -> list[BaseMessage]:
    """Compact and cut the history in rare, large steps that keep the prompt cache warm.

    The watermarks are shares of the room history has (`max_tokens` less the request
    overhead, the tool definitions in `tools` and the system messages). Nothing changes
    while history stays under the high watermark. Past it, the oldest results of
    compactable tools (every tool but `exclude_tools`, or only `compactable_tools` where
    given; at least `min_chars` long, all but the newest `keep_recent`) become
    `placeholder`, oldest first, until it is under the low watermark; where that is not
    enough, whole groups are cut from the front in one step. After a cut the
    conversation's first user message (the task, cut to a quarter of `max_tokens` where
    larger) is pinned right after the system messages when `pin_task`, then a note saying
    how many messages were left out, the groups holding results of `exclude_tools` (while
    they fit), and the latest user message before the cut where the kept part does not
    open with one; the user turns that meet there are joined as separate blocks. Each
    decision is replayed from the history itself, so the same history always gives the
    same request, and a compacted result stays compacted as the history grows.

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
    replay = CacheAwareReplay(
        max_tokens=max_tokens,
        counter=counter,
        high_watermark=high_watermark,
        low_watermark=low_watermark,
        compaction=ResultCompaction(
            keep_recent=keep_recent,
            min_chars=min_chars,
            compactable_tools=compactable_tools,
            exclude_tools=exclude_tools,
            placeholder=placeholder,
        ),
        pin_task=pin_task,
    )
    fixed_tokens = counter.request_overhead + counter.count_tools(tools)
    return list(replay.plan(as_message_list(messages), fixed_tokens=fixed_tokens).messages)
