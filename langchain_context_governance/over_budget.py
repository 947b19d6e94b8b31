"""Over budget is never silent: one WARNING per conversation that goes over its budget."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Hashable, Sequence

from langchain_core.messages import BaseMessage, HumanMessage

__all__ = ["OverBudgetWarnings", "conversation_key"]

logger = logging.getLogger("langchain_context_governance")

# Conversations remembered as warned; an old one forgotten is warned about once more.
MAX_WARNED_CONVERSATIONS = 1024


def conversation_key(messages: Sequence[BaseMessage]) -> Hashable:
    """What tells conversations apart here: the first user message (its id, else its text)."""
    for message in messages:
        if isinstance(message, HumanMessage):
            return message.id or message.text
    return None


class OverBudgetWarnings:
    """Logs a WARNING the first time a conversation's request is over its budget.

    Bounded: it remembers the last `max_conversations` conversations it warned about.
    """

    def __init__(self, max_conversations: int = MAX_WARNED_CONVERSATIONS) -> None:
        self._max = max_conversations
        self._warned: OrderedDict[Hashable, None] = OrderedDict()
        self._lock = threading.Lock()

    def check(self, messages: Sequence[BaseMessage], *, tokens: int, budget: int | None) -> bool:
        """Warn when `tokens` exceed `budget` and this conversation was not warned yet.

        Returns whether it warned.
        """
        if budget is None or tokens <= budget:
            return False
        key = conversation_key(messages)
        with self._lock:
            if key in self._warned:
                self._warned.move_to_end(key)
                return False
            self._warned[key] = None
            if len(self._warned) > self._max:
                self._warned.popitem(last=False)
        logger.warning(
            "context governance: the request is over budget: %d tokens for a budget of %d "
            "(%d over); the model may reject it as too long. Raise the window or shrink "
            "what governance cannot cut (the system message, the last turn, tool definitions).",
            tokens,
            budget,
            tokens - budget,
        )
        return True
