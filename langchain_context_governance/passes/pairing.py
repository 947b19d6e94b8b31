"""An incremental check of tool-call pairing, so a clean growing history skips the repairs."""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from langchain_context_governance._messages import iter_declared_tool_calls
from langchain_context_governance.passes._replay_pool import extends


class PairingCheck:
    """Whether a history needs `drop_orphan_tool_results` or `backfill_missing_tool_results`.

    It holds what it learned from the history of its previous call; when the next call's
    messages extend that history, only the new messages are read. A history is clean
    when every tool result answers a call of the assistant message right before its run
    of results, once, and every call of a finished run was answered.
    """

    def __init__(self) -> None:
        # A snapshot, not the caller's list: a caller may append to its list in place.
        self._history: list[BaseMessage] = []
        self._declared: set[str] = set()
        self._open: set[str] = set()
        self._clean = True

    def continues(self, messages: Sequence[BaseMessage]) -> bool:
        """Whether `messages` extends the history this check has read."""
        return extends(self._history, messages)

    def needs_repair(self, messages: Sequence[BaseMessage]) -> bool:
        """True when some tool result or tool call in `messages` is out of place."""
        known = len(self._history)
        if not self.continues(messages):
            known = 0
            self._declared = set()
            self._open = set()
            self._clean = True
        self._history = list(messages)
        for message in self._history[known:]:
            self._read(message)
        return not self._clean or bool(self._open)

    def _read(self, message: BaseMessage) -> None:
        if isinstance(message, ToolMessage):
            if message.tool_call_id in self._open:
                self._open.discard(message.tool_call_id)
            else:
                self._clean = False
            return
        if self._open:
            self._clean = False
        if isinstance(message, AIMessage) and (
            message.tool_calls or message.invalid_tool_calls or isinstance(message.content, list)
        ):
            calls = [call_id for call_id, _ in iter_declared_tool_calls(message)]
            if self._declared.intersection(calls):
                self._clean = False
            self._declared.update(calls)
            self._open = set(calls)
        else:
            self._open = set()
