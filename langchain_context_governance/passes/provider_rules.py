"""Repair what one provider rejects and the core passes leave: ids, names, blanks, systems.

The core passes make a request legal in the ways every provider shares. Providers then
differ: Mistral wants tool-call ids of exactly 9 letters or digits, Anthropic unique ids
and no empty text, Zhipu/GLM no system message followed by an assistant message, and no
provider lets a request end on a system message. Each profile below names the repairs
its provider needs; `langchain_context_governance.providers.validate_messages` checks the
result against the same provider's rules.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.messages.utils import MessageLikeRepresentation

from langchain_context_governance._messages import (
    as_message_list,
    has_tool_calls,
    is_assistant,
    is_system,
    is_tool_result,
    is_user,
)
from langchain_context_governance.passes._dual_use import runnable_when_called_without_messages
from langchain_context_governance.passes.alternation import (
    SYNTHETIC_USER_CONTENT,
    enforce_role_alternation_with_count,
)
from langchain_context_governance.passes.backfill import backfill_missing_tool_results_with_count
from langchain_context_governance.providers import PROVIDERS

Content = str | list[str | dict[str, Any]]
Step = Callable[[list[BaseMessage]], tuple[list[BaseMessage], int]]

# The report names: this pass, and the core pass whose repair it runs again.
PASS_NAME = "apply_provider_rules"
ALTERNATION_PASS_NAME = "enforce_role_alternation"

# Nine letters or digits satisfy every provider at once: Mistral's exact format,
# Anthropic's ^[a-zA-Z0-9_-]+$ and OpenAI's 40-character limit.
_ID_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_ID_LENGTH = 9
_MISTRAL_ID = re.compile(r"[a-zA-Z0-9]{9}")
_ANTHROPIC_ID = re.compile(r"[a-zA-Z0-9_-]+")
_OPENAI_MAX_ID_LENGTH = 40
# Mistral: "Function name was {name} but must be a-z, A-Z, 0-9, or contain underscores
# and dashes, with a maximum length of 64."
_NAME_CHARACTER_NOT_ALLOWED = re.compile(r"[^a-zA-Z0-9_-]")
_MAX_TOOL_NAME_LENGTH = 64
UNNAMED_TOOL = "unnamed_tool"


def _any_id(call_id: str) -> bool:
    return True


def _openai_id(call_id: str) -> bool:
    return len(call_id) <= _OPENAI_MAX_ID_LENGTH


def _anthropic_id(call_id: str) -> bool:
    return _ANTHROPIC_ID.fullmatch(call_id) is not None


def _mistral_id(call_id: str) -> bool:
    return _MISTRAL_ID.fullmatch(call_id) is not None


@dataclass(frozen=True)
class _Profile:
    """The repairs one provider needs beyond the core passes."""

    accepts_tool_call_id: Callable[[str], bool] = _any_id
    unique_tool_call_ids: bool = False
    legal_tool_names: bool = False
    systems_only_at_start: bool = False
    no_blank_content: bool = False


_PROFILES: dict[str, _Profile] = {
    "openai": _Profile(accepts_tool_call_id=_openai_id),
    # "`tool_use` ids must be unique"; "text content blocks must be non-empty"; the
    # system prompt is a request field, so system messages can only lead.
    "anthropic": _Profile(
        accepts_tool_call_id=_anthropic_id,
        unique_tool_call_ids=True,
        systems_only_at_start=True,
        no_blank_content=True,
    ),
    # "Unable to submit request because it has an empty text parameter."; the system
    # prompt is system_instruction, so system messages can only lead.
    "gemini": _Profile(systems_only_at_start=True, no_blank_content=True),
    # Error 1214 for a system message followed by an assistant message.
    "glm": _Profile(systems_only_at_start=True),
    # mistral_common: "Tool call id was {id} but must be a-z, A-Z, 0-9, with a length of
    # 9.", "Function name was ...", and "Unexpected role 'system' after role 'tool'".
    "mistral": _Profile(
        accepts_tool_call_id=_mistral_id,
        legal_tool_names=True,
        systems_only_at_start=True,
        no_blank_content=True,
    ),
    "strict": _Profile(
        accepts_tool_call_id=_mistral_id,
        unique_tool_call_ids=True,
        legal_tool_names=True,
        systems_only_at_start=True,
        no_blank_content=True,
    ),
}


def _profile_named(provider: str) -> _Profile:
    if provider not in PROVIDERS:
        known = ", ".join(repr(name) for name in PROVIDERS)
        raise ValueError(f"provider must be one of {known}; got {provider!r}")
    return _PROFILES[provider]


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
    digest = hashlib.sha256(key.encode("utf-8")).digest()
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

    profile: _Profile
    used: set[str]
    declared: set[str] = field(default_factory=set)
    replacements: dict[str, str] = field(default_factory=dict)

    def id_for_call(self, call_id: str | None, call: dict[str, Any], in_message: set[str]) -> str:
        if not call_id:
            return self._fresh(_call_key(call))
        reused = self.profile.unique_tool_call_ids and call_id in self.declared
        if call_id in in_message or reused:
            return self._fresh(call_id)
        return self.id_for_result(call_id)

    def id_for_result(self, call_id: str) -> str:
        if self.profile.accepts_tool_call_id(call_id):
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


def _tool_use_blocks(content: Content) -> list[dict[str, Any]]:
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_use"]


def _raw_call_ids(message: AIMessage) -> list[str | None]:
    """Every call id as written: duplicates and missing ids included."""
    calls = [*message.tool_calls, *message.invalid_tool_calls, *_tool_use_blocks(message.content)]
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
    if _tool_use_blocks(content):
        content = [relabeling.relabel_block(block) for block in message.content]
    assigner.declared.update(relabeling.in_message)
    if not relabeling.changed:
        return message, relabeling.pairs
    update = {"tool_calls": tool_calls, "invalid_tool_calls": invalid_calls, "content": content}
    return message.model_copy(update=update), relabeling.pairs


def _give_tool_calls_legal_ids(
    messages: list[BaseMessage], profile: _Profile
) -> tuple[list[BaseMessage], int]:
    """Rewrite tool-call ids the provider rejects, in each call and in its result."""
    assigner = _ToolCallIdAssigner(profile, used=_ids_in_request(messages))
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


def accepts_tool_call(provider: str) -> Callable[[str, str], bool]:
    """Whether `provider` takes a tool call with this id and tool name as they are."""
    profile = _profile_named(provider)

    def accepts(call_id: str, name: str) -> bool:
        if not profile.accepts_tool_call_id(call_id):
            return False
        return not profile.legal_tool_names or legal_tool_name(name) == name

    return accepts


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
    if _tool_use_blocks(content):
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


def _give_tools_legal_names(messages: list[BaseMessage]) -> tuple[list[BaseMessage], int]:
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


def _is_blank(message: BaseMessage) -> bool:
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
    if not _is_blank(message):
        return message
    if is_user(message):
        return message.model_copy(update={"content": SYNTHETIC_USER_CONTENT})
    return None


def _drop_blank_content(messages: list[BaseMessage]) -> tuple[list[BaseMessage], int]:
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


def _move_systems_to_front(
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


def _separate_consecutive_assistants(
    messages: list[BaseMessage],
) -> tuple[list[BaseMessage], int]:
    """Put the synthetic user turn between two assistant messages left side by side.

    Role alternation never merges two responses that both carry signed thinking blocks
    (they must reach Anthropic as produced), nor one into a response before it when it
    carries `reasoning_content`; a user turn between them keeps both intact and the
    roles alternating.
    """
    output: list[BaseMessage] = []
    inserted = 0
    for message in messages:
        if output and is_assistant(output[-1]) and is_assistant(message):
            output.append(HumanMessage(SYNTHETIC_USER_CONTENT))
            inserted += 1
        output.append(message)
    if inserted == 0:
        return messages, 0
    return output, inserted


def _steps(profile: _Profile) -> list[tuple[str, Step]]:
    """The repairs in order, each with the pass name its changes are reported under."""
    steps: list[tuple[str, Step]] = [
        (PASS_NAME, functools.partial(_give_tool_calls_legal_ids, profile=profile))
    ]
    if profile.legal_tool_names:
        steps.append((PASS_NAME, _give_tools_legal_names))
    if profile.no_blank_content:
        steps.append((PASS_NAME, _drop_blank_content))
    all_late = profile.systems_only_at_start
    steps.append((PASS_NAME, functools.partial(_move_systems_to_front, all_late=all_late)))
    # Moving and dropping messages can leave two turns of one role side by side.
    steps.append((ALTERNATION_PASS_NAME, enforce_role_alternation_with_count))
    steps.append((PASS_NAME, _separate_consecutive_assistants))
    return steps


def apply_message_rules_with_count(
    messages: list[BaseMessage], *, provider: str
) -> tuple[list[BaseMessage], int]:
    """Only `provider`'s repairs of single messages: call ids, tool names, blank text.

    For a part of a history (one tool-call group): the rules that look at the order of
    messages (system messages in front, alternation) need the whole request.
    """
    profile = _profile_named(provider)
    steps: list[Step] = [functools.partial(_give_tool_calls_legal_ids, profile=profile)]
    if profile.legal_tool_names:
        steps.append(_give_tools_legal_names)
    if profile.no_blank_content:
        steps.append(_drop_blank_content)
    output, changed = messages, 0
    for step in steps:
        output, count = step(output)
        changed += count
    return output, changed


def apply_provider_rules_with_counts(
    messages: list[BaseMessage], *, provider: str
) -> tuple[list[BaseMessage], dict[str, int]]:
    """Apply `provider`'s repairs; return the list and the changes by pass name.

    The role alternation this runs is reported as "enforce_role_alternation", the rest
    as "apply_provider_rules". Returns the very same list when the request already
    suits the provider.
    """
    profile = _profile_named(provider)
    output = messages
    changes = {PASS_NAME: 0, ALTERNATION_PASS_NAME: 0}
    for name, step in _steps(profile):
        output, count = step(output)
        changes[name] += count
    if messages and not output:
        # Only blank system messages were left; a request needs something to answer.
        changes[PASS_NAME] += 1
        return [HumanMessage(SYNTHETIC_USER_CONTENT)], changes
    return output, changes


def apply_provider_rules_with_count(
    messages: list[BaseMessage], *, provider: str
) -> tuple[list[BaseMessage], int]:
    """Apply `provider`'s repairs; return the list and how many messages changed.

    Returns the very same list when the request already suits the provider.
    """
    output, changes = apply_provider_rules_with_counts(messages, provider=provider)
    return output, sum(changes.values())


@runnable_when_called_without_messages
def apply_provider_rules(
    messages: Sequence[MessageLikeRepresentation], *, provider: str = "openai"
) -> list[BaseMessage]:
    """Repair what `provider` rejects and the core passes leave; `provider` is in `PROVIDERS`.

    Meant to run after the core passes (the governor does so with
    `ContextGovernor(provider=...)`). Every profile:

    - gives a tool call without an id, or with an id repeated inside its message, a
      fresh id and a placeholder result; OpenAI ids over 40 characters are rewritten;
    - moves system messages at the end of the request up to the leading system
      messages (no provider lets a request end on one);
    - runs role alternation again where its repairs moved or dropped messages, then puts
      the synthetic user turn between two assistant messages that alternation left side
      by side (signed thinking blocks are never merged or edited, and `reasoning_content`
      stays with its response).

    Then by profile: "mistral" rewrites ids that are not exactly 9 letters or digits and
    tool names with characters other than a-z, A-Z, 0-9, '_' and '-'; "anthropic" rewrites
    ids with other characters and ids already used earlier in the request; "anthropic",
    "gemini" and "mistral" remove blank text (a blank user message becomes the synthetic
    user turn); "anthropic", "gemini", "glm" and "mistral" move every system message after
    the first turn up to the leading ones. A rewritten id is a stable 9-character id
    (`stable_tool_call_id`), the same in the call and in its result and the same on every
    call. No user text is lost; image and file blocks are left as they are.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
        >>> history = [
        ...     HumanMessage("read it"),
        ...     AIMessage("", tool_calls=[{"name": "read_file", "args": {}, "id": "call_0"}]),
        ...     ToolMessage("done", tool_call_id="call_0"),
        ... ]
        >>> governed = apply_provider_rules(history, provider="mistral")
        >>> governed[1].tool_calls[0]["id"] == governed[2].tool_call_id
        True
        >>> len(governed[2].tool_call_id)
        9
    """
    repaired, _ = apply_provider_rules_with_count(as_message_list(messages), provider=provider)
    return list(repaired)
