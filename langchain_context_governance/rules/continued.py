"""`Profile.repair` of a request that continues the previous one, at the cost of what is new.

A conversation's requests grow by a few messages a call, and the one before was already
legal: running every rule over the whole request again (`Profile.repair`, the stateless
path) makes each call cost the whole request. `ContinuedRepair` gives exactly what
`Profile.repair` gives, but where the previous request needed no repair and this one
begins with its messages, it runs the rules only over a window: from the last group of
the previous request (the last assistant or user message and the results after it) to
the end. That decides every rule, because each rule either reads each message on its
own, a message and its neighbour, an assistant message and the results right after it,
the system messages after the conversation started, or the request's start and end
(`_WINDOW_RULES`); the three rules that read further back get what they need from the
part before the window as a small state (`_Resume`): the call ids declared there
(unique ids), whether a response with tool calls carried `reasoning_content` (DeepSeek),
and where the tool loop the request ends in opened (Anthropic's thinking). A window that
opens with an assistant message gets a plain user turn in front of it, standing for the
user turn the request opened with. Where the window needs any repair, or anything is
not known, the whole request goes through `Profile.repair`.

A rule not listed here is always run over the whole request: a rule added to the table
costs the whole request on every call until it is classified (the test of this module
lists every rule).

Example:
    >>> from array import array
    >>> from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    >>> from langchain_context_governance.rules.profile import resolve_profile
    >>> repairs = ContinuedRepair(resolve_profile("anthropic"))
    >>> def call(n):
    ...     step = {"name": "grep", "args": {}, "id": f"toolu_{n}"}
    ...     return [AIMessage("", tool_calls=[step]), ToolMessage("hit", tool_call_id=f"toolu_{n}")]
    >>> request = [HumanMessage("find it"), *call(1)]
    >>> repairs.repair(request, prints=array("q", [1, 2, 3]))[0] is request
    True
    >>> longer = [*request, *call(2)]
    >>> repairs.repair(longer, prints=array("q", [1, 2, 3, 4, 5]))[0] is longer
    True
    >>> repairs.windows  # the second call looked at its last three messages only
    1
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from langchain_context_governance._messages import call_key, iter_declared_tool_calls
from langchain_context_governance._packing import PackedInts, as_count
from langchain_context_governance._reasoning import opens_with_thinking, signed_thinking_blocks
from langchain_context_governance.rules import (
    content,
    ids,
    pairing,
    reasoning,
    systems,
    tool_traffic,
    turns,
)
from langchain_context_governance.rules.profile import Profile
from langchain_context_governance.rules.rule import ALTERNATION_PASS_NAME, PASS_NAME, Rule

__all__ = ["ContinuedRepair"]

# Rules decided on the window alone: each reads a message on its own, a message and the
# one before it, an assistant message and the tool results right after it (a window
# opens on an assistant or a user message, so no run of results is cut), the system
# messages after the conversation started (the window opens after it started), or the
# request's end.
_WINDOW_RULES = frozenset(
    rule.name
    for rule in (
        turns.MESSAGE_TYPES,
        reasoning.SIGNED_THINKING_BLOCKS,
        reasoning.OPENAI_REASONING_ITEMS,
        tool_traffic.SENDABLE_INVALID_TOOL_CALLS,
        pairing.TOOL_CALL_PAIRING,
        tool_traffic.TOOL_CALLS_DECLARED,
        ids.TOOL_CALL_IDS,
        ids.UNIQUE_TOOL_CALL_IDS,
        ids.OPENAI_TOOL_CALL_ID_LENGTH,
        ids.ANTHROPIC_TOOL_CALL_ID_FORMAT,
        ids.NINE_CHARACTER_TOOL_CALL_IDS,
        ids.TOOL_NAME_FORMAT,
        reasoning.THOUGHT_SIGNATURES_WITH_THEIR_CALLS,
        tool_traffic.NO_INVALID_TOOL_CALLS,
        tool_traffic.ONE_TOOL_CALL_PER_MESSAGE,
        tool_traffic.NO_TOOL_ROLE,
        reasoning.REASONING_CONTENT_WITH_TOOL_CALLS,
        content.NON_EMPTY_CONTENT,
        systems.SYSTEM_NOT_FIRST,
        systems.SYSTEM_AFTER_ASSISTANT_OR_TOOL,
        systems.SYSTEM_THEN_ASSISTANT,
        systems.ONE_LEADING_SYSTEM_MESSAGE,
        systems.NO_SYSTEM_ROLE,
        turns.TURN_ORDER,
        turns.NO_USER_AFTER_TOOL_RESULTS,
        turns.REQUEST_HAS_A_TURN,
    )
)
# Rules that also read the part before the window; `_Resume` carries what they need.
_UNIQUE_IDS = ids.UNIQUE_TOOL_CALL_IDS.name
_REASONING_CONTENT = reasoning.REASONING_CONTENT_WITH_TOOL_CALLS.name
# Decided from `_Resume` and the window, never on the window alone: the window's own
# start (or the user turn put in front of it) is not where the tool loop opened.
_THINKING_LOOP = reasoning.THINKING_OPENS_THE_TOOL_LOOP.name
CLASSIFIED_RULES = _WINDOW_RULES | {_THINKING_LOOP}

# Call ids a message of a snapshot taken up may declare, at most (a generous bound).
_MAX_CALLS_A_MESSAGE = 1_024
# Stands for the user turn the request opened with, in front of a window that opens
# with an assistant message. Repairs never edit their input, so one object serves.
_OPENING = HumanMessage("(the conversation so far)")


@dataclass
class _Resume:
    """What the rules need of a legal request's messages before `position` (the start of
    its last group), where the next request's window opens."""

    position: int
    # The request's fingerprints, to see how many leading messages the next one shares;
    # None where the state came from a record (another process's fingerprints are not
    # this one's): the caller then says how many it shares (by the record's digests).
    prints: array[int] | None
    # How many messages the request had.
    length: int
    # The call ids declared (by `call_key`), in the order they came, and as a record
    # carries them (packed as they grow).
    declared: dict[int, None] = field(default_factory=dict)
    packed: PackedInts = field(default_factory=PackedInts)
    reasoning_content: bool = False
    loop: _Loop = field(default_factory=lambda: _Loop())


@dataclass
class _Loop:
    """The tool loop the messages read so far end in: where its opening assistant message
    is, whether it opens with a thinking block, and whether any of its messages has one."""

    opening: int | None = None
    opens_with_thinking: bool = False
    thinking: bool = False

    def read(self, message: BaseMessage, index: int) -> None:
        if isinstance(message, HumanMessage):
            self.opening, self.opens_with_thinking, self.thinking = None, False, False
        elif isinstance(message, AIMessage):
            if self.opening is None:
                self.opening, self.opens_with_thinking = index, opens_with_thinking(message)
            if signed_thinking_blocks(message):
                self.thinking = True


class ContinuedRepair:
    """`Profile.repair` of a conversation's successive requests (see the module doc).

    `repair(request, prints=...)` returns what `profile.repair(request)` returns;
    `prints` are the request's message fingerprints (equal fingerprints, equal messages),
    which tell how many leading messages it shares with the previous request. Counts
    the calls decided on a window in `windows`.
    """

    def __init__(self, profile: Profile) -> None:
        self._profile = profile
        names = {rule.name for rule in profile.rules}
        self._window_rules: tuple[Rule, ...] = tuple(
            rule for rule in profile.rules if rule.name != _THINKING_LOOP
        )
        self._continuable = names <= CLASSIFIED_RULES
        self._unique_ids = _UNIQUE_IDS in names
        self._reasoning_content = _REASONING_CONTENT in names
        self._thinking_loop = _THINKING_LOOP in names
        self._resume: _Resume | None = None
        self.windows = 0

    def start_over(self) -> None:
        """Forget the previous request: the next one is repaired whole."""
        self._resume = None

    def snapshot(self) -> dict[str, Any] | None:
        """What the next request's repair needs of the previous one, as plain data a record
        carries (positions, flags and call ids as digests), or None where the next
        request is repaired whole."""
        resume = self._resume
        if resume is None:
            return None
        loop = resume.loop
        return {
            "position": resume.position,
            "length": resume.length,
            "declared": resume.packed.pack(resume.declared),
            "reasoning_content": resume.reasoning_content,
            "loop": [loop.opening, loop.opens_with_thinking, loop.thinking],
        }

    def restore(self, data: Mapping[str, Any] | None, *, length: int) -> bool:
        """Continue from another process's `snapshot` of the previous request, which had
        `length` messages; False, and the next request is repaired whole, where `data`
        cannot be read or does not describe such a request (a snapshot is untrusted input:
        it comes from a record; its numbers are bounded by that request before anything
        is made of them)."""
        self._resume = None
        if data is None:
            return False
        try:
            opening, opens_with_thinking, thinking = data["loop"]
            position = as_count(data["position"])
            declared = data["declared"]
            if (
                as_count(data["length"]) != length
                or position >= length
                or not isinstance(declared, str)
                or len(declared) > 8 + (8 * _MAX_CALLS_A_MESSAGE * length + 2) // 3 * 4
                or (opening is not None and as_count(opening) > position)
                or not all(
                    isinstance(flag, bool)
                    for flag in (opens_with_thinking, thinking, data["reasoning_content"])
                )
            ):
                raise ValueError("a snapshot of another request")
            packed = PackedInts()
            resume = _Resume(
                position=position,
                prints=None,
                length=length,
                declared=dict.fromkeys(packed.take_up(declared)),
                packed=packed,
                reasoning_content=data["reasoning_content"],
                loop=_Loop(opening, opens_with_thinking, thinking),
            )
        except (KeyError, TypeError, ValueError, IndexError, RecursionError):
            return False
        self._resume = resume
        return True

    def repair(
        self,
        request: list[BaseMessage],
        *,
        prints: array[int] | None,
        unchanged: int | None = None,
    ) -> tuple[list[BaseMessage], dict[str, int]]:
        """`Profile.repair(request)`, deciding only the new messages where it can.

        `unchanged`: how many leading messages the request shares with the previous one,
        where the caller knows (needed after `restore`, which has no fingerprints)."""
        resume = self._resume
        self._resume = None
        if (
            resume is not None
            and prints is not None
            and self._window_is_legal(request, resume, prints, unchanged)
        ):
            self.windows += 1
            self._resume = self._resumed(request, resume, prints)
            return request, {PASS_NAME: 0, ALTERNATION_PASS_NAME: 0}
        repaired, changes = self._profile.repair(request)
        if repaired is request and prints is not None and self._continuable:
            self._resume = self._resumed(request, _Resume(0, prints, len(prints)), prints)
        return repaired, changes

    def _window_is_legal(
        self,
        request: list[BaseMessage],
        resume: _Resume,
        prints: array[int],
        unchanged: int | None,
    ) -> bool:
        start = resume.position
        # The window's first message and everything before it are the previous request's.
        if len(prints) != len(request) or resume.length <= start or len(request) <= start:
            return False
        if resume.prints is not None:
            if prints[: start + 1] != resume.prints[: start + 1]:
                return False
        elif unchanged is None or unchanged <= start:
            return False
        window = request[start:]
        if isinstance(window[0], AIMessage):
            window = [_OPENING, *window]
        for rule in self._window_rules:
            if rule.repair(window)[0] is not window:
                return False
        new = request[start:]
        if self._unique_ids and any(
            call_key(call_id) in resume.declared
            for message in new
            if isinstance(message, AIMessage)
            for call_id, _ in iter_declared_tool_calls(message)
        ):
            return False
        if self._reasoning_content and resume.reasoning_content and any(map(_lost_reasoning, new)):
            return False
        return not (self._thinking_loop and self._loop_lost_its_thinking(request, resume))

    def _loop_lost_its_thinking(self, request: list[BaseMessage], resume: _Resume) -> bool:
        """Whether the tool loop the request ends in opens without the thinking block its
        other messages carry (what `THINKING_OPENS_THE_TOOL_LOOP` repairs), as
        `_reasoning.tool_loop_opening` finds the loop, from `resume` on."""
        end = len(request)
        while end > 0 and isinstance(request[end - 1], SystemMessage):
            end -= 1
        if end == 0 or not isinstance(request[end - 1], ToolMessage):
            return False
        loop = _Loop(**vars(resume.loop))
        for index in range(resume.position, len(request)):
            loop.read(request[index], index)
        return loop.opening is not None and not loop.opens_with_thinking and loop.thinking

    def _resumed(
        self, request: list[BaseMessage], resume: _Resume, prints: array[int]
    ) -> _Resume | None:
        """What the next call needs of this (legal) request: the state before its last group."""
        position = _last_group_start(request)
        if position is None:
            return None
        # The state before the previous window is reused; the messages since are read.
        for index in range(resume.position, position):
            message = request[index]
            if self._unique_ids and isinstance(message, AIMessage):
                resume.declared.update(
                    (call_key(call_id), None) for call_id, _ in iter_declared_tool_calls(message)
                )
            if self._reasoning_content and _carries_reasoning_content(message):
                resume.reasoning_content = True
            if self._thinking_loop:
                resume.loop.read(message, index)
        resume.position = position
        resume.prints, resume.length = prints, len(prints)
        return resume


def _last_group_start(request: Sequence[BaseMessage]) -> int | None:
    """Where the request's last group starts: its last assistant or user message."""
    for index in range(len(request) - 1, -1, -1):
        message = request[index]
        if isinstance(message, (AIMessage, HumanMessage)):
            return index
        if not isinstance(message, ToolMessage):
            return None
    return None


def _makes_calls(message: BaseMessage) -> bool:
    return isinstance(message, AIMessage) and bool(message.tool_calls or message.invalid_tool_calls)


def _carries_reasoning_content(message: BaseMessage) -> bool:
    """A response with tool calls and its `reasoning_content` (DeepSeek's thinking mode)."""
    return _makes_calls(message) and isinstance(
        message.additional_kwargs.get("reasoning_content"), str
    )


def _lost_reasoning(message: BaseMessage) -> bool:
    """A response with tool calls without `reasoning_content`, after one that had it."""
    return _makes_calls(message) and not isinstance(
        message.additional_kwargs.get("reasoning_content"), str
    )
