"""The request of the cache-aware replay's decisions, made from the history, fast.

The replay (state/cache_aware.py) decides where the request starts, what is compacted,
what is kept before the cut and which note goes there; this module decides nothing: it
makes the request those decisions name. After a cut: the front (the system messages, the
pinned task, the messages kept by protection class, the note at the cut, the user turns
that meet there joined), then the history from the cut, compacted results as their
placeholder.

What it made is reused while the decisions stay, so a call adds its new messages only:
the kept part as costs and fingerprints (its messages are sliced from the call's history),
the front by weak reference, what it made of the conversation's messages (the joined
user turns, the task cut to its share, the compacted results, the pinned user words, the
items of what a cut leaves out) only while those messages live (state/made.py), and the
last few notes by what they say.
"""

from __future__ import annotations

import bisect
import itertools
import operator
import weakref
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from langchain_context_governance._added import (
    added_kind,
    join_user_parts,
    user_parts,
    without_added_parts,
)
from langchain_context_governance._messages import content_text_length, message_fingerprint
from langchain_context_governance.offload.items import OffloadItem, answered_call, message_item
from langchain_context_governance.offload.kept import Offload, is_read_call
from langchain_context_governance.policy.compaction import ResultCompaction, offloaded_result
from langchain_context_governance.policy.decisions import (
    NOTE_KEPT,
    NOTE_NONE,
    NOTE_SUMMARY,
    NOTE_VALUES,
    Decisions,
    KeptGroup,
)
from langchain_context_governance.policy.note import cut_turns
from langchain_context_governance.policy.protection import (
    CURRENT_TURN,
    LATEST_USER,
    SYSTEM,
    TASK,
)
from langchain_context_governance.policy.task import pinned_task_copy
from langchain_context_governance.state.made import MadeMessages
from langchain_context_governance.state.replay_state import ReplayLearning
from langchain_context_governance.tokens.counter import MessageTokenCounter

__all__ = ["AssembledRequest", "RequestAssembly", "RequestOrigins", "note_listing"]

# Joined user turns and notes kept between calls: the front after a cut changes only at
# the next cut. A cut has at most three notes (with the summary, with the values of what
# it leaves out, plain), each kept by what it is made of: no more are kept.
_JOINED_KEPT = 8
_NOTES_KEPT = 3
# Marks a compacted result in a request's fingerprints.
_COMPACTED = 0x5F3759DF


def note_listing(listed: str, *, offloading: bool) -> dict[str, Any]:
    """What the note says of the cut's `note_values`: the values its data turn lists;
    with offload, the call that reads the cut's transcript (the first line, in the
    note's own words where it is exactly such a call) and the lines naming the
    messages kept, in its data turn."""
    if not offloading:
        return {"values": listed}
    lines = listed.splitlines()
    if lines and is_read_call(lines[0]):
        return {"kept": lines[0], "handles": tuple(lines[1:])}
    return {"handles": tuple(lines)}


class RequestOrigins(Sequence[tuple[int, ...]]):
    """The history positions each request message was made from: those of the front, one
    by one, then one position each for the kept part, from `body_start` on."""

    def __init__(self, front: list[tuple[int, ...]], body_start: int, length: int) -> None:
        self._front = front
        self._body_start = body_start
        self._length = length

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, index: int) -> tuple[int, ...]: ...

    @overload
    def __getitem__(self, index: slice) -> list[tuple[int, ...]]: ...

    def __getitem__(self, index: int | slice) -> tuple[int, ...] | list[tuple[int, ...]]:
        if isinstance(index, slice):
            return [self[position] for position in range(*index.indices(self._length))]
        if index < 0:
            index += self._length
        if not 0 <= index < self._length:
            raise IndexError(index)
        if index < len(self._front):
            return self._front[index]
        return (self._body_start + index - len(self._front),)

    def indices_between(self, low: int, high: int) -> Iterator[int]:
        """The request indices of the messages made from history positions `low` to
        `high`: the front's by a look at each, the kept part's by arithmetic."""
        for index, made_from in enumerate(self._front):
            if any(low <= position < high for position in made_from):
                yield index
        offset = len(self._front) - self._body_start
        yield from range(max(low, self._body_start) + offset, min(high + offset, self._length))


@dataclass(frozen=True)
class AssembledRequest:
    """The messages of a request, with what each costs and its fingerprint, the history
    positions sent compacted, those sent from before the cut with their protection
    class, and the positions each message was made from."""

    messages: list[BaseMessage]
    costs: array[int]
    prints: array[int]
    compacted: tuple[int, ...]
    kept: tuple[tuple[int, str], ...]
    origins: RequestOrigins


@dataclass
class _Sent:
    """Messages of a request with what each costs, its fingerprint and the history
    positions it was made from; `compacted` are the positions sent compacted."""

    messages: list[BaseMessage] = field(default_factory=list)
    costs: list[int] = field(default_factory=list)
    prints: list[int] = field(default_factory=list)
    origins: list[tuple[int, ...]] = field(default_factory=list)
    compacted: list[int] = field(default_factory=list)

    def add(
        self, message: BaseMessage, cost: int, fingerprint: int, origin: tuple[int, ...]
    ) -> None:
        self.messages.append(message)
        self.costs.append(cost)
        self.prints.append(fingerprint)
        self.origins.append(origin)


@dataclass
class _Body:
    """What the history from `start` on costs as sent (compacted results as their
    placeholder), known up to position `upto` and extended as the history grows, while
    the cut and the compaction stay: a call then adds its new positions only.

    No message is kept: the messages are sliced from the call's history, and the
    compacted copies (kept by `_compacted_copies` while their result lives) are found
    again by weak reference.
    """

    start: int
    compacted_count: int
    upto: int
    costs: array[int] = field(default_factory=lambda: array("q"))
    prints: array[int] = field(default_factory=lambda: array("q"))
    compacted: list[int] = field(default_factory=list)
    copies: list[weakref.ref[BaseMessage]] = field(default_factory=list)


@dataclass
class _Front:
    """What a request sends before the kept part after a cut (the system messages, the
    pinned task, the messages kept by protection class), by weak reference, with the
    decisions it was made for (`key`); made once per cut and reused while they stay.
    `kept` is each position's protection class for the report, made for `pinned_why`
    (the latest user message pinned is the current turn until a user writes again)."""

    key: tuple[Any, ...]
    refs: list[weakref.ref[BaseMessage]]
    sent: _Sent
    kept: tuple[tuple[int, str], ...]
    pinned_why: str | None


class RequestAssembly:
    """Makes the request of a replay's decisions, and keeps what it made for the next call.

    `build` makes the request; `compacted_tokens`, `cut_part` and `note_turns` make what
    the replay's decisions count or list too (a compacted result, the item of a message
    a cut leaves out, the note), kept with the rest. `start_over()` forgets what was made
    of the history; `forget_objects()` what was made of the previous call's objects.
    """

    def __init__(
        self, *, counter: MessageTokenCounter, compaction: ResultCompaction, max_tokens: int
    ) -> None:
        self._counter = counter
        self._compaction = compaction
        self._max_tokens = max_tokens
        self._joined: MadeMessages[tuple[BaseMessage, int, int]] = MadeMessages(limit=_JOINED_KEPT)
        self._notes: dict[tuple[Any, ...], list[tuple[BaseMessage, int, int]]] = {}
        self.start_over()

    def start_over(self) -> None:
        """Forget what was made of the history (the joined turns and the notes are kept by
        what they are made of, and stay)."""
        self._task_copies: MadeMessages[BaseMessage] = MadeMessages()
        self._compacted_copies: MadeMessages[BaseMessage] = MadeMessages()
        self._words_copies: MadeMessages[BaseMessage] = MadeMessages()
        # The items of the messages cuts leave out (offload), kept while those messages
        # live: cut after cut meets the same messages, and a made item was kept (written)
        # in the call that made it.
        self._cut_items: MadeMessages[tuple[OffloadItem | None, bool]] = MadeMessages()
        self._front: _Front | None = None
        self._body: _Body | None = None

    def forget_objects(self) -> None:
        """Forget what was made of the previous call's message objects: not this call's."""
        self._front = None
        if self._body is not None:
            self._body.copies = []

    def build(
        self,
        history: Sequence[BaseMessage],
        replay: ReplayLearning,
        decisions: Decisions,
        *,
        start: int,
        omitted: int,
        summary: str | None,
        brief: bool,
        final: int,
        offload: Offload | None,
    ) -> AssembledRequest:
        """The request of `decisions` from `start` on: after a cut (`start` > 0), the front
        (system messages, the task, the messages kept by protection class, the note of
        `decisions.note_variant` for `omitted` messages, with `summary`, `brief`), then the
        history from the cut.

        What was sent of the `final` positions is reused while the cut and the compaction
        stay (`_body_from`), so a call adds its new messages only; the front is made once
        per cut (`_front_of`) and only the note is chosen again, by the request's size.
        """
        end = len(history)
        body = self._body_from(
            history, replay, decisions, start=start, final=final, offload=offload
        )
        body_messages = self._body_messages(history, replay, body, offload)
        tail = self._sent_between(
            history, replay, decisions, max(body.upto, start), end, offload=offload
        )
        kept: list[tuple[int, str]] = []
        front = _Sent()
        # The kept part's first messages the note and the joins reach: its leading system
        # messages where only system messages are in front of them, then its leading user
        # turns; they go with the front.
        joined_body = 0
        if start > 0:
            front = self._front_of(
                history, replay, decisions, start=start, kept=kept, final=final, offload=offload
            )
            joined_body = _reached_by_the_note(front.messages, body_messages, tail.messages)
            for offset in range(joined_body):
                if offset < len(body_messages):
                    message, cost = body_messages[offset], body.costs[offset]
                    fingerprint = body.prints[offset]
                else:
                    at = offset - len(body_messages)
                    message, cost, fingerprint = tail.messages[at], tail.costs[at], tail.prints[at]
                front.add(message, cost, fingerprint, (start + offset,))
            front = self._with_cut_note(
                front, omitted, summary, decisions, brief=brief, offloading=offload is not None
            )
        skipped = max(joined_body - len(body_messages), 0)
        request = [*front.messages, *body_messages[joined_body:], *tail.messages[skipped:]]
        prints = array("q", front.prints)
        prints.extend(body.prints[joined_body:])
        prints.fromlist(tail.prints[skipped:])
        costs = array("q", front.costs)
        costs.extend(body.costs[joined_body:])
        costs.fromlist(tail.costs[skipped:])
        return AssembledRequest(
            messages=request,
            costs=costs,
            prints=prints,
            compacted=(*front.compacted, *body.compacted, *tail.compacted),
            kept=tuple(kept),
            origins=RequestOrigins(front.origins, start + joined_body, len(request)),
        )

    def compacted_tokens(
        self,
        history: Sequence[BaseMessage],
        index: int,
        replay: ReplayLearning,
        offload: Offload | None,
        copy: BaseMessage | None = None,
    ) -> int:
        """What the result at `index` costs compacted (`replay` keeps the count); `copy`:
        its compacted copy, where the caller made it already."""
        known = replay.compacted_tokens.get(index)
        if known is None:
            if copy is None:
                copy = self._compacted_copy(history, index, replay, offload)
            known = self._counter.count_message(copy)
            replay.compacted_tokens[index] = known
        return known

    def _compacted_copy(
        self,
        history: Sequence[BaseMessage],
        index: int,
        replay: ReplayLearning,
        offload: Offload | None,
    ) -> ToolMessage:
        """The result at `index` as sent compacted: its placeholder, or with `offload` the
        placeholder that names the handle its text is kept under.

        Kept while the result lives, so that a steady call costs what is new, not a copy of
        every compacted result (with offload, making it digests the result, and its item is
        kept, in the call's `Offload`, when it is made)."""
        key = (index, offload is not None)
        copy = self._compacted_copies.get(key, (index,), history)
        if copy is None:
            original = history[index]
            assert isinstance(original, ToolMessage)
            name = replay.compactable_names[index]
            if offload is not None:
                _, args = answered_call(history, index)
                copy = offloaded_result(original, name, args, offload)
            else:
                placeholder = self._compaction.placeholder_for(name)
                copy = original.model_copy(update={"content": placeholder})
            self._compacted_copies.put(key, (index,), history, copy)
        assert isinstance(copy, ToolMessage)
        return copy

    def cut_part(
        self, history: Sequence[BaseMessage], index: int, offload: Offload
    ) -> tuple[OffloadItem | None, bool]:
        """The item of the message at `index` a cut leaves out, kept in `offload` when it
        is made, and whether the note names it (not an assistant message of calls alone);
        no item for a message governance added."""
        part = self._cut_items.get(index, (index,), history)
        if part is None:
            part = _cut_part(history, index, offload)
            self._cut_items.put(index, (index,), history, part)
        return part

    def note_turns(
        self,
        omitted: int,
        summary: str | None,
        values: str,
        *,
        brief: bool,
        follows: bool,
        offloading: bool,
    ) -> list[tuple[BaseMessage, int, int]]:
        """The note at a cut of `omitted` messages (with the data turn quoting `summary`
        and the `values` they held, `note_listing`; `brief`; `follows`: a user turn comes
        after it) as messages, each with its count and print."""
        # Kept by what it is made of (the summary and the values are the very texts the
        # state keeps: no second copy of them).
        key = (omitted, summary, values, brief, follows)
        made = self._notes.get(key)
        if made is None:
            turns = cut_turns(
                omitted,
                summary=summary,
                **note_listing(values, offloading=offloading),
                brief=brief,
                user_turn_follows=follows,
            )
            made = [
                (turn, self._counter.count_message(turn), message_fingerprint(turn))
                for turn in turns
            ]
            if len(self._notes) >= _NOTES_KEPT:
                self._notes.clear()
            self._notes[key] = made
        return made

    def _task_message(self, history: Sequence[BaseMessage], replay: ReplayLearning) -> BaseMessage:
        task = replay.task
        assert task is not None
        message = history[task]
        if not replay.task_copied:
            return message
        # Made again from the history's message, and kept only while that message lives:
        # the replay keeps no copy of the task.
        copy = self._task_copies.get(0, (task,), history)
        if copy is None:
            assert isinstance(message, HumanMessage)
            words = without_added_parts(message)
            assert words is not None
            copy = pinned_task_copy(words, self._max_tokens, self._counter)
            assert copy is not None
            self._task_copies.put(0, (task,), history, copy)
        return copy

    def _body_from(
        self,
        history: Sequence[BaseMessage],
        replay: ReplayLearning,
        decisions: Decisions,
        *,
        start: int,
        final: int,
        offload: Offload | None,
    ) -> _Body:
        """The history's final positions from `start` on as sent: the previous call's,
        with the positions made final since added, where nothing else changed."""
        body = self._body
        if (
            body is None
            or body.start != start
            or body.compacted_count != decisions.compacted_count
            or body.upto > max(final, start)
        ):
            body = _Body(start=start, compacted_count=decisions.compacted_count, upto=start)
        if final > body.upto:
            added = self._sent_between(
                history, replay, decisions, body.upto, final, offload=offload, messages=False
            )
            body.costs.fromlist(added.costs)
            body.prints.fromlist(added.prints)
            body.compacted.extend(added.compacted)
            body.upto = final
        self._body = body
        return body

    def _body_messages(
        self,
        history: Sequence[BaseMessage],
        replay: ReplayLearning,
        body: _Body,
        offload: Offload | None,
    ) -> list[BaseMessage]:
        """The messages of `body` as sent on this call: a slice of the history with the
        compacted copies in place, found by weak reference while they are this call's."""
        messages: list[BaseMessage] = history[body.start : body.upto]  # type: ignore[assignment]
        found = [ref() for ref in body.copies]
        if len(found) == len(body.compacted) and _all_alive(found):
            copies: list[BaseMessage] = found  # type: ignore[assignment]
        else:
            copies = [
                self._compacted_copy(history, index, replay, offload) for index in body.compacted
            ]
            body.copies = [weakref.ref(copy) for copy in copies]
        for index, copy in zip(body.compacted, copies, strict=True):
            messages[index - body.start] = copy
        return messages

    def _sent_between(
        self,
        history: Sequence[BaseMessage],
        replay: ReplayLearning,
        decisions: Decisions,
        start: int,
        stop: int,
        *,
        offload: Offload | None,
        messages: bool = True,
    ) -> _Sent:
        """History positions `start` to `stop` as sent (compacted results as their
        placeholder, see `_compacted_copy`): costs, prints, and the messages themselves
        where `messages`, as slices of the history."""
        if stop <= start:
            return _Sent()
        sent = _Sent(
            messages=history[start:stop] if messages else [],  # type: ignore[arg-type]
            costs=replay.tokens[start:stop].tolist(),
            prints=replay.prints_between(history, start, stop),
        )
        compactable = replay.compactable
        first = bisect.bisect_left(compactable, start)
        last = min(bisect.bisect_left(compactable, stop), decisions.compacted_count)
        for index in compactable[first:last]:
            offset = index - start
            copy = None
            if messages:
                copy = sent.messages[offset] = self._compacted_copy(history, index, replay, offload)
            sent.costs[offset] = self.compacted_tokens(history, index, replay, offload, copy)
            sent.prints[offset] ^= _COMPACTED
            sent.compacted.append(index)
        return sent

    def _front_of(
        self,
        history: Sequence[BaseMessage],
        replay: ReplayLearning,
        decisions: Decisions,
        *,
        start: int,
        kept: list[tuple[int, str]],
        final: int,
        offload: Offload | None,
    ) -> _Sent:
        """The system messages before the cut, the pinned task and the pins, as sent; made
        once per set of decisions where they are all final. `kept` gets each pinned
        position's protection class."""
        pinned_why = None
        if decisions.pinned is not None:
            users = replay.users
            first_after = bisect.bisect_left(users, start)
            current = first_after >= len(users) or users[first_after] >= len(history)
            pinned_why = CURRENT_TURN if current else LATEST_USER
        key = (
            start,
            decisions.task_pinned,
            decisions.pinned,
            decisions.kept_groups,
            decisions.compacted_count,
        )
        cached = self._front
        if cached is not None and cached.key == key and start <= final:
            messages = [ref() for ref in cached.refs]
            if _all_alive(messages):
                # What the front keeps, and why, is made once per cut too: the work of a
                # call does not grow with the messages a cut keeps.
                if cached.pinned_why != pinned_why:
                    pins = _pins(decisions, pinned_why)
                    cached.kept = _kept_entries(replay, decisions, start=start, pins=pins)
                    cached.pinned_why = pinned_why
                kept.extend(cached.kept)
                return _copy_sent(cached.sent, messages)  # type: ignore[arg-type]
        pins = _pins(decisions, pinned_why)
        entries = _kept_entries(replay, decisions, start=start, pins=pins)
        kept.extend(entries)
        front = _Sent()
        for index in replay.system_indices:
            if index >= start:
                break
            self._send(history, replay, decisions, front, index, offload)
        if decisions.task_pinned:
            task = self._task_message(history, replay)
            assert replay.task is not None
            front.add(task, replay.task_tokens, message_fingerprint(task), (replay.task,))
        for pin_start, pin_stop, _ in pins:
            for index in range(pin_start, pin_stop):
                message = history[index]
                words = without_added_parts(message) if isinstance(message, HumanMessage) else None
                if words is None or words is message:
                    self._send(history, replay, decisions, front, index, offload)
                else:
                    # A pinned user message without what an earlier cut stored in it (its
                    # note), kept while that message lives.
                    copy = self._words_copies.get(index, (index,), history)
                    if copy is None:
                        copy = words
                        self._words_copies.put(index, (index,), history, copy)
                    front.add(
                        copy, self._counter.count_message(copy), message_fingerprint(copy), (index,)
                    )
        if start <= final:
            refs = [weakref.ref(message) for message in front.messages]
            self._front = _Front(key, refs, _copy_sent(front, []), entries, pinned_why)
        return front

    def _send(
        self,
        history: Sequence[BaseMessage],
        replay: ReplayLearning,
        decisions: Decisions,
        sent: _Sent,
        index: int,
        offload: Offload | None,
    ) -> None:
        if replay.is_compacted(index, decisions.compacted_count):
            copy = self._compacted_copy(history, index, replay, offload)
            sent.add(
                copy,
                self.compacted_tokens(history, index, replay, offload, copy),
                replay.prints_between(history, index, index + 1)[0] ^ _COMPACTED,
                (index,),
            )
            sent.compacted.append(index)
        else:
            sent.add(
                history[index],
                replay.tokens[index],
                replay.prints_between(history, index, index + 1)[0],
                (index,),
            )

    def _with_cut_note(
        self,
        front: _Sent,
        omitted: int,
        summary: str | None,
        decisions: Decisions,
        *,
        brief: bool,
        offloading: bool,
    ) -> _Sent:
        """The front with the note at the cut (`decisions.note_variant`), and the user
        turns at its front joined.

        The note goes right after the pinned task (or the system messages), as a user turn
        of its own; where it meets other user turns they are joined into one message, each
        its own run of blocks (see `_added.py`). What it quotes from the omitted messages
        (the summary, the values) is the data turn right after it, followed by a user turn
        (`policy/note.cut_turns`).
        """
        variant = decisions.note_variant
        if variant == NOTE_NONE:
            self._join_user_turns(front)
            return front
        position = 0
        while position < len(front.messages) and isinstance(
            front.messages[position], SystemMessage
        ):
            position += 1
        if decisions.task_pinned:
            position += 1
        follows = position < len(front.messages) and isinstance(
            front.messages[position], HumanMessage
        )
        text, listed = _note_contents(variant, summary, decisions)
        turns = self.note_turns(
            omitted, text, listed, brief=brief, follows=follows, offloading=offloading
        )
        messages, costs, prints = (list(column) for column in zip(*turns, strict=True))
        noted = _Sent(
            messages=[*front.messages[:position], *messages, *front.messages[position:]],
            costs=[*front.costs[:position], *costs, *front.costs[position:]],
            prints=[*front.prints[:position], *prints, *front.prints[position:]],
            origins=[*front.origins[:position], *[()] * len(turns), *front.origins[position:]],
            compacted=front.compacted,
        )
        self._join_user_turns(noted)
        return noted

    def _join_user_turns(self, sent: _Sent) -> None:
        """Join the user turns that meet after a cut (the task, the note, the user messages
        kept across the cut, the kept part's first), as role alternation would on every
        call: joined here, once per cut, the request needs no repair and keeps its prefix.

        Only the front can hold user turns that meet: the repaired history never has two
        user messages in a row (its repairs merged them).
        """
        output, costs, prints, origins = sent.messages, sent.costs, sent.prints, sent.origins
        position = 0
        while position < len(output):
            stop = position
            while stop < len(output) and isinstance(output[stop], HumanMessage):
                stop += 1
            if stop - position < 2:
                position = stop + 1 if stop == position else stop
                continue
            run = output[position:stop]
            key = tuple(prints[position:stop])
            joined = self._joined.get(key, range(position, stop), output)
            if joined is None:
                parts = [user_parts(message) for message in run]
                template = run[0]
                assert isinstance(template, HumanMessage)
                message = join_user_parts(parts, template=template)
                joined = (
                    message,
                    self._counter.count_message(message),
                    message_fingerprint(message),
                )
                self._joined.put(key, range(position, stop), output, joined)
            output[position:stop] = [joined[0]]
            costs[position:stop] = [joined[1]]
            prints[position:stop] = [joined[2]]
            origins[position:stop] = [tuple(o for run in origins[position:stop] for o in run)]
            position += 1


def _cut_part(
    history: Sequence[BaseMessage], index: int, offload: Offload
) -> tuple[OffloadItem | None, bool]:
    message = history[index]
    if added_kind(message) is not None:
        return None, False
    name, args = answered_call(history, index) if isinstance(message, ToolMessage) else ("", None)
    item = message_item(message, name, args)
    offload.keep(item)
    named = not isinstance(message, AIMessage) or bool(content_text_length(message.content))
    return item, named


def _note_contents(
    variant: int, summary: str | None, decisions: Decisions
) -> tuple[str | None, str]:
    """The summary and the listing (values, or with offload the lines naming what is
    kept) the note of `variant` quotes."""
    if variant == NOTE_SUMMARY:
        return summary, decisions.note_values
    if variant == NOTE_VALUES:
        return None, decisions.note_values
    if variant == NOTE_KEPT:
        return None, decisions.note_values.partition("\n")[0]
    return None, ""


def _pins(decisions: Decisions, pinned_why: str | None) -> list[tuple[int, int, str]]:
    """The kept groups and the pinned latest user message (`pinned_why`: its class), in
    order: what the front sends after the system messages and the task."""
    pins = [(group.start, group.stop, group.why) for group in _kept(decisions)]
    if decisions.pinned is not None:
        assert pinned_why is not None
        pins.append((decisions.pinned, decisions.pinned + 1, pinned_why))
    pins.sort()
    return pins


def _kept_entries(
    replay: ReplayLearning,
    decisions: Decisions,
    *,
    start: int,
    pins: list[tuple[int, int, str]],
) -> tuple[tuple[int, str], ...]:
    """Each position the front sends (before the cut at `start`), with its protection
    class: the system messages, the task, the pins."""
    entries = [
        (index, SYSTEM) for index in itertools.takewhile(start.__gt__, replay.system_indices)
    ]
    if decisions.task_pinned:
        assert replay.task is not None
        entries.append((replay.task, TASK))
    entries.extend(
        (index, why) for pin_start, pin_stop, why in pins for index in range(pin_start, pin_stop)
    )
    return tuple(entries)


def _kept(decisions: Decisions) -> tuple[KeptGroup, ...]:
    """The kept groups, but the latest user message where it is pinned on its own."""
    if decisions.pinned is None:
        return decisions.kept_groups
    return tuple(group for group in decisions.kept_groups if group.start != decisions.pinned)


def _all_alive(found: list[BaseMessage | None]) -> bool:
    """Whether no weak reference in `found` was dead: by identity, since `None in found`
    would compare each message with None through pydantic's `__eq__`."""
    return not any(map(operator.is_, found, itertools.repeat(None)))


def _copy_sent(sent: _Sent, messages: list[BaseMessage]) -> _Sent:
    return _Sent(
        list(messages),
        list(sent.costs),
        list(sent.prints),
        list(sent.origins),
        list(sent.compacted),
    )


def _reached_by_the_note(front: list[BaseMessage], *kept_part: list[BaseMessage]) -> int:
    """How many first messages of the kept part (the concatenation of `kept_part`) the
    note at a cut reaches: the note goes after the request's leading system messages (so
    after those of the kept part too where `front` holds only system messages), and joins
    the user turns right after it."""
    count = 0
    systems = all(isinstance(message, SystemMessage) for message in front)
    for part in kept_part:
        for message in part:
            if systems and isinstance(message, SystemMessage):
                count += 1
                continue
            systems = False
            if not isinstance(message, HumanMessage):
                return count
            count += 1
    return count
