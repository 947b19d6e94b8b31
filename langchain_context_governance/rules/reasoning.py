"""Reasoning state: what reasoning models need back exactly as they sent it, with its message.

Where LangChain keeps each provider's reasoning state is in `_reasoning.py`. Governance
treats it as part of its message: a response carrying it is never merged into another
(`passes/alternation.py`), no pass edits, moves, truncates or makes up a reasoning block
(compaction and truncation touch only tool results and user text, cuts drop whole
messages), and a renamed call id is renamed in the per-call state too (`rules/ids.py`).
The rules here check a request for what the providers reject and repair what can be
repaired without touching a signed block:

- Anthropic: a thinking block reaches the API with its signature; the assistant message
  that opens the current tool loop starts with its thinking block. LangChain's own
  `SummarizationMiddleware` breaks the second when it cuts inside an active tool loop
  (langchain-ai/langchain#34794): the request then opens the loop with an assistant
  message without thinking, and Anthropic answers 400.
- OpenAI (Responses API): a reasoning item is followed by the item it led to, and a
  `function_call` item belongs to a call of its message.
- Gemini: a thought signature is keyed by a call of its message, so the client sends it.
- DeepSeek: in thinking mode, every response that made tool calls comes back with its
  `reasoning_content`.

Example:
    >>> from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    >>> thinking = {"type": "thinking", "thinking": "Now the test.", "signature": "EqQB"}
    >>> def call(n):
    ...     return {"name": "read_file", "args": {"path": f"f{n}.py"}, "id": f"toolu_{n}"}
    >>> request = [
    ...     HumanMessage("fix the bug"),
    ...     AIMessage("", tool_calls=[call(1)]),  # its thinking block was cut away
    ...     ToolMessage("def f(): ...", tool_call_id="toolu_1"),
    ...     AIMessage([thinking], tool_calls=[call(2)]),  # interleaved thinking
    ...     ToolMessage("def test(): ...", tool_call_id="toolu_2"),
    ... ]
    >>> [v.rule for v in THINKING_OPENS_THE_TOOL_LOOP.check(request)]
    ['thinking-not-first']
    >>> [m.type for m in THINKING_OPENS_THE_TOOL_LOOP.repair(request)[0]]
    ['human', 'ai', 'human', 'ai', 'human']
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage

from langchain_context_governance._messages import is_tool_result
from langchain_context_governance._reasoning import (
    GEMINI_SIGNATURES_KEY,
    SIGNED_THINKING_TYPES,
    carries_provider_compaction,
    opens_with_thinking,
    provider_compaction_start,
    reasoning_left_out,
    signed_thinking_blocks,
    tool_loop_opening,
)
from langchain_context_governance.passes.alternation import enforce_role_alternation_with_count
from langchain_context_governance.rules.rule import (
    Check,
    Repair,
    Rule,
    Violation,
    map_messages,
    per_assistant,
    profiles,
)
from langchain_context_governance.rules.tool_traffic import write_tool_calls_as_text

__all__ = [
    "ANTHROPIC_COMPACTION_FIRST",
    "ANTHROPIC_THINKING_BOUND_TO_ITS_PREFIX",
    "OPENAI_REASONING_BOUND_TO_ITS_PREFIX",
    "OPENAI_REASONING_ITEMS",
    "PREFIX_BINDINGS",
    "PROVIDER_COMPACTIONS",
    "REASONING_CONTENT_WITH_TOOL_CALLS",
    "SIGNED_THINKING_BLOCKS",
    "THINKING_OPENS_THE_TOOL_LOOP",
    "THOUGHT_SIGNATURES_WITH_THEIR_CALLS",
    "PrefixBinding",
    "ProviderCompaction",
    "check_against_history",
    "compaction_first",
    "prefix_bindings",
]

_REASONING_CONTENT = "reasoning_content"


# --- Anthropic: signed thinking blocks ------------------------------------------------------


def _is_signed(block: Mapping[str, Any]) -> bool:
    """A thinking block carries its signature, a redacted one its encrypted data."""
    key = "signature" if block.get("type") == "thinking" else "data"
    value = block.get(key)
    return isinstance(value, str) and bool(value)


def _unsigned_thinking(message: AIMessage) -> list[dict[str, Any]]:
    return [block for block in signed_thinking_blocks(message) if not _is_signed(block)]


def drop_unsigned_thinking_blocks(messages: list[BaseMessage]) -> tuple[list[BaseMessage], int]:
    """Remove the thinking blocks that carry no signature; signed blocks are left as they are.

    A thinking block without a signature was not produced by Anthropic (another provider's
    reasoning, or one made up), so the API cannot take it; no signature can be made for it.
    """

    def without_unsigned(message: BaseMessage) -> BaseMessage:
        if not isinstance(message, AIMessage):
            return message
        unsigned = _unsigned_thinking(message)
        if not unsigned:
            return message
        content = [block for block in message.content if not any(block is u for u in unsigned)]
        return message.model_copy(update={"content": content})

    return map_messages(messages, without_unsigned)


# --- Anthropic: the tool loop opens with thinking -------------------------------------------


def _check_thinking_opens_the_tool_loop(request: list[BaseMessage]) -> list[Violation]:
    opening = tool_loop_opening(request)
    if opening is None or opens_with_thinking(request[opening]):
        return []
    if reasoning_left_out(request[opening]) or carries_provider_compaction(request[opening]):
        # Left out on purpose: its prefix changed (see the bindings below); or the turn
        # opens with a compaction block, which goes first. Only adaptive thinking binds to
        # its prefix or compacts, and it needs no thinking block to open a turn.
        return []
    # Thinking is on for this turn where a message of the loop carries a thinking block
    # (interleaved thinking); the opening then lost its own, or something was put in front.
    if not any(signed_thinking_blocks(message) for message in request[opening:]):
        return []
    return [
        Violation(
            opening,
            "thinking-not-first",
            f"Assistant message {opening} opens the tool loop this request continues, but "
            "does not start with a thinking block while the loop carries thinking blocks; "
            "the message that started the loop was cut away, or a message was put inside "
            "the loop.",
        )
    ]


def close_the_tool_loop_as_text(messages: list[BaseMessage]) -> tuple[list[BaseMessage], int]:
    """Write the calls of the tool loop whose opening lacks its thinking as text, and their
    results as governance's placeholders naming them (a tool's text never goes in a user
    message: `tool_traffic.write_tool_calls_as_text`).

    The request then ends on a user message, so the model starts a new assistant turn
    (with a thinking block of its own) instead of continuing one whose thinking block is
    gone; every call and argument stays in the text, and thinking blocks of the loop's
    messages stay in them, unedited.
    """
    if not _check_thinking_opens_the_tool_loop(messages):
        return messages, 0
    opening = tool_loop_opening(messages)
    assert opening is not None
    loop, rewritten = write_tool_calls_as_text(messages[opening:])
    alternated, merged = enforce_role_alternation_with_count([*messages[:opening], *loop])
    return alternated, rewritten + merged


# --- OpenAI: reasoning items and function-call items ----------------------------------------


def _is_block(block: Any, kind: str) -> bool:
    return isinstance(block, Mapping) and block.get("type") == kind


def _trailing_reasoning_items(message: AIMessage) -> list[dict[str, Any]]:
    """Reasoning items no other item follows, in a message without tool calls."""
    if message.tool_calls or message.invalid_tool_calls or not isinstance(message.content, list):
        return []
    trailing: list[dict[str, Any]] = []
    for block in reversed(message.content):
        if not _is_block(block, "reasoning"):
            break
        trailing.append(block)
    return trailing


def _lone_v0_reasoning(message: AIMessage) -> bool:
    """The older format's reasoning item, in a message with nothing else to send."""
    return bool(
        message.additional_kwargs.get("reasoning")
        and not message.content
        and not (message.tool_calls or message.invalid_tool_calls)
    )


def _orphan_function_call_items(message: AIMessage) -> list[dict[str, Any]]:
    """`function_call` items whose `call_id` is no call of the message."""
    if not isinstance(message.content, list):
        return []
    calls = {call.get("id") for call in [*message.tool_calls, *message.invalid_tool_calls]}
    return [
        block  # type: ignore[misc]
        for block in message.content
        if _is_block(block, "function_call") and block.get("call_id") not in calls  # type: ignore[union-attr]
    ]


def _reasoning_item_problems(message: AIMessage) -> bool:
    return bool(
        _trailing_reasoning_items(message)
        or _lone_v0_reasoning(message)
        or _orphan_function_call_items(message)
    )


def drop_unfollowed_reasoning_items(
    messages: list[BaseMessage],
) -> tuple[list[BaseMessage], int]:
    """Remove reasoning items nothing follows, and `function_call` items of no call.

    A response cut short while reasoning (`status: incomplete`) holds only its reasoning
    item, which OpenAI refuses to take back alone; it led to nothing, so nothing needs
    it. A `function_call` item whose call is not among the message's calls would be sent
    as a call nobody answers.
    """

    def repaired(message: BaseMessage) -> BaseMessage:
        if not isinstance(message, AIMessage) or not _reasoning_item_problems(message):
            return message
        dropped = [*_trailing_reasoning_items(message), *_orphan_function_call_items(message)]
        update: dict[str, Any] = {}
        if dropped:
            content = message.content
            update["content"] = [b for b in content if not any(b is d for d in dropped)]
        if _lone_v0_reasoning(message):
            kwargs = dict(message.additional_kwargs)
            del kwargs["reasoning"]
            update["additional_kwargs"] = kwargs
        return message.model_copy(update=update)

    return map_messages(messages, repaired)


# --- Gemini: thought signatures -------------------------------------------------------------


def _signatures(message: AIMessage) -> dict[str, Any]:
    signatures = message.additional_kwargs.get(GEMINI_SIGNATURES_KEY)
    return signatures if isinstance(signatures, dict) else {}


def _call_ids(message: AIMessage) -> list[str]:
    calls = [*message.tool_calls, *message.invalid_tool_calls]
    return [call_id for call in calls if (call_id := call.get("id"))]


def _orphan_signatures(message: AIMessage) -> list[str]:
    calls = set(_call_ids(message))
    return [call_id for call_id in _signatures(message) if call_id not in calls]


def give_thought_signatures_their_calls(
    messages: list[BaseMessage],
) -> tuple[list[BaseMessage], int]:
    """Key each thought signature of no call to the next call without one, in order.

    langchain-google-genai records the signatures of a response's calls in call order, so
    a signature whose key no call has (its call was renamed by hand) belongs to the call
    in its place; signatures left over are dropped, since no call would send them.
    """

    def rekeyed(message: BaseMessage) -> BaseMessage:
        if not isinstance(message, AIMessage) or not _orphan_signatures(message):
            return message
        signatures = _signatures(message)
        orphans = iter(_orphan_signatures(message))
        kept = {key: value for key, value in signatures.items() if key in _call_ids(message)}
        for call_id in _call_ids(message):
            if call_id in kept:
                continue
            orphan = next(orphans, None)
            if orphan is None:
                break
            kept[call_id] = signatures[orphan]
        kwargs = {**message.additional_kwargs, GEMINI_SIGNATURES_KEY: kept}
        return message.model_copy(update={"additional_kwargs": kwargs})

    return map_messages(messages, rekeyed)


# --- DeepSeek: reasoning_content with tool calls --------------------------------------------


def _makes_calls(message: BaseMessage) -> bool:
    return isinstance(message, AIMessage) and bool(message.tool_calls or message.invalid_tool_calls)


def _has_reasoning_content(message: BaseMessage) -> bool:
    return isinstance(message.additional_kwargs.get(_REASONING_CONTENT), str)


def _calls_without_reasoning_content(request: list[BaseMessage]) -> list[int]:
    """Tool-call responses without `reasoning_content` after one that had it."""
    thinking = False
    missing: list[int] = []
    for index, message in enumerate(request):
        if not _makes_calls(message):
            continue
        if _has_reasoning_content(message):
            thinking = True
        elif thinking:
            missing.append(index)
    return missing


def _check_reasoning_content_with_tool_calls(request: list[BaseMessage]) -> list[Violation]:
    return [
        Violation(
            index,
            "tool-calls-without-reasoning-content",
            f"Assistant message {index} makes tool calls without `reasoning_content`, "
            "while an earlier one had it (thinking mode); this provider wants it back "
            "with every response that made tool calls.",
        )
        for index in _calls_without_reasoning_content(request)
    ]


def write_calls_without_reasoning_as_text(
    messages: list[BaseMessage],
) -> tuple[list[BaseMessage], int]:
    """The tool calls of a response that lost its `reasoning_content` written as text, and
    their results as governance's placeholders naming them: no reasoning can be made up
    for it, text needs none, and a tool's text never goes in a user message."""
    missing = _calls_without_reasoning_content(messages)
    if not missing:
        return messages, 0
    output = list(messages)
    changed = 0
    for index in missing:
        end = index + 1
        while end < len(output) and is_tool_result(output[end]):
            end += 1
        rewritten, count = write_tool_calls_as_text(output[index:end])
        output[index:end] = rewritten
        changed += count
    alternated, merged = enforce_role_alternation_with_count(output)
    return alternated, changed + merged


# --- the rules ------------------------------------------------------------------------------

SIGNED_THINKING_BLOCKS = Rule(
    name="signed-thinking-blocks",
    within_group=True,
    codes=("unsigned-thinking-block",),
    prevents=(
        'Anthropic: "messages.1.content.0: Invalid `signature` in `thinking` block"; '
        "thinking blocks must come back complete and unmodified, and the check fails for "
        "a block that differs in any way from what the API returned (edited, merged, "
        "reordered, or made by another model)."
    ),
    source=(
        "Anthropic extended-thinking docs, 'Preserving thinking blocks'; the 400 quoted "
        "in anthropics/claude-code#10627; Anthropic's answer in "
        "anthropics/anthropic-sdk-python#1598."
    ),
    check=per_assistant(
        "unsigned-thinking-block",
        lambda message: bool(_unsigned_thinking(message)),
        lambda index, message: (
            f"Message {index} has {len(_unsigned_thinking(message))} thinking block(s) "
            "without a signature (or redacted ones without data); Anthropic takes only the "
            "blocks it signed."
        ),
    ),
    repair=drop_unsigned_thinking_blocks,
    profiles=profiles("anthropic", "strict"),
)

OPENAI_REASONING_ITEMS = Rule(
    name="reasoning-items-with-their-output",
    within_group=True,
    codes=("reasoning-item-alone",),
    prevents=(
        "OpenAI Responses API: \"Item 'rs_…' of type 'reasoning' was provided without its "
        "required following item.\"; \"Item 'fc_…' of type 'function_call' was provided "
        "without its required 'reasoning' item\" when a call is sent apart from its "
        "reasoning item."
    ),
    source=(
        "OpenAI Responses API 400s quoted in continuedev/continue#8933 and "
        "cline/cline#12242; langchain-openai _construct_responses_api_input."
    ),
    check=per_assistant(
        "reasoning-item-alone",
        _reasoning_item_problems,
        lambda index, _: (
            f"Message {index} has a reasoning item that no output item follows, or a "
            "`function_call` item whose call is not among its tool calls."
        ),
    ),
    repair=drop_unfollowed_reasoning_items,
    profiles=profiles("openai", "strict"),
)

THOUGHT_SIGNATURES_WITH_THEIR_CALLS = Rule(
    name="thought-signatures-with-their-calls",
    within_group=True,
    codes=("thought-signature-without-call",),
    prevents=(
        'Gemini: "Function call is missing a thought_signature in functionCall parts. '
        "This is required for tools to work correctly, and missing thought_signature may "
        'lead to degraded model performance."'
    ),
    source=(
        "Gemini API 400 quoted in lbjlaq/Antigravity-Manager#139; "
        "ai.google.dev/gemini-api/docs/thought-signatures; langchain-google-genai keeps "
        "each call's signature in additional_kwargs[" + repr(GEMINI_SIGNATURES_KEY) + "] "
        "by call id and sends it only with the call of that id."
    ),
    check=per_assistant(
        "thought-signature-without-call",
        lambda message: bool(_orphan_signatures(message)),
        lambda index, message: (
            f"Message {index} has thought signatures for calls it does not make: "
            f"{_orphan_signatures(message)}; the client sends a signature only with its call."
        ),
    ),
    repair=give_thought_signatures_their_calls,
    profiles=profiles("gemini", "strict"),
)

REASONING_CONTENT_WITH_TOOL_CALLS = Rule(
    name="reasoning-content-with-tool-calls",
    codes=("tool-calls-without-reasoning-content",),
    prevents=(
        'DeepSeek: "The `reasoning_content` in the thinking mode must be passed back to '
        'the API." For turns that made tool calls it must come back in every later '
        "request; for other turns it is ignored, so it is never removed."
    ),
    source=(
        "api-docs.deepseek.com/guides/thinking_mode (tool calls); the 400 quoted in "
        "crewAIInc/crewAI#5878."
    ),
    check=_check_reasoning_content_with_tool_calls,
    repair=write_calls_without_reasoning_as_text,
    profiles=profiles("openai", "strict"),
)

THINKING_OPENS_THE_TOOL_LOOP = Rule(
    name="thinking-opens-the-tool-loop",
    codes=("thinking-not-first",),
    prevents=(
        'Anthropic: "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, '
        "but found `tool_use`. When `thinking` is enabled, a final `assistant` message must "
        "start with a thinking block (preceeding the lastmost set of `tool_use` and "
        '`tool_result` blocks)."'
    ),
    source=(
        "The 400 quoted in Kilo-Org/kilocode#5219; Anthropic extended-thinking docs, "
        "'Extended thinking with tool use'; the same failure in LangChain's "
        "SummarizationMiddleware, langchain-ai/langchain#34794."
    ),
    check=_check_thinking_opens_the_tool_loop,
    repair=close_the_tool_loop_as_text,
    profiles=profiles("anthropic", "strict"),
)


# --- reasoning bound to its prefix ----------------------------------------------------------


@dataclass(frozen=True)
class PrefixBinding:
    """A provider's binding of reasoning to the prefix it was made after.

    Unlike a `Rule`, it cannot be checked on a request alone: whether a block is still
    behind its prefix depends on what was sent when it was made. The governor keeps track
    of that (state/binding.py) and leaves such blocks out where it changed their prefix;
    `check_against_history` checks a request against the history it was made from.
    `outcome` says what the provider does with a block whose prefix changed.
    """

    name: str
    code: str
    block_types: frozenset[str]
    block_types_phrase: str
    models: str
    outcome: str
    prevents: str
    source: str
    profiles: frozenset[str]


ANTHROPIC_THINKING_BOUND_TO_ITS_PREFIX = PrefixBinding(
    name="thinking-bound-to-its-prefix",
    code="thinking-prefix-changed",
    block_types=SIGNED_THINKING_TYPES,
    block_types_phrase="thinking blocks",
    models=(
        "Claude models with preserved thinking that run the prefix check: Claude Fable 5.1 "
        "and later, Claude Opus 5.5, Claude Sonnet 5.5 (Claude Mythos 5.1 records the "
        "binding but does not check it). All of them think adaptively."
    ),
    outcome=(
        "A 400 by default where the check is enforced (accounts created from 2026-08-31, "
        "or any request setting thinking.block_binding.prefix_mismatch_behavior); with "
        '"drop_block" the API drops the block and every later thinking block instead.'
    ),
    prevents=(
        'Anthropic: "messages.N.content.0: Invalid `signature` in `thinking` block. The '
        "block is bound to a different conversation. Remove the block, or set "
        '`thinking.block_binding.prefix_mismatch_behavior` to "drop_block"." The prefix is '
        "the top-level system prompt, the tools and every message before the block; "
        "cache_control markers are not compared; only a leading run of earlier thinking "
        "blocks may be left out."
    ),
    source=(
        "platform.claude.com/docs/en/build-with-claude/preserved-thinking (and its pages "
        "prefix-checks, fix-bound-to-a-different-conversation); build-with-claude/thinking "
        "('Only in the conversation that produced it'); docs.aws.amazon.com/bedrock/latest/"
        "userguide/claude-messages-thinking-block-binding.html."
    ),
    profiles=profiles("anthropic", "strict"),
)

OPENAI_REASONING_BOUND_TO_ITS_PREFIX = PrefixBinding(
    name="reasoning-items-bound-to-their-prefix",
    code="reasoning-prefix-changed",
    block_types=frozenset({"reasoning"}),
    block_types_phrase="reasoning items",
    models="OpenAI's newer frontier reasoning models (Responses API).",
    outcome=(
        "No error: the API drops the reasoning item (reported in input_transformations as "
        "prefix_mismatch); the model may redo that reasoning (more tokens, cost, latency)."
    ),
    prevents=(
        'OpenAI: "Starting with newer frontier models, the API will drop reasoning items '
        'that follow a prefix change as part of our safeguards."'
    ),
    source="developers.openai.com/api/docs/guides/keep-prefix-unchanged",
    profiles=profiles("openai", "strict"),
)

PREFIX_BINDINGS: tuple[PrefixBinding, ...] = (
    ANTHROPIC_THINKING_BOUND_TO_ITS_PREFIX,
    OPENAI_REASONING_BOUND_TO_ITS_PREFIX,
)
"""Every provider's binding of reasoning to its prefix."""


def prefix_bindings(provider: str) -> tuple[PrefixBinding, ...]:
    """The bindings of profile `provider`.

    Example:
        >>> [binding.code for binding in prefix_bindings("anthropic")]
        ['thinking-prefix-changed']
        >>> prefix_bindings("mistral")
        ()
    """
    return tuple(binding for binding in PREFIX_BINDINGS if provider in binding.profiles)


# --- the providers' compaction ----------------------------------------------------------------


def _misplaced_compaction(request: list[BaseMessage]) -> list[Violation]:
    positions = [
        index for index, message in enumerate(request) if carries_provider_compaction(message)
    ]
    if not positions:
        return []
    first = next(i for i, message in enumerate(request) if not isinstance(message, SystemMessage))
    violations = [
        Violation(
            index,
            "more-than-one-compaction-block",
            f"Message {index} holds a compaction block, and so does a later message; "
            "Anthropic takes exactly one per request, the newest.",
        )
        for index in positions[:-1]
    ]
    newest = positions[-1]
    if newest != first:
        violations.append(
            Violation(
                newest,
                "compaction-block-misplaced",
                f"Message {newest} holds a compaction block, but messages come before it; "
                "the block goes first in `messages` and stands for what it summarized.",
            )
        )
    return violations


def compaction_first(messages: list[BaseMessage]) -> tuple[list[BaseMessage], int]:
    """`messages` from the newest message holding an Anthropic compaction block on, after
    the leading system messages: what came before it is what the summary replaced (or a
    turn governance put in front of it); how many messages went.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> summary = AIMessage([{"type": "compaction", "content": "...", "signature": "Eu"}])
        >>> [m.type for m in compaction_first([HumanMessage("hi"), summary, HumanMessage("go")])[0]]
        ['ai', 'human']
    """
    start = provider_compaction_start(messages)
    if start is None:
        return messages, 0
    leading = 0
    while leading < start and isinstance(messages[leading], SystemMessage):
        leading += 1
    if start == leading:
        return messages, 0
    return [*messages[:leading], *messages[start:]], start - leading


@dataclass(frozen=True)
class ProviderCompaction:
    """Where a provider takes its own compaction block back.

    Not a `Rule` of the table: what the block stands for is a property of the history, so
    the governor starts every request at the newest one (`ConversationState.
    provider_window`) and `repair` takes out the turn the repairs put in front of it;
    `check` serves `validate_messages`. `opens_request` says the block may open the
    request as an assistant message, which the turn-order rule would otherwise refuse.
    """

    name: str
    codes: tuple[str, ...]
    prevents: str
    source: str
    check: Check
    repair: Repair
    profiles: frozenset[str]
    opens_request: bool = True


ANTHROPIC_COMPACTION_FIRST = ProviderCompaction(
    name="compaction-block-first",
    codes=("compaction-block-misplaced", "more-than-one-compaction-block"),
    prevents=(
        "Anthropic: the compaction block goes first in `messages`, as an assistant message "
        "of its own or as the first block of the first message; summarized messages left "
        "in front of it are a 400 (`compaction_block_misplaced`); exactly one compaction "
        "block per request."
    ),
    source=(
        "platform.claude.com/docs/en/build-with-claude/compaction-on-demand ('Continue from "
        "the summary'); build-with-claude/compaction-thinking-blocks."
    ),
    check=_misplaced_compaction,
    repair=compaction_first,
    profiles=profiles("anthropic", "strict"),
)

PROVIDER_COMPACTIONS: tuple[ProviderCompaction, ...] = (ANTHROPIC_COMPACTION_FIRST,)
"""How each provider takes its compaction back (OpenAI's and xAI's items may stand
anywhere in the input)."""


def _compared(message: BaseMessage, bound: frozenset[str]) -> str:
    """What the prefix check compares of a message: what is sent of it, without its bound
    blocks and without `cache_control` markers (never part of the comparison)."""
    content: Any = message.content
    if isinstance(content, list):
        content = [
            {k: v for k, v in block.items() if k != "cache_control"}
            if isinstance(block, Mapping)
            else block
            for block in content
            if not (isinstance(block, Mapping) and block.get("type") in bound)
        ]
    calls = [
        (call.get("id"), call.get("name"), call.get("args"))
        for call in (message.tool_calls if isinstance(message, AIMessage) else [])
    ]
    call_id = message.tool_call_id if isinstance(message, ToolMessage) else None
    return json.dumps([message.type, content, calls, call_id], sort_keys=True, default=str)


def _bound_keys(message: BaseMessage, bound: frozenset[str]) -> list[str]:
    if not isinstance(message.content, list):
        return []
    return [
        json.dumps(block, sort_keys=True, default=str)
        for block in message.content
        if isinstance(block, Mapping) and block.get("type") in bound
    ]


def _checked_from(messages: Sequence[BaseMessage]) -> int:
    """Where the checked prefix starts: at the newest provider compaction, else 0."""
    start = provider_compaction_start(messages)
    return 0 if start is None else start


def check_against_history(
    request: Sequence[BaseMessage],
    history: Sequence[BaseMessage],
    *,
    provider: str,
) -> list[Violation]:
    """Every bound block of `request` that `history` says was made after another prefix.

    `history` is the conversation the request was made from, as the model saw it when it
    made each block: each assistant message's blocks were made after the messages before
    it (the stored history of an agent that sends it as it is). A block is still valid in
    `request` where the messages before it are those before its message in `history`
    (compared without bound blocks and `cache_control`; from the newest provider
    compaction on), and the bound blocks sent before it are those of `history` less a
    leading run (the oldest first). A request governance made on a history it had cut
    before holds blocks made after governance's earlier requests, not after `history`:
    check those against the requests (tests/prefix_oracle.py does).

    Example:
        >>> from langchain_core.messages import HumanMessage, ToolMessage
        >>> thinking = {"type": "thinking", "thinking": "", "signature": "EqQB"}
        >>> call = {"name": "read_file", "args": {}, "id": "toolu_1"}
        >>> history = [HumanMessage("read a.py"), AIMessage([thinking], tool_calls=[call]),
        ...            ToolMessage("print(1)", tool_call_id="toolu_1")]
        >>> check_against_history(history, history, provider="anthropic")
        []
        >>> edited = [HumanMessage("read b.py"), *history[1:]]
        >>> [v.rule for v in check_against_history(edited, history, provider="anthropic")]
        ['thinking-prefix-changed']
    """
    violations: list[Violation] = []
    for binding in prefix_bindings(provider):
        bound = binding.block_types
        made_after: dict[str, int] = {}
        for position, message in enumerate(history):
            for key in _bound_keys(message, bound):
                made_after.setdefault(key, position)
        history_keys = [_compared(m, bound) for m in history]
        request_keys = [_compared(m, bound) for m in request]
        request_start, history_start = _checked_from(request), _checked_from(history)
        for index, message in enumerate(request):
            keys = _bound_keys(message, bound)
            source = next((made_after[key] for key in keys if key in made_after), None)
            if source is None:
                continue
            same = request_keys[request_start:index] == history_keys[history_start:source]
            sent = [k for m in request[request_start:index] for k in _bound_keys(m, bound)]
            before = [k for m in history[history_start:source] for k in _bound_keys(m, bound)]
            if same and before[len(before) - len(sent) :] == sent:
                continue
            violations.append(
                Violation(
                    index,
                    binding.code,
                    f"Message {index} carries {binding.block_types_phrase} made after history "
                    f"message {source}'s prefix, which the request does not send unchanged "
                    f"before it; {binding.outcome}",
                )
            )
    return violations
