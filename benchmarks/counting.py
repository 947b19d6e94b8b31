"""Counting like the provider: estimate error per provider family, calibrated and not; the
Mistral window check; the time and memory a 20 MB tool result costs to count.

1. Estimate error. On the real runs (read at run time from ../shared/real-trajectories),
   every model call's request (the history up to each assistant message) is counted with
   the approximate counter and with the reference tokenizer of a provider family that
   ships offline: tiktoken o200k_base (OpenAI) and mistral_common's Tekken with Mistral's
   control tokens (open-mistral-nemo). Error = estimate / reference - 1 (negative: an
   under-count, a request that may be refused). "Calibrated" is the estimate corrected by
   the factor learned from the run's earlier calls (`Calibration.observe(estimate,
   reported)` with the reference as the reported size), as a governor learns it from each
   reply's `usage_metadata`.
2. Mistral window check (`--mistral-check`, about 3 minutes a configuration). Each run is
   replayed call by call through a governor whose input budget is 40% of the run (counted
   by Tekken), and every governed request is counted by mistral_common's own
   `encode_chat_completion` of the request langchain-mistralai would send (control tokens
   included). Configurations: approximate counting with the Mistral profile (no usage),
   the same with each reply's usage (the reference size of its request) in the history,
   and `ContextGovernor.from_model(ChatMistralAI(model="open-mistral-nemo"))`.
3. A 20 MB tool result without whitespace: each measurement runs in a fresh process
   (time and peak resident memory over the process's state after set-up): counting it
   exactly with tiktoken (what governing it cost before), governing the request it
   ends (window 128k, tiktoken), and counting exactly the part that is sent.

    python benchmarks/counting.py [--mistral-check] [--skip-large] [--trajectories DIR]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage

REPOSITORY = Path(__file__).resolve().parent.parent
if str(REPOSITORY) not in sys.path:
    sys.path.insert(0, str(REPOSITORY))

from benchmarks.trajectories import BUDGET_SHARE, Trajectory, load_trajectories  # noqa: E402
from langchain_context_governance import ContextGovernor  # noqa: E402
from langchain_context_governance.tokens.calibration import UNCALIBRATED  # noqa: E402
from langchain_context_governance.tokens.counter import (  # noqa: E402
    MessageTokenCounter,
    get_token_counter,
)

__all__ = ["error_table", "large_result_table", "main", "mistral_window_table"]

DEFAULT_TRAJECTORIES = REPOSITORY.parent / "shared" / "real-trajectories"
FAMILIES = {
    "OpenAI (tiktoken o200k_base)": "tiktoken:o200k_base",
    "Mistral (mistral_common Tekken, open-mistral-nemo)": "mistral:open-mistral-nemo",
}
UNDER_COUNT_SHOWN = 0.05
MISTRAL_MODEL = "open-mistral-nemo"
MISTRAL_OUTPUT_TOKENS = 1_000
LARGE_RESULT_CHARS = 20_000_000
LARGE_WINDOW_TOKENS = 128_000


def call_points(messages: Sequence[BaseMessage]) -> list[int]:
    return [i for i, m in enumerate(messages) if isinstance(m, AIMessage) and i > 0]


@dataclass
class Errors:
    before: list[float]
    after: list[float]


def run_errors(
    messages: list[BaseMessage], estimate: MessageTokenCounter, reference: MessageTokenCounter
) -> Errors:
    """Per call: the estimate's error, and the error after the run's earlier calls calibrated it."""
    errors = Errors([], [])
    calibration = UNCALIBRATED
    for point in call_points(messages):
        request = messages[:point]
        estimated = estimate.count_messages(request)
        true = reference.count_messages(request)
        errors.before.append(estimated / true - 1)
        errors.after.append(calibration.corrected(estimated) / true - 1)
        calibration = calibration.observe(estimate=estimated, reported=true)
    return errors


def _summary(values: list[float]) -> str:
    under = sum(value < -UNDER_COUNT_SHOWN for value in values)
    return (
        f"{statistics.median(values):+.1%} | {min(values):+.1%} | {max(values):+.1%} | "
        f"{statistics.mean(abs(v) for v in values):.1%} | {under} of {len(values)}"
    )


def error_table(trajectories: list[Trajectory]) -> str:
    estimate = get_token_counter("approximate")
    lines = [
        "| family (reference) | counting | median | min | max | mean abs | under by >5% |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for family, spec in FAMILIES.items():
        reference = get_token_counter(spec)
        combined = Errors([], [])
        for trajectory in trajectories:
            found = run_errors(trajectory.messages, estimate, reference)
            combined.before += found.before
            combined.after += found.after
        lines.append(f"| {family} | approximate | {_summary(combined.before)} |")
        lines.append(f"| | approximate, calibrated | {_summary(combined.after)} |")
    return "\n".join(lines)


# --- the Mistral window check ----------------------------------------------------------


def mistral_reference() -> Callable[[list[BaseMessage]], int]:
    """mistral_common's own count of the request langchain-mistralai sends for `messages`."""
    from langchain_mistralai.chat_models import _convert_message_to_mistral_chat_message
    from mistral_common.protocol.instruct.request import ChatCompletionRequest

    from langchain_context_governance.tokens.mistral import mistral_tokenizer, tokenizer_for_model

    tokenizer = mistral_tokenizer(tokenizer_for_model(MISTRAL_MODEL).file)

    def count(messages: list[BaseMessage]) -> int:
        converted = [_convert_message_to_mistral_chat_message(m) for m in messages]
        request = ChatCompletionRequest.model_validate({"messages": converted})
        return len(tokenizer.encode_chat_completion(request).tokens)

    return count


@dataclass
class WindowCheck:
    requests: int = 0
    over: int = 0
    worst: float = 0.0
    # Requests whose count by the governor's own counter is the reference count.
    counted_alike: int = 0
    seconds: float = 0.0


def _governor(configuration: str, budget: int) -> ContextGovernor:
    window = budget + MISTRAL_OUTPUT_TOKENS
    settings = {
        "context_window_tokens": window,
        "max_output_tokens": MISTRAL_OUTPUT_TOKENS,
        "safety_buffer": 0,
        "provider": "mistral",
    }
    if configuration == "from_model":
        from langchain_mistralai import ChatMistralAI

        model = ChatMistralAI(model=MISTRAL_MODEL, api_key="unused-offline")
        return ContextGovernor.from_model(model, **settings)
    return ContextGovernor(token_counter="approximate", **settings)


def check_run(
    trajectory: Trajectory, configuration: str, reference: Callable[[list[BaseMessage]], int]
) -> WindowCheck:
    tekken = get_token_counter(f"mistral:{MISTRAL_MODEL}")
    messages = list(trajectory.messages)
    systems = [m for m in messages if isinstance(m, SystemMessage)]
    budget = max(
        int(tekken.count_messages(messages) * BUDGET_SHARE), 2 * tekken.count_messages(systems)
    )
    governor = _governor(configuration, budget)
    found = WindowCheck()
    started = time.perf_counter()
    for point in call_points(messages):
        request = governor.invoke(messages[:point])
        true = reference(request)
        found.requests += 1
        found.counted_alike += governor.count_tokens(request) == true
        if true > budget:
            found.over += 1
            found.worst = max(found.worst, true / budget - 1)
        if configuration == "approximate + usage":
            usage = {"input_tokens": true, "output_tokens": 1, "total_tokens": true + 1}
            messages[point] = messages[point].model_copy(update={"usage_metadata": usage})
    found.seconds = time.perf_counter() - started
    return found


MISTRAL_CONFIGURATIONS = {
    "approximate, provider='mistral'": "approximate",
    "approximate, provider='mistral', usage in the history": "approximate + usage",
    'from_model(ChatMistralAI(model="open-mistral-nemo"))': "from_model",
}


def mistral_window_table(trajectories: list[Trajectory]) -> str:
    reference = mistral_reference()
    lines = [
        "| counting | requests | over the budget (mistral_common) | worst | governor's count "
        "= mistral_common's | seconds |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for label, configuration in MISTRAL_CONFIGURATIONS.items():
        total = WindowCheck()
        for trajectory in trajectories:
            found = check_run(trajectory, configuration, reference)
            total.requests += found.requests
            total.over += found.over
            total.worst = max(total.worst, found.worst)
            total.counted_alike += found.counted_alike
            total.seconds += found.seconds
        worst = f"+{total.worst:.1%}" if total.over else "-"
        lines.append(
            f"| {label} | {total.requests:,} | {total.over} | {worst} | "
            f"{total.counted_alike:,} | {total.seconds:.0f} |"
        )
    return "\n".join(lines)


# --- a 20 MB tool result ---------------------------------------------------------------

_LARGE_SCRIPT = """
import base64, json, random, resource, sys, time
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_context_governance import ContextGovernor
from langchain_context_governance.tokens.counter import get_token_counter
kind, mode, chars, window = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
if kind == "one character":
    text = "x" * chars
else:
    text = base64.b64encode(random.Random(0).randbytes(chars)).decode()[:chars]
call = {"name": "cat", "args": {"path": "dump.bin"}, "id": "call00001", "type": "tool_call"}
history = [SystemMessage("You are a careful agent."), HumanMessage("Show me the dump."),
           AIMessage("", tool_calls=[call]), ToolMessage(text, tool_call_id="call00001")]
governor = ContextGovernor(context_window_tokens=window, token_counter="tiktoken")
exact = get_token_counter("tiktoken")
governor.count_tokens(history[:3]); exact.count_message(history[0])
if mode == "sent part":
    history = [governor.govern(history).messages[-1]]
    exact = get_token_counter("tiktoken")
    exact.count_message(history[0].model_copy(update={"content": "x"}))
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
started = time.perf_counter()
if mode == "govern":
    tokens = governor.govern(history).report.tokens_after
else:
    tokens = exact.count_message(history[-1])
seconds = time.perf_counter() - started
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"seconds": seconds, "megabytes": (peak - before) / 1024, "tokens": tokens}))
"""

LARGE_MODES = {
    "count it exactly (tiktoken; what governing cost before)": "exact",
    "govern the request (window 128k, tiktoken)": "govern",
    "count the part that is sent, exactly": "sent part",
}


def measure_large(kind: str, mode: str, *, chars: int, window: int) -> dict[str, float]:
    completed = subprocess.run(
        [sys.executable, "-c", _LARGE_SCRIPT, kind, mode, str(chars), str(window)],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPOSITORY,
    )
    result: dict[str, float] = json.loads(completed.stdout.strip().splitlines()[-1])
    return result


def large_result_table(
    *, chars: int = LARGE_RESULT_CHARS, window: int = LARGE_WINDOW_TOKENS
) -> str:
    lines = [
        "| result | what | seconds | peak memory added | tokens |",
        "|---|---|---:|---:|---:|",
    ]
    for kind in ("one character", "base64"):
        for label, mode in LARGE_MODES.items():
            found = measure_large(kind, mode, chars=chars, window=window)
            lines.append(
                f"| {chars / 1e6:.0f} MB, {kind} | {label} | {found['seconds']:.2f} | "
                f"{found['megabytes']:,.0f} MB | {int(found['tokens']):,} |"
            )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trajectories", type=Path, default=DEFAULT_TRAJECTORIES)
    parser.add_argument("--mistral-check", action="store_true", help="the Mistral window check")
    parser.add_argument("--skip-large", action="store_true", help="no 20 MB result timing")
    parser.add_argument("--skip-errors", action="store_true", help="no estimate error table")
    arguments = parser.parse_args(argv)
    trajectories = load_trajectories(arguments.trajectories)
    if not arguments.skip_errors:
        print(f"\n## Estimate error on {len(trajectories)} real runs, one request per call\n")
        print(error_table(trajectories))
    if arguments.mistral_check:
        print("\n## Mistral: governed requests counted by mistral_common (budget 40% of a run)\n")
        print(mistral_window_table(trajectories))
    if not arguments.skip_large:
        print("\n## A 20 MB tool result without whitespace (fresh process each)\n")
        print(large_result_table())


if __name__ == "__main__":
    main()
