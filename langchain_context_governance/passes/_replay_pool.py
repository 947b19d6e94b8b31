"""A few incremental replay states, one per conversation a governor serves."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Generic, Protocol, TypeVar

from langchain_core.messages import BaseMessage


def extends(history: list[BaseMessage], messages: Sequence[BaseMessage]) -> bool:
    """Whether `messages` is a non-empty `history` with messages appended (or equal to it).

    Compared by identity first, then by equality, so that a history reloaded from a
    checkpoint (equal messages, new objects) still counts as the same conversation.
    """
    known = len(history)
    return 0 < known <= len(messages) and list(messages[:known]) == history


class Replay(Protocol):
    def continues(self, messages: Sequence[BaseMessage]) -> bool: ...


ReplayT = TypeVar("ReplayT", bound=Replay)
ResultT = TypeVar("ResultT")


class ReplayPool(Generic[ReplayT]):
    """Hands out the state whose history the messages extend, safe across threads.

    A governor may serve several conversations (threads of an agent, batch calls); each
    keeps its own state so that a growing history only replays what is new. When none
    fits, a new state starts and the least recently used one is dropped.
    """

    def __init__(self, new_state: Callable[[], ReplayT], *, size: int = 8) -> None:
        self._new_state = new_state
        self._size = size
        self._states: list[ReplayT] = []
        self._lock = threading.Lock()

    def run(self, messages: Sequence[BaseMessage], use: Callable[[ReplayT], ResultT]) -> ResultT:
        """Call `use` with the state for `messages`, holding the pool's lock."""
        with self._lock:
            state = next((s for s in self._states if s.continues(messages)), None)
            if state is None:
                state = self._new_state()
                if len(self._states) >= self._size:
                    self._states.pop(0)
            else:
                self._states.remove(state)
            self._states.append(state)
            return use(state)
