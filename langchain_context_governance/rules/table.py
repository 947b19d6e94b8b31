"""The provider rules: one table, each rule with its check, its repair and its profiles.

A rule is one `Rule`: the provider wording it prevents and where that wording comes from,
a `check` that lists the violations in a request, a `repair` that removes them, and the
profiles it belongs to. `validate_messages` runs the checks of a profile and
`apply_provider_rules` its repairs, both from `RULES`, so a rule cannot be checked without
being repaired or the reverse. A profile is the list of rule names in `PROFILES`.

Rules marked for every profile hold for every provider: the tool-call pairing rules and
the turn order this package promises (user first, roles alternate, the request ends on a
user message or tool results). The repairs run in table order.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from langchain_context_governance._added import (
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
from langchain_context_governance.passes._names import ALTERNATION, PROVIDER_RULES
from langchain_context_governance.passes.alternation import (
    enforce_role_alternation_with_count,
    insert_user_before_leading_assistant,
)
from langchain_context_governance.passes.backfill import backfill_missing_tool_results_with_count
from langchain_context_governance.passes.orphans import drop_orphan_tool_results_with_count
from langchain_context_governance.rules import repairs

__all__ = [
    "HOSTED_PROFILES",
    "PROFILES",
    "PROVIDERS",
    "RULES",
    "Rule",
    "Violation",
    "rules_named",
]

# The report names: the provider-rules pass, and the core pass whose repair it runs again.
PASS_NAME = PROVIDER_RULES
ALTERNATION_PASS_NAME = ALTERNATION


@dataclass(frozen=True)
class Violation:
    """One broken rule: where (`index` of the message, -1 for the whole request), which, why."""

    index: int
    rule: str
    message: str


Check = Callable[[list[BaseMessage]], list[Violation]]


@dataclass(frozen=True)
class Rule:
    """One provider rule: what it prevents, how it is checked, how it is repaired.

    `name` is the rule's name in `PROFILES`; `codes` are the `Violation.rule` values its
    check reports. `prevents` quotes the provider and `source` says where the quote is
    from. `repair` returns the request and how many messages it changed (the very same
    list when nothing needs changing), reported under `reported_as`. `accepts_call`, where
    set, says whether a tool call with this id and tool name is left as it is;
    `breaks_at(previous, message)`, where set, whether a message breaks the rule where it
    stands. `within_group` rules are repaired on each tool-call group of a history before
    snipping (repairs that add tokens must count against the budget).
    """

    name: str
    codes: tuple[str, ...]
    prevents: str
    source: str
    check: Check
    repair: repairs.Repair
    profiles: frozenset[str]
    reported_as: str = PASS_NAME
    accepts_call: Callable[[str, str], bool] | None = None
    breaks_at: Callable[[BaseMessage | None, BaseMessage], bool] | None = None
    # The repair needs only one tool-call group (an assistant message and its results),
    # so the governor decides it once per group of the history, before cutting.
    within_group: bool = False


# --- checks ---------------------------------------------------------------------------------


def _role(message: BaseMessage) -> str:
    if is_assistant(message):
        return "an assistant"
    if is_user(message):
        return "a user"
    if is_tool_result(message):
        return "a tool"
    if is_system(message):
        return "a system"
    return f"a {message.type!r}"


def _check_has_a_turn(request: list[BaseMessage]) -> list[Violation]:
    if any(not is_system(message) for message in request):
        return []
    if request:
        text = "The request holds only system messages; it needs a user message to answer."
    else:
        text = "The request has no messages."
    return [Violation(-1, "empty-request", text)]


def _repair_has_a_turn(messages: list[BaseMessage]) -> tuple[list[BaseMessage], int]:
    # An empty request has nothing to govern and stays empty.
    if not messages or not all(is_system(message) for message in messages):
        return messages, 0
    return [*messages, synthetic_user_turn()], 1


def _check_message_types(request: list[BaseMessage]) -> list[Violation]:
    return [
        Violation(
            index,
            "unsupported-message-type",
            f"Message {index} is {_role(message)} message; use SystemMessage, "
            "HumanMessage, AIMessage or ToolMessage.",
        )
        for index, message in enumerate(request)
        if not (
            is_system(message)
            or is_user(message)
            or is_assistant(message)
            or is_tool_result(message)
        )
    ]


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


def _ids_of(message: BaseMessage) -> list[str]:
    if isinstance(message, AIMessage):
        return [call_id for call_id, _ in iter_declared_tool_calls(message)]
    if isinstance(message, ToolMessage):
        return [message.tool_call_id]
    return []


def _id_format_check(
    pattern: re.Pattern[str], requirement: str
) -> tuple[Check, Callable[[str], bool]]:
    def accepts(call_id: str) -> bool:
        return pattern.fullmatch(call_id) is not None

    def check(request: list[BaseMessage]) -> list[Violation]:
        return [
            Violation(
                index, "tool-call-id-format", f"Tool call id {call_id!r} must be {requirement}."
            )
            for index, message in enumerate(request)
            for call_id in _ids_of(message)
            if not accepts(call_id)
        ]

    return check, accepts


# OpenAI: "Invalid 'messages[2].tool_calls[0].id': string too long. Expected a string with
# maximum length 40, but got a string with length 41 instead."
_OPENAI_MAX_TOOL_CALL_ID_LENGTH = 40


def _accepts_openai_id(call_id: str) -> bool:
    return len(call_id) <= _OPENAI_MAX_TOOL_CALL_ID_LENGTH


def _check_openai_id_length(request: list[BaseMessage]) -> list[Violation]:
    limit = _OPENAI_MAX_TOOL_CALL_ID_LENGTH
    return [
        Violation(
            index,
            "tool-call-id-too-long",
            f"Tool call id {call_id!r} has {len(call_id)} characters; the limit is {limit}.",
        )
        for index, message in enumerate(request)
        if isinstance(message, AIMessage)
        for call_id in _ids_of(message)
        if not _accepts_openai_id(call_id)
    ]


_check_anthropic_id, _accepts_anthropic_id = _id_format_check(
    re.compile(r"[a-zA-Z0-9_-]+"), "only a-z, A-Z, 0-9, '_' and '-'"
)
_check_nine_character_id, _accepts_nine_character_id = _id_format_check(
    re.compile(r"[a-zA-Z0-9]{9}"), "exactly 9 characters from a-z, A-Z, 0-9"
)
_TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")


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
                f"Tool name {name!r} of tool call {call_id!r} must be 1 to 64 characters "
                "from a-z, A-Z, 0-9, '_' and '-'.",
            )
            for call_id, name in names
            if not _TOOL_NAME.fullmatch(name)
        )
    return violations


def _check_tool_use_blocks_declared(request: list[BaseMessage]) -> list[Violation]:
    return [
        Violation(
            index,
            "tool-call-only-in-content",
            f"Tool call {block.get('id')!r} of message {index} is only a `tool_use` content "
            "block, with no `tool_calls` entry; clients that read `tool_calls` drop it.",
        )
        for index, message in enumerate(request)
        if isinstance(message, AIMessage)
        for block in repairs.undeclared_tool_use_blocks(message)
    ]


def _per_assistant(
    code: str, broken: Callable[[AIMessage], bool], text: Callable[[int, AIMessage], str]
) -> Check:
    """A check that reports each assistant message `broken` says breaks the rule."""

    def check(request: list[BaseMessage]) -> list[Violation]:
        return [
            Violation(index, code, text(index, message))
            for index, message in enumerate(request)
            if isinstance(message, AIMessage) and broken(message)
        ]

    return check


_check_no_invalid_tool_calls = _per_assistant(
    "invalid-tool-call",
    lambda message: bool(message.invalid_tool_calls),
    lambda index, _: (
        f"Message {index} has invalid tool calls; this client drops them, so their "
        "results lose their call (and an assistant message left without parts is sent "
        "as an empty text part)."
    ),
)

_check_sendable_invalid_calls = _per_assistant(
    "unsendable-invalid-tool-call",
    lambda message: bool(repairs.unsendable_invalid_calls(message)),
    lambda index, _: (
        f"Message {index} has an invalid tool call without an id or a name, or with the "
        "id of another call; this client leaves it out, so a result for it is an orphan."
    ),
)


def _call_count(message: AIMessage) -> int:
    return len(message.tool_calls) + len(message.invalid_tool_calls)


_check_one_call_per_message = _per_assistant(
    "parallel-tool-calls",
    lambda message: _call_count(message) > 1,
    lambda index, message: (
        f"Assistant message {index} has {_call_count(message)} tool calls; this model takes "
        "one tool call per assistant message."
    ),
)


def _is_blank(content: str | list[str | dict[str, object]]) -> bool:
    if isinstance(content, str):
        return not content.strip()
    for block in content:
        if isinstance(block, str):
            if block.strip():
                return False
        elif block.get("type") != "text" or str(block.get("text") or "").strip():
            return False
    return True


def _blank_text_blocks(content: str | list[str | dict[str, object]]) -> Iterator[int]:
    if isinstance(content, str):
        return
    for position, block in enumerate(content):
        if isinstance(block, dict) and block.get("type") == "text":
            if not str(block.get("text") or "").strip():
                yield position
        elif isinstance(block, str) and not block.strip():
            yield position


def _check_non_empty_content(request: list[BaseMessage]) -> list[Violation]:
    # An empty tool result is accepted (Anthropic tool_result content is optional, a Gemini
    # function response may be empty); the call it answers is what matters.
    violations: list[Violation] = []
    for index, message in enumerate(request):
        if not (is_tool_result(message) or has_tool_calls(message)) and _is_blank(message.content):
            violations.append(
                Violation(
                    index,
                    "empty-content",
                    f"Message {index} ({_role(message)} message) has no content; this "
                    "provider rejects empty messages.",
                )
            )
            continue
        violations.extend(
            Violation(
                index,
                "empty-content",
                f"Content block {position} of message {index} is an empty text block; text "
                "content blocks must be non-empty.",
            )
            for position in _blank_text_blocks(message.content)
        )
    return violations


def _neighbours(code: str, breaks: Callable[[BaseMessage, BaseMessage], bool], text: str) -> Check:
    """A check on each message and the one before it; `text` is formatted with both."""

    def check(request: list[BaseMessage]) -> list[Violation]:
        return [
            Violation(
                index,
                code,
                text.format(
                    index=index,
                    previous_index=index - 1,
                    type=message.type,
                    previous_type=request[index - 1].type,
                ),
            )
            for index, message in enumerate(request)
            if index and breaks(request[index - 1], message)
        ]

    return check


def _check_system_not_first(request: list[BaseMessage]) -> list[Violation]:
    first_turn = next((i for i, m in enumerate(request) if not is_system(m)), len(request))
    return [
        Violation(
            index,
            "system-not-first",
            f"System message {index} comes after the conversation started; this provider "
            "takes system messages only at the start.",
        )
        for index in range(first_turn, len(request))
        if is_system(request[index])
    ]


def _check_one_leading_system(request: list[BaseMessage]) -> list[Violation]:
    systems = [index for index, message in enumerate(request) if is_system(message)]
    return [
        Violation(
            index,
            "several-system-messages",
            f"System message {index} is not the only system message; this model takes one "
            "system message, first.",
        )
        for index in systems[1:]
    ] + [
        Violation(
            index,
            "several-system-messages",
            f"System message {index} is not the first message; this model takes one system "
            "message, first.",
        )
        for index in systems[:1]
        if index != 0
    ]


def _check_no_system_role(request: list[BaseMessage]) -> list[Violation]:
    return [
        Violation(
            index,
            "system-role",
            f"Message {index} is a system message; this model has no system role.",
        )
        for index, message in enumerate(request)
        if is_system(message)
    ]


def _check_no_tool_role(request: list[BaseMessage]) -> list[Violation]:
    return [
        Violation(
            index,
            "tool-traffic",
            f"Message {index} is {_role(message)} message with tool traffic; this model's "
            "chat template has no tool role.",
        )
        for index, message in enumerate(request)
        if is_tool_result(message)
        or (
            isinstance(message, AIMessage)
            and (
                message.tool_calls
                or message.invalid_tool_calls
                or repairs.tool_use_blocks(message.content)
            )
        )
    ]


def _check_turn_order(request: list[BaseMessage]) -> list[Violation]:
    violations: list[Violation] = []
    first = next(((i, m) for i, m in enumerate(request) if not is_system(m)), None)
    if first is not None and not is_user(first[1]):
        index, message = first
        violations.append(
            Violation(
                index,
                "first-not-user",
                f"The first message after the system prompt is {_role(message)} message; it "
                "must be a user message.",
            )
        )
    for index in range(1, len(request)):
        previous, message = request[index - 1], request[index]
        if is_user(previous) and is_user(message):
            violations.append(
                Violation(
                    index,
                    "consecutive-user",
                    f"User message {index} directly follows user message {index - 1}; roles "
                    "must alternate.",
                )
            )
        if is_assistant(previous) and is_assistant(message):
            violations.append(
                Violation(
                    index,
                    "consecutive-assistant",
                    f"Assistant message {index} directly follows assistant message "
                    f"{index - 1}; roles must alternate.",
                )
            )
    if request and not (is_user(request[-1]) or is_tool_result(request[-1])):
        violations.append(
            Violation(
                len(request) - 1,
                "last-not-user-or-tool",
                f"The request ends with {_role(request[-1])} message; it must end with a user "
                "message or tool results (no assistant prefill).",
            )
        )
    return violations


def _repair_turn_order(messages: list[BaseMessage]) -> tuple[list[BaseMessage], int]:
    # No provider lets a request end on a system message; then the alternation repairs,
    # and a user turn between two responses alternation must keep apart.
    moved, moved_count = repairs.move_systems_to_front(messages, all_late=False)
    alternated, alternated_count = enforce_role_alternation_with_count(moved)
    separated, separated_count = repairs.separate_consecutive_assistants(alternated)
    return separated, moved_count + alternated_count + separated_count


def _repair_ids(accepts: Callable[[str], bool], *, unique: bool = False) -> repairs.Repair:
    return functools.partial(repairs.give_tool_calls_legal_ids, accepts=accepts, unique=unique)


def _any_id(call_id: str) -> bool:
    return True


_move_late_systems_to_front = functools.partial(repairs.move_systems_to_front, all_late=True)


def _repair_system_then_assistant(messages: list[BaseMessage]) -> tuple[list[BaseMessage], int]:
    moved, moved_count = _move_late_systems_to_front(messages)
    opened, opened_count = insert_user_before_leading_assistant(moved)
    return opened, moved_count + opened_count


# --- the table ------------------------------------------------------------------------------

_HOSTED = ("openai", "anthropic", "gemini", "glm", "mistral")
_TEMPLATES = ("llama3", "qwen", "mistral_template", "gemma")
_EVERY = frozenset((*_HOSTED, *_TEMPLATES, "strict"))


def _in(*profiles: str) -> frozenset[str]:
    return frozenset(profiles)


RULES: tuple[Rule, ...] = (
    Rule(
        name="message-types",
        codes=("unsupported-message-type",),
        prevents="A role the provider does not know (a ChatMessage or FunctionMessage).",
        source="OpenAI chat completions: roles system, developer, user, assistant, tool.",
        check=_check_message_types,
        repair=repairs.convert_other_message_types,
        profiles=_EVERY,
    ),
    Rule(
        name="sendable-invalid-tool-calls",
        within_group=True,
        codes=("unsendable-invalid-tool-call",),
        prevents=(
            'Anthropic: "unexpected `tool_use_id` found in `tool_result` blocks", for the '
            "result of an invalid tool call that ChatAnthropic did not send (it sends one as "
            "`tool_use` only with an id and a name of its own)."
        ),
        source="langchain-anthropic _format_messages; captured on the wire (tests/test_wire).",
        check=_check_sendable_invalid_calls,
        repair=repairs.drop_unsendable_invalid_calls,
        profiles=_in("anthropic", "strict"),
    ),
    Rule(
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
        profiles=_EVERY,
    ),
    Rule(
        name="tool-calls-declared",
        within_group=True,
        codes=("tool-call-only-in-content",),
        prevents=(
            "ChatOpenAI (and the other clients that read only `tool_calls`) drops `tool_use` "
            "content blocks, leaving their tool results orphaned."
        ),
        source="langchain-openai _convert_message_to_dict; issue 14.",
        check=_check_tool_use_blocks_declared,
        repair=repairs.declare_tool_use_blocks_as_tool_calls,
        profiles=_EVERY - {"anthropic"},
        breaks_at=lambda previous, message: (
            isinstance(message, AIMessage) and bool(repairs.undeclared_tool_use_blocks(message))
        ),
    ),
    Rule(
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
        profiles=_EVERY,
    ),
    Rule(
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
        profiles=_in("anthropic", "gemini", "strict"),
    ),
    Rule(
        name="openai-tool-call-id-length",
        within_group=True,
        codes=("tool-call-id-too-long",),
        prevents=(
            "OpenAI: \"Invalid 'messages[2].tool_calls[0].id': string too long. Expected a "
            'string with maximum length 40"'
        ),
        source="OpenAI chat completions 400 error.",
        check=_check_openai_id_length,
        repair=_repair_ids(_accepts_openai_id),
        profiles=_in("openai", "strict"),
        accepts_call=lambda call_id, name: _accepts_openai_id(call_id),
    ),
    Rule(
        name="anthropic-tool-call-id-format",
        within_group=True,
        codes=("tool-call-id-format",),
        prevents='Anthropic: tool_use ids must match ^[a-zA-Z0-9_-]+$ ("String should match '
        'pattern").',
        source="Anthropic Messages API schema.",
        check=_check_anthropic_id,
        repair=_repair_ids(_accepts_anthropic_id),
        profiles=_in("anthropic", "strict"),
        accepts_call=lambda call_id, name: _accepts_anthropic_id(call_id),
    ),
    Rule(
        name="nine-character-tool-call-ids",
        within_group=True,
        codes=("tool-call-id-format",),
        prevents=(
            'Mistral: "Tool call id was {id} but must be a-z, A-Z, 0-9, with a length of 9."; '
            'Mistral chat templates: "Tool call IDs should be alphanumeric strings with '
            'length 9!"'
        ),
        source="mistral_common MistralRequestValidatorV3; Mistral-Nemo chat template.",
        check=_check_nine_character_id,
        repair=_repair_ids(_accepts_nine_character_id),
        profiles=_in("mistral", "mistral_template", "strict"),
        accepts_call=lambda call_id, name: _accepts_nine_character_id(call_id),
    ),
    Rule(
        name="tool-name-format",
        within_group=True,
        codes=("tool-name-format",),
        prevents=(
            'Mistral: "Function name was {name} but must be a-z, A-Z, 0-9, or contain '
            'underscores and dashes, with a maximum length of 64."'
        ),
        source="mistral_common MistralRequestValidator._validate_function_call.",
        check=_check_tool_names,
        repair=repairs.give_tools_legal_names,
        profiles=_in("mistral", "strict"),
        accepts_call=lambda call_id, name: repairs.legal_tool_name(name) == name,
    ),
    Rule(
        name="no-invalid-tool-calls",
        within_group=True,
        codes=("invalid-tool-call",),
        prevents=(
            'ChatGoogleGenerativeAI drops `invalid_tool_calls`: Vertex answers "Unable to '
            "submit request because it has an empty text parameter.\", and the call's result "
            "is left without its call."
        ),
        source="langchain-google-genai _parse_chat_history; issue 14.",
        check=_check_no_invalid_tool_calls,
        repair=repairs.send_invalid_tool_calls_as_tool_calls,
        profiles=_in("gemini", "strict"),
        breaks_at=lambda previous, message: (
            isinstance(message, AIMessage) and bool(message.invalid_tool_calls)
        ),
    ),
    Rule(
        name="one-tool-call-per-message",
        within_group=True,
        codes=("parallel-tool-calls",),
        prevents='Llama 3.1/3.2/3.3 chat templates: "This model only supports single '
        'tool-calls at once!"',
        source="meta-llama Llama-3.1-8B-Instruct tokenizer_config.json chat_template.",
        check=_check_one_call_per_message,
        repair=repairs.split_parallel_tool_calls,
        profiles=_in("llama3"),
        breaks_at=lambda previous, message: (
            isinstance(message, AIMessage)
            and len(message.tool_calls) + len(message.invalid_tool_calls) > 1
        ),
    ),
    Rule(
        name="no-tool-role",
        within_group=True,
        codes=("tool-traffic",),
        prevents='Gemma chat templates: "Conversation roles must alternate '
        'user/assistant/user/assistant/..." for any tool message.',
        source="google/gemma-2-2b-it tokenizer_config.json chat_template.",
        check=_check_no_tool_role,
        repair=repairs.write_tool_traffic_as_text,
        profiles=_in("gemma"),
        breaks_at=lambda previous, message: bool(_check_no_tool_role([message])),
    ),
    Rule(
        name="non-empty-content",
        within_group=True,
        codes=("empty-content",),
        prevents=(
            'Anthropic: "messages: text content blocks must be non-empty"; Vertex/Gemini: '
            '"Unable to submit request because it has an empty text parameter."; '
            'mistral_common (tokenizers before v7): "Assistant message must have either '
            'content or tool_calls".'
        ),
        source="The providers' 400 error texts; mistral_common.",
        check=_check_non_empty_content,
        repair=repairs.drop_blank_content,
        profiles=_in("anthropic", "gemini", "mistral", "strict"),
    ),
    Rule(
        name="system-not-first",
        codes=("system-not-first",),
        prevents=(
            'langchain-anthropic: "System message must be at beginning of message list."; '
            'LangChain Google GenAI: "System message should be the first one".'
        ),
        source="langchain-anthropic _format_messages; langchain-google-genai.",
        check=_check_system_not_first,
        repair=_move_late_systems_to_front,
        profiles=_in("anthropic", "gemini", "strict"),
    ),
    Rule(
        name="system-after-assistant-or-tool",
        codes=("system-after-assistant-or-tool",),
        prevents="Mistral: \"Unexpected role 'system' after role 'tool'\" (or 'assistant').",
        source="mistral_common MistralRequestValidator._validate_message_order.",
        check=_neighbours(
            "system-after-assistant-or-tool",
            lambda previous, message: (
                (is_assistant(previous) or is_tool_result(previous)) and is_system(message)
            ),
            "System message {index} directly follows {previous_type} message "
            "{previous_index}; this provider takes a system message only after a system or "
            "user message.",
        ),
        repair=_move_late_systems_to_front,
        profiles=_in("mistral", "strict"),
    ),
    Rule(
        name="system-then-assistant",
        codes=("system-then-assistant",),
        prevents='Zhipu GLM error 1214: "messages 参数非法。请检查文档。" for a system message '
        "followed directly by an assistant message.",
        source="Zhipu BigModel API error codes.",
        check=_neighbours(
            "system-then-assistant",
            lambda previous, message: is_system(previous) and is_assistant(message),
            "Assistant message {index} directly follows system message {previous_index}; "
            "this provider rejects it (GLM error 1214).",
        ),
        repair=_repair_system_then_assistant,
        profiles=_in("glm", "strict"),
    ),
    Rule(
        name="one-leading-system-message",
        codes=("several-system-messages",),
        prevents='Qwen3.5 chat template: "System message must be at the beginning."; Mistral '
        'templates: "Only user and assistant roles are supported, with the exception of an '
        'initial optional system message!"',
        source="Qwen/Qwen3.5 and mistralai/Mistral-Nemo-Instruct-2407 chat templates.",
        check=_check_one_leading_system,
        repair=repairs.merge_system_messages,
        profiles=_in("qwen", "mistral_template", "llama3", "strict"),
        breaks_at=lambda previous, message: previous is not None and is_system(message),
    ),
    Rule(
        name="no-system-role",
        within_group=True,
        codes=("system-role",),
        prevents='Gemma 2 chat template: "System role not supported".',
        source="google/gemma-2-2b-it tokenizer_config.json chat_template.",
        check=_check_no_system_role,
        repair=repairs.fold_system_messages_into_first_user,
        profiles=_in("gemma"),
        breaks_at=lambda previous, message: is_system(message),
    ),
    Rule(
        name="turn-order",
        codes=(
            "first-not-user",
            "consecutive-user",
            "consecutive-assistant",
            "last-not-user-or-tool",
        ),
        prevents=(
            'Anthropic: "messages: first message must use the "user" role"; Gemini: "Please '
            'ensure that multiturn requests alternate between user and model."; Mistral: '
            '"Expected last role User or Tool (or Assistant with prefix) for serving but got '
            'assistant".'
        ),
        source="The providers' 400 error texts; mistral_common.",
        check=_check_turn_order,
        repair=_repair_turn_order,
        profiles=_EVERY,
        reported_as=ALTERNATION_PASS_NAME,
    ),
    Rule(
        name="no-user-after-tool-results",
        codes=("user-after-tool",),
        prevents=(
            "Mistral: invalid_request_message_order \"Unexpected role 'user' after role "
            "'tool'\" (error 3230); Mistral chat templates: \"After the optional system "
            'message, conversation roles must alternate user/assistant/user/assistant/..."'
        ),
        source="Mistral API error 3230; mistral_common up to 1.11.0; Mistral-Nemo template.",
        check=_neighbours(
            "user-after-tool",
            lambda previous, message: is_tool_result(previous) and is_user(message),
            "User message {index} directly follows tool message {previous_index}; this "
            "provider wants an assistant turn between tool results and the next user message.",
        ),
        repair=repairs.put_assistant_turn_after_tool_results,
        profiles=_in("mistral", "mistral_template", "strict"),
        breaks_at=lambda previous, message: (
            previous is not None and is_tool_result(previous) and is_user(message)
        ),
    ),
    Rule(
        name="request-has-a-turn",
        codes=("empty-request",),
        prevents=(
            'OpenAI: "[] is too short - \'messages\'"; Anthropic: "messages: at least one '
            'message is required"; a system prompt alone leaves Anthropic and Gemini no turn.'
        ),
        source="The providers' 400 error texts.",
        check=_check_has_a_turn,
        repair=_repair_has_a_turn,
        profiles=_EVERY,
        reported_as=ALTERNATION_PASS_NAME,
    ),
)

_RULES_BY_NAME = {rule.name: rule for rule in RULES}

PROFILES: dict[str, tuple[str, ...]] = {
    profile: tuple(rule.name for rule in RULES if profile in rule.profiles)
    for profile in (*_HOSTED, *_TEMPLATES, "strict")
}
"""Each profile as the names of its rules, in table order."""

PROVIDERS: tuple[str, ...] = tuple(PROFILES)
"""Profile names `validate_messages` and `apply_provider_rules` accept (see the README)."""

HOSTED_PROFILES: tuple[str, ...] = _HOSTED
"""The profiles of hosted APIs; "strict" holds every rule of each of them."""


def rules_named(provider: str, extra_rules: Collection[str] = ()) -> tuple[Rule, ...]:
    """The rules of profile `provider` and the rules named in `extra_rules`, in table order."""
    if provider not in PROFILES:
        known = ", ".join(repr(name) for name in PROVIDERS)
        raise ValueError(f"provider must be one of {known}; got {provider!r}")
    unknown = [name for name in extra_rules if name not in _RULES_BY_NAME]
    if unknown:
        raise ValueError(f"unknown rule names {unknown!r}; known: {sorted(_RULES_BY_NAME)}")
    wanted = {*PROFILES[provider], *extra_rules}
    return tuple(rule for rule in RULES if rule.name in wanted)
