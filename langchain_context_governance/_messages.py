"""Small read-only helpers over langchain-core messages, shared by the passes.

Nothing here mutates a message: helpers either read one or build a new one.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import operator
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
    convert_to_messages,
)
from langchain_core.messages.utils import MessageLikeRepresentation
from langchain_core.prompt_values import PromptValue
from langgraph.graph.message import REMOVE_ALL_MESSAGES

logger = logging.getLogger("langchain_context_governance")

_CONTENT = operator.attrgetter("content")
_ID = operator.attrgetter("id")

__all__ = [
    "MAX_NESTING",
    "as_message_list",
    "call_key",
    "content_fingerprint",
    "content_text",
    "content_text_length",
    "declared_tool_call_ids",
    "given_items",
    "has_tool_calls",
    "is_assistant",
    "is_system",
    "is_tool_result",
    "is_user",
    "iter_declared_tool_calls",
    "message_fingerprint",
    "message_key",
    "message_keys",
    "message_keys_and_text",
    "messages_from",
    "messages_to_govern",
    "nested_too_deep",
    "readable_contents",
    "results_run_end",
    "results_run_start",
    "tool_names_by_call_id",
]


def as_message_list(messages: Sequence[MessageLikeRepresentation]) -> list[BaseMessage]:
    """Return a new list of BaseMessage objects; the input is never returned itself.

    BaseMessage objects are taken as they are (no copy), but for a `None` content, which
    becomes "" on a copy (OpenAI's null content); anything else goes through
    `langchain_core.messages.convert_to_messages`. A message that cannot be read, or
    whose content is neither a string nor a list of strings and blocks, is a ValueError
    naming its index.

    Example:
        >>> as_message_list([("user", "hi")])
        [HumanMessage(content='hi', additional_kwargs={}, response_metadata={})]
    """
    return readable_contents(_as_messages(_listed(messages))[0])


def _listed(messages: Sequence[MessageLikeRepresentation]) -> list[Any]:
    """A new list of `messages`, not yet read; TypeError for a string or a lone message."""
    if isinstance(messages, (str, bytes)):
        raise TypeError("messages must be a sequence of messages, not a single string")
    if isinstance(messages, BaseMessage):
        raise TypeError("messages must be a sequence of messages; put the one message in a list")
    return list(messages)


def _as_messages(items: list[Any], *, start: int = 0) -> tuple[list[BaseMessage], set[type]]:
    """`items` as BaseMessage objects (`items` itself where they all are), with their
    contents not yet checked, and the set of the classes from `start` on: the items before
    `start` are messages the caller knows (the very objects read on an earlier call)."""
    # By the set of types: isinstance on a pydantic class is slow, 10,000 times a call. A
    # slice, not islice, which would walk the items before `start` on every call.
    kinds = set(map(type, items[start:]))
    if all(issubclass(kind, BaseMessage) for kind in kinds):
        return items, kinds
    converted: list[BaseMessage] = items[:start]
    for index, item in enumerate(items[start:], start):
        if isinstance(item, BaseMessage):
            converted.append(item)
            continue
        try:
            converted.extend(convert_to_messages([item]))
        except (ValueError, TypeError, NotImplementedError, KeyError) as error:
            raise ValueError(
                f"message {index} cannot be read as a chat message: {error}"
            ) from error
    return converted, set(map(type, converted))


def readable_contents(messages: list[BaseMessage], *, start: int = 0) -> list[BaseMessage]:
    """`messages`, with a `None` content as "" (on a copy); ValueError names any other
    content that is not a string or a list of strings and blocks.

    Only the messages from `start` on are read: a caller that checked the ones before on
    an earlier call (the very same objects) skips them.

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> [m.content for m in readable_contents([HumanMessage("hi"), HumanMessage("")])]
        ['hi', '']
    """
    # The common paths (every content text, or text and lists of strings and dicts) are
    # checked by the set of types, with no Python loop over the messages.
    contents = list(map(_CONTENT, messages[start:]))
    kinds = set(map(type, contents))
    if kinds <= {str}:
        return messages
    if kinds <= {str, list}:
        lists = [content for content in contents if type(content) is list]
        if set(map(type, itertools.chain.from_iterable(lists))) <= {str, dict}:
            return messages
    repaired: list[BaseMessage] | None = None
    for index, content in enumerate(contents, start):
        if isinstance(content, str):
            continue
        if content is None:
            if repaired is None:
                repaired = list(messages)
            repaired[index] = messages[index].model_copy(update={"content": ""})
        elif not isinstance(content, list):
            raise ValueError(
                f"message {index}: content must be a string or a list of content blocks, "
                f"got {type(content).__name__}"
            )
        elif not all(map(isinstance, content, itertools.repeat((str, dict)))):
            names = {
                type(block).__name__ for block in content if not isinstance(block, (str, dict))
            }
            raise ValueError(
                f"message {index}: a content block must be a string or a dict, got "
                + ", ".join(sorted(names))
            )
    return messages if repaired is None else repaired


# Nesting no chat message needs: deeper content, arguments or extra fields are refused by
# name (JSON and `repr`, which every digest and count reads them with, recurse).
MAX_NESTING = 100


def _nesting(value: Any, limit: int) -> bool:
    """Whether `value` nests lists and mappings deeper than `limit` (walked with a stack,
    never recursion, and only as deep as `limit`)."""
    pending: list[tuple[Any, int]] = [(value, 0)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, Mapping):
            children: Iterable[Any] = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        if depth >= limit:
            return True
        pending.extend((child, depth + 1) for child in children)
    return False


def nested_too_deep(messages: Sequence[Any]) -> ValueError | None:
    """A ValueError naming the first message whose content, tool-call arguments or extra
    fields nest deeper than `MAX_NESTING`, or None where none does: what a recursion
    error in reading them is said as (see `ContextGovernor.govern`).

    Example:
        >>> deep: Any = "x"
        >>> for _ in range(150):
        ...     deep = [deep]
        >>> block = {"type": "text", "text": "a", "x": deep}
        >>> print(nested_too_deep([HumanMessage("hi"), HumanMessage([block])]))
        message 1: its content, tool calls or extra fields nest more than 100 levels deep
    """
    for index, message in enumerate(messages):
        if not isinstance(message, BaseMessage):
            continue  # not read yet: a recursion error was not in reading it
        calls = message.tool_calls if isinstance(message, AIMessage) else ()
        parts = (message.content, message.additional_kwargs, [call.get("args") for call in calls])
        if any(_nesting(part, MAX_NESTING) for part in parts):
            return ValueError(
                f"message {index}: its content, tool calls or extra fields nest more than "
                f"{MAX_NESTING} levels deep"
            )
    return None


def messages_to_govern(value: Any, *, check_contents: bool = True) -> list[BaseMessage]:
    """The messages the governor is given, as a new list of BaseMessage objects.

    Takes what a Runnable in front of a chat model is given: a list of messages (or of
    what `convert_to_messages` reads), a `PromptValue`, or a LangGraph state (a mapping
    with a "messages" key, whose list is governed; its other keys are not read). A
    `RemoveMessage` is applied as LangGraph's `add_messages` applies it (the earlier
    message with its id is removed, every earlier message for `REMOVE_ALL_MESSAGES`)
    and never sent; one that removes nothing is dropped with a warning.

    With `check_contents=False` the contents are left to `readable_contents`, for a
    caller that knows which messages it checked on an earlier call; where a
    `RemoveMessage` is applied they are checked here all the same, so that an error
    names the index the caller gave. The same in two steps: `given_items`, then
    `messages_from` (for a caller that knows which items it read before).

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage
        >>> state = {"messages": [HumanMessage("hi"), AIMessage("yo", id="a1"),
        ...                       RemoveMessage(id="a1"), HumanMessage("again")]}
        >>> [m.content for m in messages_to_govern(state)]
        ['hi', 'again']
    """
    return messages_from(given_items(value), check_contents=check_contents)


def given_items(value: Any) -> list[Any]:
    """The list of what the governor is given (see `messages_to_govern`), as a new list
    whose items are not read yet."""
    if isinstance(value, PromptValue):
        value = value.to_messages()
    if isinstance(value, Mapping):
        if "messages" not in value:
            keys = ", ".join(repr(key) for key in list(value)[:5]) or "none"
            raise TypeError(
                "messages must be a list of messages, or a LangGraph state with a "
                f"'messages' key; got a mapping whose keys are {keys}"
            )
        value = value["messages"]
    return _listed(value)


def messages_from(
    items: list[Any], *, start: int = 0, check_contents: bool = True
) -> list[BaseMessage]:
    """`given_items` read as messages (see `messages_to_govern`): `items` itself where it
    holds messages only and removes none. The items before `start` are not read: they are
    the very message objects read on an earlier call (`RepairStream.objects_read_in`), so
    a long history costs a look at what is new only."""
    messages, kinds = _as_messages(items, start=start)
    if not any(issubclass(kind, RemoveMessage) for kind in kinds):
        return readable_contents(messages, start=start) if check_contents else messages
    return _apply_removals(readable_contents(messages))


def _apply_removals(messages: list[BaseMessage]) -> list[BaseMessage]:
    kept: list[tuple[int, BaseMessage]] = []
    for index, message in enumerate(messages):
        if not isinstance(message, RemoveMessage):
            kept.append((index, message))
            continue
        if message.id == REMOVE_ALL_MESSAGES:
            removed, kept = len(kept), []
        else:
            before = len(kept)
            kept = [(position, m) for position, m in kept if m.id != message.id]
            removed = before - len(kept)
        if not removed:
            logger.warning(
                "message %d: RemoveMessage(id=%r) removes no earlier message; it is ignored "
                "(it is never sent to the model)",
                index,
                message.id,
            )
    return [message for _, message in kept]


def is_system(message: BaseMessage) -> bool:
    return isinstance(message, SystemMessage)


def is_user(message: BaseMessage) -> bool:
    return isinstance(message, HumanMessage)


def is_assistant(message: BaseMessage) -> bool:
    return isinstance(message, AIMessage)


def is_tool_result(message: BaseMessage) -> bool:
    return isinstance(message, ToolMessage)


def iter_declared_tool_calls(message: AIMessage) -> Iterator[tuple[str, str]]:
    """Yield (id, tool name) for every tool call an assistant message declares.

    A provider sees a call from three places: `tool_calls`, `invalid_tool_calls`
    (langchain-openai sends them as tool calls too) and Anthropic `tool_use` content
    blocks. Each id is yielded once; calls without an id cannot be answered and are
    skipped.
    """
    seen: set[str] = set()
    for call in message.tool_calls:
        call_id = call.get("id")
        if call_id and call_id not in seen:
            seen.add(call_id)
            yield call_id, call.get("name") or ""
    for invalid in message.invalid_tool_calls:
        call_id = invalid.get("id")
        if call_id and call_id not in seen:
            seen.add(call_id)
            yield call_id, invalid.get("name") or ""
    if isinstance(message.content, list):
        for block in message.content:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                call_id = block.get("id")
                if isinstance(call_id, str) and call_id and call_id not in seen:
                    seen.add(call_id)
                    yield call_id, str(block.get("name") or "")


def declared_tool_call_ids(message: BaseMessage) -> list[str]:
    """Ids of the tool calls an assistant message declares; empty for other messages."""
    if not isinstance(message, AIMessage):
        return []
    return [call_id for call_id, _ in iter_declared_tool_calls(message)]


def tool_names_by_call_id(messages: Sequence[BaseMessage]) -> dict[str, str]:
    """Map each declared tool-call id to its tool name."""
    names: dict[str, str] = {}
    for message in messages:
        if isinstance(message, AIMessage) and (
            message.tool_calls or message.invalid_tool_calls or isinstance(message.content, list)
        ):
            for call_id, name in iter_declared_tool_calls(message):
                names.setdefault(call_id, name)
    return names


def group_start(messages: Sequence[BaseMessage], end: int) -> int:
    """Start of the group that ends just before `end`.

    A group is an assistant message together with the tool results that directly
    follow it, or any other single message. Tool results with no assistant message
    in front of them form a group of their own.

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> call = {"name": "ls", "args": {}, "id": "c1"}
        >>> history = [HumanMessage("go"), AIMessage("", tool_calls=[call]),
        ...            ToolMessage("a", tool_call_id="c1")]
        >>> group_start(history, 3), group_end(history, 1, 3)
        (1, 3)
    """
    last = end - 1
    if not isinstance(messages[last], ToolMessage):
        return last
    start = results_run_start(messages, last)
    if start > 0 and isinstance(messages[start - 1], AIMessage):
        return start - 1
    return start


def group_end(messages: Sequence[BaseMessage], start: int, end: int) -> int:
    """End (before `end`) of the group that begins at `start` (see `group_start`)."""
    if isinstance(messages[start], (AIMessage, ToolMessage)):
        return results_run_end(messages, start + 1, end)
    return start + 1


def results_run_start(messages: Sequence[BaseMessage], index: int) -> int:
    """Where the run of tool results that holds the result at `index` begins: the message
    before it, if any, is the one those results follow (their calls' assistant message,
    in a well-formed history).

    Example:
        >>> history = [AIMessage("", tool_calls=[{"name": "ls", "args": {}, "id": "c1"}]),
        ...            ToolMessage("a", tool_call_id="c1"), ToolMessage("b", tool_call_id="c2")]
        >>> results_run_start(history, 2), results_run_end(history, 1)
        (1, 3)
    """
    start = index
    while start > 0 and isinstance(messages[start - 1], ToolMessage):
        start -= 1
    return start


def results_run_end(messages: Sequence[BaseMessage], start: int, end: int | None = None) -> int:
    """Index just past the run of tool results that begins at `start` (before `end`)."""
    end = len(messages) if end is None else end
    stop = start
    while stop < end and isinstance(messages[stop], ToolMessage):
        stop += 1
    return stop


def content_text(content: str | list[str | dict[str, Any]]) -> str:
    """The text of a message content: its string, or its text blocks joined by lines.

    Example:
        >>> content_text(["a", {"type": "text", "text": "b"}, {"type": "image_url"}])
        'a\\nb'
    """
    if isinstance(content, str):
        return content
    return "\n".join(block_texts(content))


def block_texts(blocks: Sequence[Any]) -> list[str]:
    """The texts of content `blocks`: each string, and each text block's text.

    Example:
        >>> block_texts(["a", {"type": "text", "text": "b"}, {"type": "image_url"}])
        ['a', 'b']
    """
    texts = []
    for block in blocks:
        if isinstance(block, str):
            texts.append(block)
        elif isinstance(block, dict) and block.get("type") == "text":
            text = block.get("text")
            if isinstance(text, str):
                texts.append(text)
    return texts


def content_text_length(content: str | list[str | dict[str, Any]]) -> int:
    """Characters of text in a message content; image and file blocks count as zero."""
    if isinstance(content, str):
        return len(content)
    total = 0
    for block in content:
        if isinstance(block, str):
            total += len(block)
        elif isinstance(block, dict) and block.get("type") == "text":
            text = block.get("text")
            if isinstance(text, str):
                total += len(text)
    return total


def has_tool_calls(message: BaseMessage) -> bool:
    """True when an assistant message declares at least one answerable tool call."""
    if not isinstance(message, AIMessage):
        return False
    if message.tool_calls or message.invalid_tool_calls:
        return any(True for _ in iter_declared_tool_calls(message))
    if isinstance(message.content, list):
        return any(True for _ in iter_declared_tool_calls(message))
    return False


def _json_key(value: object) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


# The JSON of each assistant message's tool calls made during the current call, by
# message object (`calls_encoded_once`).
_CALLS_JSON: ContextVar[dict[int, tuple[AIMessage, str]] | None] = ContextVar(
    "calls_json", default=None
)


@contextmanager
def calls_encoded_once() -> Iterator[None]:
    """Within it, a message's tool calls are encoded once (`tool_calls_json`), however
    many fingerprints and digests read them: a governance call is computation on messages
    it never changes."""
    token = _CALLS_JSON.set({})
    try:
        yield
    finally:
        _CALLS_JSON.reset(token)


def tool_calls_json(message: AIMessage) -> str:
    """The tool calls and invalid tool calls of `message` as JSON (sorted keys, ASCII),
    made once per message object within `calls_encoded_once`.

    Example:
        >>> tool_calls_json(AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "1"}]))
        '[[{"args": {}, "id": "1", "name": "f", "type": "tool_call"}], []]'
    """
    made = _CALLS_JSON.get()
    if made is not None:
        found = made.get(id(message))
        if found is not None and found[0] is message:
            return found[1]
    text = json.dumps(
        [message.tool_calls, message.invalid_tool_calls],
        sort_keys=True,
        ensure_ascii=True,
        default=str,
    )
    if made is not None:
        made[id(message)] = (message, text)
    return text


def content_fingerprint(message: BaseMessage) -> int:
    """A hash of everything a token counter reads from `message`, the same for equal copies.

    A message reloaded from a checkpoint is a new object with the same fields, so it has
    the same fingerprint; a copy with other content does not. A string's hash is cached
    by Python on the string, so an unchanged message is fingerprinted in constant time.
    """
    content = "" if message.content is None else message.content  # as the governor reads it
    content_key = content if isinstance(content, str) else _json_key(content)
    calls_key = ""
    if isinstance(message, AIMessage) and (message.tool_calls or message.invalid_tool_calls):
        calls_key = tool_calls_json(message)
    extra_key = _json_key(message.additional_kwargs) if message.additional_kwargs else ""
    call_id = message.tool_call_id if isinstance(message, ToolMessage) else None
    return hash((message.type, message.name, call_id, content_key, calls_key, extra_key))


def message_fingerprint(message: BaseMessage) -> int:
    """`content_fingerprint` plus the message id: what tells two history entries apart."""
    return hash((content_fingerprint(message), message.id))


def call_key(call_id: str) -> int:
    """A tool call id as a number, the same in every process (a 64-bit BLAKE2b digest),
    for state that a record carries: eight bytes whatever the id's length.

    Example:
        >>> call_key("call_1") == call_key("call_1") != call_key("call_2")
        True
    """
    digest = hashlib.blake2b(call_id.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "little", signed=True)


def message_key(message: BaseMessage) -> int:
    """What tells a message read before from another one at its place in a history.

    A message is known by its content: its id, its class, its text (or content blocks),
    its name, a result's call id, an assistant message's tool calls and its extra fields
    (`additional_kwargs`). A message changed in place (LangGraph's `add_messages`
    replaces a message with the same id: a redaction of the same length, a word swapped,
    a call's arguments edited) is another message, and everything decided on the old one
    is dropped with it; ids and lengths alone never stand for content. Python caches a
    string's hash on the string, so the text of the very objects read before costs
    nothing to hash again; the text of a history reloaded from a checkpoint (new
    objects) is hashed once.

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> message_key(HumanMessage("hi", id="m1")) == message_key(HumanMessage("hi", id="m1"))
        True
        >>> message_key(HumanMessage("hi", id="m1")) == message_key(HumanMessage("ho", id="m1"))
        False
        >>> message_key(HumanMessage("hi", id="m1")) == message_key(HumanMessage("hi", id="m2"))
        False
    """
    return hash((message.id, type(message), _content_key(message.content), _extras_key(message)))


_EMPTY_TEXT_KEY = hash("")


def _content_key(content: object) -> int:
    """A content's part of `message_key`: a `None` content as "" (as the governor reads
    it), content blocks by their JSON, content of no known shape (not yet checked) as
    itself only."""
    if type(content) is str:
        return hash(content)
    if content is None:
        return _EMPTY_TEXT_KEY
    if isinstance(content, list):
        return hash(_json_key(content))
    return hash(("unread content", id(content)))


def _calls_key(calls: list[Any]) -> int:
    """Tool calls' part of `message_key`, by their ids, names and arguments (in the order
    of their names: a message rebuilt from a checkpoint may hold them in another): arguments
    of scalars are hashed as they are, others by their text."""
    parts = []
    for call in calls:
        arguments = call.get("args")
        try:
            items = sorted(arguments.items())
            parts.append(hash((call.get("id"), call.get("name"), tuple(items))))
        except (AttributeError, TypeError):
            parts.append(hash((call.get("id"), call.get("name"), repr(arguments))))
    return hash(tuple(parts))


def _extras_key(message: BaseMessage) -> int:
    """What `message_key` reads besides the id, the class and the content."""
    kwargs = message.additional_kwargs
    key: tuple[Any, ...] = (message.name, repr(kwargs)) if kwargs else (message.name,)
    if type(message) is ToolMessage:
        return hash((*key, message.tool_call_id))
    if isinstance(message, AIMessage):
        if message.tool_calls:
            key += (_calls_key(message.tool_calls),)
        if message.invalid_tool_calls:
            key += (repr(message.invalid_tool_calls),)
    elif isinstance(message, ToolMessage):
        key += (message.tool_call_id,)
    return hash(key)


def compared_content_length(content: object) -> int:
    """The length `message_key` (and the record's `HistoryDigest`) reads: a `None` content
    is read as "" (as the governor reads it), content of no length (not yet checked)
    matches nothing."""
    if content is None:
        return 0
    return len(content) if isinstance(content, (str, list)) else -1


def message_keys(messages: Iterable[BaseMessage]) -> array[int]:
    """`message_key` of each message, computed in bulk where every message has an id."""
    return message_keys_and_text(messages)[0]


def message_keys_and_text(messages: Iterable[BaseMessage]) -> tuple[array[int], bool]:
    """`message_keys`, and whether every content is text (then `readable_contents` has
    nothing to look at), found on the same pass: a history reloaded from a checkpoint
    (new objects) is read once, not once for its keys and once for its contents.

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> keys, text = message_keys_and_text([HumanMessage("hi", id="m1")])
        >>> len(keys), text, keys[0] == message_key(HumanMessage("hi", id="m1"))
        (1, True, True)
        >>> message_keys_and_text([HumanMessage(["hi"], id="m1")])[1]
        False
    """
    items = messages if isinstance(messages, list) else list(messages)
    contents = list(map(_CONTENT, items))
    text = set(map(type, contents)) <= {str}
    content_keys = map(hash if text else _content_key, contents)
    parts = zip(
        map(_ID, items), map(type, items), content_keys, map(_extras_key, items), strict=True
    )
    return array("q", map(hash, parts)), text
