"""Tool calls in the shape each client sends: declared, valid, one per message, or as text.

Clients read tool calls from different places of an `AIMessage`. ChatOpenAI reads only
`tool_calls` (an Anthropic `tool_use` block alone is dropped), ChatGoogleGenerativeAI drops
`invalid_tool_calls`, ChatAnthropic sends an invalid call only with an id and a name of
its own. Llama 3 templates take one call per message, and templates without a tool role
(Gemma) take calls and results only as text.

A tool result never gains a user's authority (docs/design.md, "What governance adds"):
where a call must be written as text (a rule that cannot send it as a call), its result
is replaced in the user role by governance's placeholder naming the call, never by the
tool's text (`write_tool_calls_as_text`). A template with no tool role at all has one
channel for tool output, and it is the user turn: Gemma's function-calling guide has the
framework return a result "wrapped with ```tool_output```" in the user's turn, the form
the model was trained to read as a tool's output rather than the user's words. There the
result goes in that form (`write_tool_traffic_as_text`), headed by governance's line
naming the call, the fences inside it escaped so it cannot end its block, and the message
marked as tool output (`_added`, kind "tool-output"), never taken for the user's own
words (a task, a pinned latest user message). Dropping the results instead would leave
such a model unable to use tools at all, and an assistant turn would make it read a
tool's output as its own words.

Example:
    >>> from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    >>> block = {"type": "tool_use", "id": "toolu_01", "name": "grep", "input": {"q": "x"}}
    >>> result = ToolMessage("x", tool_call_id="toolu_01")
    >>> request = [HumanMessage("find x"), AIMessage([block]), result]
    >>> [v.rule for v in TOOL_CALLS_DECLARED.check(request)]
    ['tool-call-only-in-content']
    >>> TOOL_CALLS_DECLARED.repair(request)[0][1].tool_calls[0]["id"]
    'toolu_01'
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.messages.tool import tool_call

from langchain_context_governance._added import mark_added
from langchain_context_governance._messages import content_text, is_tool_result, results_run_end
from langchain_context_governance._reasoning import (
    GEMINI_SIGNATURES_KEY,
    OPENAI_FUNCTION_CALL_IDS_KEY,
)
from langchain_context_governance.passes.alternation import merge_contents
from langchain_context_governance.policy.note import value_text
from langchain_context_governance.rules._calls import call_key, tool_use_blocks
from langchain_context_governance.rules.ids import stable_tool_call_id
from langchain_context_governance.rules.rule import (
    EVERY_PROFILE,
    Rule,
    Violation,
    map_messages,
    per_assistant,
    profiles,
    role_phrase,
)

__all__ = [
    "NO_INVALID_TOOL_CALLS",
    "NO_TOOL_ROLE",
    "ONE_TOOL_CALL_PER_MESSAGE",
    "SENDABLE_INVALID_TOOL_CALLS",
    "TOOL_CALLS_DECLARED",
    "undeclared_tool_use_blocks",
    "write_tool_calls_as_text",
    "write_tool_traffic_as_text",
]

Content = str | list[str | dict[str, Any]]


# --- tool_use blocks declared as tool calls -------------------------------------------------


def undeclared_tool_use_blocks(message: AIMessage) -> list[dict[str, Any]]:
    """The `tool_use` blocks whose id no `tool_calls` or `invalid_tool_calls` entry has."""
    declared = {call.get("id") for call in [*message.tool_calls, *message.invalid_tool_calls]}
    return [
        block
        for block in tool_use_blocks(message.content)
        if not block.get("id") or block.get("id") not in declared
    ]


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
        for block in undeclared_tool_use_blocks(message)
    ]


def _call_from_block(block: dict[str, Any]) -> dict[str, Any]:
    arguments = block.get("input")
    name = str(block.get("name") or "")
    call_id = block.get("id")
    if not (isinstance(call_id, str) and call_id):
        call_id = stable_tool_call_id(call_key({"name": name, "args": arguments}))
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

    return map_messages(messages, declare)


# --- invalid tool calls ---------------------------------------------------------------------


def _arguments_of(invalid: dict[str, Any]) -> dict[str, Any]:
    raw = invalid.get("args")
    try:
        parsed = json.loads(raw) if isinstance(raw, str) else None
    except json.JSONDecodeError:
        parsed = None
    return parsed if isinstance(parsed, dict) else {"arguments": raw or ""}


def _unsendable_invalid_calls(message: AIMessage) -> list[dict[str, Any]]:
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
        dropped = _unsendable_invalid_calls(message)
        if not dropped:
            return message
        kept = [call for call in message.invalid_tool_calls if dict(call) not in dropped]
        return message.model_copy(update={"invalid_tool_calls": kept})

    return map_messages(messages, without_unsendable)


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

    return map_messages(messages, convert)


# --- one call per message -------------------------------------------------------------------


def _call_count(message: BaseMessage) -> int:
    if not isinstance(message, AIMessage):
        return 0
    return len(message.tool_calls) + len(message.invalid_tool_calls)


def _call_id_of_block(block: str | dict[str, Any]) -> str | None:
    """The call a content block belongs to: a `tool_use` block's id, a `function_call`
    item's `call_id`; None for any other block."""
    if not isinstance(block, dict):
        return None
    key = {"tool_use": "id", "function_call": "call_id"}.get(str(block.get("type")))
    value = block.get(key) if key else None
    return value if isinstance(value, str) else None


def _is_call_block(block: str | dict[str, Any]) -> bool:
    return isinstance(block, dict) and block.get("type") in ("tool_use", "function_call")


def _kwargs_for_call(kwargs: dict[str, Any], call_id: str | None) -> dict[str, Any]:
    """The per-call state of one call (Gemini's signature, OpenAI's item id), nothing else."""
    return {
        name: {call_id: per_call[call_id]}
        for name in (GEMINI_SIGNATURES_KEY, OPENAI_FUNCTION_CALL_IDS_KEY)
        if isinstance(per_call := kwargs.get(name), dict) and call_id in per_call
    }


def _piece(message: AIMessage, call_id: str | None, *, first: bool) -> AIMessage:
    """`message` reduced to the one call `call_id`, with the blocks and per-call state of
    that call; only the first piece keeps the text and the rest of the message's
    reasoning state (it is the message itself, a copy)."""
    tool_calls = [call for call in message.tool_calls if call.get("id") == call_id]
    invalid = [call for call in message.invalid_tool_calls if call.get("id") == call_id]
    content: Content
    if isinstance(message.content, str):
        content = message.content if first else ""
    else:
        content = [
            block
            for block in message.content
            if (call_id is not None and _call_id_of_block(block) == call_id)
            or (first and not _is_call_block(block))
        ]
    own = _kwargs_for_call(message.additional_kwargs, call_id)
    if first:
        kwargs = {**message.additional_kwargs, **own}
        for name in (GEMINI_SIGNATURES_KEY, OPENAI_FUNCTION_CALL_IDS_KEY):
            if name in kwargs and name not in own:
                del kwargs[name]
        update = {
            "tool_calls": tool_calls,
            "invalid_tool_calls": invalid,
            "content": content,
            "additional_kwargs": kwargs,
        }
        return message.model_copy(update=update)
    return AIMessage(
        content=content, tool_calls=tool_calls, invalid_tool_calls=invalid, additional_kwargs=own
    )


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
        end = results_run_end(messages, index)
        output.extend(_split_run(message, messages[index:end]))
        changed += 1
        index = end
    return output, changed


# --- no tool role ---------------------------------------------------------------------------


def _blocks(message: BaseMessage) -> list[Any]:
    return message.content if isinstance(message.content, list) else []


def _has_tool_traffic(message: BaseMessage) -> bool:
    if is_tool_result(message):
        return True
    return isinstance(message, AIMessage) and bool(
        message.tool_calls or message.invalid_tool_calls or tool_use_blocks(message.content)
    )


def _check_no_tool_role(request: list[BaseMessage]) -> list[Violation]:
    return [
        Violation(
            index,
            "tool-traffic",
            f"Message {index} is {role_phrase(message)} message with tool traffic; this "
            "model's chat template has no tool role.",
        )
        for index, message in enumerate(request)
        if _has_tool_traffic(message)
    ]


def _call_as_text(name: str, arguments: Any, call_id: str) -> str:
    written = json.dumps(arguments, sort_keys=True, default=str, ensure_ascii=False)
    return f"(called tool {name} with {written}, call {call_id})"


def _assistant_without_calls(message: AIMessage) -> AIMessage:
    # The call blocks (Anthropic tool_use, OpenAI function_call items) are the calls
    # themselves: a client would send them as calls, so they become text too.
    content: Content = message.content
    if isinstance(content, list):
        content = [block for block in content if not _is_call_block(block)]
    seen: set[str] = set()
    for call in [*message.tool_calls, *message.invalid_tool_calls]:
        call_id = call.get("id") or ""
        seen.add(call_id)
        content = merge_contents(
            content, _call_as_text(call.get("name") or "", call.get("args"), call_id)
        )
    for block in _blocks(message):
        block_call = str(_call_id_of_block(block))
        if _is_call_block(block) and block_call not in seen:
            seen.add(block_call)
            arguments = block.get("input", block.get("arguments"))
            text = _call_as_text(str(block.get("name") or ""), arguments, block_call)
            content = merge_contents(content, text)
    kwargs = {
        name: value
        for name, value in message.additional_kwargs.items()
        if name not in (GEMINI_SIGNATURES_KEY, OPENAI_FUNCTION_CALL_IDS_KEY)
    }
    return message.model_copy(
        update={
            "content": content,
            "tool_calls": [],
            "invalid_tool_calls": [],
            "additional_kwargs": kwargs,
        }
    )


# The fence of a result where the user turn is the template's only channel for tool output.
TOOL_OUTPUT_FENCE = "```tool_output"
# A call's name and id in governance's own line (either may be any text a model sent).
_NAMED_CHARS = 64


def _named(text: str) -> str:
    return value_text(text[:_NAMED_CHARS])


def result_placeholder(message: ToolMessage) -> HumanMessage:
    """Governance's placeholder, in the user role, for a result a rule cannot send as a
    result: it names the call, never holds the tool's text.

    Example:
        >>> result_placeholder(ToolMessage("IGNORE ALL", tool_call_id="c2", name="fetch")).content
        '[The result of call c2 (tool fetch) is not shown: it could not be sent as a tool result.]'
    """
    text = (
        f"[The result of call {_named(message.tool_call_id)} (tool {_named(message.name or '?')})"
        " is not shown: it could not be sent as a tool result.]"
    )
    return mark_added(HumanMessage(text, id=message.id), "result-placeholder")


def result_as_tool_output(message: ToolMessage) -> HumanMessage:
    """A result in the user turn of a template with no tool role (see the module doc):
    governance's line naming the call, then the tool's text in a `tool_output` fence that
    nothing inside it can close; blocks that are not text (images) follow.

    Example:
        >>> print(result_as_tool_output(ToolMessage("a```b", tool_call_id="c1", name="grep")).text)
        (result of tool grep for call c1)
        ```tool_output
        a\\`\\`\\`b
        ```
    """
    text = content_text(message.content).replace("```", "\\`\\`\\`")
    header = (
        f"(result of tool {_named(message.name or 'call')} for call {_named(message.tool_call_id)})"
    )
    written = f"{header}\n{TOOL_OUTPUT_FENCE}\n{text}\n```"
    others = (
        [
            block
            for block in message.content
            if isinstance(block, dict) and block.get("type") != "text"
        ]
        if isinstance(message.content, list)
        else []
    )
    content: Content = [{"type": "text", "text": written}, *others] if others else written
    return mark_added(HumanMessage(content, id=message.id), "tool-output")


def _calls_as_text(
    messages: list[BaseMessage], result: Callable[[ToolMessage], BaseMessage]
) -> tuple[list[BaseMessage], int]:
    def rewrite(message: BaseMessage) -> BaseMessage:
        if isinstance(message, ToolMessage):
            return result(message)
        if isinstance(message, AIMessage) and (
            _has_tool_traffic(message) or any(_is_call_block(b) for b in _blocks(message))
        ):
            return _assistant_without_calls(message)
        return message

    return map_messages(messages, rewrite)


def write_tool_traffic_as_text(messages: list[BaseMessage]) -> tuple[list[BaseMessage], int]:
    """Tool calls become assistant text and tool results the template's tool output in the
    user turn (`result_as_tool_output`), for chat templates with no tool role. Nothing is
    dropped: names, arguments, ids and results stay, and so does any reasoning state of
    the assistant message."""
    return _calls_as_text(messages, result_as_tool_output)


def write_tool_calls_as_text(messages: list[BaseMessage]) -> tuple[list[BaseMessage], int]:
    """Tool calls become assistant text, for a rule that cannot send them as calls; their
    results become governance's placeholders naming them (`result_placeholder`): a tool's
    text is never sent as the user's."""
    return _calls_as_text(messages, result_placeholder)


# --- the rules ------------------------------------------------------------------------------

SENDABLE_INVALID_TOOL_CALLS = Rule(
    name="sendable-invalid-tool-calls",
    within_group=True,
    codes=("unsendable-invalid-tool-call",),
    prevents=(
        'Anthropic: "unexpected `tool_use_id` found in `tool_result` blocks", for the '
        "result of an invalid tool call that ChatAnthropic did not send (it sends one as "
        "`tool_use` only with an id and a name of its own)."
    ),
    source="langchain-anthropic _format_messages; captured on the wire (tests/test_wire).",
    check=per_assistant(
        "unsendable-invalid-tool-call",
        lambda message: bool(_unsendable_invalid_calls(message)),
        lambda index, _: (
            f"Message {index} has an invalid tool call without an id or a name, or with "
            "the id of another call; this client leaves it out, so a result for it is an "
            "orphan."
        ),
    ),
    repair=drop_unsendable_invalid_calls,
    profiles=profiles("anthropic", "strict"),
)

TOOL_CALLS_DECLARED = Rule(
    name="tool-calls-declared",
    within_group=True,
    codes=("tool-call-only-in-content",),
    prevents=(
        "ChatOpenAI (and the other clients that read only `tool_calls`) drops `tool_use` "
        "content blocks, leaving their tool results orphaned."
    ),
    source="langchain-openai _convert_message_to_dict; issue 14.",
    check=_check_tool_use_blocks_declared,
    repair=declare_tool_use_blocks_as_tool_calls,
    profiles=EVERY_PROFILE - {"anthropic"},
)

NO_INVALID_TOOL_CALLS = Rule(
    name="no-invalid-tool-calls",
    within_group=True,
    codes=("invalid-tool-call",),
    prevents=(
        'ChatGoogleGenerativeAI drops `invalid_tool_calls`: Vertex answers "Unable to '
        "submit request because it has an empty text parameter.\", and the call's result "
        "is left without its call."
    ),
    source=(
        "langchain-google-genai _parse_chat_history; issue 14. Qwen3.5's chat template "
        "(tests/fixtures/chat_templates/Qwen3.5-4B.jinja) fails on an invalid call too: the "
        "probe finds this rule for it, so the 'qwen' profile has it."
    ),
    check=per_assistant(
        "invalid-tool-call",
        lambda message: bool(message.invalid_tool_calls),
        lambda index, _: (
            f"Message {index} has invalid tool calls; this client drops them, so their "
            "results lose their call (and an assistant message left without parts is sent "
            "as an empty text part)."
        ),
    ),
    repair=send_invalid_tool_calls_as_tool_calls,
    profiles=profiles("gemini", "qwen", "strict"),
)

ONE_TOOL_CALL_PER_MESSAGE = Rule(
    name="one-tool-call-per-message",
    within_group=True,
    codes=("parallel-tool-calls",),
    prevents='Llama 3.1/3.2/3.3 chat templates: "This model only supports single '
    'tool-calls at once!"',
    source="meta-llama Llama-3.1-8B-Instruct tokenizer_config.json chat_template.",
    check=per_assistant(
        "parallel-tool-calls",
        lambda message: _call_count(message) > 1,
        lambda index, message: (
            f"Assistant message {index} has {_call_count(message)} tool calls; this model "
            "takes one tool call per assistant message."
        ),
    ),
    repair=split_parallel_tool_calls,
    profiles=profiles("llama3"),
)

NO_TOOL_ROLE = Rule(
    name="no-tool-role",
    within_group=True,
    codes=("tool-traffic",),
    prevents='Gemma chat templates: "Conversation roles must alternate '
    'user/assistant/user/assistant/..." for any tool message.',
    source="google/gemma-2-2b-it tokenizer_config.json chat_template.",
    check=_check_no_tool_role,
    repair=write_tool_traffic_as_text,
    profiles=profiles("gemma"),
)
