"""Tool-call ids and tool names: present, distinct, unique where needed, in each API's format.

A rewritten id is a stable nine-character id (`stable_tool_call_id`), the same in the
call, in its result, in the call's content block and in the per-call state reasoning
clients keep (OpenAI `function_call` items, Gemini thought signatures), and the same on
every call of a conversation, so the provider's prompt cache keeps the prefix.

Example:
    >>> from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    >>> request = [
    ...     HumanMessage("go"),
    ...     AIMessage("", tool_calls=[{"name": "grep", "args": {}, "id": "call_0"}]),
    ...     ToolMessage("hit", tool_call_id="call_0"),
    ... ]
    >>> [v.rule for v in NINE_CHARACTER_TOOL_CALL_IDS.check(request)]
    ['tool-call-id-format', 'tool-call-id-format']
    >>> repaired, changed = NINE_CHARACTER_TOOL_CALL_IDS.repair(request)
    >>> repaired[1].tool_calls[0]["id"] == repaired[2].tool_call_id, changed
    (True, 2)
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from langchain_context_governance._messages import iter_declared_tool_calls
from langchain_context_governance.passes.backfill import backfill_missing_tool_results_with_count
from langchain_context_governance.rules import limits
from langchain_context_governance.rules._calls import (
    call_key,
    ids_in_request,
    raw_call_ids,
    renamed_block,
    renamed_kwargs,
    tool_use_blocks,
    with_renamed_calls,
)
from langchain_context_governance.rules.rule import (
    EVERY_PROFILE,
    Check,
    Repair,
    Rule,
    Violation,
    map_messages,
    profiles,
)

__all__ = [
    "ANTHROPIC_TOOL_CALL_ID_FORMAT",
    "NINE_CHARACTER_TOOL_CALL_IDS",
    "OPENAI_TOOL_CALL_ID_LENGTH",
    "TOOL_CALL_IDS",
    "TOOL_NAME_FORMAT",
    "UNIQUE_TOOL_CALL_IDS",
    "UNNAMED_TOOL",
    "give_reused_call_ids_fresh_ids",
    "legal_tool_name",
    "stable_tool_call_id",
]

# Nine letters or digits satisfy every provider at once: Mistral's exact format,
# Anthropic's ^[a-zA-Z0-9_-]+$ and OpenAI's 40-character limit.
_ID_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_ID_LENGTH = 9
UNNAMED_TOOL = "unnamed_tool"


def stable_tool_call_id(key: str) -> str:
    """Nine letters or digits derived from `key`: the same key gives the same id, always.

    Stable across calls and processes (no salted `hash()`), so a rewritten history
    stays the same prefix turn after turn and the provider's prompt cache keeps working.
    Any text is a key, lone surrogates included.

    Example:
        >>> stable_tool_call_id("call_0") == stable_tool_call_id("call_0")
        True
        >>> len(stable_tool_call_id("toolu.01")), len(stable_tool_call_id("bad\\udc80id"))
        (9, 9)
    """
    # surrogatepass: an id that came through JSON with a lone surrogate still hashes.
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()
    number = int.from_bytes(digest[:8], "big") % len(_ID_ALPHABET) ** _ID_LENGTH
    characters = []
    for _ in range(_ID_LENGTH):
        number, remainder = divmod(number, len(_ID_ALPHABET))
        characters.append(_ID_ALPHABET[remainder])
    return "".join(characters)


# --- checks ---------------------------------------------------------------------------------


def _ids_of(message: BaseMessage) -> list[str]:
    if isinstance(message, AIMessage):
        return [call_id for call_id, _ in iter_declared_tool_calls(message)]
    if isinstance(message, ToolMessage):
        return [message.tool_call_id]
    return []


def _check_call_ids_present_and_distinct(request: list[BaseMessage]) -> list[Violation]:
    violations: list[Violation] = []
    for index, message in enumerate(request):
        if not isinstance(message, AIMessage):
            continue
        seen: set[str] = set()
        for position, call in enumerate([*message.tool_calls, *message.invalid_tool_calls]):
            call_id = call.get("id")
            name = call.get("name") or "unnamed"
            if not call_id:
                text = f"Tool call {position} ({name}) has no id, so no tool result can answer it."
                violations.append(Violation(index, "tool-call-without-id", text))
            elif call_id in seen:
                text = f"Tool call id {call_id!r} appears twice in this assistant message."
                violations.append(Violation(index, "duplicate-tool-call-id", text))
            else:
                seen.add(call_id)
    return violations


def _check_ids_unique_in_request(request: list[BaseMessage]) -> list[Violation]:
    declared_at: dict[str, int] = {}
    violations: list[Violation] = []
    for index, message in enumerate(request):
        if not isinstance(message, AIMessage):
            continue
        for call_id, _ in iter_declared_tool_calls(message):
            if call_id in declared_at:
                violations.append(
                    Violation(
                        index,
                        "reused-tool-call-id",
                        f"Tool call id {call_id!r} was already used by message "
                        f"{declared_at[call_id]}; tool call ids must be unique in a request.",
                    )
                )
            declared_at[call_id] = index
    return violations


def _id_format_check(accepts: Callable[[str], bool], requirement: str) -> Check:
    def check(request: list[BaseMessage]) -> list[Violation]:
        return [
            Violation(
                index, "tool-call-id-format", f"Tool call id {call_id!r} must be {requirement}."
            )
            for index, message in enumerate(request)
            for call_id in _ids_of(message)
            if not accepts(call_id)
        ]

    return check


def _check_openai_id_length(request: list[BaseMessage]) -> list[Violation]:
    limit = limits.OPENAI_MAX_TOOL_CALL_ID_LENGTH
    return [
        Violation(
            index,
            "tool-call-id-too-long",
            f"Tool call id {call_id!r} has {len(call_id)} characters; the limit is {limit}.",
        )
        for index, message in enumerate(request)
        if isinstance(message, AIMessage)
        for call_id in _ids_of(message)
        if not limits.accepts_openai_id(call_id)
    ]


def _check_tool_names(request: list[BaseMessage]) -> list[Violation]:
    violations: list[Violation] = []
    for index, message in enumerate(request):
        if isinstance(message, AIMessage):
            names = list(iter_declared_tool_calls(message))
        elif isinstance(message, ToolMessage) and message.name:
            # An empty name is not sent as a name (mistral_common accepts it).
            names = [(message.tool_call_id, message.name)]
        else:
            continue
        violations.extend(
            Violation(
                index,
                "tool-name-format",
                f"Tool name {name!r} of tool call {call_id!r} must be 1 to "
                f"{limits.TOOL_NAME_MAX_LENGTH} characters from a-z, A-Z, 0-9, '_' and '-'.",
            )
            for call_id, name in names
            if not limits.accepts_tool_name(name)
        )
    return violations


# --- repairs: ids ---------------------------------------------------------------------------


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
            return self._fresh(call_key(call))
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
        if not isinstance(block, dict):
            return block
        if block.get("type") == "function_call":
            # OpenAI's item for a call of `tool_calls`: it follows the call's id.
            return renamed_block(block, self.renamed)
        if block.get("type") != "tool_use":
            return block
        # A tool_use block with the id of a tool_calls entry is the same call.
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
    if isinstance(content, list):
        content = [relabeling.relabel_block(block) for block in content]
    assigner.declared.update(relabeling.in_message)
    if not relabeling.changed:
        return message, relabeling.pairs
    renamed = {old: new for old, new in relabeling.renamed.items() if old != new}
    update = {
        "tool_calls": tool_calls,
        "invalid_tool_calls": invalid_calls,
        "content": content,
        "additional_kwargs": renamed_kwargs(message.additional_kwargs, renamed),
    }
    return message.model_copy(update=update), relabeling.pairs


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
            ids = raw_call_ids(message)
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
    assigner = _ToolCallIdAssigner(accepts, unique, used=ids_in_request(messages))
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
    in_part = ids_in_request(messages)
    renamed: dict[str, str] = {}
    output: list[BaseMessage] = []
    changed = 0
    for message in messages:
        relabeled: BaseMessage = message
        if isinstance(message, AIMessage):
            reused = [call_id for call_id in raw_call_ids(message) if call_id and taken(call_id)]
            for call_id in reused:
                renamed.setdefault(call_id, _fresh_id(call_id, taken, in_part))
            if reused:
                relabeled = with_renamed_calls(message, renamed)
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


def _repair_ids(accepts: Callable[[str], bool], *, unique: bool = False) -> Repair:
    return functools.partial(give_tool_calls_legal_ids, accepts=accepts, unique=unique)


def _any_id(call_id: str) -> bool:
    return True


# --- repairs: names -------------------------------------------------------------------------


def legal_tool_name(name: str | None) -> str:
    """`name` with every character Mistral rejects replaced by '_', cut to 64 characters."""
    legal = limits.TOOL_NAME_CHARACTER_NOT_ALLOWED.sub("_", name or "")
    return legal[: limits.TOOL_NAME_MAX_LENGTH] or UNNAMED_TOOL


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
    return map_messages(messages, _message_with_legal_tool_names)


# --- the rules ------------------------------------------------------------------------------

TOOL_CALL_IDS = Rule(
    name="tool-call-ids",
    within_group=True,
    codes=("tool-call-without-id", "duplicate-tool-call-id"),
    prevents=(
        "OpenAI: \"Missing required parameter: 'messages[1].tool_calls[0].id'\"; "
        'Mistral: "Duplicate tool call id {id} in assistant message".'
    ),
    source="OpenAI chat completions; mistral_common MistralRequestValidator.",
    check=_check_call_ids_present_and_distinct,
    repair=_repair_ids(_any_id),
    profiles=EVERY_PROFILE,
)

UNIQUE_TOOL_CALL_IDS = Rule(
    name="unique-tool-call-ids",
    within_group=True,
    codes=("reused-tool-call-id",),
    prevents=(
        'Anthropic: "`tool_use` ids must be unique"; Gemini pairs function responses with '
        "calls by id over the whole history, so a reused id gives the model the wrong "
        "result."
    ),
    source="Anthropic Messages API errors; langchain-google-genai _parse_chat_history.",
    check=_check_ids_unique_in_request,
    repair=_repair_ids(_any_id, unique=True),
    profiles=profiles("anthropic", "gemini", "strict"),
)

OPENAI_TOOL_CALL_ID_LENGTH = Rule(
    name="openai-tool-call-id-length",
    within_group=True,
    codes=("tool-call-id-too-long",),
    prevents=(
        "OpenAI: \"Invalid 'messages[2].tool_calls[0].id': string too long. Expected a "
        'string with maximum length 40"'
    ),
    source="OpenAI chat completions 400 error.",
    check=_check_openai_id_length,
    repair=_repair_ids(limits.accepts_openai_id),
    profiles=profiles("openai", "strict"),
)

ANTHROPIC_TOOL_CALL_ID_FORMAT = Rule(
    name="anthropic-tool-call-id-format",
    within_group=True,
    codes=("tool-call-id-format",),
    prevents='Anthropic: tool_use ids must match ^[a-zA-Z0-9_-]+$ ("String should match pattern").',
    source="Anthropic Messages API schema.",
    check=_id_format_check(limits.accepts_anthropic_id, "only a-z, A-Z, 0-9, '_' and '-'"),
    repair=_repair_ids(limits.accepts_anthropic_id),
    profiles=profiles("anthropic", "strict"),
)

NINE_CHARACTER_TOOL_CALL_IDS = Rule(
    name="nine-character-tool-call-ids",
    within_group=True,
    codes=("tool-call-id-format",),
    prevents=(
        'Mistral: "Tool call id was {id} but must be a-z, A-Z, 0-9, with a length of 9."; '
        'Mistral chat templates: "Tool call IDs should be alphanumeric strings with '
        'length 9!"'
    ),
    source="mistral_common MistralRequestValidatorV3; Mistral-Nemo chat template.",
    check=_id_format_check(
        limits.accepts_nine_character_id, "exactly 9 characters from a-z, A-Z, 0-9"
    ),
    repair=_repair_ids(limits.accepts_nine_character_id),
    profiles=profiles("mistral", "mistral_template", "strict"),
)

TOOL_NAME_FORMAT = Rule(
    name="tool-name-format",
    within_group=True,
    codes=("tool-name-format",),
    prevents=(
        'Mistral: "Function name was {name} but must be a-z, A-Z, 0-9, or contain '
        'underscores and dashes, with a maximum length of 64."'
    ),
    source="mistral_common MistralRequestValidator._validate_function_call.",
    check=_check_tool_names,
    repair=give_tools_legal_names,
    profiles=profiles("mistral", "strict"),
)
