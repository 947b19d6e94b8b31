"""Seeded synthetic tool-calling agent histories as langchain-core messages.

A history is a system prompt, a user request, then iterations. An iteration is either a tool
step (an AIMessage with 1-3 tool calls followed by one ToolMessage per call) or, now and then,
a final answer followed by a user follow-up. Tool results are heavy-tailed: lognormal lengths
clipped to 50-20,000 characters, the way file reads and command outputs are in real agents.

The same seed always gives the same messages, so every policy sees the same history.

>>> history = build_history(100, seed=1)
>>> len(history), history[0].type, history[1].type
(100, 'system', 'human')
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    messages_from_dict,
    messages_to_dict,
)

__all__ = [
    "DAMAGED_HISTORY_MIN_MESSAGES",
    "MAX_RESULT_CHARS",
    "MIN_RESULT_CHARS",
    "TOOL_NAMES",
    "UNANSWERED_CALL_STEPS",
    "HistoryGenerator",
    "build_damaged_history",
    "build_history",
    "build_tool_loop",
    "history_stats",
    "reload_messages",
]

TOOL_NAMES = ("read_file", "grep", "exec", "web_fetch", "list_dir", "write_file")
MIN_RESULT_CHARS = 50
MAX_RESULT_CHARS = 20_000
# Median ~700 chars with a long tail: most results are short, a few are whole files.
RESULT_LENGTH_MEDIAN = 700
RESULT_LENGTH_SIGMA = 1.3

# Vocabulary of the synthetic tool output: code-ish words, so tokenizers work as on real text.
_WORD_TEXT = """the agent returns a value when request fails retry with budget token message tool
result cache prefix window context history model provider error handler config default option
parser module function class method import export stream chunk async await timeout limit offset
index length buffer queue worker thread process"""
_IDENTIFIER_TEXT = """messages budget counter result request handler config state node graph edge
client session response payload tokens cache window index offset limit item"""
_WORDS = tuple(_WORD_TEXT.split())
_IDENTIFIERS = tuple(_IDENTIFIER_TEXT.split())
_KEYWORDS = ("def", "return", "if", "for", "while", "class", "import", "from", "raise", "with")
_DIRECTORIES = ("src", "lib", "tests", "docs", "scripts", "app", "core", "utils")
_EXTENSIONS = (".py", ".md", ".toml", ".json", ".ts", ".yaml")
_LOG_LEVELS = ("INFO", "DEBUG", "WARNING", "ERROR")

SYSTEM_PROMPT = (
    "You are a careful software engineering agent working in a repository. Use the tools to "
    "read files, search the code, run commands, fetch documentation and write changes. "
    "Think before each tool call, prefer small focused reads, and verify every change by "
    "running the tests. Report what you changed and why when you are done. "
) * 4
USER_REQUESTS = (
    "The test suite fails on the token budget module; find out why and fix it.",
    "Add retry with exponential backoff to the HTTP client and cover it with tests.",
    "Profile the request builder and make it faster on long histories.",
    "Update the documentation for the configuration options and check every example runs.",
)
# Tool calls of a damaged history whose results never arrived, one per interrupted step.
UNANSWERED_CALL_STEPS = 3
# The opening, each unanswered step after a normal one, room for one more and the answer.
DAMAGED_HISTORY_MIN_MESSAGES = 2 + 4 * UNANSWERED_CALL_STEPS + 3
RESUMED_AFTER_INTERRUPTION = "Sorry, the run was interrupted. Please carry on where you were."
FOLLOW_UPS = (
    "Thanks. Can you also check the edge case with an empty history?",
    "That works. Now please run the full test suite again and summarise the failures.",
    "Good. Could you make the error message name the offending setting?",
    "Please also look at the async path; it has the same problem I think.",
)


@dataclass
class HistoryGenerator:
    """Produce agent messages one iteration at a time from a seeded random stream.

    `max_tool_calls` bounds the tool calls of one AI step (1 gives a strict one-call loop);
    `follow_up_probability` is the chance that an iteration is an answer plus a user follow-up.
    """

    seed: int = 0
    max_tool_calls: int = 3
    follow_up_probability: float = 0.04
    _rng: random.Random = field(init=False, repr=False)
    _message_count: int = field(init=False, default=0, repr=False)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def opening(self) -> list[BaseMessage]:
        """The system prompt and the first user request."""
        request = self._rng.choice(USER_REQUESTS)
        return [
            SystemMessage(SYSTEM_PROMPT, id=self._next_id()),
            HumanMessage(request, id=self._next_id()),
        ]

    def iteration(self, max_messages: int | None = None) -> list[BaseMessage]:
        """The messages of the next iteration.

        With `max_messages`, the iteration takes at most that many messages and never leaves
        room for exactly one, so a history can be filled to an exact length.
        """
        if max_messages is not None and max_messages < 2:
            raise ValueError(f"an iteration needs room for 2 messages, got {max_messages}")
        if _leaves_fillable_room(max_messages, 2) and (
            self._rng.random() < self.follow_up_probability
        ):
            return [self._final_answer(), self._follow_up()]
        return self._tool_step(self._tool_call_count(max_messages))

    def interrupted_iteration(self) -> list[BaseMessage]:
        """A tool step whose results never arrived, then the user writing again.

        What a thread keeps after its run was interrupted between the model's tool calls
        and the tool results: the calls stay unanswered in the stored history forever.
        """
        return [self._tool_step(1)[0], self._resumed()]

    def final_answer(self) -> AIMessage:
        """An assistant answer without tool calls."""
        return self._final_answer()

    def _resumed(self) -> HumanMessage:
        return HumanMessage(RESUMED_AFTER_INTERRUPTION, id=self._next_id())

    def _tool_call_count(self, room: int | None) -> int:
        calls = self._rng.randint(1, self.max_tool_calls)
        if room is None:
            return calls
        if room <= self.max_tool_calls + 1:
            return room - 1
        if _leaves_fillable_room(room, calls + 1):
            return calls
        return calls + 1 if calls < self.max_tool_calls else max(1, calls - 1)

    def _tool_step(self, calls: int) -> list[BaseMessage]:
        tool_calls = [self._tool_call() for _ in range(calls)]
        ai = AIMessage(
            content=self._thought(),
            tool_calls=tool_calls,
            id=self._next_id(),
            response_metadata={"finish_reason": "tool_calls", "model_name": "synthetic-1"},
        )
        results: list[BaseMessage] = [
            ToolMessage(
                content=self._tool_result(call["name"]),
                tool_call_id=call["id"],
                name=call["name"],
                id=self._next_id(),
            )
            for call in tool_calls
        ]
        return [ai, *results]

    def _tool_call(self) -> dict[str, Any]:
        name = self._rng.choice(TOOL_NAMES)
        return {
            "name": name,
            "args": self._tool_args(name),
            "id": f"call_{self._rng.getrandbits(64):016x}",
            "type": "tool_call",
        }

    def _tool_args(self, name: str) -> dict[str, Any]:
        path = self._path()
        if name == "grep":
            return {"pattern": self._rng.choice(_IDENTIFIERS), "path": path.rsplit("/", 1)[0]}
        if name == "exec":
            return {"command": f"python -m pytest -q {path}", "timeout": 120}
        if name == "web_fetch":
            return {"url": f"https://docs.example.com/{self._rng.choice(_WORDS)}/{path}"}
        if name == "write_file":
            return {"path": path, "content": self._code_text(self._rng.randint(100, 1_500))}
        return {"path": path}

    def _tool_result(self, name: str) -> str:
        length = self._result_length()
        writers: dict[str, Callable[[int], str]] = {
            "read_file": self._code_text,
            "grep": self._grep_text,
            "exec": self._log_text,
            "web_fetch": self._prose_text,
            "list_dir": self._listing_text,
            "write_file": self._diff_text,
        }
        return writers[name](length)

    def _result_length(self) -> int:
        drawn = self._rng.lognormvariate(math.log(RESULT_LENGTH_MEDIAN), RESULT_LENGTH_SIGMA)
        return int(min(MAX_RESULT_CHARS, max(MIN_RESULT_CHARS, drawn)))

    def _final_answer(self) -> AIMessage:
        return AIMessage(
            content=self._prose_text(self._rng.randint(200, 1_200)),
            id=self._next_id(),
            response_metadata={"finish_reason": "stop", "model_name": "synthetic-1"},
        )

    def _follow_up(self) -> HumanMessage:
        return HumanMessage(self._rng.choice(FOLLOW_UPS), id=self._next_id())

    def _thought(self) -> str:
        if self._rng.random() < 0.5:
            return ""
        return self._prose_text(self._rng.randint(40, 300))

    def _next_id(self) -> str:
        self._message_count += 1
        return f"msg-{self.seed}-{self._message_count:06d}"

    def _path(self) -> str:
        parts = self._rng.choices(_DIRECTORIES, k=self._rng.randint(1, 3))
        stem = self._rng.choice(_IDENTIFIERS)
        return "/".join([*parts, stem + self._rng.choice(_EXTENSIONS)])

    def _fill_lines(self, length: int, line: Callable[[], str]) -> str:
        lines: list[str] = []
        size = 0
        while size < length:
            text = line()
            lines.append(text)
            size += len(text) + 1
        return "\n".join(lines)[:length]

    def _code_text(self, length: int) -> str:
        def line() -> str:
            indent = " " * 4 * self._rng.randint(0, 3)
            keyword = self._rng.choice(_KEYWORDS)
            names = self._rng.choices(_IDENTIFIERS, k=self._rng.randint(1, 4))
            number = self._rng.randint(0, 999)
            return f"{indent}{keyword} {names[0]}_{number}({', '.join(names[1:])}):"

        return self._fill_lines(length, line)

    def _grep_text(self, length: int) -> str:
        def line() -> str:
            words = " ".join(self._rng.choices(_IDENTIFIERS, k=self._rng.randint(2, 6)))
            return f"{self._path()}:{self._rng.randint(1, 2_000)}: {words}"

        return self._fill_lines(length, line)

    def _log_text(self, length: int) -> str:
        def line() -> str:
            level = self._rng.choice(_LOG_LEVELS)
            words = " ".join(self._rng.choices(_WORDS, k=self._rng.randint(3, 9)))
            return f"[{level}] {self._rng.randint(0, 99_999):05d} {words}"

        return self._fill_lines(length, line)

    def _prose_text(self, length: int) -> str:
        def line() -> str:
            words = self._rng.choices(_WORDS, k=self._rng.randint(8, 20))
            return " ".join(words).capitalize() + "."

        return self._fill_lines(length, line)

    def _listing_text(self, length: int) -> str:
        return self._fill_lines(length, self._path)

    def _diff_text(self, length: int) -> str:
        summary = f"Wrote {length} bytes. Diff:\n"
        return summary + self._code_text(max(1, length - len(summary)))


def _leaves_fillable_room(room: int | None, size: int) -> bool:
    return room is None or (room >= size and room - size != 1)


def build_history(
    n_messages: int, *, seed: int = 0, generator: HistoryGenerator | None = None
) -> list[BaseMessage]:
    """A history of exactly `n_messages` messages ending on a complete iteration.

    `n_messages` is 2 (the opening alone) or at least 4 (the opening and whole iterations).

    Pass `generator` to keep growing the same history afterwards with `generator.iteration()`.
    """
    if n_messages < 2 or n_messages == 3:
        raise ValueError(f"n_messages must be 2 or at least 4, got {n_messages}")
    source = generator if generator is not None else HistoryGenerator(seed=seed)
    history = source.opening()
    while len(history) < n_messages:
        history.extend(source.iteration(max_messages=n_messages - len(history)))
    return history


def build_damaged_history(
    n_messages: int, *, seed: int = 0, generator: HistoryGenerator | None = None
) -> list[BaseMessage]:
    """A history of exactly `n_messages` with the defects a long-lived thread keeps.

    Early on, `UNANSWERED_CALL_STEPS` tool calls that were never answered (each followed
    by the user writing again); at the end, an assistant answer without tool
    calls. Growing it afterwards with `generator.iteration()` appends tool steps after
    that answer, so every later request carries all these old defects.

    >>> history = build_damaged_history(60, seed=1)
    >>> len(history), history[-1].type, history[-1].tool_calls
    (60, 'ai', [])
    """
    if n_messages < DAMAGED_HISTORY_MIN_MESSAGES:
        raise ValueError(
            f"n_messages must be at least {DAMAGED_HISTORY_MIN_MESSAGES}, got {n_messages}"
        )
    source = generator if generator is not None else HistoryGenerator(seed=seed)
    history = source.opening()
    for _ in range(UNANSWERED_CALL_STEPS):
        history.extend(source.iteration(max_messages=2))
        history.extend(source.interrupted_iteration())
    while len(history) < n_messages - 1:
        history.extend(source.iteration(max_messages=n_messages - 1 - len(history)))
    return [*history, source.final_answer()]


def reload_messages(messages: list[BaseMessage]) -> list[BaseMessage]:
    """Equal messages as new objects, as a checkpointer gives them back on every run."""
    return messages_from_dict(messages_to_dict(messages))


def build_tool_loop(iterations: int, *, seed: int = 0) -> list[list[BaseMessage]]:
    """The opening followed by `iterations` steps of exactly one tool call and its result.

    Returned as a list of chunks (the opening first) so a simulation can append one at a time.
    """
    generator = HistoryGenerator(seed=seed, max_tool_calls=1, follow_up_probability=0.0)
    return [generator.opening(), *(generator.iteration() for _ in range(iterations))]


def history_stats(history: list[BaseMessage]) -> dict[str, int]:
    """Message count, tool results, and the size of their contents in characters."""
    sizes = sorted(len(str(m.content)) for m in history if isinstance(m, ToolMessage))
    return {
        "messages": len(history),
        "tool results": len(sizes),
        "median result chars": sizes[len(sizes) // 2] if sizes else 0,
        "largest result chars": sizes[-1] if sizes else 0,
        "total content chars": sum(len(str(m.content)) for m in history),
    }
