"""What the governor knows about each conversation it serves, and where it finds it.

One compiled LangGraph graph, and so one governor, serves every thread of a server. A
conversation's state lets a call cost only what is new in its history: the repairs
decided so far, the replay of the compaction policy, the previous request for the
prefix report. It is found by the thread id LangGraph gives each run
(`config["configurable"]["thread_id"]`); plain calls without a thread are matched to
a state by the history itself. Everything in a state is rebuilt from the history when
it is missing (after a restart, on another worker, after eviction), and a rebuilt
state gives the same request as the one it replaces.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage

from langchain_context_governance.state.cache_aware import CacheAwareReplay
from langchain_context_governance.state.repair_stream import RepairStream

DEFAULT_MAX_CONVERSATIONS = 10_000
# States kept per thread (several agents of one graph may share a thread, each with its
# own message list) and for calls without a thread (matched by their history).
_STATES_PER_THREAD = 4
_STATES_WITHOUT_THREAD = 8


@dataclass
class ConversationState:
    """Everything the governor learned about one conversation.

    `repairs` holds the repair decisions, group by group; `replay` the replay of the
    cache-aware policy (None without a budget or with `compaction="keep_recent"`);
    `over_budget_warned` whether the conversation's over-budget warning was logged;
    `summary` the summary model's text for the latest cut, by the cut's position (None
    where the model failed: it is asked once per cut).
    A state serves one call at a time (`lock`); a call that finds it busy governs with a
    fresh state instead, which gives the same request.
    """

    repairs: RepairStream
    replay: CacheAwareReplay | None
    over_budget_warned: bool = False
    summary: tuple[int, str | None] | None = None
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def forget(self) -> None:
        """Start over from the next call's history (after a failed call)."""
        self.repairs.start_over()
        self._forget_replay()

    def restart_if(self, restarted: bool) -> None:
        """Forget the replay when the repairs had to start over (the history was edited)."""
        if restarted:
            self._forget_replay()

    def summary_for(self, cut: int) -> str | None:
        """The summary made for a cut at `cut`, if there is one."""
        if self.summary is None or self.summary[0] != cut:
            return None
        return self.summary[1]

    def _forget_replay(self) -> None:
        if self.replay is not None:
            self.replay.reset()
        self.summary = None


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
        ...     repairs = RepairStream(repair_group=lambda m, d: (m, {}), count_message=len)
        ...     return ConversationState(repairs, replay=None)
        >>> conversations = Conversations(new_state, max_conversations=2)
        >>> first = conversations.state_for("thread-1", [])
        >>> first is conversations.state_for("thread-1", [])
        True
        >>> _ = conversations.state_for("thread-2", []), conversations.state_for("thread-3", [])
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
        self, thread_id: str | None, messages: Sequence[BaseMessage]
    ) -> ConversationState:
        """The state of the conversation `messages` belongs to; a new one when none fits."""
        with self._lock:
            states = self._states.get(thread_id)
            if states is None:
                states = self._states[thread_id] = []
                self._drop_oldest_threads()
            else:
                self._states.move_to_end(thread_id)
            state = self._continued_state(states, messages, by_thread=thread_id is not None)
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
        states: list[ConversationState], messages: Sequence[BaseMessage], *, by_thread: bool
    ) -> ConversationState | None:
        if by_thread and len(states) == 1:
            # One conversation per thread is the common case: no need to compare.
            return states[0]
        for state in reversed(states):
            if state.repairs.continued_by(messages):
                return state
        return None

    def _drop_oldest_threads(self) -> None:
        while len(self._states) > self._max_conversations:
            self._states.popitem(last=False)
