"""Builders for histories in the shapes agents produce."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage


def call(call_id: str, name: str = "read_file", **args: Any) -> dict[str, Any]:
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}


def ai_calls(*calls: dict[str, Any], content: Any = "") -> AIMessage:
    return AIMessage(content=content, tool_calls=list(calls))


def result(call_id: str, content: Any = "ok", name: str | None = None) -> ToolMessage:
    return ToolMessage(content=content, tool_call_id=call_id, name=name)


def tool_loop(iterations: int, *, size: int = 800, tool: str = "read_file") -> list[BaseMessage]:
    """A system prompt, one user request and `iterations` call/result pairs."""
    messages: list[BaseMessage] = [SystemMessage("You are a coding agent."), HumanMessage("fix it")]
    for n in range(iterations):
        messages.append(ai_calls(call(f"c{n}", tool, path=f"f{n}.py")))
        messages.append(result(f"c{n}", f"line {n}\n" * (size // 7), name=tool))
    return messages


def block_texts(message: BaseMessage) -> list[str]:
    """The texts of a message's content: one for a string, one per text block of a list."""
    if isinstance(message.content, str):
        return [message.content]
    return [
        block if isinstance(block, str) else str(block.get("text", ""))
        for block in message.content
        if isinstance(block, str) or block.get("type") == "text"
    ]
