"""What the governor knows about each conversation it serves, and where it finds it.

One compiled LangGraph graph, and so one governor, serves every thread of a server. A
conversation's state lets a call cost only what is new in its history: the repairs
decided so far, the replay of the compaction policy, the previous request for the
prefix report, the summary of the latest cut. It is found by the thread id LangGraph
gives each run (`config["configurable"]["thread_id"]`); plain calls without a thread
are matched to a state by the history itself.

What is a function of the history (the repairs, the replay) is rebuilt from it when it
is missing (after a restart, on another worker, after eviction), and a rebuilt state
gives the same request as the one it replaces. The thread's `GovernanceRecord`
(state/record.py) carries what is not (the summary text, the previous request, the
warning logged) and the decisions themselves (the repairs', the replay's and the
request rules', as positions, counts and digests), so a worker that takes the thread up
continues from them at the cost of what is new instead of rebuilding them:
`ConversationState.to_record()` writes it, `continue_from(record)` takes it up. The
states here are a cache in front of the records.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage, SystemMessage

from langchain_context_governance._reasoning import carries_provider_compaction
from langchain_context_governance.offload.kept import Offload
from langchain_context_governance.policy.summary_job import SummaryRecord
from langchain_context_governance.rules.continued import ContinuedRepair
from langchain_context_governance.state.cache_aware import CacheAwareReplay, CompactionPlan
from langchain_context_governance.state.made import MadeMessages
from langchain_context_governance.state.record import (
    GovernanceRecord,
    HistoryDigest,
    HistoryMark,
    PreviousRequest,
)
from langchain_context_governance.state.repair_stream import (
    RepairedHistory,
    RepairStream,
    StreamRead,
)
from langchain_context_governance.tokens.calibration import Overflow

logger = logging.getLogger(__name__)

DEFAULT_MAX_CONVERSATIONS = 10_000
# States kept per thread (several agents of one graph may share a thread, each with its
# own message list) and for calls without a thread (matched by their history).
_STATES_PER_THREAD = 4
_STATES_WITHOUT_THREAD = 8
# Copies of messages sent without their bound reasoning, kept while their message lives
# (the same copy each call: the request, and the provider's prompt cache, stay as they were).
_REASONING_COPIES_KEPT = 4096
# Replays kept per conversation, one per size of the tool definitions sent: an agent
# whose tool set changes between calls (two sets alternating) keeps each replay going
# instead of replaying the history anew at every change.
_REPLAYS_PER_CONVERSATION = 3

# Makes the compaction replay of a conversation.
NewReplay = Callable[[], CacheAwareReplay]


@dataclass
class ConversationState:
    """Everything the governor learned about one conversation.

    `repairs` holds the repair decisions, group by group; the compaction replays (one per
    size of the fixed tokens of a request — overhead and tool definitions —, made by
    `new_replay`; none without a budget or with
    `compaction="keep_recent"`) the cache-aware policy's decisions; `summary` the summary
    model's text for the latest cut; `previous_request` the digests of the previous
    request; `over_budget_warned` whether the conversation's over-budget warning was
    logged; `reasoning_warned` whether the warning that reasoning was left out was;
    `truncation_warned` the newest message whose cut in the current turn was
    logged; `calibration` the counter's calibration (kept as given); `serial` the
    record this state wrote or took up last; `request_repairs` the provider rules of
    the conversation's successive requests (rules/continued.py).
    A state serves one call at a time (`lock`); a call that finds it busy governs with a
    fresh state instead, which gives the same request.

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> def new_state() -> ConversationState:
        ...     one = lambda message: 1
        ...     repairs = RepairStream(repair_group=lambda m, d: (m, {}), count_message=one)
        ...     return ConversationState(repairs, count_message=one)
        >>> state = new_state()
        >>> [m.content for m in state.read([HumanMessage("hi")]).history]
        ['hi']
        >>> record = state.to_record(settings="s", history=[HumanMessage("hi")])
        >>> elsewhere = new_state()
        >>> elsewhere.continue_from(record, [HumanMessage("hi")])
        True
        >>> elsewhere.serial == record.serial
        True
    """

    repairs: RepairStream
    new_replay: NewReplay | None = None
    count_message: Callable[[BaseMessage], int] = field(default=lambda message: 0, repr=False)
    summary: SummaryRecord | None = None
    previous_request: PreviousRequest | None = None
    over_budget_warned: bool = False
    truncation_warned: int | None = None
    reasoning_warned: bool = False
    calibration: Mapping[str, Any] | None = None
    serial: str | None = None
    request_repairs: ContinuedRepair | None = field(default=None, repr=False)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _replays: OrderedDict[int, CacheAwareReplay] = field(default_factory=OrderedDict, repr=False)
    # Where the newest provider compaction of the history was found, how many messages
    # were looked at, and the last of them (`provider_window`).
    _compaction_start: int | None = field(default=None, repr=False)
    _compaction_scanned: int = field(default=0, repr=False)
    _compaction_last: weakref.ref[BaseMessage] | None = field(default=None, repr=False)
    reasoning_copies: MadeMessages[Any] = field(
        default_factory=lambda: MadeMessages(limit=_REASONING_COPIES_KEPT), repr=False
    )

    def start_over(self) -> None:
        """Forget the history read and what was decided on it (after a failed call)."""
        self.repairs.start_over()
        self._replays.clear()
        if self.request_repairs is not None:
            self.request_repairs.start_over()
        self.summary = None

    def forget_record(self) -> None:
        """Start over and forget what a record carries beside the decisions too (the
        previous request, the calibration, the warnings logged): another worker served the
        thread in a way this state cannot read."""
        self.start_over()
        self.previous_request = self.calibration = self.serial = None
        self.over_budget_warned = self.reasoning_warned = False
        self.truncation_warned = None

    def provider_window(
        self, messages: Sequence[BaseMessage]
    ) -> tuple[Sequence[BaseMessage], int, int | None]:
        """`messages` from the newest provider compaction on, after their leading system
        messages: the provider's summary stands for everything before it (see
        `_reasoning.provider_compaction_start`). Returns the window, how many leading
        system messages it keeps, and where the compaction is (None: the messages as
        they are). Only what is new since the previous call is looked at.
        """
        scanned = self._compaction_scanned
        last = self._compaction_last() if self._compaction_last is not None else None
        if not (0 < scanned <= len(messages) and messages[scanned - 1] is last):
            scanned, self._compaction_start = 0, None
        for index in range(scanned, len(messages)):
            if carries_provider_compaction(messages[index]):
                self._compaction_start = index
        self._compaction_scanned = len(messages)
        self._compaction_last = weakref.ref(messages[-1]) if messages else None
        start = self._compaction_start
        if start is None:
            return messages, 0, None
        leading = 0
        while leading < start and isinstance(messages[leading], SystemMessage):
            leading += 1
        return [*messages[:leading], *messages[start:]], leading, start

    def read(self, messages: Sequence[BaseMessage]) -> StreamRead:
        """The repaired history of `messages` (see `RepairStream.read`).

        Where the messages do not continue what was read (the history was edited), the
        decisions made on the old history, and its summary, are forgotten with it.
        """
        read = self.repairs.read(messages)
        if read.restarted:
            self._replays.clear()
            self.summary = None
        return read

    def plan(
        self,
        history: RepairedHistory,
        *,
        fixed_tokens: int,
        overflows: Sequence[Overflow] = (),
        rules_tokens: int = 0,
        offload: Offload | None = None,
    ) -> CompactionPlan | None:
        """The cache-aware policy's request for this call, or None without a replay.

        `fixed_tokens` are what this call's request takes besides its messages (the
        overhead and the tool definitions); `overflows` the
        provider's refusals of this call's request for its length (a retry);
        `rules_tokens` what the provider rules add to this call's request; `offload`
        where what leaves the request is kept (`CacheAwareReplay.plan`). The prefix
        report compares with the conversation's previous request, also where another
        worker sent it (by the record's digests).
        """
        replay = self._replay_for(fixed_tokens)
        if replay is None:
            return None
        previous = self.previous_request
        replay.previous_request = None if previous is None else previous.local
        plan = replay.plan(
            history,
            fixed_tokens=fixed_tokens,
            final=history.final,
            summary_for=self._summary_text,
            overflows=overflows,
            same_objects=history.same_objects,
            rules_tokens=rules_tokens,
            offload=offload,
        )
        local = replay.previous_request
        if previous is None:
            self.previous_request = PreviousRequest(b"", None).followed_by(plan.messages, local)[0]
            return plan
        self.previous_request, unchanged = previous.followed_by(
            plan.messages, local, unchanged=plan.unchanged_prefix_messages
        )
        if unchanged is not None:
            plan.unchanged_prefix_messages = unchanged
            changed = sum(map(self.count_message, plan.messages[unchanged:]))
            plan.unchanged_prefix_tokens = max(plan.tokens_after - changed, 0)
        return plan

    def continue_from(self, record: GovernanceRecord, messages: Sequence[BaseMessage]) -> bool:
        """Take up what `record` knows, where another worker wrote it since this state's;
        False, and nothing taken, where the record was written for another history.

        The record is used only where `messages` begins with the very content it was
        written for (`HistoryMark`): a record of another conversation, or of this one
        before a message was changed in place, gives nothing, not even its summary. What
        this state read of another history (the thread was edited elsewhere) is
        forgotten.
        """
        if record.serial == self.serial:
            return True
        mark = record.history
        if mark.count > len(messages):
            return False
        repairs = self.repairs
        own = (
            repairs.continued_by(messages)
            and repairs.read_count <= mark.count
            and not self._record_read_more(record)
        )
        if own:
            # What this state read is the messages' content already: only the rest of
            # the history the record marks is read.
            digest = repairs.history_digest().add(list(messages[repairs.read_count : mark.count]))
            if digest.hexdigest() != mark.digest:
                return False
        else:
            read = self._record_read_count(record, mark.count)
            prefix = HistoryDigest().add(list(messages[:read]))
            rest = list(messages[read : mark.count])
            if prefix.copy().add(rest).hexdigest() != mark.digest:
                return False
            # Another worker served the thread since: its decisions cost less to take up
            # than the messages it read since this state's call.
            self.start_over()
            self._resume(record, messages, prefix)
        self.summary = record.summary
        self.previous_request = (
            None if record.previous_request is None else PreviousRequest(record.previous_request)
        )
        self.over_budget_warned = record.over_budget_warned
        self.reasoning_warned = record.reasoning_warned
        self.truncation_warned = record.truncation_warned
        self.calibration = record.calibration
        self.serial = record.serial
        return True

    @staticmethod
    def _record_read_count(record: GovernanceRecord, limit: int) -> int:
        """How many messages the record's repair stream read, where it says and within
        the history the record marks; else 0."""
        stream = (record.resume or {}).get("stream")
        read = RepairStream.read_count_of(stream) if isinstance(stream, Mapping) else None
        return read if read is not None and 0 <= read <= limit else 0

    def _record_read_more(self, record: GovernanceRecord) -> bool:
        stream = (record.resume or {}).get("stream")
        read = RepairStream.read_count_of(stream) if isinstance(stream, Mapping) else None
        return read is not None and read > self.repairs.read_count

    def _resume(
        self, record: GovernanceRecord, messages: Sequence[BaseMessage], read: HistoryDigest
    ) -> None:
        """Take up the decisions another worker's state made on `messages`' history (the
        record's `resume`), so that this call reads only what is new; where they cannot
        be used, the history is read from the start, to the same decisions (and the
        reason is logged at DEBUG). `read` is the digest of the messages the record's
        stream read."""
        data = record.resume
        if not data:
            return
        stream, replay, rules = data.get("stream"), data.get("replay"), data.get("rules")
        if not isinstance(stream, Mapping) or not self.repairs.restore(
            stream, messages, digest=read
        ):
            logger.debug("context governance: the record's repairs are not used; rebuilding")
            return
        if isinstance(replay, Mapping) and self.new_replay is not None:
            restored = self.new_replay()
            if restored.restore(replay, final=self.repairs.final_count):
                self._replays[restored.fixed_tokens] = restored
            else:
                logger.debug("context governance: the record's replay is not used; rebuilding")
        if self.request_repairs is not None and isinstance(rules, Mapping):
            length = (
                0
                if record.previous_request is None
                else len(PreviousRequest(record.previous_request))
            )
            self.request_repairs.restore(rules, length=length)

    def to_record(
        self, *, settings: str, history: Sequence[BaseMessage], thread: str | None = None
    ) -> GovernanceRecord:
        """The record of this state after a call on `history`, under `settings`, for
        `thread` (`record.thread_digest` of the call's thread id)."""
        previous = self.previous_request
        resume: dict[str, Any] = {"stream": self.repairs.snapshot()}
        if self._replays:
            resume["replay"] = next(reversed(self._replays.values())).snapshot()
        if self.request_repairs is not None:
            resume["rules"] = self.request_repairs.snapshot()
        repairs = self.repairs
        digest = repairs.history_digest().add(list(history[repairs.read_count :]))
        record = GovernanceRecord(
            settings=settings,
            thread=thread,
            history=HistoryMark(len(history), digest.hexdigest()),
            summary=self.summary,
            previous_request=None if previous is None else previous.digests,
            over_budget_warned=self.over_budget_warned,
            reasoning_warned=self.reasoning_warned,
            truncation_warned=self.truncation_warned,
            calibration=self.calibration,
            resume=resume,
        )
        self.serial = record.serial
        return record

    def _replay_for(self, fixed_tokens: int) -> CacheAwareReplay | None:
        if self.new_replay is None:
            return None
        replay = self._replays.get(fixed_tokens)
        if replay is None:
            replay = self._replays[fixed_tokens] = self.new_replay()
            if len(self._replays) > _REPLAYS_PER_CONVERSATION:
                self._replays.popitem(last=False)
        else:
            self._replays.move_to_end(fixed_tokens)
        return replay

    def _summary_text(self, cut: int) -> str | None:
        return None if self.summary is None else self.summary.text_for(cut)


def thread_id_of(config: Mapping[str, Any] | None) -> str | None:
    """The LangGraph thread of a run's config, or None outside a thread."""
    if not config:
        return None
    configurable = config.get("configurable") or {}
    thread_id = configurable.get("thread_id")
    return None if thread_id is None else str(thread_id)


class Conversations:
    """The governor's conversation states, found by thread id, least recently used dropped.

    Safe across threads and event loops: the lock guards the lookup only, never a
    governance run.

    Example:
        >>> from langchain_context_governance.state.repair_stream import RepairStream
        >>> def new_state():
        ...     one = lambda message: 1
        ...     repairs = RepairStream(repair_group=lambda m, d: (m, {}), count_message=one)
        ...     return ConversationState(repairs)
        >>> conversations = Conversations(new_state, max_conversations=2)
        >>> first = conversations.state_for("thread-1", list)
        >>> first is conversations.state_for("thread-1", list)
        True
        >>> _ = conversations.state_for("thread-2", list), conversations.state_for("thread-3", list)
        >>> len(conversations)
        2
    """

    def __init__(
        self,
        new_state: Callable[[], ConversationState],
        *,
        max_conversations: int = DEFAULT_MAX_CONVERSATIONS,
    ) -> None:
        self._new_state = new_state
        self._max_conversations = max_conversations
        self._states: OrderedDict[str | None, list[ConversationState]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return sum(len(states) for states in self._states.values())

    def state_for(
        self, thread_id: str | None, history: Callable[[], Sequence[BaseMessage]]
    ) -> ConversationState:
        """The state of the conversation whose messages `history()` gives; a new one when
        none fits. `history` is called only where states are compared by their history
        (no thread id, or several conversations under one), so a call of the one
        conversation of a thread reads none of its messages here."""
        with self._lock:
            states = self._states.get(thread_id)
            if states is None:
                states = self._states[thread_id] = []
                self._drop_oldest_threads()
            else:
                self._states.move_to_end(thread_id)
            state = self._continued_state(states, history, by_thread=thread_id is not None)
            if state is None:
                state = self._new_state()
                limit = _STATES_WITHOUT_THREAD if thread_id is None else _STATES_PER_THREAD
                if len(states) >= limit:
                    states.pop(0)
            else:
                states.remove(state)
            states.append(state)
            return state

    @staticmethod
    def _continued_state(
        states: list[ConversationState],
        history: Callable[[], Sequence[BaseMessage]],
        *,
        by_thread: bool,
    ) -> ConversationState | None:
        if by_thread and len(states) == 1:
            # One conversation per thread is the common case: no need to compare.
            return states[0]
        if not states:
            return None
        messages = history()
        for state in reversed(states):
            if state.repairs.continued_by(messages):
                return state
        return None

    def _drop_oldest_threads(self) -> None:
        while len(self._states) > self._max_conversations:
            self._states.popitem(last=False)
