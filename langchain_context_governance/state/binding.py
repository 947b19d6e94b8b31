"""Which messages' bound reasoning is no longer valid: the positions an edit put it behind.

A thinking block (Anthropic) or a reasoning item (OpenAI) is valid only while everything
before it is what the model saw when it made it: the request governance sent at the call
that produced its message. The compaction replay decides at every call point what the
request holds (state/cache_aware.py); where a call point's request differs from the one
before it at position `e` (a result compacted, the front after a cut rebuilt, a late
system message moved to the front), every message made by an earlier call at a position
after `e` now sits behind a prefix it was not made after. Those positions are the
policy's `LeftOut` ranges (policy/left_out.py); this module leaves their reasoning out of a
request. Messages made after an edit are bound to the edited request, and stay valid while
nothing changes before them again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage

from langchain_context_governance._added import added_kind
from langchain_context_governance._reasoning import (
    carries_bound_reasoning,
    carries_provider_compaction,
    without_bound_reasoning,
)
from langchain_context_governance.policy.left_out import LeftOut

__all__ = [
    "StaleReasoning",
    "leave_out_stale_reasoning",
    "turns_around_compaction",
    "without_messages",
]


def leave_out_stale_reasoning(
    request: list[BaseMessage],
    planned: Sequence[BaseMessage],
    *,
    position_of: Callable[[int], int | None],
    still_bound: Callable[[int, int], bool],
    candidates: Iterable[int] | None = None,
    stripped: Callable[[AIMessage, int | None], AIMessage] | None = None,
) -> tuple[list[BaseMessage], list[int]]:
    """`request` with the bound reasoning left out of every message whose prefix changed,
    and the history positions of those messages.

    `planned` is the request as the compaction policy made it; where the steps after it
    (the request rules, the last resort) changed or added a message, every message from
    there on is behind a prefix this call changed. Before that, `position_of(index)` gives
    the history position of the planned message at `index` (None for one governance made),
    and `still_bound(index, position)` whether the plan kept its prefix since its call.
    `candidates`, where given, are the only indices before the change that may have lost
    it (the others are not looked at); `stripped(message, position)` makes the copy
    without the reasoning (`without_bound_reasoning` by default: a caller may keep them).

    Example:
        >>> from langchain_core.messages import HumanMessage, ToolMessage
        >>> thinking = {"type": "thinking", "thinking": "", "signature": "EqQB"}
        >>> call = {"name": "read_file", "args": {}, "id": "toolu_1"}
        >>> planned = [HumanMessage("go"), AIMessage([thinking], tool_calls=[call]),
        ...            ToolMessage("text", tool_call_id="toolu_1")]
        >>> sent, positions = leave_out_stale_reasoning(
        ...     planned, planned, position_of=lambda i: i, still_bound=lambda i, p: p != 1
        ... )
        >>> sent[1].content, positions
        ([], [1])
    """
    changed = min(len(request), len(planned))
    if request is not planned:
        pairs = enumerate(zip(request, planned, strict=False))
        changed = next((index for index, (sent, made) in pairs if sent is not made), changed)
    looked_at: Iterable[int] = range(len(request))
    if candidates is not None:
        looked_at = sorted({*(i for i in candidates if i < changed), *range(changed, len(request))})
    output = request
    left_out: list[int] = []
    planned_at: dict[int, int] | None = None
    for index in looked_at:
        message = request[index]
        if not carries_bound_reasoning(message):
            continue
        if index < changed:
            position = position_of(index)
            if position is not None and still_bound(index, position):
                continue
        else:
            # Rare: found by identity among the planned messages, for the report.
            if planned_at is None:
                planned_at = {id(made): at for at, made in enumerate(planned)}
            at = planned_at.get(id(message))
            position = None if at is None else position_of(at)
        if output is request:
            output = list(request)
        assert isinstance(message, AIMessage)
        output[index] = (
            without_bound_reasoning(message) if stripped is None else stripped(message, position)
        )
        if position is not None:
            left_out.append(position)
    return output, left_out


@dataclass(frozen=True)
class StaleReasoning:
    """How to tell, in a request, which messages' bound reasoning lost its prefix.

    `planned` is the request as the compaction policy made it; `position_of(index)` the
    history position of its message at `index` (None for one governance made);
    `still_bound(index, position)` whether the plan kept that message's prefix since its
    call; `candidates` the only indices that may not have (None: any).
    """

    planned: Sequence[BaseMessage]
    position_of: Callable[[int], int | None]
    still_bound: Callable[[int, int], bool]
    candidates: Iterable[int] | None = None

    @classmethod
    def of_replay(
        cls,
        planned: Sequence[BaseMessage],
        origins: Sequence[tuple[int, ...]],
        left_out: LeftOut,
        candidates: Iterable[int] | None,
    ) -> StaleReasoning:
        """By the cache-aware replay's decisions: `origins` of each planned message, the
        positions `left_out` covers."""

        def position_of(index: int) -> int | None:
            made_from = origins[index]
            return made_from[0] if len(made_from) == 1 else None

        return cls(
            planned, position_of, lambda _, position: not left_out.covers(position), candidates
        )

    @classmethod
    def of_repaired(
        cls, planned: Sequence[BaseMessage], repaired: Sequence[BaseMessage]
    ) -> StaleReasoning:
        """Without the replay: a message keeps its prefix only where everything before it
        is the repaired history itself."""
        pairs = enumerate(zip(planned, repaired, strict=False))
        unchanged = next(
            (index for index, (a, b) in pairs if a is not b), min(len(planned), len(repaired))
        )
        found: dict[int, int] = {}

        def position_of(index: int) -> int | None:
            if index < unchanged:
                return index
            if not found:
                found.update((id(message), at) for at, message in enumerate(repaired))
            return found.get(id(planned[index]))

        return cls(planned, position_of, lambda index, _: index < unchanged)

    def without(self, removed: Sequence[int]) -> StaleReasoning:
        """The same, for the planned request without the messages at `removed` (sorted):
        what every call takes out alike changes no prefix."""
        if not removed:
            return self
        unmoved = self.position_of
        still_bound = self.still_bound

        def moved(index: int) -> int:
            for at in removed:
                index += at <= index
            return index

        def position_of(index: int) -> int | None:
            return unmoved(moved(index))

        candidates = None
        if self.candidates is not None:
            taken = set(removed)
            candidates = [
                index - sum(at < index for at in removed)
                for index in self.candidates
                if index not in taken
            ]
        return StaleReasoning(
            without_messages(self.planned, removed),
            position_of,
            lambda index, position: still_bound(moved(index), position),
            candidates,
        )

    def leave_out(
        self,
        request: list[BaseMessage],
        stripped: Callable[[AIMessage, int | None], AIMessage] | None = None,
    ) -> tuple[list[BaseMessage], list[int]]:
        """`leave_out_stale_reasoning` of `request` against this plan."""
        return leave_out_stale_reasoning(
            request,
            self.planned,
            position_of=self.position_of,
            still_bound=self.still_bound,
            candidates=self.candidates,
            stripped=stripped,
        )


def turns_around_compaction(messages: Sequence[BaseMessage]) -> list[int]:
    """The user turns governance put around a provider's compaction block that opens the
    request: in front of it (the turn order wants a user first; Anthropic wants the block
    first) and between it and an assistant turn kept after it (Anthropic: the kept turns
    follow the block directly, or their thinking is behind a changed prefix).

    Example:
        >>> from langchain_core.messages import HumanMessage, SystemMessage
        >>> from langchain_context_governance._added import synthetic_user_turn
        >>> summary = AIMessage([{"type": "compaction", "content": "...", "signature": "Eu"}])
        >>> kept = AIMessage("meanwhile")
        >>> request = [SystemMessage("s"), synthetic_user_turn(), summary,
        ...            synthetic_user_turn(), kept, HumanMessage("go")]
        >>> turns_around_compaction(request)
        [1, 3]
    """
    first = 0
    while first < len(messages) and isinstance(messages[first], SystemMessage):
        first += 1
    block = first + 1 if first < len(messages) and added_kind(messages[first]) else first
    if block >= len(messages) or not carries_provider_compaction(messages[block]):
        return []
    turns = [first] if block > first else []
    after = block + 1
    if (
        after + 1 < len(messages)
        and added_kind(messages[after]) is not None
        and isinstance(messages[after + 1], AIMessage)
    ):
        turns.append(after)
    return turns


def without_messages(messages: Sequence[BaseMessage], removed: Sequence[int]) -> list[BaseMessage]:
    """`messages` without those at the indices `removed`."""
    taken = set(removed)
    return [message for index, message in enumerate(messages) if index not in taken]
