"""The repairs behind the provider rules: each a pure function from a request to a request.

Every repair returns the request and how many messages it changed, and the very same
list when there is nothing to change. Which repairs a provider needs, and the provider
wording each one prevents, is in `langchain_context_governance.rules.table`.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.tool import tool_call

from langchain_context_governance._added import (
    SYNTHETIC_USER_CONTENT,
    mark_added,
    synthetic_user_turn,
)
from langchain_context_governance._messages import (
    has_tool_calls,
    is_assistant,
    is_system,
    is_tool_result,
    is_user,
    iter_declared_tool_calls,
)
from langchain_context_governance.passes.alternation import (
    merge_contents,
)
from langchain_context_governance.passes.backfill import backfill_missing_tool_results_with_count

Content = str | list[str | dict[str, Any]]
Repair = Callable[[list[BaseMessage]], tuple[list[BaseMessage], int]]

# What the assistant says between tool results and the next user message, for templates
# and APIs that want an assistant turn there (Mistral).
SYNTHETIC_ASSISTANT_CONTENT = "(tool results received)"

# Nine letters or digits satisfy every provider at once: Mistral's exact format,
# Anthropic's ^[a-zA-Z0-9_-]+$ and OpenAI's 40-character limit.
_ID_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_ID_LENGTH = 9
# Mistral: "Function name was {name} but must be a-z, A-Z, 0-9, or contain underscores
# and dashes, with a maximum length of 64."
_NAME_CHARACTER_NOT_ALLOWED = re.compile(r"[^a-zA-Z0-9_-]")
_MAX_TOOL_NAME_LENGTH = 64
UNNAMED_TOOL = "unnamed_tool"
_ROLE_CLASSES: dict[str, type[BaseMessage]] = {
    "user": HumanMessage,
    "human": HumanMessage,
    "assistant": AIMessage,
    "ai": AIMessage,
    "system": SystemMessage,
    "developer": SystemMessage,
}


def stable_tool_call_id(key: str) -> str:
    """Nine letters or digits derived from `key`: the same key gives the same id, always.

    Stable across calls and processes (no salted `hash()`), so a rewritten history
    stays the same prefix turn after turn and the provider's prompt cache keeps working.

    Example:
        >>> stable_tool_call_id("call_0") == stable_tool_call_id("call_0")
        True
        >>> len(stable_tool_call_id("toolu.01"))
        9
    """
    # surrogatepass: an id read from JSON can hold a lone surrogate, which UTF-8 refuses.
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()
    number = int.from_bytes(digest[:8], "big") % len(_ID_ALPHABET) ** _ID_LENGTH
    characters = []
    for _ in range(_ID_LENGTH):
        number, remainder = divmod(number, len(_ID_ALPHABET))
        characters.append(_ID_ALPHABET[remainder])
    return "".join(characters)


@dataclass
class _ToolCallIdAssigner:
    """Decides the id each tool call is sent with, walking the request from the start.

    An id the provider accepts stays. A rejected id maps to one stable id wherever it
    appears; a missing id, an id repeated inside one message, or (for providers that
    want ids unique in the request) an id declared before, gets a fresh stable id.
    Fresh ids never collide with any id already in the request.
    """

    accepts: Callable[[str], bool]
    unique: bool
    used: set[str]
    declared: set[str] = field(default_factory=set)
    replacements: dict[str, str] = field(default_factory=dict)

    def id_for_call(self, call_id: str | None, call: dict[str, Any], in_message: set[str]) -> str:
        if not call_id:
            return self._fresh(_call_key(call))
        reused = self.unique and call_id in self.declared
        if call_id in in_message or reused:
            return self._fresh(call_id)
        return self.id_for_result(call_id)

    def id_for_result(self, call_id: str) -> str:
        if self.accepts(call_id):
            return call_id
        if call_id not in self.replacements:
            self.replacements[call_id] = self._fresh(call_id)
        return self.replacements[call_id]

    def _fresh(self, key: str) -> str:
        salt = 0
        candidate = stable_tool_call_id(key)
        while candidate in self.used:
            salt += 1
            candidate = stable_tool_call_id(f"{key}#{salt}")
        self.used.add(candidate)
        return candidate


def _call_key(call: dict[str, Any]) -> str:
    """What a call without an id is known by: its tool name and arguments."""
    arguments = json.dumps(call.get("args"), sort_keys=True, default=str)
    return f"{call.get('name') or ''}({arguments})"


def _ids_in_request(messages: list[BaseMessage]) -> set[str]:
    ids: set[str] = set()
    for message in messages:
        if isinstance(message, ToolMessage):
            ids.add(message.tool_call_id)
        elif isinstance(message, AIMessage):
            ids.update(call_id for call_id in _raw_call_ids(message) if call_id)
    return ids


def tool_use_blocks(content: Content) -> list[dict[str, Any]]:
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_use"]


def _raw_call_ids(message: AIMessage) -> list[str | None]:
    """Every call id as written: duplicates and missing ids included."""
    calls = [*message.tool_calls, *message.invalid_tool_calls, *tool_use_blocks(message.content)]
    return [call.get("id") for call in calls]


@dataclass
class _MessageRelabeling:
    """The ids of one assistant message's calls, picked one call at a time."""

    assigner: _ToolCallIdAssigner
    in_message: set[str] = field(default_factory=set)
    renamed: dict[str, str] = field(default_factory=dict)
    pairs: list[tuple[str, str]] = field(default_factory=list)
    changed: bool = False

    def relabel(self, call: dict[str, Any]) -> dict[str, Any]:
        old = call.get("id")
        new = self.assigner.id_for_call(old, call, self.in_message)
        self.in_message.add(new)
        if old:
            self.in_message.add(old)
            self.renamed.setdefault(old, new)
            self.pairs.append((old, new))
        if new == old:
            return call
        self.changed = True
        return {**call, "id": new}

    def relabel_block(self, block: str | dict[str, Any]) -> str | dict[str, Any]:
        # A tool_use block with the id of a tool_calls entry is the same call.
        if not isinstance(block, dict) or block.get("type") != "tool_use":
            return block
        old = block.get("id")
        if isinstance(old, str) and old in self.renamed:
            return block if self.renamed[old] == old else {**block, "id": self.renamed[old]}
        return self.relabel(block)


def _relabel_calls(
    message: AIMessage, assigner: _ToolCallIdAssigner
) -> tuple[AIMessage, list[tuple[str, str]]]:
    """The message with the ids `assigner` picks, and (old, new) for each answerable call."""
    relabeling = _MessageRelabeling(assigner)
    tool_calls = [relabeling.relabel(dict(call)) for call in message.tool_calls]
    invalid_calls = [relabeling.relabel(dict(call)) for call in message.invalid_tool_calls]
    content = message.content
    if tool_use_blocks(content):
        content = [relabeling.relabel_block(block) for block in message.content]
    assigner.declared.update(relabeling.in_message)
    if not relabeling.changed:
        return message, relabeling.pairs
    update = {"tool_calls": tool_calls, "invalid_tool_calls": invalid_calls, "content": content}
    return message.model_copy(update=update), relabeling.pairs


def give_tool_calls_legal_ids(
    messages: list[BaseMessage], *, accepts: Callable[[str], bool], unique: bool
) -> tuple[list[BaseMessage], int]:
    """Rewrite tool-call ids `accepts` rejects, in each call and in its result.

    A call without an id, or with an id repeated inside its message (or, when `unique`,
    declared earlier in the request) gets a fresh id and, where it has none, a
    placeholder result.
    """
    if not _needs_new_ids(messages, accepts=accepts, unique=unique):
        return messages, 0
    assigner = _ToolCallIdAssigner(accepts, unique, used=_ids_in_request(messages))
    output: list[BaseMessage] = []
    pending: dict[str, list[str]] = {}
    changed = 0
    for message in messages:
        relabeled: BaseMessage = message
        if isinstance(message, AIMessage):
            relabeled, pairs = _relabel_calls(message, assigner)
            pending = {}
            for old, new in pairs:
                pending.setdefault(old, []).append(new)
        elif isinstance(message, ToolMessage):
            answers = pending.get(message.tool_call_id)
            new_id = answers.pop(0) if answers else assigner.id_for_result(message.tool_call_id)
            if new_id != message.tool_call_id:
                relabeled = message.model_copy(update={"tool_call_id": new_id})
        else:
            pending = {}
        changed += relabeled is not message
        output.append(relabeled)
    if changed == 0:
        return messages, 0
    # A call that had no id, or shared one, is now a call of its own with no result yet.
    answered, backfilled = backfill_missing_tool_results_with_count(output)
    return answered, changed + backfilled


def give_reused_call_ids_fresh_ids(
    messages: list[BaseMessage], *, taken: Callable[[str], bool]
) -> tuple[list[BaseMessage], int]:
    """Fresh ids for calls whose id `taken` says was declared before `messages`.

    For a part of a history (one tool-call group) under a provider that wants call ids
    unique in the request: each such call, and its result in `messages`, gets a stable
    id of nine letters or digits that nothing before or in `messages` uses, so a
    request cut from the history keeps its ids unique.
    """
    in_part = _ids_in_request(messages)
    renamed: dict[str, str] = {}
    output: list[BaseMessage] = []
    changed = 0
    for message in messages:
        relabeled: BaseMessage = message
        if isinstance(message, AIMessage):
            reused = [call_id for call_id in _raw_call_ids(message) if call_id and taken(call_id)]
            for call_id in reused:
                renamed.setdefault(call_id, _fresh_id(call_id, taken, in_part))
            if reused:
                relabeled = _with_call_ids(message, renamed)
        elif isinstance(message, ToolMessage) and message.tool_call_id in renamed:
            relabeled = message.model_copy(update={"tool_call_id": renamed[message.tool_call_id]})
        changed += relabeled is not message
        output.append(relabeled)
    return (output, changed) if changed else (messages, 0)


def _fresh_id(call_id: str, taken: Callable[[str], bool], in_part: set[str]) -> str:
    salt = 0
    candidate = stable_tool_call_id(call_id)
    while taken(candidate) or candidate in in_part:
        salt += 1
        candidate = stable_tool_call_id(f"{call_id}#{salt}")
    in_part.add(candidate)
    return candidate


def _with_call_ids(message: AIMessage, renamed: dict[str, str]) -> AIMessage:
    def relabel(call: dict[str, Any]) -> dict[str, Any]:
        call_id = call.get("id")
        return {**call, "id": renamed[call_id]} if call_id in renamed else call

    content = message.content
    if tool_use_blocks(content):
        content = [
            relabel(block) if isinstance(block, dict) and block.get("type") == "tool_use" else block
            for block in message.content
        ]
    update = {
        "tool_calls": [relabel(dict(call)) for call in message.tool_calls],
        "invalid_tool_calls": [relabel(dict(call)) for call in message.invalid_tool_calls],
        "content": content,
    }
    return message.model_copy(update=update)


def legal_tool_name(name: str | None) -> str:
    """`name` with every character Mistral rejects replaced by '_', cut to 64 characters."""
    legal = _NAME_CHARACTER_NOT_ALLOWED.sub("_", name or "")[:_MAX_TOOL_NAME_LENGTH]
    return legal or UNNAMED_TOOL


def _with_legal_name(call: dict[str, Any]) -> dict[str, Any]:
    name = call.get("name")
    legal = legal_tool_name(name)
    return call if legal == name else {**call, "name": legal}


def _message_with_legal_tool_names(message: BaseMessage) -> BaseMessage:
    if isinstance(message, ToolMessage):
        if message.name is None or legal_tool_name(message.name) == message.name:
            return message
        return message.model_copy(update={"name": legal_tool_name(message.name)})
    if not isinstance(message, AIMessage):
        return message
    tool_calls = [_with_legal_name(dict(call)) for call in message.tool_calls]
    invalid_calls = [_with_legal_name(dict(call)) for call in message.invalid_tool_calls]
    content = message.content
    if tool_use_blocks(content):
        content = [
            _with_legal_name(block)
            if isinstance(block, dict) and block.get("type") == "tool_use"
            else block
            for block in message.content
        ]
    unchanged = (tool_calls, invalid_calls, content) == (
        message.tool_calls,
        message.invalid_tool_calls,
        message.content,
    )
    if unchanged:
        return message
    update = {"tool_calls": tool_calls, "invalid_tool_calls": invalid_calls, "content": content}
    return message.model_copy(update=update)


def give_tools_legal_names(messages: list[BaseMessage]) -> tuple[list[BaseMessage], int]:
    """Replace tool names Mistral rejects (empty, spaces, dots) in calls and results."""
    return _map_messages(messages, _message_with_legal_tool_names)


def _map_messages(
    messages: list[BaseMessage], edit: Callable[[BaseMessage], BaseMessage]
) -> tuple[list[BaseMessage], int]:
    output = [edit(message) for message in messages]
    changed = sum(new is not old for new, old in zip(output, messages, strict=True))
    return (output, changed) if changed else (messages, 0)


def _is_blank_block(block: str | dict[str, Any]) -> bool:
    if isinstance(block, str):
        return not block.strip()
    return block.get("type") == "text" and not str(block.get("text") or "").strip()


def _without_blank_text(content: Content) -> Content:
    if isinstance(content, str):
        return content if content.strip() else ""
    return [block for block in content if not _is_blank_block(block)]


def is_blank_message(message: BaseMessage) -> bool:
    """No text and no other block, so providers that reject empty messages reject it."""
    if is_tool_result(message) or has_tool_calls(message):
        return False
    return not message.content


def _remove_blank_text(message: BaseMessage) -> BaseMessage | None:
    """The message without blank text; None where nothing is left to send.

    A blank user message becomes the synthetic user turn rather than vanish, since the
    turn order around it depends on it.
    """
    content = _without_blank_text(message.content)
    if content != message.content:
        message = message.model_copy(update={"content": content})
    if not is_blank_message(message):
        return message
    if is_user(message):
        return mark_added(
            message.model_copy(update={"content": SYNTHETIC_USER_CONTENT}), "user-turn"
        )
    return None


def drop_blank_content(messages: list[BaseMessage]) -> tuple[list[BaseMessage], int]:
    """Remove blank text blocks; drop blank system and assistant messages."""
    output: list[BaseMessage] = []
    changed = 0
    for message in messages:
        kept = _remove_blank_text(message)
        changed += kept is not message
        if kept is not None:
            output.append(kept)
    if changed == 0:
        return messages, 0
    return output, changed


def _late_system_positions(messages: list[BaseMessage], *, all_late: bool) -> list[int]:
    """System messages after the conversation started (all, or only those at the end)."""
    first_turn = next((i for i, m in enumerate(messages) if not is_system(m)), len(messages))
    last_answerable = max(
        (i for i, m in enumerate(messages) if is_user(m) or is_tool_result(m)), default=-1
    )
    start = first_turn if all_late else max(first_turn, last_answerable + 1)
    return [i for i in range(start, len(messages)) if is_system(messages[i])]


def move_systems_to_front(
    messages: list[BaseMessage], *, all_late: bool
) -> tuple[list[BaseMessage], int]:
    """Move late system messages, in order, to the end of the leading system messages."""
    late = _late_system_positions(messages, all_late=all_late)
    if not late:
        return messages, 0
    moved = set(late)
    leading = next((i for i, m in enumerate(messages) if not is_system(m)), len(messages))
    rest = [m for i, m in enumerate(messages[leading:], start=leading) if i not in moved]
    return [*messages[:leading], *(messages[i] for i in late), *rest], len(late)


def separate_consecutive_assistants(
    messages: list[BaseMessage],
) -> tuple[list[BaseMessage], int]:
    """Put the synthetic user turn between two assistant messages left side by side.

    Role alternation never merges two responses that both carry signed thinking blocks
    (they must reach Anthropic as produced), nor one into a response before it when it
    carries `reasoning_content`; a user turn between them keeps both intact and the
    roles alternating.
    """
    return _insert_between(
        messages,
        lambda previous, message: is_assistant(previous) and is_assistant(message),
        synthetic_user_turn,
    )


def _insert_between(
    messages: list[BaseMessage],
    needs_turn: Callable[[BaseMessage, BaseMessage], bool],
    make_turn: Callable[[], BaseMessage],
) -> tuple[list[BaseMessage], int]:
    """`messages` with a made turn wherever `needs_turn(previous, message)`; the count."""
    output: list[BaseMessage] = []
    inserted = 0
    for message in messages:
        if output and needs_turn(output[-1], message):
            output.append(make_turn())
            inserted += 1
        output.append(message)
    return (output, inserted) if inserted else (messages, 0)


def _needs_new_ids(
    messages: list[BaseMessage], *, accepts: Callable[[str], bool], unique: bool
) -> bool:
    """Whether `give_tool_calls_legal_ids` would change anything (a read-only fast path)."""
    declared: set[str] = set()
    for message in messages:
        if isinstance(message, ToolMessage):
            if not accepts(message.tool_call_id):
                return True
        elif isinstance(message, AIMessage):
            ids = _raw_call_ids(message)
            named = [call_id for call_id in ids if call_id]
            if len(named) != len(ids) or not all(map(accepts, named)):
                return True
            calls = {call_id for call_id, _ in iter_declared_tool_calls(message)}
            tool_calls = [call.get("id") for call in message.tool_calls]
            tool_calls += [call.get("id") for call in message.invalid_tool_calls]
            if len(set(tool_calls)) != len(tool_calls) or (unique and calls & declared):
                return True
            declared |= calls
    return False


def convert_other_message_types(messages: list[BaseMessage]) -> tuple[list[BaseMessage], int]:
    """A ChatMessage becomes the message class of its role; any other role, and a
    FunctionMessage, a user message that names the role, so no text is lost."""

    def convert(message: BaseMessage) -> BaseMessage:
        if not isinstance(message, (ChatMessage, FunctionMessage)):
            return message
        role = message.role if isinstance(message, ChatMessage) else f"function {message.name}"
        target = _ROLE_CLASSES.get(role.lower())
        if target is not None:
            return target(content=message.content, id=message.id)
        return HumanMessage(merge_contents(f"({role})", message.content), id=message.id)

    return _map_messages(messages, convert)


def _call_from_block(block: dict[str, Any]) -> dict[str, Any]:
    arguments = block.get("input")
    name = str(block.get("name") or "")
    call_id = block.get("id")
    if not (isinstance(call_id, str) and call_id):
        call_id = stable_tool_call_id(_call_key({"name": name, "args": arguments}))
    return dict(
        tool_call(name=name, args=arguments if isinstance(arguments, dict) else {}, id=call_id)
    )


def declare_tool_use_blocks_as_tool_calls(
    messages: list[BaseMessage],
) -> tuple[list[BaseMessage], int]:
    """Give every Anthropic `tool_use` block without a `tool_calls` entry one, same id.

    A block without an id gets a stable one, in the block and in the call alike.
    """

    def declare(message: BaseMessage) -> BaseMessage:
        if not isinstance(message, AIMessage) or not tool_use_blocks(message.content):
            return message
        missing = undeclared_tool_use_blocks(message)
        if not missing:
            return message
        calls = {id(block): _call_from_block(block) for block in missing}
        content = [
            {**block, "id": calls[id(block)]["id"]}
            if isinstance(block, dict) and id(block) in calls
            else block
            for block in message.content
        ]
        tool_calls = [*message.tool_calls, *calls.values()]
        return message.model_copy(update={"content": content, "tool_calls": tool_calls})

    return _map_messages(messages, declare)


def undeclared_tool_use_blocks(message: AIMessage) -> list[dict[str, Any]]:
    """The `tool_use` blocks whose id no `tool_calls` or `invalid_tool_calls` entry has."""
    declared = {call.get("id") for call in [*message.tool_calls, *message.invalid_tool_calls]}
    return [
        block
        for block in tool_use_blocks(message.content)
        if not block.get("id") or block.get("id") not in declared
    ]


def _arguments_of(invalid: dict[str, Any]) -> dict[str, Any]:
    raw = invalid.get("args")
    try:
        parsed = json.loads(raw) if isinstance(raw, str) else None
    except json.JSONDecodeError:
        parsed = None
    return parsed if isinstance(parsed, dict) else {"arguments": raw or ""}


def unsendable_invalid_calls(message: AIMessage) -> list[dict[str, Any]]:
    """Invalid calls ChatAnthropic leaves out: no id, no name, or the id of another call."""
    valid_ids = {call.get("id") for call in message.tool_calls}
    return [
        dict(invalid)
        for invalid in message.invalid_tool_calls
        if not invalid.get("id") or not invalid.get("name") or invalid.get("id") in valid_ids
    ]


def drop_unsendable_invalid_calls(
    messages: list[BaseMessage],
) -> tuple[list[BaseMessage], int]:
    """Remove the invalid calls the client will not send, so none of them gets a result."""

    def without_unsendable(message: BaseMessage) -> BaseMessage:
        if not isinstance(message, AIMessage) or not message.invalid_tool_calls:
            return message
        dropped = unsendable_invalid_calls(message)
        if not dropped:
            return message
        kept = [call for call in message.invalid_tool_calls if dict(call) not in dropped]
        return message.model_copy(update={"invalid_tool_calls": kept})

    return _map_messages(messages, without_unsendable)


def send_invalid_tool_calls_as_tool_calls(
    messages: list[BaseMessage],
) -> tuple[list[BaseMessage], int]:
    """Turn `invalid_tool_calls` into tool calls, their raw arguments kept.

    Arguments that are a JSON object are parsed; any other text is kept under the key
    "arguments", so the call and its result reach the model as a pair.
    """

    def convert(message: BaseMessage) -> BaseMessage:
        if not isinstance(message, AIMessage) or not message.invalid_tool_calls:
            return message
        converted = [
            tool_call(
                name=invalid.get("name") or "",
                args=_arguments_of(dict(invalid)),
                id=invalid.get("id"),
            )
            for invalid in message.invalid_tool_calls
        ]
        update = {"tool_calls": [*message.tool_calls, *converted], "invalid_tool_calls": []}
        return message.model_copy(update=update)

    return _map_messages(messages, convert)


def _call_count(message: BaseMessage) -> int:
    if not isinstance(message, AIMessage):
        return 0
    return len(message.tool_calls) + len(message.invalid_tool_calls)


def _is_tool_use(block: str | dict[str, Any], call_id: str | None = None) -> bool:
    """A tool_use block; with `call_id`, the one of that call."""
    if not (isinstance(block, dict) and block.get("type") == "tool_use"):
        return False
    return call_id is None or block.get("id") == call_id


def _piece(message: AIMessage, call_id: str | None, *, first: bool) -> AIMessage:
    """`message` reduced to the one call `call_id`; only the first piece keeps the text."""
    tool_calls = [call for call in message.tool_calls if call.get("id") == call_id]
    invalid = [call for call in message.invalid_tool_calls if call.get("id") == call_id]
    content: Content
    if isinstance(message.content, str):
        content = message.content if first else ""
    else:
        content = [
            block
            for block in message.content
            if _is_tool_use(block, call_id) or (first and not _is_tool_use(block))
        ]
    if first:
        update = {"tool_calls": tool_calls, "invalid_tool_calls": invalid, "content": content}
        return message.model_copy(update=update)
    return AIMessage(content=content, tool_calls=tool_calls, invalid_tool_calls=invalid)


def _split_run(message: AIMessage, results: list[BaseMessage]) -> list[BaseMessage]:
    """One call and its result after the other, in the order of the results."""
    order = [call.get("id") for call in [*message.tool_calls, *message.invalid_tool_calls]]
    output: list[BaseMessage] = []
    for result in results:
        assert isinstance(result, ToolMessage)
        if result.tool_call_id in order:
            order.remove(result.tool_call_id)
            output.append(_piece(message, result.tool_call_id, first=not output))
        output.append(result)
    output.extend(_piece(message, call_id, first=not output) for call_id in order)
    return output


def split_parallel_tool_calls(messages: list[BaseMessage]) -> tuple[list[BaseMessage], int]:
    """Split an assistant message with several tool calls into one message per call.

    Each call is followed by its own result, in the order the results came in; the
    text (and any thinking) stays with the first call.
    """
    if not any(_call_count(message) > 1 for message in messages):
        return messages, 0
    output: list[BaseMessage] = []
    changed = 0
    index = 0
    while index < len(messages):
        message = messages[index]
        index += 1
        if not (isinstance(message, AIMessage) and _call_count(message) > 1):
            output.append(message)
            continue
        end = index
        while end < len(messages) and isinstance(messages[end], ToolMessage):
            end += 1
        output.extend(_split_run(message, messages[index:end]))
        changed += 1
        index = end
    return output, changed


def merge_system_messages(messages: list[BaseMessage]) -> tuple[list[BaseMessage], int]:
    """Move every system message to the front and merge them into one."""
    moved, count = move_systems_to_front(messages, all_late=True)
    leading = next((i for i, m in enumerate(moved) if not is_system(m)), len(moved))
    if leading < 2:
        return moved, count
    merged = moved[0]
    for message in moved[1:leading]:
        merged = merged.model_copy(
            update={"content": merge_contents(merged.content, message.content)}
        )
    return [merged, *moved[leading:]], count + leading - 1


def fold_system_messages_into_first_user(
    messages: list[BaseMessage],
) -> tuple[list[BaseMessage], int]:
    """Put the text of every system message at the start of the first user message.

    With no user message, the system text becomes one, where the first system message was.
    """
    systems = [message for message in messages if is_system(message)]
    if not systems:
        return messages, 0
    text: Content = ""
    for system in systems:
        text = merge_contents(text, system.content)
    first_user = next((i for i, m in enumerate(messages) if is_user(m)), None)
    output: list[BaseMessage] = []
    for index, message in enumerate(messages):
        if is_system(message):
            if first_user is None and message is systems[0]:
                output.append(HumanMessage(text))
        elif index == first_user:
            output.append(
                message.model_copy(update={"content": merge_contents(text, message.content)})
            )
        else:
            output.append(message)
    return output, len(systems)


def put_assistant_turn_after_tool_results(
    messages: list[BaseMessage],
) -> tuple[list[BaseMessage], int]:
    """Insert a short assistant turn where a user message directly follows tool results."""
    return _insert_between(
        messages,
        lambda previous, message: is_tool_result(previous) and is_user(message),
        lambda: AIMessage(SYNTHETIC_ASSISTANT_CONTENT),
    )


def _call_as_text(name: str, arguments: Any, call_id: str) -> str:
    written = json.dumps(arguments, sort_keys=True, default=str, ensure_ascii=False)
    return f"(called tool {name} with {written}, call {call_id})"


def _assistant_without_calls(message: AIMessage) -> AIMessage:
    content: Content = message.content
    if isinstance(content, list):
        content = [
            block
            for block in content
            if not (isinstance(block, dict) and block.get("type") == "tool_use")
        ]
    seen: set[str] = set()
    for call in [*message.tool_calls, *message.invalid_tool_calls]:
        call_id = call.get("id") or ""
        seen.add(call_id)
        content = merge_contents(
            content, _call_as_text(call.get("name") or "", call.get("args"), call_id)
        )
    for block in tool_use_blocks(message.content):
        if block.get("id") not in seen:
            text = _call_as_text(
                str(block.get("name") or ""), block.get("input"), str(block.get("id"))
            )
            content = merge_contents(content, text)
    return message.model_copy(
        update={"content": content, "tool_calls": [], "invalid_tool_calls": []}
    )


def write_tool_traffic_as_text(messages: list[BaseMessage]) -> tuple[list[BaseMessage], int]:
    """Tool calls become assistant text and tool results user text, for chat templates
    with no tool role. Nothing is dropped: names, arguments, ids and results stay."""

    def rewrite(message: BaseMessage) -> BaseMessage:
        if isinstance(message, ToolMessage):
            header = f"(result of tool {message.name or 'call'} {message.tool_call_id})"
            return HumanMessage(merge_contents(header, message.content), id=message.id)
        if isinstance(message, AIMessage) and (
            message.tool_calls or message.invalid_tool_calls or tool_use_blocks(message.content)
        ):
            return _assistant_without_calls(message)
        return message

    return _map_messages(messages, rewrite)
