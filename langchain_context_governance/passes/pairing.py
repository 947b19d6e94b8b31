"""An incremental check of a history's shape, so a clean growing history skips the repairs."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from langchain_context_governance._messages import iter_declared_tool_calls
from langchain_context_governance.passes._replay_pool import extends


class RepairCheck:
    """Whether a history needs any repair before it is compacted and snipped.

    Clean means: no blank text; every tool result answers a call of the assistant
    message right before its run of results, once; every call of a finished run is
    answered and has an id and tool name the provider accepts; no two user or two
    assistant messages stand side by side; the first message after the system messages
    comes from the user, and no system message comes later. A clean history needs no
    repair that could add tokens after snipping.

    It holds what it learned from the history of its previous call; when the next call's
    messages extend that history, only the new messages are read.
    """

    def __init__(
        self,
        *,
        accepts_call: Callable[[str, str], bool] | None = None,
        breaks_at: Callable[[BaseMessage | None, BaseMessage], bool] | None = None,
    ) -> None:
        """`accepts_call(id, tool name)` says whether the provider takes a call as it is;
        `breaks_at(previous, message)` whether a message breaks a provider rule there."""
        self._accepts_call = accepts_call
        self._breaks_at = breaks_at
        # A snapshot, not the caller's list: a caller may append to its list in place.
        self._history: list[BaseMessage] = []
        self._declared: set[str] = set()
        self._open: set[str] = set()
        self._previous: BaseMessage | None = None
        self._clean = True

    def continues(self, messages: Sequence[BaseMessage]) -> bool:
        """Whether `messages` extends the history this check has read."""
        return extends(self._history, messages)

    def needs_repair(self, messages: Sequence[BaseMessage]) -> bool:
        """True when some message in `messages` is out of place (see the class doc)."""
        known = len(self._history)
        if not self.continues(messages):
            known = 0
            self._declared = set()
            self._open = set()
            self._previous = None
            self._clean = True
        self._history = list(messages)
        for message in self._history[known:]:
            self._read(message)
        return not self._clean or bool(self._open)

    def _read(self, message: BaseMessage) -> None:
        if self._clean:
            self._clean = self._fits_after(self._previous, message) and not _has_blank_text(message)
        if self._clean and self._breaks_at is not None:
            self._clean = not self._breaks_at(self._previous, message)
        self._previous = message
        if isinstance(message, ToolMessage):
            if message.tool_call_id in self._open:
                self._open.discard(message.tool_call_id)
            else:
                self._clean = False
            return
        if self._open:
            self._clean = False
        self._open = set()
        if isinstance(message, AIMessage):
            self._read_calls(message)

    def _read_calls(self, message: AIMessage) -> None:
        if any(not call.get("id") for call in message.tool_calls):
            self._clean = False
        declared = list(iter_declared_tool_calls(message))
        if self._accepts_call is not None and not all(
            self._accepts_call(call_id, name) for call_id, name in declared
        ):
            self._clean = False
        calls = [call_id for call_id, _ in declared]
        if self._declared.intersection(calls) or len(set(calls)) != len(calls):
            self._clean = False
        self._declared.update(calls)
        self._open = set(calls)

    @staticmethod
    def _fits_after(previous: BaseMessage | None, message: BaseMessage) -> bool:
        if isinstance(message, SystemMessage):
            return previous is None or isinstance(previous, SystemMessage)
        if previous is None or isinstance(previous, SystemMessage):
            return isinstance(message, HumanMessage)
        if isinstance(message, HumanMessage):
            return not isinstance(previous, HumanMessage)
        if isinstance(message, AIMessage):
            return not isinstance(previous, AIMessage)
        return True


def _has_blank_text(message: BaseMessage) -> bool:
    """Blank text that a provider profile would remove, or turn into a synthetic turn."""
    content = message.content
    if isinstance(content, str):
        plain = not isinstance(message, ToolMessage) and not (
            isinstance(message, AIMessage) and (message.tool_calls or message.invalid_tool_calls)
        )
        return plain and not content.strip()
    return not content or any(
        (isinstance(block, str) and not block.strip())
        or (
            isinstance(block, dict)
            and block.get("type") == "text"
            and not str(block.get("text") or "").strip()
        )
        for block in content
    )
