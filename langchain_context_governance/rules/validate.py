"""What each chat-model provider accepts, and a validator that reports every rule a request breaks.

The rules live in one table, `langchain_context_governance.rules.table.RULES`; every rule
carries the provider's own wording (its documentation or the text of its 400 error) so a
violation can be traced to the error it prevents. This module runs their checks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages.utils import MessageLikeRepresentation

from langchain_context_governance._messages import as_message_list
from langchain_context_governance.rules.profile import resolve_profile
from langchain_context_governance.rules.table import PROVIDERS, Violation

__all__ = ["PROVIDERS", "Violation", "validate_messages"]


def validate_messages(
    messages: Sequence[MessageLikeRepresentation],
    *,
    provider: str = "openai",
    chat_template: str | None = None,
    tools: Sequence[Any] | None = None,
    history: Sequence[MessageLikeRepresentation] | None = None,
) -> list[Violation]:
    """Return every rule of `provider` that the request `messages` breaks, in message order.

    An empty list means the provider accepts the request. Nothing is changed: the
    validator only reads. `provider` is one of `PROVIDERS`. With `chat_template` (the
    Jinja text of a model's chat template, as vLLM, llama.cpp or transformers apply it;
    needs the `templates` extra), the rules the template needs (what
    `ContextGovernor(chat_template=...)` repairs) are checked too, and the request is
    rendered through the template: its own error, if any, is rule "chat-template" at
    index -1; `tools` are the request's tool definitions it renders with (stand-ins
    otherwise). A template that is not Jinja, rejects even a plain conversation, or takes
    longer or renders more than a render may (`rules.templates.RENDER_TIME_LIMIT_SECONDS`,
    `RENDER_SIZE_LIMIT_CHARACTERS`), is a ValueError.

    With `history`, the conversation the request was made from (as the model saw it
    when it made each reasoning block: the stored history of an agent that sends it as
    it is), reasoning the provider binds to its prefix is checked too: Anthropic's
    thinking blocks and OpenAI's reasoning items are valid only behind the very messages
    that preceded them (rule "thinking-prefix-changed", "reasoning-prefix-changed";
    docs/reasoning.md). Compaction, truncation or a cut in front of such a block, by
    `trim_messages`, `ClearToolUsesEdit` or anything else, shows here.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
        >>> call = {"name": "search", "args": {}, "id": "call_1"}
        >>> asked = [HumanMessage("hi"), AIMessage("", tool_calls=[call])]
        >>> [violation.rule for violation in validate_messages(asked)]
        ['unanswered-tool-call', 'last-not-user-or-tool']
        >>> validate_messages([*asked, ToolMessage("3 results", tool_call_id="call_1")])
        []
        >>> thinking = {"type": "thinking", "thinking": "", "signature": "EqQB"}
        >>> stored = [HumanMessage("hi"), AIMessage([thinking, {"type": "text", "text": "Hello"}]),
        ...           HumanMessage("how are you?")]
        >>> trimmed = [HumanMessage("(earlier turns left out)"), *stored[1:]]
        >>> [v.rule for v in validate_messages(trimmed, provider="anthropic", history=stored)]
        ['thinking-prefix-changed']
    """
    request = as_message_list(messages)
    profile = resolve_profile(provider, chat_template=chat_template)
    if history is None:
        return profile.check(request, tools=tools)
    return profile.check(request, tools=tools, history=as_message_list(history))
