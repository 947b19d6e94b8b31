"""The whole benchmark in one process: timings, the tool-loop simulation, then many
conversations on one governor."""

from __future__ import annotations

import argparse
import functools
import logging
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from benchmarks.bfcl import TOOLS_SHARE_OF_BUDGET, find_wheel, load_conversations
from benchmarks.call_parts import call_parts_table, measure_call_parts
from benchmarks.concurrency import (
    CONCURRENCY_WINDOW_TOKENS,
    CONVERSATION_COUNTS,
    ITERATIONS_PER_CONVERSATION,
    LARGE_MESSAGE_SIZES,
    concurrency_table,
    concurrency_targets,
    large_message_table,
    large_message_targets,
    retained_with_large_messages,
    run_conversations,
)
from benchmarks.histories import build_history, build_tool_loop, history_stats
from benchmarks.loop import (
    CACHED_TOKEN_PRICE,
    LoopResult,
    MessageTokenMemo,
    combine_results,
    simulate_loop,
)
from benchmarks.offload import (
    ReaderCounts,
    loop_trajectories,
    offload_table,
    offload_targets,
    read_back,
    reader_table,
    real_runs,
    replay_offload,
)
from benchmarks.policies import (
    GOVERNOR_APPROXIMATE,
    GOVERNOR_MAX_OUTPUT_TOKENS,
    GOVERNOR_SAFETY_BUFFER,
    GOVERNOR_TIKTOKEN,
    TRIM_APPROXIMATE,
    NamedPolicy,
    Variant,
    clear_tool_uses_name,
    clear_tool_uses_policy,
    governor_available,
    governor_defaults,
    governor_variant_policy,
    loop_policies,
    timing_policies,
    tool_heavy_policies,
)
from benchmarks.report import (
    Target,
    Trial,
    fitting_table,
    fitting_targets,
    growth_table,
    history_kind_table,
    history_kind_targets,
    loop_table,
    loop_targets,
    markdown_table,
    ratio_table,
    render_targets,
    seed_table,
    timing_table,
    timing_targets,
    tool_heavy_table,
    tool_heavy_targets,
    tradeoff_table,
    trajectory_detail_table,
    trajectory_table,
    trajectory_targets,
)
from benchmarks.timing import (
    HistoryKind,
    Repetitions,
    time_all,
    time_fitting,
    time_history_kinds,
)
from benchmarks.trajectories import (
    BUDGET_SHARE,
    Trajectory,
    TrajectoryResult,
    load_trajectories,
    replay_trajectory,
    trajectory_budget,
)

__all__ = ["main"]

PolicyFactory = Callable[[int], list[NamedPolicy]]

DEFAULT_SIZES = (100, 1_000, 10_000)
TIMING_WINDOW_TOKENS = 32_000
# A history that fits: 1,000 messages (about 340,000 tokens) in a budget that holds them.
FITTING_SIZE = 1_000
FITTING_WINDOW_TOKENS = 1_000_000
LOOP_BUDGET_TOKENS = 30_000
LOOP_ITERATIONS = 300
# One seed can flatter settings tuned on it; targets must hold on each of these.
LOOP_SEEDS = 5
# The builders timed on damaged and reloaded histories too (trim_messages keeps no state,
# so a reload changes nothing for it).
FITTING_POLICIES = (TRIM_APPROXIMATE, GOVERNOR_APPROXIMATE)
HISTORY_KIND_POLICIES: dict[str, tuple[HistoryKind, ...]] = {
    TRIM_APPROXIMATE: ("damaged",),
    GOVERNOR_APPROXIMATE: ("damaged", "reloaded"),
    GOVERNOR_TIKTOKEN: ("damaged", "reloaded"),
}
# Relative to the repository root; the runs are read from there, never copied in.
DEFAULT_TRAJECTORIES = Path("../shared/real-trajectories")
# The variants of the trade-off table: the defaults, other watermarks, and each tuning
# share of the cache-aware policy (tuning.py) at other values; every other setting and
# share at its default.
TRADEOFF_VARIANTS = (
    Variant("defaults"),
    Variant("high=1.0, low=0.2", {"high_watermark": 1.0, "low_watermark": 0.2}),
    Variant("high=1.0, low=0.5", {"high_watermark": 1.0, "low_watermark": 0.5}),
    Variant("high=0.95, low=0.2", {"high_watermark": 0.95, "low_watermark": 0.2}),
    Variant("high=0.95, low=0.3", {"high_watermark": 0.95, "low_watermark": 0.3}),
    Variant("high=0.9, low=0.3", {"high_watermark": 0.9, "low_watermark": 0.3}),
    Variant("no values in the note", constants={"NOTE_VALUES_SHARE": 0.0}),
    Variant("NOTE_VALUES_SHARE=0.05", constants={"NOTE_VALUES_SHARE": 0.05}),
    Variant("NOTE_VALUES_SHARE=0.15", constants={"NOTE_VALUES_SHARE": 0.15}),
    Variant(
        "COMPACTION_ENOUGH_SHARE=1 (cut only above high)",
        constants={"COMPACTION_ENOUGH_SHARE": 1.0},
    ),
    Variant("EARLIER_USERS_SHARE=1 (all, while they fit)", constants={"EARLIER_USERS_SHARE": 1.0}),
    Variant("FULL_NOTE_SHARE=1 (the full note always)", constants={"FULL_NOTE_SHARE": 1.0}),
)
PACKAGES = ("langchain-core", "langchain", "langgraph", "tiktoken")


def repetitions_for(size: int, *, quick: bool) -> Repetitions:
    """Fewer, capped repetitions as calls get slower, to keep the run near 10 minutes."""
    if quick:
        return Repetitions(cold=2, steady=5, cap_seconds=3.0, minimum=2)
    if size <= 100:
        return Repetitions(cold=10, steady=50, cap_seconds=10.0)
    if size <= 1_000:
        return Repetitions(cold=5, steady=50, cap_seconds=20.0)
    return Repetitions(cold=5, steady=30, cap_seconds=40.0)


def machine_description() -> str:
    lines = [
        f"cores available: {len(os.sched_getaffinity(0))}",
        f"cpu: {_cpu_model()}",
        f"python: {platform.python_version()} ({platform.platform()})",
    ]
    lines += [f"{package}: {_package_version(package)}" for package in PACKAGES]
    return "\n".join(lines)


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _package_version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return "not installed"


def _progress(message: str) -> None:
    print(f"... {message}", file=sys.stderr, flush=True)


def history_table(sizes: Sequence[int], *, seed: int) -> str:
    stats = [history_stats(build_history(size, seed=seed + 1)) for size in sizes]
    header = list(stats[0])
    rows = [[f"{value:,}" for value in row.values()] for row in stats]
    return markdown_table(header, rows)


def run_timings(arguments: argparse.Namespace) -> list[Target]:
    budget = arguments.window - GOVERNOR_MAX_OUTPUT_TOKENS - GOVERNOR_SAFETY_BUFFER
    print(f"\n## Timings (window {arguments.window:,} tokens, input budget {budget:,} for all)\n")
    policies = timing_policies(budget)
    timings = time_all(
        policies,
        arguments.sizes,
        lambda size: repetitions_for(size, quick=arguments.quick),
        seed=arguments.seed,
        progress=_progress,
    )
    print("Histories (the first cold one at each size):\n")
    print(history_table(arguments.sizes, seed=arguments.seed))
    print("\nMedian milliseconds per call (number of timed calls):\n")
    print(timing_table(timings))
    print("\nRatio of medians, governor / peer (below 1: the governor is faster):\n")
    print(ratio_table(timings))
    print("\nSteady-state growth exponent, log(time) vs log(messages) (1 = linear):\n")
    print(growth_table(timings))
    largest = max(arguments.sizes)
    timings += time_history_kinds(
        [(p, HISTORY_KIND_POLICIES[p.name]) for p in policies if p.name in HISTORY_KIND_POLICIES],
        largest,
        repetitions_for(largest, quick=arguments.quick),
        seed=arguments.seed,
        progress=_progress,
    )
    print(
        f"\nSteady calls at {largest:,} messages by history: clean; damaged (old unanswered "
        "calls, an assistant answer the growth continues after); reloaded (each call gets "
        "equal messages as new objects, as from a checkpointer). Median ms (n), and ratio "
        f"to {TRIM_APPROXIMATE} on the same kind of history:\n"
    )
    print(history_kind_table(timings, largest))
    fitting_budget = FITTING_WINDOW_TOKENS - GOVERNOR_MAX_OUTPUT_TOKENS - GOVERNOR_SAFETY_BUFFER
    fitting = time_fitting(
        [p for p in timing_policies(fitting_budget) if p.name in FITTING_POLICIES],
        FITTING_SIZE,
        repetitions_for(FITTING_SIZE, quick=arguments.quick),
        seed=arguments.seed,
        progress=_progress,
    )
    print(
        f"\nSteady calls on a clean history that fits the budget ({fitting_budget:,} tokens; "
        "nothing to compact or cut). Median ms (n), and ratio to "
        f"{TRIM_APPROXIMATE}:\n"
    )
    print(fitting_table(fitting))
    _progress("timing the parts of steady calls on the fitting and the reloaded histories")
    quick = arguments.quick
    parts = [
        measure_call_parts(kind, size=size, budget=kind_budget, calls=calls, seed=arguments.seed)
        for kind, size, kind_budget, calls in (
            ("fits", FITTING_SIZE, fitting_budget, 10 if quick else 50),
            ("reloaded", largest, budget, 5 if quick else 30),
        )
    ]
    print(
        "\nWhere those steady calls' time goes (the governor(approximate) of the two rows "
        "above, no thread; mean ms per call of each part, and its share of the call):\n"
    )
    print(call_parts_table(parts))
    targets = timing_targets(timings) + history_kind_targets(timings, largest)
    targets += fitting_targets(fitting)
    print("\n" + render_targets(targets))
    return targets


def run_loop(arguments: argparse.Namespace) -> list[Target]:
    budget = arguments.loop_budget
    seeds = range(arguments.seed, arguments.seed + arguments.loop_seeds)
    print(
        f"\n## Tool loop: {arguments.loop_iterations} iterations, input budget {budget:,} "
        f"tokens, cached tokens priced {CACHED_TOKEN_PRICE}, others 1.0\n"
    )
    results_by_seed = {seed: simulate_policies(arguments, seed) for seed in seeds}
    print(f"Seed {arguments.seed}:\n")
    print(loop_table(results_by_seed[arguments.seed]))
    for result in results_by_seed[arguments.seed]:
        if result.first_problem:
            print(f"\n{result.policy}: first illegal request: {result.first_problem}")
    if len(results_by_seed) > 1:
        by_policy: dict[str, list[LoopResult]] = {}
        for results in results_by_seed.values():
            for result in results:
                by_policy.setdefault(result.policy, []).append(result)
        print(f"\nAll {len(results_by_seed)} seeds, summed:\n")
        print(loop_table([combine_results(results) for results in by_policy.values()]))
        print(f"\n{GOVERNOR_APPROXIMATE} seed by seed:\n")
        print(seed_table(results_by_seed))
    targets = loop_targets(results_by_seed)
    print("\n" + render_targets(targets))
    return targets


def simulate_policies(arguments: argparse.Namespace, seed: int) -> list[LoopResult]:
    """Every loop policy on the tool loop of one seed."""
    chunks = build_tool_loop(arguments.loop_iterations, seed=seed)
    memo = MessageTokenMemo()
    results = []
    for policy in loop_policies(arguments.loop_budget):
        _progress(f"simulating the loop of seed {seed} with {policy.name}")
        results.append(simulate_loop(policy, chunks, budget=arguments.loop_budget, memo=memo))
    return results


def run_concurrency(arguments: argparse.Namespace) -> list[Target]:
    counts = arguments.conversations
    if arguments.quick and counts == list(CONVERSATION_COUNTS):
        counts = [1, 10]
    print(
        f"\n## Interleaved conversations on one governor (window {CONCURRENCY_WINDOW_TOKENS:,} "
        f"tokens, {arguments.conversation_iterations} tool iterations each, round-robin)\n"
    )
    results = []
    for count in counts:
        _progress(f"playing {count} interleaved conversations")
        results.append(
            run_conversations(
                count,
                iterations=arguments.conversation_iterations,
                seed=arguments.seed,
                measure_memory=True,
            )
        )
    print(concurrency_table(results))
    _progress("conversations with two large user messages in a row")
    large = [
        retained_with_large_messages(chars, seed=arguments.seed) for chars in LARGE_MESSAGE_SIZES
    ]
    print(
        "\nMemory kept per conversation whose history holds two large user messages in a row "
        "(merged into one turn by the repairs), histories dropped:\n"
    )
    print(large_message_table(large))
    targets = concurrency_targets(results) + large_message_targets(large)
    print("\n" + render_targets(targets))
    return targets


def run_growth(arguments: argparse.Namespace) -> list[Target]:
    """Steady calls at 1,000 and 10,000 messages, first contact at 10,000 and 100,000."""
    from benchmarks.growth import growth_table, growth_targets, measure_growth

    _progress("measuring how a call's cost grows with the history")
    result = measure_growth(quick=arguments.quick)
    print(
        "\n## Growth: CPU milliseconds of a steady call (median) and of first contact, "
        "window 128,000 tokens\n"
    )
    print(growth_table(result))
    targets = growth_targets(result)
    print("\n" + render_targets(targets))
    return targets


def trajectories_directory(arguments: argparse.Namespace) -> Path:
    directory = Path(arguments.trajectories)
    if not directory.is_absolute():
        directory = Path(__file__).resolve().parent.parent / directory
    return directory


def replay_all(
    trajectories: Sequence[Trajectory], make_policies: PolicyFactory, memo: MessageTokenMemo
) -> dict[str, list[TrajectoryResult]]:
    """Every policy `make_policies(budget)` gives, on every trajectory, by policy name."""
    results: dict[str, list[TrajectoryResult]] = {}
    for trajectory in trajectories:
        budget = trajectory_budget(trajectory, memo)
        for policy in make_policies(budget):
            result = replay_trajectory(policy, trajectory, budget=budget, memo=memo)
            results.setdefault(policy.name, []).append(result)
    return results


def run_trajectories(arguments: argparse.Namespace) -> list[Target]:
    directory = trajectories_directory(arguments)
    if not (directory / "MANIFEST.json").is_file():
        print(f"\n## Real trajectories\n\nSkipped: no MANIFEST.json in {directory}.")
        return []
    trajectories = load_trajectories(directory)
    print(
        f"\n## Real trajectories: {len(trajectories)} runs from {arguments.trajectories}, one "
        f"call before every assistant message, input budget {BUDGET_SHARE:.0%} of each run's "
        "tokens (at least twice its system prompt)\n"
    )
    # The governor logs a warning for each request it sends over budget; the table counts them.
    logging.getLogger("langchain_context_governance").setLevel(logging.ERROR)
    memo = MessageTokenMemo()
    _progress("replaying the real trajectories with every policy")
    results = replay_all(trajectories, loop_policies, memo)
    baseline = clear_tool_uses_name()
    print(trajectory_table(results, baseline=baseline))
    if GOVERNOR_APPROXIMATE in results:
        print(f"\n{GOVERNOR_APPROXIMATE} run by run:\n")
        print(trajectory_detail_table(results[GOVERNOR_APPROXIMATE]))
        if not arguments.skip_tradeoff:
            tool_heavy = None if arguments.skip_tool_heavy else load_tool_heavy(arguments)
            print_tradeoff(arguments, trajectories, results[baseline], memo, tool_heavy)
    targets = trajectory_targets(results, governor=GOVERNOR_APPROXIMATE, baseline=baseline)
    print("\n" + render_targets(targets))
    return targets


def print_tradeoff(
    arguments: argparse.Namespace,
    trajectories: Sequence[Trajectory],
    baseline: Sequence[TrajectoryResult],
    memo: MessageTokenMemo,
    tool_heavy: ToolHeavyRun | None,
) -> None:
    """The governor as each variant sets it, on the real runs, the tool-heavy replay and
    the synthetic loop."""
    seeds = range(arguments.seed, arguments.seed + arguments.loop_seeds)
    loops = {seed: build_tool_loop(arguments.loop_iterations, seed=seed) for seed in seeds}
    budget = arguments.loop_budget
    peer = clear_tool_uses_policy(budget)
    loop_memo = MessageTokenMemo()
    peers = {
        seed: simulate_loop(peer, loops[seed], budget=budget, memo=loop_memo) for seed in seeds
    }
    trials = []
    for variant in TRADEOFF_VARIANTS:
        _progress(f"trade-off: {variant.label}")
        real = replay_all(trajectories, functools.partial(_variant_policies, variant=variant), memo)
        policy = governor_variant_policy(budget, variant)
        loop = [
            (simulate_loop(policy, loops[seed], budget=budget, memo=loop_memo), peers[seed])
            for seed in seeds
        ]
        heavy: list[TrajectoryResult] = []
        if tool_heavy is not None:
            heavy = next(
                iter(
                    replay_tool_heavy(
                        tool_heavy,
                        functools.partial(_tool_heavy_variant_policies, variant=variant),
                        MessageTokenMemo(),
                    ).values()
                )
            )
        trials.append(Trial(variant.label, next(iter(real.values())), baseline, loop, heavy))
    print(
        "\nTrade-off (real: all runs above; tool-heavy: the BFCL replay below; "
        "loop: the tool loop, "
        f"{len(loops)} seeds, budget {budget:,}; CTU = {clear_tool_uses_name()}; needed "
        "facts visible, and in brackets the share of them shown only in the note):\n"
    )
    print(tradeoff_table(trials))


def _variant_policies(budget: int, *, variant: Variant) -> list[NamedPolicy]:
    return [governor_variant_policy(budget, variant)]


def _tool_heavy_variant_policies(
    budget: int,
    tools: list[Any],
    tools_tokens: int,
    excluded: frozenset[str],
    *,
    variant: Variant,
) -> list[NamedPolicy]:
    del tools_tokens  # the governor counts the tools itself
    return [governor_variant_policy(budget, variant, tools=tools, exclude_tools=excluded)]


@dataclass(frozen=True)
class ToolHeavyRun:
    """The conversations of the tool-heavy replay, each with its budget and tools."""

    conversations: list[tuple[Trajectory, int, int, list[Any], frozenset[str]]]
    skipped: int


def load_tool_heavy(arguments: argparse.Namespace) -> ToolHeavyRun | None:
    wheel = find_wheel()
    if wheel is None:
        return None
    from langchain_context_governance import get_token_counter

    counter = get_token_counter("approximate")
    loaded, skipped = load_conversations(wheel, limit=arguments.tool_heavy_limit)
    conversations = []
    for conversation in loaded:
        tools_tokens = counter.count_tools(conversation.tools)
        budget = round(tools_tokens / TOOLS_SHARE_OF_BUDGET)
        trajectory = Trajectory(conversation.name, "bfcl", conversation.messages)
        conversations.append(
            (trajectory, budget, tools_tokens, conversation.tools, conversation.exclude_tools)
        )
    return ToolHeavyRun(conversations, skipped)


def replay_tool_heavy(
    run: ToolHeavyRun,
    make_policies: Callable[[int, list[Any], int, frozenset[str]], list[NamedPolicy]],
    memo: MessageTokenMemo,
) -> dict[str, list[TrajectoryResult]]:
    results: dict[str, list[TrajectoryResult]] = {}
    for trajectory, budget, tools_tokens, tools, excluded in run.conversations:
        for policy in make_policies(budget, tools, tools_tokens, excluded):
            result = replay_trajectory(
                policy,
                trajectory,
                budget=budget - tools_tokens,
                memo=memo,
                exclude_tools=excluded,
            )
            results.setdefault(policy.name, []).append(result)
    return results


def _tool_heavy_policies(
    budget: int, tools: list[Any], tools_tokens: int, excluded: frozenset[str]
) -> list[NamedPolicy]:
    return tool_heavy_policies(
        budget, tools=tools, tools_tokens=tools_tokens, exclude_tools=excluded
    )


def run_tool_heavy(arguments: argparse.Namespace) -> list[Target]:
    run = load_tool_heavy(arguments)
    if run is None:
        print(
            "\n## Tool-heavy replay (BFCL multi-turn)\n\nSkipped: the bfcl-eval wheel is not "
            "there (set BFCL_WHEEL, or run `make bench`, which downloads it to "
            "~/.cache/langchain-context-governance/bfcl)."
        )
        return []
    budgets = sorted(budget for _, budget, _, _, _ in run.conversations)
    print(
        f"\n## Tool-heavy replay: {len(run.conversations)} BFCL multi-turn conversations "
        f"({run.skipped} skipped: they need the math backend), tool definitions "
        f"{TOOLS_SHARE_OF_BUDGET:.0%} of each budget (median budget "
        f"{budgets[len(budgets) // 2]:,} tokens); messages only in the token columns\n"
    )
    logging.getLogger("langchain_context_governance").setLevel(logging.ERROR)
    _progress("replaying the tool-heavy conversations")
    results = replay_tool_heavy(run, _tool_heavy_policies, MessageTokenMemo())
    print(tool_heavy_table(results))
    targets = tool_heavy_targets(results, governor=GOVERNOR_APPROXIMATE, trim=TRIM_APPROXIMATE)
    print("\n" + render_targets(targets))
    return targets


def run_offload(arguments: argparse.Namespace) -> list[Target]:
    """The governor with offload against its defaults on the replays that are run (the
    real runs, the tool-heavy replay, the tool loop), and the scripted reader."""
    logging.getLogger("langchain_context_governance").setLevel(logging.ERROR)
    runs: dict[str, list[Any]] = {}
    directory = trajectories_directory(arguments)
    if not arguments.skip_trajectories and (directory / "MANIFEST.json").is_file():
        runs["real runs"] = real_runs(load_trajectories(directory), MessageTokenMemo())
    tool_heavy = None if arguments.skip_tool_heavy else load_tool_heavy(arguments)
    if tool_heavy is not None:
        runs["tool-heavy"] = tool_heavy.conversations
    if not arguments.skip_loop:
        seeds = range(arguments.seed, arguments.seed + arguments.loop_seeds)
        runs["tool loop"] = loop_trajectories(
            arguments.loop_iterations, seeds, arguments.loop_budget
        )
    print(
        "\n## Offload: the governor with offload=True against its defaults (needed facts "
        "retrievable: visible, or behind a handle the request shows; store per thread: "
        "what a run keeps at its end)\n"
    )
    replays = {}
    for kind, of_kind in runs.items():
        _progress(f"offload: {kind}")
        replays[kind] = replay_offload(of_kind, MessageTokenMemo())
    print(offload_table(replays))
    readers = {}
    for kind in ("real runs", "tool-heavy"):
        if kind in runs:
            _progress(f"offload: the scripted reader on the {kind}")
            readers[kind] = ReaderCounts()
            for run in runs[kind]:
                read_back(run, readers[kind])
    if readers:
        print(
            "\nA scripted agent that reads back, before each call, the needed values its "
            "request shows only behind a handle (read_context with a pattern):\n"
        )
        print(reader_table(readers))
    targets = offload_targets(replays)
    print("\n" + render_targets(targets))
    return targets


def parse_arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=list(DEFAULT_SIZES))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--window", type=int, default=TIMING_WINDOW_TOKENS)
    parser.add_argument("--loop-budget", type=int, default=LOOP_BUDGET_TOKENS)
    parser.add_argument("--loop-iterations", type=int, default=LOOP_ITERATIONS)
    parser.add_argument(
        "--loop-seeds", type=int, default=LOOP_SEEDS, help="loops simulated, seed after seed"
    )
    parser.add_argument("--conversations", type=int, nargs="+", default=list(CONVERSATION_COUNTS))
    parser.add_argument("--conversation-iterations", type=int, default=ITERATIONS_PER_CONVERSATION)
    parser.add_argument(
        "--quick",
        action="store_true",
        help="few repetitions and only 1 and 10 conversations, for a smoke run",
    )
    parser.add_argument("--skip-timing", action="store_true")
    parser.add_argument("--skip-loop", action="store_true")
    parser.add_argument("--skip-concurrency", action="store_true")
    parser.add_argument(
        "--skip-growth", action="store_true", help="no steady-call and first-contact growth"
    )
    parser.add_argument(
        "--trajectories",
        default=str(DEFAULT_TRAJECTORIES),
        help="directory of real runs with a MANIFEST.json (relative to the repository root)",
    )
    parser.add_argument("--skip-trajectories", action="store_true")
    parser.add_argument("--skip-tradeoff", action="store_true", help="no trade-off table")
    parser.add_argument("--skip-tool-heavy", action="store_true", help="no BFCL replay")
    parser.add_argument(
        "--tool-heavy-limit", type=int, default=None, help="replay only the first N conversations"
    )
    parser.add_argument(
        "--skip-offload",
        action="store_true",
        help="no offload section (benchmarks/offload.py)",
    )
    parser.add_argument(
        "--skip-injection",
        action="store_true",
        help="no injection replay (benchmarks/injection.py)",
    )
    parser.add_argument(
        "--skip-counting",
        action="store_true",
        help="no estimate error table, no 20 MB result timing (benchmarks/counting.py)",
    )
    parser.add_argument(
        "--skip-thinking",
        action="store_true",
        help="no thinking-agent replay under the prefix check (benchmarks/thinking.py)",
    )
    return parser.parse_args(argv)


def run_thinking_agents(arguments: argparse.Namespace) -> list[Target]:
    """Thinking agents replayed call by call, judged by the prefix oracle."""
    from benchmarks.thinking import SEEDS, run_thinking, thinking_section

    seeds = SEEDS[:2] if arguments.quick else SEEDS
    _progress(f"thinking agents: {len(seeds)} histories, every policy, two budgets")
    table, targets = thinking_section(run_thinking(seeds))
    print(f"\n## Thinking agents: reasoning bound to its prefix ({len(seeds)} histories)\n")
    print(table)
    print("\n" + render_targets(targets))
    return targets


def run_counting(arguments: argparse.Namespace) -> None:
    """Estimate error per provider family (calibrated and not), and a 20 MB tool result."""
    from benchmarks.counting import error_table, large_result_table

    directory = trajectories_directory(arguments)
    if not arguments.skip_trajectories and (directory / "MANIFEST.json").is_file():
        trajectories = load_trajectories(directory)
        print(
            f"\n## Counting: estimate error on {len(trajectories)} real runs, one request a call\n"
        )
        print(error_table(trajectories))
    _progress("counting a 20 MB tool result")
    print("\n## Counting: a 20 MB tool result without whitespace (a fresh process each)\n")
    print(large_result_table())


def main(argv: Sequence[str] | None = None) -> None:
    arguments = parse_arguments(argv)
    started = time.perf_counter()
    print("# langchain-context-governance benchmarks\n")
    print(machine_description())
    if not governor_available():
        print("\nContextGovernor is not importable: only the peers are measured.")
    else:
        settings = ", ".join(f"{name}={value!r}" for name, value in governor_defaults().items())
        print(f"ContextGovernor defaults: {settings}")
    targets: list[Target] = []
    if not arguments.skip_timing:
        targets += run_timings(arguments)
    if not arguments.skip_loop:
        targets += run_loop(arguments)
    if not arguments.skip_concurrency and governor_available():
        targets += run_concurrency(arguments)
    if not arguments.skip_growth and governor_available():
        targets += run_growth(arguments)
    if not arguments.skip_trajectories:
        targets += run_trajectories(arguments)
    if not arguments.skip_tool_heavy:
        targets += run_tool_heavy(arguments)
    if not arguments.skip_offload and governor_available():
        targets += run_offload(arguments)
    if not arguments.skip_thinking and governor_available():
        targets += run_thinking_agents(arguments)
    if not arguments.skip_injection and governor_available():
        from benchmarks.injection import run as run_injection

        targets += run_injection(seed=arguments.seed)
    if not arguments.skip_counting and governor_available():
        run_counting(arguments)
    print("\n## Targets\n")
    print(render_targets(targets))
    print(f"\nTotal wall time: {time.perf_counter() - started:.0f} s")
