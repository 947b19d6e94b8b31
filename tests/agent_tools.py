"""Real tools and a long tool-loop scenario for agent tests.

The tools read, grep and evaluate over a folder of generated modules, so an agent under
test sees tool results of realistic size and shape; a strict ScriptedChatModel replays
which tool to call next and rejects any request a provider would reject.
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import BaseTool, tool

from langchain_context_governance import ContextGovernor, GovernanceReport, GovernanceResult
from langchain_context_governance._added import user_parts
from langchain_context_governance.policy.compaction import compacted_placeholder
from langchain_context_governance.rules.validate import validate_messages
from langchain_context_governance.testing import ScriptedChatModel

MODULE_COUNT = 8
FUNCTIONS_PER_MODULE = 30
FINAL_ANSWER = "All modules reviewed."
# About 600 tokens a module: 40 rounds of reading need some 30,000 tokens ungoverned.
AGENT_WINDOW_TOKENS = 7_000
AGENT_OUTPUT_TOKENS = 1_000


def write_workspace(root: Path) -> list[str]:
    """Write MODULE_COUNT Python modules of a few thousand characters each; return names."""
    names = []
    for module in range(MODULE_COUNT):
        name = f"module_{module}.py"
        functions = [
            f"def total_{module}_{n}(values):\n"
            f"    '''Sum of the values, scaled by {n}.'''\n"
            f"    return sum(values) * {n}\n"
            for n in range(FUNCTIONS_PER_MODULE)
        ]
        (root / name).write_text("\n\n".join(functions), encoding="utf-8")
        names.append(name)
    return names


_BINARY_OPERATORS: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}


def evaluate_expression(expression: str) -> Any:
    """Evaluate integer arithmetic and `sum(range(n))`, the Python the exec tool accepts."""
    return _evaluate(ast.parse(expression, mode="eval").body)


def _evaluate(node: ast.expr) -> Any:
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY_OPERATORS:
        return _BINARY_OPERATORS[type(node.op)](_evaluate(node.left), _evaluate(node.right))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        arguments = [_evaluate(argument) for argument in node.args]
        if node.func.id == "range":
            return range(*arguments)
        if node.func.id == "sum":
            return sum(*arguments)
    raise ValueError(f"unsupported expression: {ast.dump(node)}")


def workspace_tools(root: Path) -> list[BaseTool]:
    """read_file, grep and exec over the files in `root`."""

    @tool
    def read_file(path: str) -> str:
        """Return the text of a file in the workspace."""
        return (root / path).read_text(encoding="utf-8")

    @tool
    def grep(pattern: str) -> str:
        """Return `file:line: text` for every workspace line matching the regex `pattern`."""
        compiled = re.compile(pattern)
        hits = []
        for file in sorted(root.glob("*.py")):
            lines = file.read_text(encoding="utf-8").splitlines()
            for number, line in enumerate(lines, start=1):
                if compiled.search(line):
                    hits.append(f"{file.name}:{number}: {line}")
        return "\n".join(hits) or "no matches"

    @tool("exec")
    def exec_python(expression: str) -> str:
        """Evaluate a short Python arithmetic expression and return its value."""
        return repr(evaluate_expression(expression))

    return [read_file, grep, exec_python]


def _tool_call(name: str, call_id: str, **args: Any) -> dict[str, Any]:
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}


def _call_id(round_number: int, letter: str) -> str:
    # Nine letters and digits: the one id format every provider profile accepts.
    return f"call{round_number:04d}{letter}"


def exploration_script(iterations: int) -> list[AIMessage]:
    """Replies of an agent that explores the workspace for `iterations` tool rounds.

    Mostly read_file, with a grep every fifth round and an exec every seventh; every
    third round asks for two tools at once. The last reply is FINAL_ANSWER.
    """
    replies = []
    for round_number in range(iterations):
        first = _call_id(round_number, "a")
        module = round_number % MODULE_COUNT
        if round_number % 5 == 4:
            calls = [_tool_call("grep", first, pattern=f"total_{module}_1\\d")]
        elif round_number % 7 == 6:
            calls = [_tool_call("exec", first, expression=f"sum(range({round_number}))")]
        else:
            calls = [_tool_call("read_file", first, path=f"module_{module}.py")]
        if round_number % 3 == 2:
            second = _call_id(round_number, "b")
            calls.append(_tool_call("read_file", second, path="module_0.py"))
        replies.append(AIMessage("", tool_calls=calls))
    replies.append(AIMessage(FINAL_ANSWER))
    return replies


def agent_model(script: list[AIMessage]) -> ScriptedChatModel:
    """A strict scripted model with a window far smaller than a long tool loop."""
    return ScriptedChatModel(
        script,
        provider="strict",
        max_input_tokens=AGENT_WINDOW_TOKENS,
        max_output_tokens=AGENT_OUTPUT_TOKENS,
    )


Summary = list[tuple[str, Any, Any]]


def summarize(messages: Sequence[BaseMessage]) -> Summary:
    """What a history says, without the ids each run draws at random."""
    summary: Summary = []
    for message in messages:
        if isinstance(message, AIMessage):
            calls = [(c["name"], c["args"], c["id"]) for c in message.tool_calls]
            summary.append(("ai", message.content, calls))
        elif isinstance(message, ToolMessage):
            summary.append(("tool", message.content, message.tool_call_id))
        else:
            summary.append((message.type, message.content, None))
    return summary


def whole_history(question: str, script: list[AIMessage], tools: list[BaseTool]) -> Summary:
    """The summary of the ungoverned history one turn of `script` produces."""
    tools_by_name = {t.name: t for t in tools}
    summary: Summary = [("human", question, None)]
    for reply in script:
        summary.extend(summarize([reply]))
        for tool_call in reply.tool_calls:
            output = tools_by_name[tool_call["name"]].invoke(tool_call["args"])
            summary.append(("tool", output, tool_call["id"]))
    return summary


def assert_requests_legal_and_within_budget(
    requests: list[list[BaseMessage]], governor: ContextGovernor
) -> None:
    """Every request passes the strict validator and fits the governor's budget."""
    assert requests, "the model was never called"
    assert governor.budget is not None
    for number, request in enumerate(requests):
        assert validate_messages(request, provider="strict") == [], f"request {number}"
        tokens = governor.count_tokens(request)
        assert tokens <= governor.budget, f"request {number}: {tokens} > {governor.budget}"


def is_shortened(messages: Sequence[BaseMessage], tool_name: str) -> bool:
    """Whether `messages` compact a `tool_name` result or leave messages out (a cut note)."""
    placeholder = compacted_placeholder(tool_name)
    return any(
        (isinstance(message, ToolMessage) and message.content == placeholder)
        or "cut-note" in [kind for _, kind in user_parts(message)]
        for message in messages
    )


def assert_some_request_shortened(requests: list[list[BaseMessage]], tool_name: str) -> None:
    """Some request compacted a `tool_name` result or left messages out at a cut (a step
    that cannot compact enough cuts too: the compacted results may be cut with it)."""
    assert any(is_shortened(request, tool_name) for request in requests), (
        f"no request compacted a {tool_name} result or cut the history"
    )


class GovernanceRuns:
    """Counts ContextGovernor.govern calls while installed with `monkeypatch`."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.reports: list[GovernanceReport] = []
        govern = ContextGovernor.govern

        def recording_govern(
            governor: ContextGovernor, messages: Any, **per_call: Any
        ) -> GovernanceResult:
            governed = govern(governor, messages, **per_call)
            self.reports.append(governed.report)
            return governed

        monkeypatch.setattr(ContextGovernor, "govern", recording_govern)

    @property
    def count(self) -> int:
        return len(self.reports)
