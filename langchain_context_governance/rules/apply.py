"""`apply_provider_rules`: repair what one provider rejects and the core passes leave.

The core passes make a request legal in the ways every provider shares. Providers then
differ: Mistral wants tool-call ids of exactly 9 letters or digits, Anthropic unique ids
and no empty text, Zhipu/GLM no system message followed by an assistant message, Llama 3
templates one tool call per message, and no provider lets a request end on a system
message. The rules, each with its check and repair, are the table in `rules/table.py`;
a profile resolved once (`rules/profile.py`) runs them.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from langchain_core.messages import BaseMessage
from langchain_core.messages.utils import MessageLikeRepresentation

from langchain_context_governance._messages import as_message_list
from langchain_context_governance.passes._dual_use import runnable_when_called_without_messages
from langchain_context_governance.rules.profile import resolve_profile

__all__ = ["apply_provider_rules", "apply_provider_rules_with_count"]


def apply_provider_rules_with_count(
    messages: list[BaseMessage], *, provider: str, extra_rules: Collection[str] = ()
) -> tuple[list[BaseMessage], int]:
    """Apply the repairs of `provider` and `extra_rules`; the list and how many messages changed.

    Returns the very same list when the request already suits the provider.
    """
    output, changes = resolve_profile(provider, extra_rules=extra_rules).repair(messages)
    return output, sum(changes.values())


@runnable_when_called_without_messages
def apply_provider_rules(
    messages: Sequence[MessageLikeRepresentation], *, provider: str = "openai"
) -> list[BaseMessage]:
    """Repair what `provider` rejects and the core passes leave; `provider` is in `PROVIDERS`.

    Runs the repair of every rule of the profile, in the order of
    `langchain_context_governance.rules.table.RULES` (the README lists them by profile).
    Every profile pairs tool results with their calls, gives a call without an id (or
    with an id repeated inside its message) a fresh id and a placeholder result, moves
    system messages at the end of the request up to the leading ones and runs role
    alternation again. Reasoning state stays with its message: signed thinking blocks
    are never edited, merged or moved, and `reasoning_content`, OpenAI reasoning items
    and Gemini thought signatures stay with their response. A rewritten id is a stable
    9-character id (`stable_tool_call_id`), the same in the call and in its result and
    the same on every call. No user text is lost; image and file blocks are left as
    they are.

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
