"""A tool-heavy replay: multi-turn conversations of the Berkeley Function Calling
Leaderboard (BFCL v4, "multi_turn_base"), their correct tool calls executed on the
benchmark's own tool backends, replayed call by call through each policy.

The data and the backends ship in the `bfcl-eval` wheel. The wheel is read as a zip at
run time, from `$BFCL_WHEEL` or from `~/.cache/langchain-context-governance/bfcl/`
(`make bench` downloads it there with `pip download --no-deps bfcl-eval`); nothing of it is
copied into this repository. Without the wheel the replay is skipped, with a message.

Each conversation becomes a history: a short system prompt; then, turn by turn, the
user's message, one assistant message per correct call (as the benchmark's ground truth
lists them) followed by its result, executed on the backend instance the benchmark sets
up from the conversation's initial state, and a short assistant answer closing the turn.
The tool definitions are the benchmark's own documentation of the classes involved (the
excluded functions left out), sent with every request, and the input budget is set so
that they fill 90% of it (a small local model with many tools). Tools whose results are
receipts of one-off actions (names starting with book_, create_, post_, send_ or
authenticate) are `exclude_tools` for the governor. Skipped: conversations that need the
math backend (it imports `mpmath`, not installed here).
"""

from __future__ import annotations

import ast
import copy
import importlib
import inspect
import json
import os
import sys
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

__all__ = [
    "TOOLS_SHARE_OF_BUDGET",
    "BfclConversation",
    "find_wheel",
    "load_conversations",
]

WHEEL_CACHE = Path.home() / ".cache" / "langchain-context-governance" / "bfcl"
DATA = "bfcl_eval/data"
CATEGORY = "BFCL_v4_multi_turn_base.json"
BACKENDS = "bfcl_eval.eval_checker.multi_turn_eval.func_source_code"
# The benchmark's classes: the module of each backend and the file documenting its tools.
CLASSES = {
    "GorillaFileSystem": ("gorilla_file_system", "gorilla_file_system.json"),
    "MathAPI": ("math_api", "math_api.json"),
    "MessageAPI": ("message_api", "message_api.json"),
    "TwitterAPI": ("posting_api", "posting_api.json"),
    "TicketAPI": ("ticket_api", "ticket_api.json"),
    "TradingBot": ("trading_bot", "trading_bot.json"),
    "TravelAPI": ("travel_booking", "travel_booking.json"),
    "VehicleControlAPI": ("vehicle_control", "vehicle_control.json"),
}
UNAVAILABLE_CLASSES = frozenset({"MathAPI"})
TOOLS_SHARE_OF_BUDGET = 0.9
RECEIPT_PREFIXES = ("book_", "create_", "post_", "send_", "authenticate")
SYSTEM_PROMPT = "You are an assistant that completes the user's requests with the given tools."


@dataclass
class BfclConversation:
    name: str
    messages: list[BaseMessage]
    tools: list[dict[str, Any]]
    exclude_tools: frozenset[str] = field(default_factory=frozenset)


def find_wheel() -> Path | None:
    """The bfcl-eval wheel: `$BFCL_WHEEL`, else the newest one in the cache directory."""
    named = os.environ.get("BFCL_WHEEL")
    if named:
        return Path(named) if Path(named).is_file() else None
    wheels = sorted(WHEEL_CACHE.glob("bfcl_eval-*.whl"))
    return wheels[-1] if wheels else None


def _json_lines(archive: zipfile.ZipFile, name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in archive.read(name).decode().splitlines() if line.strip()]


def _openai_schema(doc: dict[str, Any]) -> dict[str, Any]:
    """A tool documentation entry as an OpenAI tool definition ("dict" is JSON's object)."""

    def fix(node: Any) -> Any:
        if isinstance(node, dict):
            return {
                key: ("object" if key == "type" and value == "dict" else fix(value))
                for key, value in node.items()
            }
        if isinstance(node, list):
            return [fix(item) for item in node]
        return node

    return {
        "type": "function",
        "function": {
            "name": doc["name"],
            "description": doc.get("description", ""),
            "parameters": fix(doc.get("parameters", {"type": "object", "properties": {}})),
        },
    }


def _parse_call(text: str) -> tuple[str, list[Any], dict[str, Any]]:
    """A ground-truth call such as "mv(source='a', destination='b')": name, args, kwargs."""
    node = ast.parse(text.strip(), mode="eval").body
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise ValueError(f"not a plain call: {text!r}")
    args = [ast.literal_eval(argument) for argument in node.args]
    kwargs = {
        keyword.arg: ast.literal_eval(keyword.value)
        for keyword in node.keywords
        if keyword.arg is not None
    }
    return node.func.id, args, kwargs


def _result_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        try:
            return json.dumps(value)
        except TypeError:
            return str(value)
    return str(value)


def _conversation(
    entry: dict[str, Any],
    answers: list[list[str]],
    docs: dict[str, list[dict[str, Any]]],
) -> BfclConversation:
    instances: dict[str, Any] = {}
    methods: dict[str, Callable[..., Any]] = {}
    for class_name in entry["involved_classes"]:
        module = importlib.import_module(f"{BACKENDS}.{CLASSES[class_name][0]}")
        instance = getattr(module, class_name)()
        scenario = copy.deepcopy(entry.get("initial_config", {}).get(class_name, {}))
        instance._load_scenario(scenario, long_context=False)
        instances[class_name] = instance
        for name, method in inspect.getmembers(instance, predicate=inspect.ismethod):
            if not name.startswith("_"):
                methods[name] = method
    excluded = set(entry.get("excluded_function") or [])
    tools = [
        _openai_schema(doc)
        for class_name in entry["involved_classes"]
        for doc in docs[class_name]
        if doc["name"] not in excluded
    ]
    messages: list[BaseMessage] = [SystemMessage(SYSTEM_PROMPT)]
    for turn, (question, calls) in enumerate(zip(entry["question"], answers, strict=False)):
        for user in question:
            messages.append(HumanMessage(user["content"]))
        names = []
        for number, text in enumerate(calls):
            name, args, kwargs = _parse_call(text)
            method = methods[name]
            bound = inspect.signature(method).bind_partial(*args, **kwargs)
            call_id = f"call_{turn}_{number}"
            messages.append(
                AIMessage(
                    "", tool_calls=[{"name": name, "args": dict(bound.arguments), "id": call_id}]
                )
            )
            try:
                output = _result_text(method(*args, **kwargs))
            except Exception as error:  # the backend's own errors are results too
                output = f"Error during execution: {error}"
            messages.append(ToolMessage(output, tool_call_id=call_id, name=name))
            names.append(name)
        messages.append(AIMessage(f"Done: {', '.join(names)}." if names else "Noted."))
    receipts = frozenset(
        tool["function"]["name"]
        for tool in tools
        if tool["function"]["name"].startswith(RECEIPT_PREFIXES)
    )
    return BfclConversation(entry["id"], messages, tools, receipts)


def load_conversations(
    wheel: Path, *, limit: int | None = None
) -> tuple[list[BfclConversation], int]:
    """The conversations of the category, built from the wheel; and how many were skipped."""
    sys.path.insert(0, str(wheel))
    try:
        with zipfile.ZipFile(wheel) as archive:
            entries = _json_lines(archive, f"{DATA}/{CATEGORY}")
            answers = {
                item["id"]: item["ground_truth"]
                for item in _json_lines(archive, f"{DATA}/possible_answer/{CATEGORY}")
            }
            docs = {
                class_name: _json_lines(archive, f"{DATA}/multi_turn_func_doc/{doc_file}")
                for class_name, (_, doc_file) in CLASSES.items()
            }
        conversations = []
        skipped = 0
        for entry in entries[:limit]:
            if set(entry["involved_classes"]) & UNAVAILABLE_CLASSES:
                skipped += 1
                continue
            conversations.append(_conversation(entry, answers[entry["id"]], docs))
        return conversations, skipped
    finally:
        sys.path.remove(str(wheel))


def tools_tokens(tools: Sequence[dict[str, Any]], count: Callable[[list[BaseMessage]], int]) -> int:
    """Tokens of the tool definitions, counted as one message holding their JSON."""
    return count([SystemMessage(json.dumps(list(tools)))])
