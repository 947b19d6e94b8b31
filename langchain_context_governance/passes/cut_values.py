"""The values a cut drops: the ids, codes, dates, names and paths its messages held.

A cut drops whole messages, and with them what the next call needs most: the
reservation code a lookup returned, the date the user gave, the path a search found.
On 27 real agent runs, 176 of the 187 values of the agent's next call that the
governor's requests no longer showed were in messages a cut had dropped. The note at
the cut carries them, extracted, not summarized: the short scalar values of the
dropped messages, grouped under the name they had (a JSON key of a tool result, an
argument of a call, else the tool's name or the speaker), newest first, each once,
within a size the caller gives. Nothing is asked of a model and the text is a
function of the dropped messages alone, so every worker makes the same note and the
provider's prompt cache keeps it until the next cut.

What is a value:
- in a tool result that is JSON, and in a call's arguments: every string leaf of at
  most `MAX_VALUE_CHARS` characters on one line, and every number of two digits or
  more, under its key;
- in other text: every word that looks like an identifier rather than prose: one that
  holds a digit, or is an upper-case code (`JFK`), or joins parts with `_`, `/`, `@`,
  `.` between letters or digits (`user_id`, `src/app.py`, `a@b.com`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable, Iterator, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from langchain_context_governance._added import USER_PART, user_parts

# Longer strings are prose or content, not values one refers to again.
MAX_VALUE_CHARS = 64
# Of a long message, only the head is searched for values: the cost of a cut stays
# bounded whatever the size of what it drops.
SCANNED_CHARS = 2_000
# Below this many characters left, no entry ("; id: 42") fits: the search ends.
_SHORTEST_ENTRY = 8
# Words in text: letters and digits, joined by the characters paths, ids and dates use.
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9_./:@#+-]*[A-Za-z0-9]")
_DIGIT = re.compile(r"\d")
_JOINER = re.compile(r"[_/@.]")

# One key and its values, in the order the note lists them.
KeyedValues = tuple[str, tuple[str, ...]]


def _is_identifier(word: str) -> bool:
    if len(word) > MAX_VALUE_CHARS:
        return False
    if word.isalpha():
        return len(word) >= 2 and word.isupper()
    if word.isdigit():
        return len(word) >= 2
    if _DIGIT.search(word):
        return len(word) >= 3
    return len(word) >= 3 and _JOINER.search(word) is not None


def _leaves(node: Any, key: str) -> Iterator[tuple[str, str]]:
    if isinstance(node, dict):
        for name, value in node.items():
            yield from _leaves(value, str(name))
    elif isinstance(node, (list, tuple)):
        for value in node:
            yield from _leaves(value, key)
    elif isinstance(node, bool) or node is None:
        return
    elif isinstance(node, (int, float)):
        text = str(node)
        if sum(character.isdigit() for character in text) >= 2:
            yield key, text
    else:
        text = str(node).strip()
        if text and len(text) <= MAX_VALUE_CHARS and "\n" not in text:
            yield key, text


def _texts(message: BaseMessage) -> list[str]:
    """The text of `message` a value may come from: a user's own words only."""
    if isinstance(message, HumanMessage):
        blocks = [
            block for blocks, kind in user_parts(message) if kind == USER_PART for block in blocks
        ]
    else:
        content = message.content
        blocks = [content] if isinstance(content, str) else list(content)
    texts = []
    for block in blocks:
        if isinstance(block, str):
            texts.append(block)
        elif isinstance(block, dict) and block.get("type") == "text":
            text = block.get("text")
            if isinstance(text, str):
                texts.append(text)
    return texts


def _words(text: str, key: str) -> Iterator[tuple[str, str]]:
    for word in _WORD.findall(text[:SCANNED_CHARS]):
        if _is_identifier(word):
            yield key, word


def values_of(message: BaseMessage) -> list[tuple[str, str]]:
    """The values `message` holds, each with the name it goes by, in the message's order.

    Example:
        >>> from langchain_core.messages import ToolMessage
        >>> values_of(ToolMessage('{"reservation_id": "4WQ150", "paid": 165}', tool_call_id="c"))
        [('reservation_id', '4WQ150'), ('paid', '165')]
    """
    found: list[tuple[str, str]] = []
    if isinstance(message, AIMessage):
        for call in message.tool_calls:
            found += _leaves(call["args"], call["name"])
    for text in _texts(message):
        if isinstance(message, ToolMessage):
            parsed = _json(text)
            if parsed is not None:
                found += _leaves(parsed, message.name or "result")
                continue
            found += _words(text, message.name or "result")
        else:
            found += _words(text, "user" if isinstance(message, HumanMessage) else "assistant")
    return found


def _json(text: str) -> dict[str, Any] | list[Any] | None:
    stripped = text.strip()
    if not stripped or stripped[0] not in "[{" or len(stripped) > SCANNED_CHARS:
        return None
    try:
        parsed = json.loads(stripped)
    except ValueError:
        return None
    return parsed if isinstance(parsed, (dict, list)) else None


def dropped_values(
    messages: Iterable[BaseMessage | Sequence[tuple[str, str]]],
    *,
    max_chars: int,
    shown: Collection[str] = (),
    skip: Collection[str] = (),
) -> list[tuple[str, str]]:
    """The values of `messages` (newest first; a message, or its `values_of` where the
    caller has them), each once with its name, as many as their text (`values_text` of
    `grouped(...)`) holds within `max_chars`: a value that would take it over is passed
    over for the next ones. Values in `shown` (those the request carries anyway,
    `shown_values`) and in `skip` are left out.

    Example:
        >>> from langchain_core.messages import AIMessage
        >>> call = {"name": "get_order", "args": {"order_id": "W123"}, "id": "c1"}
        >>> dropped_values([AIMessage("", tool_calls=[call])], max_chars=100)
        [('order_id', 'W123')]
    """
    accepted: list[tuple[str, str]] = []
    keys: set[str] = set()
    seen: set[str] = set()
    length = 0
    for message in messages:
        if max_chars - length < _SHORTEST_ENTRY:
            break
        found = values_of(message) if isinstance(message, BaseMessage) else message
        for key, value in found:
            if value in seen or value in skip or value in shown:
                continue
            # "; key: value" for a new key, ", value" for one already listed.
            added = len(value) + (2 if key in keys else len(key) + 4)
            if length + added > max_chars:
                continue
            seen.add(value)
            keys.add(key)
            accepted.append((key, value))
            length += added
    return accepted


def grouped(values: Iterable[tuple[str, str]]) -> tuple[KeyedValues, ...]:
    """Values grouped under their names, the names in the order they first come.

    Example:
        >>> grouped([("id", "A2"), ("city", "Paris"), ("id", "A1")])
        (('id', ('A2', 'A1')), ('city', ('Paris',)))
    """
    keys: dict[str, list[str]] = {}
    for key, value in values:
        keys.setdefault(key, []).append(value)
    return tuple((key, tuple(found)) for key, found in keys.items())


def shown_words(messages: Iterable[BaseMessage]) -> set[str]:
    """The words of `messages` (text, and calls' arguments): a value among them is in the
    request anyway and needs no listing.

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> sorted(shown_words([HumanMessage("cancel W123, then W456.")]))
        ['W123', 'W456', 'cancel', 'then']
    """
    words: set[str] = set()
    for message in messages:
        texts = _texts(message)
        if isinstance(message, AIMessage):
            texts += [json.dumps(call["args"], default=str) for call in message.tool_calls]
        for text in texts:
            words.update(_WORD.findall(text))
    return words


def values_text(values: Sequence[KeyedValues]) -> str:
    """The values as the note lists them: `key: v1, v2; key2: v3`.

    Example:
        >>> values_text((("date", ("2024-05-17", "2024-05-27")), ("origin", ("JFK",))))
        'date: 2024-05-17, 2024-05-27; origin: JFK'
    """
    return "; ".join(f"{key}: {', '.join(values)}" for key, values in values)
