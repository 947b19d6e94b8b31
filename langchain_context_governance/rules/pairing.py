"""Tool calls and their results: each call answered once, right after the message that makes it.

Every provider pairs a tool result with a call of the assistant message just before its
run of results. The repair is the two core passes: drop the results that answer no call
(`drop_orphan_tool_results`) and give every unanswered call a placeholder result
(`backfill_missing_tool_results`).

Example:
    >>> from langchain_core.messages import HumanMessage, ToolMessage
    >>> request = [HumanMessage("hi"), ToolMessage("stray", tool_call_id="c9")]
    >>> [v.rule for v in TOOL_CALL_PAIRING.check(request)]
    ['orphan-tool-result']
    >>> [m.type for m in TOOL_CALL_PAIRING.repair(request)[0]]
    ['human']
"""

from __future__ import annotations

from dataclasses import dataclass, field

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from langchain_context_governance._messages import iter_declared_tool_calls
from langchain_context_governance.passes.backfill import backfill_missing_tool_results_with_count
from langchain_context_governance.passes.orphans import drop_orphan_tool_results_with_count
from langchain_context_governance.rules.rule import EVERY_PROFILE, Rule, Violation

__all__ = ["TOOL_CALL_PAIRING"]


@dataclass
class _ToolCallLedger:
    """One pass over the request pairing tool calls with their results.

    A tool call is answered only by a ToolMessage in the unbroken run of ToolMessages
    directly after the assistant message that declares it.
    """

    violations: list[Violation] = field(default_factory=list)
    declared_at: dict[str, int] = field(default_factory=dict)
    answered: set[str] = field(default_factory=set)
    run_owner: int = -1
    pending: dict[str, str] = field(default_factory=dict)

    def check(self, request: list[BaseMessage]) -> list[Violation]:
        for index, message in enumerate(request):
            if isinstance(message, ToolMessage):
                self._answer(index, message)
            elif isinstance(message, AIMessage):
                self._open_run(index, message)
            else:
                self._close_run()
        self._close_run()
        return self.violations

    def _open_run(self, index: int, message: AIMessage) -> None:
        self._close_run()
        for call_id, name in iter_declared_tool_calls(message):
            self.declared_at[call_id] = index
            self.answered.discard(call_id)
            self.pending[call_id] = name
        self.run_owner = index

    def _answer(self, index: int, message: ToolMessage) -> None:
        call_id = message.tool_call_id
        if call_id in self.pending:
            del self.pending[call_id]
            self.answered.add(call_id)
        elif call_id not in self.declared_at:
            self._add(
                index,
                "orphan-tool-result",
                f"Tool result for {call_id!r} answers no tool call declared by an earlier "
                "assistant message.",
            )
        elif call_id in self.answered:
            self._add(
                index,
                "duplicate-tool-result",
                f"Tool call {call_id!r} already has a tool result; this is a second one.",
            )
        else:
            self.answered.add(call_id)
            self._add(
                index,
                "tool-result-not-adjacent",
                f"Tool result for {call_id!r} is not in the run of tool messages directly "
                f"after message {self.declared_at[call_id]}, which declares the call.",
            )

    def _close_run(self) -> None:
        for call_id, name in self.pending.items():
            self._add(
                self.run_owner,
                "unanswered-tool-call",
                f"Tool call {call_id!r} ({name or 'unnamed'}) is not answered by a tool "
                "message directly after the assistant message that declares it.",
            )
        self.pending.clear()
        self.run_owner = -1

    def _add(self, index: int, rule: str, text: str) -> None:
        self.violations.append(Violation(index, rule, text))


def _check_pairing(request: list[BaseMessage]) -> list[Violation]:
    return _ToolCallLedger().check(request)


def _repair_pairing(messages: list[BaseMessage]) -> tuple[list[BaseMessage], int]:
    kept, dropped = drop_orphan_tool_results_with_count(messages)
    answered, added = backfill_missing_tool_results_with_count(kept)
    return answered, dropped + added


TOOL_CALL_PAIRING = Rule(
    name="tool-call-pairing",
    codes=(
        "orphan-tool-result",
        "duplicate-tool-result",
        "tool-result-not-adjacent",
        "unanswered-tool-call",
    ),
    prevents=(
        "OpenAI: \"An assistant message with 'tool_calls' must be followed by tool "
        "messages responding to each 'tool_call_id'.\"; Anthropic: \"`tool_use` ids were "
        'found without `tool_result` blocks immediately after"; Gemini: "Please ensure '
        'that function response turn comes immediately after a function call turn."; '
        'Mistral: "Not the same number of function calls and responses".'
    ),
    source="The providers' 400 error texts; mistral_common's request validator.",
    check=_check_pairing,
    repair=_repair_pairing,
    profiles=EVERY_PROFILE,
)
