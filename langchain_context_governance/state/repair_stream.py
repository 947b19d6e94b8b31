"""The history's repairs decided once per group, so an old defect costs only once.

A long-lived thread keeps its defects: the stored history is never edited, so an
interrupted tool call early on is still there a thousand calls later. Repairing the whole
history on every call would make each call cost the whole history. `RepairStream` reads
the history group by group instead (a group is a non-tool message with the tool results
right after it) and decides each group's repairs once:

- within a group: tool results that answer no call of the group's assistant message,
  and second results for a call, are dropped; calls left unanswered get a placeholder
  result (`backfill_missing_tool_results`); the group's calls get ids and names the
  provider takes, where it would rewrite them;
- between groups: a user message right after a user message, or an assistant message
  right after a plain assistant message, is merged into it
  (`enforce_role_alternation`); a synthetic user turn opens a conversation whose first
  turn is the assistant's, and separates two responses that cannot be merged.

A group's decisions are final once the next group begins and cannot be merged into it;
the last groups stay pending and are decided again on each call. Because the decisions
depend only on the groups themselves, reading a history at once (after a restart, on
another worker) gives exactly what reading it call by call gave. A result that arrives
after its conversation moved on (a later group) answers nothing there and is dropped:
its call was already answered with the placeholder, and moving the result back would
rewrite a prefix the provider's prompt cache holds.

The stream keeps no copy of message content: positions, the objects read while the
newest of them lives, and keys of what it read (`_messages.message_key`: a hash of a
message's content, id and class), a digest of their content, the call ids declared, and
for each message a repair made, how to make it again from the caller's messages (a
recipe).
A made message is kept only as long as the messages it was made from are alive, and is
served only to a call that passes those very objects: a conversation is never given a
message made from another conversation's messages, however equal their text.

A call normally passes the messages read before as the very same objects, which one
identity check per message confirms (`_ReadObjects`). A history reloaded from a checkpoint
(new objects, as the first call of every LangGraph run gets it) is matched by the
messages' keys, in bulk: a message changed in place (same id, other content) is another
message, and the stream starts over, so nothing decided on the old content (counts,
repairs, the replay's decisions and the note's values, the summary) outlives it. Once
the newest message read is freed (the run ended), the objects read are let go together:
an idle conversation holds none.
"""

from __future__ import annotations

import bisect
import itertools
import weakref
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import Any, Literal, overload

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from langchain_context_governance._added import synthetic_user_turn
from langchain_context_governance._messages import (
    call_key,
    iter_declared_tool_calls,
    message_keys,
    message_keys_and_text,
    results_run_end,
)
from langchain_context_governance._packing import PackedInts, as_count
from langchain_context_governance.passes._names import ALTERNATION as ALTERNATION_PASS_NAME
from langchain_context_governance.passes._names import PASS_NAMES
from langchain_context_governance.passes._names import PROVIDER_RULES as BRIDGE_PASS_NAME
from langchain_context_governance.passes.alternation import can_merge_turns, merge_turns
from langchain_context_governance.state.made import MadeMessages
from langchain_context_governance.state.record import RECORD_READ_ERRORS, HistoryDigest

# A group's repair: its messages (a head and the tool results after it) and whether a call
# id was declared before the group, to the repaired messages and the changes by pass.
GroupRepair = Callable[
    [list[BaseMessage], Callable[[str], bool]], tuple[list[BaseMessage], Mapping[str, int]]
]
# Messages a provider wants between two messages (the last of a group, the next group's
# first), e.g. an assistant turn between tool results and a user message.
Bridge = Callable[[BaseMessage, BaseMessage], list[BaseMessage]]

# Where no source index exists: the message was made by a repair.
_MADE = -1
# Bounds a snapshot taken up must keep (a record is untrusted input): tool calls a message
# declares, messages a repair makes per message read (a user turn, a bridge), tokens of a
# message.
_MAX_CALLS_A_MESSAGE = 1_024
_MAX_MADE_A_MESSAGE = 3
_MAX_TOKENS_A_MESSAGE = 1 << 40
# How a call's messages continue what was read: the very objects read before, or equal
# messages as new objects (a reloaded history).
Continuation = Literal["same objects", "reloaded"]

# How a made message is made again from the caller's messages: (kind, start, stop, k) for
# the group of messages[start:stop]:
_GROUP_OUTPUT = 0  # output k of the group's repair
_USER_TURN = 1  # the user turn made before the group's first output
_BRIDGE = 2  # message k of what the provider wants between the message before and the group
# ... or (_MERGED, parts): the merge of its parts in order (a caller index or a recipe).
_MERGED = 3
Recipe = tuple[int, int, int, int] | tuple[int, tuple["Part", ...]]
Part = int | Recipe


@dataclass(frozen=True)
class StreamRead:
    """What one `RepairStream.read` found.

    `history` is the repaired history of the call; `restarted` whether the messages did
    not continue what was read before (the stream started over); `raw_tokens` the
    tokens of the messages as they came; `changes` the repairs of the whole history, by
    pass (also those decided on earlier calls).
    """

    history: RepairedHistory
    restarted: bool
    raw_tokens: int
    changes: dict[str, int]


class RepairedHistory(Sequence[BaseMessage]):
    """The repaired history of one call: the final part from the stream, then the pending part.

    Final messages are read from the caller's list by position, or made again by the
    stream where a repair made them; positions below `final` never change while the
    history only grows. `same_objects`: the final messages are the very objects they
    were on the previous call (the caller passed the messages read before as they were).
    """

    def __init__(
        self,
        messages: Sequence[BaseMessage],
        stream: RepairStream,
        pending: list[BaseMessage],
        pending_sources: Sequence[int] = (),
        pending_recipes: Sequence[Recipe | None] = (),
        *,
        same_objects: bool = False,
    ) -> None:
        self.same_objects = same_objects
        self._messages = messages
        self._stream = stream
        self._sources = stream._sources
        self._pending = pending
        self._pending_sources = pending_sources
        self._pending_recipes = pending_recipes
        # Groups repaired again during this call, so a group is repaired once per call.
        self._groups: dict[tuple[int, int], list[BaseMessage]] = {}
        self.final = len(self._sources)

    def __len__(self) -> int:
        return self.final + len(self._pending)

    def source_index(self, position: int) -> int | None:
        """The caller's index of the message at `position`, or None for one a repair made."""
        if position >= self.final:
            offset = position - self.final
            pending = self._pending_sources
            source = pending[offset] if offset < len(pending) else _MADE
        else:
            source = self._sources[position]
        return None if source == _MADE else source

    def input_indices(self, position: int) -> tuple[int, ...]:
        """The caller's indices the message at `position` stands for: its own; for one a
        repair rewrote (a call id the provider takes), the message of its group with the
        same id, else the whole group; for turns the repairs merged, each turn's; none for
        a turn or a bridge the repairs added.

        Example:
            >>> from langchain_core.messages import HumanMessage
            >>> stream = RepairStream(repair_group=lambda m, d: (m, {}), count_message=lambda m: 1)
            >>> history = [HumanMessage("a"), HumanMessage("b"), AIMessage("c"), HumanMessage("d")]
            >>> read = stream.read(history)
            >>> [read.history.input_indices(position) for position in range(3)]
            [(0, 1), (2,), (3,)]
        """
        own = self.source_index(position)
        if own is not None:
            return (own,)
        if position >= self.final:
            offset = position - self.final
            recipes = self._pending_recipes
            recipe = recipes[offset] if offset < len(recipes) else None
        else:
            recipe = self._stream._recipes.get(position)
        if recipe is None:
            return ()
        return _input_indices_of(recipe, self[position].id, self._messages)

    @overload
    def __getitem__(self, index: int) -> BaseMessage: ...

    @overload
    def __getitem__(self, index: slice) -> list[BaseMessage]: ...

    def __getitem__(self, index: int | slice) -> BaseMessage | list[BaseMessage]:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                return [self[position] for position in range(start, stop, step)]
            if stop <= start:
                return []
            final = self.final
            output = self._stream._final_slice(
                self._messages, start, min(stop, final), self._groups
            )
            if stop > final:
                output.extend(self._pending[max(start, final) - final : stop - final])
            return output
        if index < 0:
            index += len(self)
        if index >= self.final:
            return self._pending[index - self.final]
        source = self._sources[index]
        if source == _MADE:
            return self._stream._made_at(index, self._messages, self._groups)
        return self._messages[source]

    def __iter__(self) -> Iterator[BaseMessage]:
        return iter(self[:])

    def to_list(self) -> list[BaseMessage]:
        """The repaired history as a new list."""
        return self[:]


@dataclass
class _StreamColumns:
    """The stream's columns as its snapshot packs them, packed as they grow."""

    run_positions: PackedInts = field(default_factory=lambda: PackedInts("i"))
    run_sources: PackedInts = field(default_factory=lambda: PackedInts("i"))
    declared: PackedInts = field(default_factory=PackedInts)
    declared_at: PackedInts = field(default_factory=lambda: PackedInts("i"))


@dataclass
class _Pending:
    """Repaired messages not yet final, with the caller's index of each (or `_MADE` and
    the recipe that makes it again)."""

    messages: list[BaseMessage] = field(default_factory=list)
    sources: list[int] = field(default_factory=list)
    recipes: list[Recipe | None] = field(default_factory=list)
    # The call ids the groups declare, with the caller index of each group.
    declared: list[tuple[str, int]] = field(default_factory=list)
    changes: dict[str, int] = field(default_factory=dict)
    # Positions of the user turns made to separate two responses.
    separators: set[int] = field(default_factory=set)

    def add_changes(self, changes: Mapping[str, int]) -> None:
        for name, count in changes.items():
            if count:
                self.changes[name] = self.changes.get(name, 0) + count

    def extend(
        self, messages: list[BaseMessage], sources: list[int], recipes: list[Recipe | None]
    ) -> None:
        self.messages.extend(messages)
        self.sources.extend(sources)
        self.recipes.extend(recipes)


class _ReadObjects:
    """The messages read, in order, while the newest of them lives.

    A later call that passes these very objects is known by one identity check per
    message, in C. All but the newest are held, the newest by weak reference: once it is
    freed (the run that held the history ended; the next run gets it reloaded from a
    checkpoint, as new objects), no call can pass these objects again, so they are let go
    together and an idle conversation holds none of them. While the newest lives, the
    caller's history holds them all anyway.

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> history = [HumanMessage("a"), HumanMessage("b")]
        >>> read = _ReadObjects()
        >>> read.replace(history)
        >>> read.are(history, 2), read.are([HumanMessage("x"), history[1]], 2)
        (True, False)
        >>> read.are([HumanMessage("a"), history[1]], 2)  # an equal message in its place
        True
        >>> del history
        >>> len(read)
        0
    """

    __slots__ = ("__weakref__", "_read")

    def __init__(self) -> None:
        # The messages read but the newest, and a weak reference to the newest: one tuple,
        # replaced whole where the newest is freed (perhaps on another thread, see
        # `_holding`), so that a reader never takes one without the other.
        self._read: tuple[list[BaseMessage], weakref.ref[BaseMessage] | None] = ([], None)

    def __len__(self) -> int:
        held, newest = self._read
        return 0 if newest is None else len(held) + 1

    def are(self, messages: Sequence[BaseMessage], count: int) -> bool:
        """Whether the first `count` of `messages` are the objects read (or, where one was
        replaced, by a message equal to it in every field: what was made of it holds)."""
        held, newest = self._read
        if newest is None:
            return count == 0
        if len(held) + 1 != count:
            return False
        if newest() is not messages[count - 1]:
            # New objects (a reloaded history): no message is compared field by field.
            return False
        try:
            # List equality compares by identity first, in C: one pointer comparison per
            # message where they are the objects read.
            before = count - 1
            given = (
                messages[:before] if isinstance(messages, list) else list(islice(messages, before))
            )
            return held == given
        except Exception:  # a field whose comparison fails: not known to be equal
            return False

    def replace(self, messages: Sequence[BaseMessage]) -> None:
        """Remember `messages` instead of the objects read before."""
        self._read = self._holding([], messages)

    def extend(self, messages: Sequence[BaseMessage]) -> None:
        """Remember `messages`, read after those remembered."""
        if not messages:
            return
        held, newest = self._read
        previous = newest() if newest is not None else None
        if previous is None:
            # Nothing read yet, or the newest was freed: what was read is not held.
            self._read = self._holding([], messages)
            return
        held.append(previous)
        self._read = self._holding(held, messages)

    def _holding(
        self, held: list[BaseMessage], messages: Sequence[BaseMessage]
    ) -> tuple[list[BaseMessage], weakref.ref[BaseMessage] | None]:
        """`held` and `messages` but the newest of them, and the newest watched: when it is
        freed, everything is let go."""
        if not messages:
            return [], None
        held.extend(messages[:-1])
        me = weakref.ref(self)

        def forget(gone: weakref.ref[BaseMessage]) -> None:
            read = me()
            if read is not None and read._read[1] is gone:
                read._read = ([], None)

        return held, weakref.ref(messages[-1], forget)


class RepairStream:
    """Repairs of one growing history, each group's decided once (see the module doc).

    `read(messages)` returns the repaired history for a call (a `StreamRead`). When
    `messages` continues what was read before (the same messages in front, compared by
    identity or, for a reloaded history, by fingerprint), only the new groups are read;
    otherwise the stream starts over, with the same result a fresh stream would give.
    """

    def __init__(
        self,
        *,
        repair_group: GroupRepair,
        count_message: Callable[[BaseMessage], int],
        bridge: Bridge | None = None,
    ) -> None:
        """`count_message` counts the history as it came, for `StreamRead.raw_tokens`."""
        self._repair_group = repair_group
        self._bridge = bridge
        self._count_message = count_message
        self.start_over()

    def start_over(self) -> None:
        """Forget what was read: the next call reads its history from the start."""
        # What was read: the caller's messages up to `_read`, the final part of the output.
        self._read = 0
        self._objects = _ReadObjects()
        # The remembered objects replaced those of the call before (a reloaded history),
        # and no call has read them yet.
        self._reloaded = False
        # The continuation found for a list the call goes on to read (by
        # `continued_by` or `checked_before`), and how many of its leading messages need
        # no content check, so that a call compares its messages once; held until that
        # read.
        self._found: tuple[Sequence[BaseMessage], Continuation | None, int] | None = None
        # Keys of the messages read (`message_key`), or None where they were taken from a
        # record (`restore`): the history's digest stands for them until next needed.
        self._keys: array[int] | None = array("q")
        self._sources = array("q")
        # The final part as runs: each starts at a position with its source, and a run
        # of the caller's messages goes on with consecutive sources (a made message is a
        # run of its own), so a slice of the history is a few slices of the caller's list.
        self._run_positions = array("q")
        self._run_sources = array("q")
        self._recipes: dict[int, Recipe] = {}
        self._made: MadeMessages[BaseMessage] = MadeMessages()
        self._opened = False
        # Each call id declared in the final part (by `call_key`), with the caller index of
        # the group that declared it first.
        self._declared: dict[int, int] = {}
        self._read_tokens = 0
        self._changes: dict[str, int] = {}
        self._digest = HistoryDigest()
        self._packed = _StreamColumns()

    @property
    def read_count(self) -> int:
        """How many of the caller's messages the final part was read from."""
        return self._read

    @property
    def final_count(self) -> int:
        """How many positions of the repaired history are final."""
        return len(self._sources)

    def history_digest(self) -> HistoryDigest:
        """A copy of the digest of the caller's messages read (`read_count` of them), to
        be grown with the messages after them."""
        return self._digest.copy()

    @staticmethod
    def read_count_of(snapshot: Mapping[str, Any]) -> int | None:
        """How many messages the stream that wrote `snapshot` had read (None where it
        does not say)."""
        read = snapshot.get("read")
        return read if isinstance(read, int) and not isinstance(read, bool) else None

    def snapshot(self) -> dict[str, Any]:
        """The decisions on the final part as plain data a record carries (positions,
        recipes, the call ids declared, a digest of what was read; no message): a stream
        on another worker continues from them with `restore`."""
        return {
            "read": self._read,
            "digest": self._digest.hexdigest(),
            "read_tokens": self._read_tokens,
            "opened": self._opened,
            "changes": dict(self._changes),
            "final": len(self._sources),
            "run_positions": self._packed.run_positions.pack(self._run_positions),
            "run_sources": self._packed.run_sources.pack(self._run_sources),
            "recipes": [[position, recipe] for position, recipe in self._recipes.items()],
            "declared": self._packed.declared.pack(self._declared),
            "declared_at": self._packed.declared_at.pack(self._declared.values()),
        }

    def restore(
        self,
        data: Mapping[str, Any],
        messages: Sequence[BaseMessage],
        *,
        digest: HistoryDigest | None = None,
    ) -> bool:
        """Continue from another stream's `snapshot`, where `messages` begins with the
        history it read (by `HistoryDigest`: `digest`, where the caller made it of the
        messages the snapshot says were read); False, and started over, where not or
        where `data` cannot be read."""
        self.start_over()
        try:
            read = as_count(data["read"])
            if read > len(messages):
                return False
            history = list(messages[:read])
            if digest is None or digest.count != read:
                digest = HistoryDigest().add(history)
            if digest.hexdigest() != data["digest"]:
                return False
            self._take_up(data, history)
        except RECORD_READ_ERRORS:
            self.start_over()
            return False
        self._read = read
        self._digest = digest.copy()
        self._objects.replace(history)
        self._keys = None
        # What was made of the messages read is made again from these; the read of this
        # very list takes them as reloaded with no comparison (see `_continuation`), and
        # their contents need no check where the digest found them all text.
        self._reloaded = True
        self._found = (messages, "reloaded", read if digest.all_text else 0)
        return True

    def _take_up(self, data: Mapping[str, Any], history: list[BaseMessage]) -> None:
        """The decisions of a snapshot of the messages read (`history`), each bounded by
        them before
        anything is made of it (a snapshot is untrusted input: it comes from a record), so
        that no record makes a stream allocate or compute more than its history is worth;
        a ValueError where anything is out of range."""
        read = len(history)
        packed = self._packed
        # At most a call id per call the messages declare: a generous bound per message.
        declared = _column(packed.declared, data["declared"], _MAX_CALLS_A_MESSAGE * read)
        # Read only (zipped into the dict kept): as written, not widened.
        declared_at = _column(packed.declared_at, data["declared_at"], len(declared), wide=False)
        if any(not 0 <= start < read for start in declared_at):
            raise ValueError("a call declared out of the messages read")
        # Made messages: a backfilled result per call, a user turn or a bridge per group.
        final = as_count(data["final"])
        if final > _MAX_MADE_A_MESSAGE * read + len(declared):
            raise ValueError("more final positions than the messages read can make")
        self._run_positions = _column(packed.run_positions, data["run_positions"], final)
        self._run_sources = _column(packed.run_sources, data["run_sources"], final)
        self._sources = _sources_of_runs(self._run_positions, self._run_sources, final, read=read)
        recipes = data["recipes"]
        if not isinstance(recipes, (list, tuple)) or len(recipes) > final:
            raise ValueError("more recipes than final positions")
        self._recipes = {as_count(p): _recipe(recipe, read) for p, recipe in recipes}
        if any(
            position >= len(self._sources) or self._sources[position] != _MADE
            for position in self._recipes
        ):
            raise ValueError("a recipe is not of a made message of the messages read")
        _check_groups_apart(self._recipes.values())
        if _made_count(self._run_positions, self._run_sources, len(self._sources)) != len(
            self._recipes
        ):
            raise ValueError("a made message has no recipe")
        self._declared = dict(zip(declared, declared_at, strict=True))
        changes = data["changes"]
        if not isinstance(changes, Mapping) or not set(changes) <= set(PASS_NAMES):
            raise ValueError("changes of passes that do not exist")
        self._changes = {name: _bounded(number, final + read) for name, number in changes.items()}
        self._read_tokens = _bounded(data["read_tokens"], _MAX_TOKENS_A_MESSAGE * read)
        # Opened where a final message is not a system message (a made one never is).
        opened = any(
            source == _MADE or not isinstance(history[source], SystemMessage)
            for source in self._sources
        )
        if data["opened"] is not opened:
            raise ValueError("the conversation's opening is not the one read")
        self._opened = opened

    def read(self, messages: Sequence[BaseMessage]) -> StreamRead:
        """The repaired history of `messages`; its first `final` messages never change."""
        continuation = self._continuation(messages)
        restarted = continuation is None
        if restarted:
            self.start_over()
        pending = self._read_groups(messages)
        self._drop_trailing_assistants(pending)
        history = RepairedHistory(
            messages,
            self,
            pending.messages,
            pending.sources,
            pending.recipes,
            same_objects=continuation == "same objects" and self._read > 0,
        )
        changes = dict(self._changes)
        for name, count in pending.changes.items():
            changes[name] = changes.get(name, 0) + count
        counter = self._count_message
        raw_tokens = self._read_tokens + sum(
            counter(messages[index]) for index in range(self._read, len(messages))
        )
        return StreamRead(history, restarted=restarted, raw_tokens=raw_tokens, changes=changes)

    def _drop_trailing_assistants(self, pending: _Pending) -> None:
        """No request ends on an assistant turn: this call's history leaves them out, with
        the user turns made to separate them.

        They stay in the history: the next user message follows them. Where nothing but
        system messages would be left, the request-level repair decides instead.
        """
        end = len(pending.messages)
        while end > 0 and (
            isinstance(pending.messages[end - 1], AIMessage) or end - 1 in pending.separators
        ):
            end -= 1
        dropped = len(pending.messages) - end
        if not dropped:
            return
        kept = pending.messages[:end]
        if not self._opened and all(isinstance(message, SystemMessage) for message in kept):
            return
        pending.messages, pending.sources = kept, pending.sources[:end]
        pending.recipes = pending.recipes[:end]
        pending.add_changes({ALTERNATION_PASS_NAME: dropped})

    def continued_by(self, messages: Sequence[BaseMessage]) -> bool:
        """Whether `messages` starts with what this stream read (and it read anything).

        The caller goes on to `read` them: a reloaded history found here is not compared
        by key again there (see `_continuation`).
        """
        if self._read == 0:
            return False
        self._found = (messages, *self._compare(messages))
        self._reloaded = self._found[1] == "reloaded"
        return self._found[1] is not None

    def objects_read_in(self, items: Sequence[Any]) -> int:
        """How many leading `items` (what a call was given, not read yet) are the message
        objects this stream read (or, one replaced, a message equal to it in every field),
        all of them or none: they need no look at their classes or contents
        (`_messages.messages_from`). `checked_before` and `read` of this very list take
        the comparison made here.

        Example:
            >>> from langchain_core.messages import AIMessage, HumanMessage
            >>> one = lambda message: 1
            >>> stream = RepairStream(repair_group=lambda m, d: (m, {}), count_message=one)
            >>> history = [HumanMessage("a"), AIMessage("b"), HumanMessage("c")]
            >>> _ = stream.read(history)  # the last group stays pending
            >>> stream.objects_read_in([*history, ("ai", "d")])
            2
            >>> stream.objects_read_in([HumanMessage("z"), *history[1:]])  # another history
            0
        """
        known = self._read
        if known == 0 or self._reloaded or len(items) < known:
            return 0
        if not self._objects.are(items, known):
            return 0
        # What `_compare` finds for these very objects.
        self._found = (items, "same objects", known)
        return known

    def checked_before(self, messages: Sequence[BaseMessage]) -> int:
        """How many leading `messages` need no look at their contents: the very objects
        read on earlier calls, where the call passes them as they were, or those of a
        reloaded history found equal by key whose contents are all text; else 0. `read`
        of this very list takes the comparison made here.

        Example:
            >>> from langchain_core.messages import AIMessage, HumanMessage
            >>> one = lambda message: 1
            >>> stream = RepairStream(repair_group=lambda m, d: (m, {}), count_message=one)
            >>> history = [HumanMessage("a", id="1"), AIMessage("b", id="2"), HumanMessage("c")]
            >>> _ = stream.read(history)  # the last group stays pending
            >>> stream.checked_before([*history, AIMessage("d")])
            2
            >>> stream.checked_before([HumanMessage("a", id="1"), *history[1:]])  # reloaded
            2
            >>> stream.checked_before([HumanMessage("z"), *history[1:]])  # another history
            0
        """
        found = self._found
        if found is None or found[0] is not messages:
            found = self._found = (messages, *self._compare(messages))
            self._reloaded = found[1] == "reloaded"
        return found[2]

    def _continuation(self, messages: Sequence[BaseMessage]) -> Continuation | None:
        """How `messages` starts with the messages read, or None where it does not (see
        `_compare`); where `continued_by` or `checked_before` compared this very list,
        their finding is taken."""
        found, self._found = self._found, None
        if found is not None and found[0] is messages:
            self._reloaded = False
            return found[1]
        return self._compare(messages)[0]

    def _compare(self, messages: Sequence[BaseMessage]) -> tuple[Continuation | None, int]:
        """How `messages` starts with the messages read, and how many leading messages
        need no look at their contents (see `checked_before`).

        Compared by identity first, then by key (`message_key`, in bulk). The new objects
        of a reloaded history replace the remembered ones, so the next comparison is by
        identity again; after `continued_by` found them reloaded, it still says so, as
        what was made of the objects read before is not these objects'.
        """
        known = self._read
        if len(messages) < known:
            return None, 0
        reloaded, self._reloaded = self._reloaded, False
        if self._objects.are(messages, known):
            return ("reloaded", 0) if reloaded else ("same objects", known)
        read = list(islice(messages, known))
        keys, text = message_keys_and_text(read)
        if self._keys is None:
            # Restored from a record: compared by the digest the record was checked by.
            if HistoryDigest().add(read).hexdigest() != self._digest.hexdigest():
                return None, 0
            self._keys = keys
        elif keys != self._keys:
            return None, 0
        self._objects.replace(read)
        return "reloaded", known if text else 0

    def _declared_before(self, start: int) -> Callable[[str], bool]:
        """Whether a call id was declared by a final group before caller index `start`."""
        declared = self._declared
        return lambda call_id: declared.get(call_key(call_id), start) < start

    def _read_groups(self, messages: Sequence[BaseMessage]) -> _Pending:
        """Repair the groups from `_read` on; make final those the next group cannot touch."""
        pending = _Pending()
        opened = self._opened
        declared_in_pending: set[str] = set()
        declared_final = self._declared

        def declared_before(call_id: str) -> bool:
            return call_id in declared_in_pending or call_key(call_id) in declared_final

        for start, stop in _groups(messages, self._read):
            repaired, changes = self._repair_group(list(messages[start:stop]), declared_before)
            declared = list(_declared_ids(repaired))
            declared_in_pending.update(declared)
            if not repaired:
                pending.add_changes(changes)
                continue
            sources = [_source_of(message, messages, start, stop) for message in repaired]
            recipes: list[Recipe | None] = [
                None if source != _MADE else (_GROUP_OUTPUT, start, stop, k)
                for k, source in enumerate(sources)
            ]
            head = repaired[0]
            if pending.messages and can_merge_turns(pending.messages[-1], head):
                pending.messages[-1] = merge_turns(pending.messages[-1], head)
                pending.recipes[-1] = _merged(
                    pending.sources[-1], pending.recipes[-1], sources[0], recipes[0]
                )
                pending.sources[-1] = _MADE
                pending.add_changes({ALTERNATION_PASS_NAME: 1})
                repaired, sources, recipes = repaired[1:], sources[1:], recipes[1:]
            else:
                last = pending.messages[-1] if pending.messages else self._last_final(messages)
                self._make_final(pending, messages, read_up_to=start)
                pending = _Pending()
                if isinstance(head, AIMessage) and (isinstance(last, AIMessage) or not opened):
                    # Two responses that cannot merge (signed thinking) get a user turn
                    # between them, as does an assistant turn that opens the conversation.
                    if isinstance(last, AIMessage):
                        pending.separators.add(0)
                    pending.extend(
                        [_synthetic_user_before(head, start)],
                        [_MADE],
                        [(_USER_TURN, start, stop, 0)],
                    )
                    pending.add_changes({ALTERNATION_PASS_NAME: 1})
                elif last is not None and self._bridge is not None:
                    between = self._bridge(last, head)
                    pending.extend(
                        between,
                        [_MADE] * len(between),
                        [(_BRIDGE, start, stop, k) for k in range(len(between))],
                    )
                    pending.add_changes({BRIDGE_PASS_NAME: len(between)})
            if not isinstance(head, SystemMessage):
                opened = True
            pending.extend(repaired, sources, recipes)
            pending.declared.extend((call_id, start) for call_id in declared)
            pending.add_changes(changes)
        return pending

    def _last_final(self, messages: Sequence[BaseMessage]) -> BaseMessage | None:
        """The last message of the final part, read again from `messages` where it came from."""
        if not self._sources:
            return None
        position = len(self._sources) - 1
        source = self._sources[position]
        if source == _MADE:
            return self._made_at(position, messages, {})
        return messages[source]

    def _make_final(
        self, pending: _Pending, messages: Sequence[BaseMessage], *, read_up_to: int
    ) -> None:
        for message, source, recipe in zip(
            pending.messages, pending.sources, pending.recipes, strict=True
        ):
            position = len(self._sources)
            if source == _MADE:
                assert recipe is not None
                self._recipes[position] = recipe
            self._sources.append(source)
            self._extend_runs(position, source)
            if not isinstance(message, SystemMessage):
                self._opened = True
        for call_id, group_start in pending.declared:
            self._declared.setdefault(call_key(call_id), group_start)
        for name, count in pending.changes.items():
            self._changes[name] = self._changes.get(name, 0) + count
        self._remember_read(messages, read_up_to)

    def _extend_runs(self, position: int, source: int) -> None:
        runs, sources = self._run_positions, self._run_sources
        if (
            source != _MADE
            and sources
            and sources[-1] != _MADE
            and sources[-1] + position - runs[-1] == source
        ):
            return
        runs.append(position)
        sources.append(source)

    def _final_slice(
        self,
        messages: Sequence[BaseMessage],
        start: int,
        stop: int,
        groups: dict[tuple[int, int], list[BaseMessage]],
    ) -> list[BaseMessage]:
        """The final messages at positions `start` to `stop`, as slices of `messages`."""
        output: list[BaseMessage] = []
        runs, sources = self._run_positions, self._run_sources
        run = bisect.bisect_right(runs, start) - 1
        position = start
        while position < stop:
            run_start, source = runs[run], sources[run]
            run_stop = runs[run + 1] if run + 1 < len(runs) else len(self._sources)
            end = min(stop, run_stop)
            if source == _MADE:
                output.append(self._made_at(position, messages, groups))
            else:
                offset = source - run_start
                output.extend(messages[position + offset : end + offset])
            position = end
            run += 1
        return output

    def _remember_read(self, messages: Sequence[BaseMessage], up_to: int) -> None:
        if up_to <= self._read:
            return
        # A slice, not islice: islice walks the history from its start on every call, which
        # made first contact quadratic in the history's length.
        read = list(messages[self._read : up_to])
        self._objects.extend(read)
        if self._keys is not None:
            self._keys.extend(message_keys(read))
        self._digest.add(read)
        self._read_tokens += sum(map(self._count_message, read))
        self._read = up_to

    def _made_at(
        self,
        position: int,
        messages: Sequence[BaseMessage],
        groups: dict[tuple[int, int], list[BaseMessage]],
    ) -> BaseMessage:
        """The message a repair made at final `position`, made again from `messages`."""
        recipe = self._recipes[position]
        indices = _indices_of(recipe)
        made = self._made.get(position, indices, messages)
        if made is None:
            made = self._make(recipe, position, messages, groups)
            self._made.put(position, indices, messages, made)
        return made

    def _make(
        self,
        recipe: Recipe,
        position: int,
        messages: Sequence[BaseMessage],
        groups: dict[tuple[int, int], list[BaseMessage]],
    ) -> BaseMessage:
        if recipe[0] == _MERGED:
            made = [
                messages[part]
                if isinstance(part, int)
                else self._make(part, position, messages, groups)
                for part in recipe[1]  # type: ignore[union-attr]
            ]
            merged = made[0]
            for part in made[1:]:
                merged = merge_turns(merged, part)
            return merged
        kind, start, stop, k = recipe  # type: ignore[misc]
        repaired = groups.get((start, stop))
        if repaired is None:
            group = list(messages[start:stop])
            repaired = self._repair_group(group, self._declared_before(start))[0]
            groups[(start, stop)] = repaired
        if kind == _GROUP_OUTPUT:
            return repaired[k]
        head = repaired[0]
        if kind == _USER_TURN:
            return _synthetic_user_before(head, start)
        assert self._bridge is not None
        # The message before the bridge: the final message k + 1 places before it.
        last = self._at(position - k - 1, messages, groups)
        return self._bridge(last, head)[k]

    def _at(
        self,
        position: int,
        messages: Sequence[BaseMessage],
        groups: dict[tuple[int, int], list[BaseMessage]],
    ) -> BaseMessage:
        source = self._sources[position]
        return self._made_at(position, messages, groups) if source == _MADE else messages[source]


def _sources_of_runs(
    positions: array[int], sources: array[int], final: int, *, read: int
) -> array[int]:
    """The source of each final position, from the runs they make (see `start_over`):
    caller indices in their order, each below `read`, or made messages."""
    if len(positions) != len(sources) or (positions and positions[0] != 0):
        raise ValueError("the runs do not cover the final positions")
    expanded = array("q")
    after = 0
    for run, (start, source) in enumerate(zip(positions, sources, strict=True)):
        stop = positions[run + 1] if run + 1 < len(positions) else final
        if stop <= start:
            raise ValueError("the runs do not cover the final positions")
        if source == _MADE:
            expanded.extend(array("q", [_MADE]) * (stop - start))
            continue
        if source < after or source + stop - start > read:
            raise ValueError("the runs' sources are not the messages read, in order")
        expanded.extend(array("q", list(range(source, source + stop - start))))
        after = source + stop - start
    if len(expanded) != final:
        raise ValueError("the runs do not cover the final positions")
    return expanded


def _made_count(positions: array[int], sources: array[int], final: int) -> int:
    """How many of the final positions are made messages, from the runs (checked by
    `_sources_of_runs`), at the cost of the runs, not of the positions."""
    stops = [*positions[1:], final]
    return sum(
        stop - start
        for start, stop, source in zip(positions, stops, sources, strict=True)
        if source == _MADE
    )


def _recipe(data: Any, read: int) -> Recipe:
    """A recipe as `snapshot` wrote it (JSON makes its tuples lists), of groups within the
    `read` messages: a merge's parts are caller indices or recipes of one group, never
    merges (see `_merged`); a ValueError where it is anything else."""
    if not isinstance(data, (list, tuple)) or not data:
        raise ValueError("a recipe is a list")
    if data[0] == _MERGED:
        parts = data[1]
        if len(data) != 2 or not isinstance(parts, (list, tuple)) or not 0 < len(parts) <= read:
            raise ValueError("a merge of no parts, or of more than the messages read")
        return (
            _MERGED,
            tuple(
                _index(part, read) if isinstance(part, int) else _group_recipe(part, read)
                for part in parts
            ),
        )
    return _group_recipe(data, read)


def _group_recipe(data: Any, read: int) -> tuple[int, int, int, int]:
    kind, start, stop, k = data
    if kind not in (_GROUP_OUTPUT, _USER_TURN, _BRIDGE) or isinstance(kind, bool):
        raise ValueError(f"unknown recipe kind, of type {type(kind).__name__}")
    start, stop, k = as_count(start), as_count(stop), as_count(k)
    if not start < stop <= read or k > stop - start + _MAX_CALLS_A_MESSAGE * (stop - start):
        raise ValueError("a recipe of a group out of the messages read")
    return (kind, start, stop, k)


def _index(value: int, read: int) -> int:
    if isinstance(value, bool) or not 0 <= value < read:
        raise ValueError("a merged part out of the messages read")
    return value


def _check_groups_apart(recipes: Iterable[Recipe]) -> None:
    """The groups the recipes read are groups of one history: each two the same or
    apart, so that making every made message again reads each message a few times at
    most."""
    groups: set[tuple[int, int]] = set()
    for recipe in recipes:
        parts: tuple[Part, ...] = recipe[1] if recipe[0] == _MERGED else (recipe,)  # type: ignore[assignment]
        for part in parts:
            if not isinstance(part, int):
                _, start, stop, _ = part  # type: ignore[misc]
                groups.add((start, stop))
    ordered = sorted(groups)
    if any(first[1] > second[0] for first, second in itertools.pairwise(ordered)):
        raise ValueError("recipes of groups that overlap")


def _column(column: PackedInts, text: Any, limit: int, *, wide: bool = True) -> array[int]:
    """`column.take_up(text)`, where `text` holds at most `limit` integers (its length is
    checked before anything is decoded)."""
    if not isinstance(text, str) or len(text) > 8 + (8 * limit + 2) // 3 * 4:
        raise ValueError("a column longer than the messages read")
    return column.take_up(text, wide=wide)


def _bounded(value: Any, limit: int) -> int:
    count = as_count(value)
    if count > limit:
        raise ValueError(f"a count of {count} where at most {limit} is possible")
    return count


def _merged(
    first_source: int, first: Recipe | None, second_source: int, second: Recipe | None
) -> Recipe:
    """The recipe of `first` merged with `second` (a merge of a merge adds a part)."""
    second_part: Part = second_source if second is None else second
    if first is not None and first[0] == _MERGED:
        return (_MERGED, (*first[1], second_part))  # type: ignore[misc]
    first_part: Part = first_source if first is None else first
    return (_MERGED, (first_part, second_part))


def _indices_of(recipe: Recipe) -> tuple[int, ...]:
    """The caller indices a recipe reads: its groups' messages and merged messages."""
    if recipe[0] == _MERGED:
        indices: list[int] = []
        for part in recipe[1]:  # type: ignore[union-attr]
            indices.extend((part,) if isinstance(part, int) else _indices_of(part))
        return tuple(indices)
    _, start, stop, _ = recipe  # type: ignore[misc]
    return tuple(range(start, stop))


def _input_indices_of(
    recipe: Recipe, made_id: str | None, messages: Sequence[BaseMessage]
) -> tuple[int, ...]:
    """The caller's indices a made message stands for (see `RepairedHistory.input_indices`):
    `made_id` is its message id, which a rewrite of its calls keeps."""
    if recipe[0] == _MERGED:
        indices: list[int] = []
        for part in recipe[1]:  # type: ignore[union-attr]
            made = (part,) if isinstance(part, int) else _input_indices_of(part, None, messages)
            indices.extend(made)
        return tuple(indices)
    kind, start, stop, _ = recipe  # type: ignore[misc]
    if kind != _GROUP_OUTPUT:
        return ()
    if made_id is not None:
        for index in range(start, stop):
            if messages[index].id == made_id:
                return (index,)
    return tuple(range(start, stop))


def _groups(messages: Sequence[BaseMessage], start: int) -> Iterator[tuple[int, int]]:
    """(start, stop) of each group from `start`: a non-tool message and the results after it."""
    end = len(messages)
    while start < end:
        stop = results_run_end(messages, start + 1, end)
        yield start, stop
        start = stop


def _declared_ids(messages: list[BaseMessage]) -> Iterator[str]:
    for message in messages:
        if isinstance(message, AIMessage):
            yield from (call_id for call_id, _ in iter_declared_tool_calls(message))


def _source_of(message: BaseMessage, messages: Sequence[BaseMessage], start: int, stop: int) -> int:
    for index in range(start, stop):
        if messages[index] is message:
            return index
    return _MADE


def _synthetic_user_before(head: BaseMessage, index: int) -> HumanMessage:
    """The user turn before an assistant turn that opens the conversation or follows one.

    Its id is derived from the assistant message, so every call makes the same message.
    """
    anchor = head.id or f"message-{index}"
    return synthetic_user_turn(message_id=f"{anchor}-opening-user-turn")
