"""Hypothesis strategies that build agent histories, legal and malformed, and the test profiles.

Profiles: "default" runs 200 examples per property (the plain `pytest -q` run), the same
examples on every run, so that a test run (CI's too) is reproducible; "fuzz" runs 10,000
random ones (`make fuzz`, which sets HYPOTHESIS_PROFILE=fuzz) to find new failures.

The histories are small on purpose (short texts, a handful of messages) so that a few
hundred examples per property stay fast; tight budgets make snipping happen anyway.
"""

from __future__ import annotations

import os
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.graph.message import REMOVE_ALL_MESSAGES

settings.register_profile(
    "default",
    max_examples=200,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "fuzz",
    max_examples=10_000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

# A small pool, so that results often find their call, calls get reused and results
# get duplicated. It mixes ids every provider takes, ids only some take (Mistral wants
# exactly 9 letters or digits, Anthropic no dots, OpenAI at most 40 characters), the
# literal "null" Mistral reserves, and calls with no id at all (None).
TOOL_CALL_IDS: tuple[str | None, ...] = (
    "c1",
    "c2",
    "call_0",
    "a1B2c3D4e",
    "toolu.01",
    "null",
    "call_" + "x" * 40,
    None,
)
TOOL_NAMES = ("read_file", "grep", "", "web search", "run-1")
WORDS = ("alpha", "beta", "gamma", "delta", "ok", "42")

IMAGE_BLOCK: dict[str, Any] = {
    "type": "image_url",
    "image_url": {"url": "data:image/png;base64,iVBORw0KGgo=", "detail": "low"},
}
BLANK_TEXTS = ("", " ", "\n")

texts = st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join)
maybe_blank_texts = st.one_of(texts, st.sampled_from(BLANK_TEXTS))


def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def signed_thinking_block(thought: str, signature: str) -> dict[str, Any]:
    return {"type": "thinking", "thinking": thought, "signature": signature}


@st.composite
def system_messages(draw: st.DrawFn) -> SystemMessage:
    return SystemMessage(draw(maybe_blank_texts))


@st.composite
def user_contents(draw: st.DrawFn, tag: str) -> str | list[str | dict[str, Any]]:
    """User text that starts with a unique tag, so a test can find it again."""
    text = f"{tag} {draw(texts)}"
    shape = draw(st.sampled_from(("string", "text block", "text and image", "blank block")))
    if shape == "string":
        return text
    if shape == "text block":
        return [text_block(text)]
    if shape == "text and image":
        return [text_block(text), dict(IMAGE_BLOCK)]
    return [text_block(draw(st.sampled_from(BLANK_TEXTS))), text_block(text)]


@st.composite
def assistant_texts(draw: st.DrawFn, tag: str) -> AIMessage:
    """A plain answer: blank, text, text blocks, signed thinking, or with reasoning_content.

    Signatures and reasoning carry `tag`, so a test can tell which response they came from.
    """
    shape = draw(st.sampled_from(("text", "blank", "blocks", "thinking", "reasoning")))
    if shape == "blank":
        return AIMessage(draw(st.sampled_from(BLANK_TEXTS)))
    if shape == "blocks":
        return AIMessage([text_block(draw(maybe_blank_texts)), text_block(draw(texts))])
    if shape == "thinking":
        thinking = signed_thinking_block(draw(texts), f"sig-{tag}")
        return AIMessage([thinking, text_block(draw(texts))])
    if shape == "reasoning":
        reasoning = f"{tag} {draw(texts)}"
        return AIMessage(draw(texts), additional_kwargs={"reasoning_content": reasoning})
    return AIMessage(draw(texts))


@st.composite
def tool_calls(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "name": draw(st.sampled_from(TOOL_NAMES)),
        "args": {"q": draw(st.sampled_from(WORDS))},
        "id": draw(st.sampled_from(TOOL_CALL_IDS)),
        "type": "tool_call",
    }


@st.composite
def assistant_calls(draw: st.DrawFn, tag: str) -> AIMessage:
    """Parallel calls, sometimes with text, signed thinking or an invalid call beside them."""
    calls = draw(st.lists(tool_calls(), min_size=1, max_size=3))
    shape = draw(st.sampled_from(("empty", "text", "thinking", "invalid call")))
    if shape == "text":
        return AIMessage(draw(texts), tool_calls=calls)
    if shape == "thinking":
        thinking = signed_thinking_block(draw(texts), f"sig-{tag}")
        return AIMessage([thinking], tool_calls=calls)
    if shape == "invalid call":
        invalid = {
            "name": draw(st.sampled_from(TOOL_NAMES)),
            "args": "{not json",
            "id": draw(st.sampled_from(TOOL_CALL_IDS)),
            "error": "bad json",
            "type": "invalid_tool_call",
        }
        return AIMessage("", tool_calls=calls, invalid_tool_calls=[invalid])
    return AIMessage("", tool_calls=calls)


@st.composite
def tool_results(draw: st.DrawFn) -> ToolMessage:
    call_id = draw(st.sampled_from([i for i in TOOL_CALL_IDS if i is not None]))
    content: str | list[str | dict[str, Any]] = draw(maybe_blank_texts)
    if draw(st.booleans()):
        content = [text_block(draw(maybe_blank_texts)), text_block(draw(texts))]
    name = draw(st.sampled_from((None, *TOOL_NAMES)))
    return ToolMessage(content, tool_call_id=call_id, name=name)


def _well_formed_turn(draw: st.DrawFn, tag: str) -> list[BaseMessage]:
    """A user request and one answered tool round: the legal core around the noise."""
    call_id = draw(st.sampled_from(("a1B2c3D4e", "c1", "call_0")))
    name = draw(st.sampled_from(TOOL_NAMES[:2]))
    call = {"name": name, "args": {}, "id": call_id, "type": "tool_call"}
    return [
        HumanMessage(draw(user_contents(tag))),
        AIMessage("", tool_calls=[call]),
        ToolMessage(draw(texts), tool_call_id=call_id, name=name),
    ]


@st.composite
def histories(draw: st.DrawFn, *, max_size: int = 12) -> list[BaseMessage]:
    """An arbitrary history: any order, any roles, legal or malformed.

    Covers orphan and duplicate results, unanswered calls, results separated from their
    call, consecutive same roles, leading and trailing assistant messages, system-only and
    empty histories, list contents with text and image blocks, blank text, tool calls with
    empty names or ids, reused ids and parallel calls. Every user text starts with a
    unique tag `u<n>`, so that a test can look for it in the output.
    """
    kinds = draw(
        st.lists(
            st.sampled_from(
                ("system", "user", "assistant", "calls", "result", "turn", "blank user")
            ),
            max_size=max_size,
        )
    )
    messages: list[BaseMessage] = []
    for position, kind in enumerate(kinds):
        tag = f"u{position}"
        if kind == "system":
            messages.append(draw(system_messages()))
        elif kind == "user":
            messages.append(HumanMessage(draw(user_contents(tag))))
        elif kind == "blank user":
            messages.append(HumanMessage(draw(st.sampled_from(BLANK_TEXTS))))
        elif kind == "assistant":
            messages.append(draw(assistant_texts(f"a{position}")))
        elif kind == "calls":
            messages.append(draw(assistant_calls(f"a{position}")))
        elif kind == "result":
            messages.append(draw(tool_results()))
        else:
            messages.extend(_well_formed_turn(draw, tag))
    return messages


budgets = st.integers(min_value=20, max_value=400)


# Bad input a governor meets in the wild: lone surrogates (JSON's "\ud800" escape reads
# into one; UTF-8 cannot encode it), content None (OpenAI's null content, set on a
# message after it was made), and LangGraph's RemoveMessage, by id or REMOVE_ALL_MESSAGES.
LONE_SURROGATES = ("\ud800", "\udfff", "\udc80")
MISSING_ID = "no-such-message"


def with_surrogate(text: str, surrogate: str) -> str:
    return f"{text}{surrogate}"


@st.composite
def surrogate_messages(draw: st.DrawFn, tag: str) -> list[BaseMessage]:
    """A call and its result whose id, name or text holds a lone surrogate."""
    surrogate = draw(st.sampled_from(LONE_SURROGATES))
    where = draw(st.sampled_from(("id", "name", "text", "result text")))
    call_id = with_surrogate("c", surrogate) if where == "id" else "c1"
    name = with_surrogate("grep", surrogate) if where == "name" else "grep"
    call = {"name": name, "args": {"q": "x"}, "id": call_id, "type": "tool_call"}
    text = with_surrogate(f"{tag} {draw(texts)}", surrogate) if where == "text" else draw(texts)
    result = with_surrogate("found", surrogate) if where == "result text" else "found"
    return [
        HumanMessage(text),
        AIMessage("", tool_calls=[call]),
        ToolMessage(result, tool_call_id=call_id, name=name),
    ]


def without_content(message: BaseMessage) -> BaseMessage:
    """`message` with content None, as an assignment after construction leaves it."""
    emptied = message.model_copy()
    emptied.content = None  # type: ignore[assignment]
    return emptied


@st.composite
def bad_inputs(draw: st.DrawFn) -> list[BaseMessage]:
    """A history (see `histories`) with bad input mixed in: messages holding lone
    surrogates, messages whose content is None, and RemoveMessages naming an earlier
    message, no message, or every earlier message."""
    messages = [
        message.model_copy(update={"id": f"m{position}"})
        for position, message in enumerate(draw(histories(max_size=8)))
    ]
    for position in range(draw(st.integers(min_value=1, max_value=4))):
        kind = draw(st.sampled_from(("surrogates", "no content", "remove")))
        at = draw(st.integers(min_value=0, max_value=len(messages)))
        if kind == "surrogates":
            messages[at:at] = draw(surrogate_messages(f"s{position}"))
        elif kind == "no content" and messages:
            target = min(at, len(messages) - 1)
            if not isinstance(messages[target], RemoveMessage):
                messages[target] = without_content(messages[target])
        elif kind == "remove":
            earlier = [m.id for m in messages[:at] if m.id and not isinstance(m, RemoveMessage)]
            choices = [*earlier, MISSING_ID, REMOVE_ALL_MESSAGES]
            messages.insert(at, RemoveMessage(id=draw(st.sampled_from(choices))))
    return messages
