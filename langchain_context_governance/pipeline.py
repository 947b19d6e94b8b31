"""The steps of one governance call, in their order, as data; and the fallback's steps.

`STEPS` is the order every call runs (`Pipeline.run`):

1. repair the history: pairs, the provider rules of each group, alternation between
   groups, each group decided once (what the repairs add counts against the budget);
2. compact and cut to the budget by protection class (only with a budget): the
   cache-aware replay, or the keep-recent microcompact and snip; a cut leaves its note;
3. guarantee the request's user turn, then the provider rules that need the whole
   request;
4. where step 3 took a request the replay made within budget over it (a tool loop
   written as text, a user turn added), plan this call again with what it added counted,
   and run step 3 on that plan: the request fits, and governing it again changes nothing;
5. the last resort, only where the request is still over budget: compact the newest
   results, then cut text by protection class, the current turn last;
6. the provider's own state: where it binds reasoning to the exact prefix it was made
   after, the reasoning of messages whose prefix an edit changed is left out on purpose
   (docs/reasoning.md); a provider compaction block goes first;
7. find the summary the cut needs, if a summary model is set (the governor asks for it
   once per cut and runs the steps again with it).

Thresholds compare counts corrected by the calibration (tokens/calibration.py). Where a
step fails on input nobody foresaw, the governor sends `FALLBACK_STEPS` instead: the
pairing repairs, alternation and the provider rules of the whole list, with no state.

Example:
    >>> [name for name, _ in STEPS]  # doctest: +NORMALIZE_WHITESPACE
    ['repair the history', 'compact and cut', 'user turn and request rules',
     'plan again for what the rules added', 'last resort', 'provider state', 'summary job']
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from langchain_context_governance._reasoning import (
    carries_bound_reasoning,
    without_bound_reasoning,
)
from langchain_context_governance.offload import Offload
from langchain_context_governance.passes._names import (
    ALTERNATION,
    BACKFILL,
    DROP_ORPHANS,
    MICROCOMPACT,
    PASS_NAMES,
    PROVIDER_RULES,
    SNIP,
    TRUNCATE,
)
from langchain_context_governance.passes.alternation import (
    enforce_role_alternation_with_count,
    guarantee_user_turn,
)
from langchain_context_governance.passes.backfill import backfill_missing_tool_results_with_count
from langchain_context_governance.passes.orphans import drop_orphan_tool_results_with_count
from langchain_context_governance.passes.snip import snip_history_with_count
from langchain_context_governance.policy.compaction import (
    ResultCompaction,
    compact_all_but_newest,
)
from langchain_context_governance.policy.last_resort import BudgetFit, fit_to_budget
from langchain_context_governance.policy.summary_job import SummaryJob, summary_job, summary_size
from langchain_context_governance.report import GovernanceReport
from langchain_context_governance.rules.profile import Profile
from langchain_context_governance.state.binding import (
    StaleReasoning,
    turns_around_compaction,
    without_messages,
)
from langchain_context_governance.state.cache_aware import CompactionPlan
from langchain_context_governance.state.conversation import ConversationState
from langchain_context_governance.state.record import PreviousRequest
from langchain_context_governance.state.repair_stream import RepairedHistory, StreamRead
from langchain_context_governance.tokens.calibration import Calibration, Overflow
from langchain_context_governance.tokens.counter import MessageTokenCounter

__all__ = ["FALLBACK_STEPS", "STEPS", "Call", "Pipeline", "Step"]


PassFunction = Callable[[list[BaseMessage]], tuple[list[BaseMessage], int | Mapping[str, int]]]
"""A repair of a whole list: the messages and how many it changed, or counts per pass."""


@dataclass
class Call:
    """One governance call as the steps fill it in: what it was given, then what each
    step made."""

    state: ConversationState
    # The caller's messages (their contents checked) and what the call sends beside them.
    messages: list[BaseMessage]
    fixed_tokens: int
    overflows: Sequence[Overflow] = ()
    # With `offload`, what steps 2 and 5 take out of the request is kept here (offload/).
    offload: Offload | None = None
    read: StreamRead | None = None
    plan: CompactionPlan | None = None
    request: list[BaseMessage] = field(default_factory=list)
    # What steps 3 changed (counts per pass name).
    made: dict[str, int] = field(default_factory=dict)
    # The conversation's previous request before this call (step 4 plans again from it).
    previous_request: PreviousRequest | None = None
    # The request the last resort was given, and what it did (None where it did not run).
    before_last_resort: list[BaseMessage] = field(default_factory=list)
    fit: BudgetFit | None = None
    # Input indices of the messages whose bound reasoning step 6 left out.
    reasoning_dropped: tuple[int, ...] = ()
    summary_job: SummaryJob | None = None

    @property
    def history(self) -> RepairedHistory:
        assert self.read is not None
        return self.read.history

    def changes(self) -> dict[str, int]:
        """What the steps changed, per pass name."""
        assert self.read is not None
        changes = dict(self.read.changes)
        if self.plan is not None:
            changes[MICROCOMPACT] = self.plan.compacted
            changes[SNIP] = self.plan.removed
        for name, count in self.made.items():
            changes[name] = changes.get(name, 0) + count
        if self.fit is not None:
            changes[MICROCOMPACT] = changes.get(MICROCOMPACT, 0) + len(self.fit.compacted)
            changes[TRUNCATE] = len(self.fit.truncated)
        return changes


Step = Callable[["Pipeline", Call], None]
"""A step: reads what the steps before it made in the call, and adds its own."""


@dataclass(frozen=True)
class Pipeline:
    """The steps with what they need from the settings: the budget, the counter, the
    provider profile, the compaction and its policy, resolved once per governor."""

    budget: int | None
    counter: MessageTokenCounter
    profile: Profile
    compaction: ResultCompaction
    compaction_mode: str
    pin_task: bool
    on_over_budget: str
    summarizes: bool

    def run(self, call: Call) -> None:
        """Every step of `STEPS`, in order."""
        for _, step in STEPS:
            step(self, call)

    def calibration_for(
        self, plan: CompactionPlan | None, overflows: Sequence[Overflow]
    ) -> Calibration:
        """The calibration a call compares with thresholds: the replay's (learned from the
        history), else what this call's refusals for length taught."""
        if plan is not None and self.compaction_mode == "cache_aware":
            return plan.calibration
        calibration = Calibration()
        for overflow in overflows:
            budget = self.budget if self.budget is not None else overflow.estimate_tokens
            calibration = calibration.observe_overflow(overflow, budget=budget)
        return calibration

    def request_tokens(self, messages: Sequence[BaseMessage], fixed_tokens: int) -> int:
        """Tokens of a request of `messages` whose overhead and tools take `fixed_tokens`."""
        overhead = self.counter.request_overhead
        return self.counter.count_messages(messages) - overhead + fixed_tokens

    def minimal_repair(
        self, messages: list[BaseMessage]
    ) -> tuple[list[BaseMessage], dict[str, int]]:
        """`FALLBACK_STEPS` and the user turn, with no state: what is sent where a step
        failed on input nobody foresaw."""
        changes: dict[str, int] = {}
        repaired = messages
        for name, repair in (*FALLBACK_STEPS, (PROVIDER_RULES, self.profile.repair)):
            repaired, changed = repair(repaired)
            counts = changed if isinstance(changed, Mapping) else {name: changed}
            for pass_name, count in counts.items():
                changes[pass_name] = changes.get(pass_name, 0) + count
        has_conversation = any(not isinstance(message, ToolMessage) for message in messages)
        repaired, added = guarantee_user_turn(repaired, has_conversation=has_conversation)
        changes[ALTERNATION] = changes.get(ALTERNATION, 0) + added
        return repaired, changes

    def changes_by_pass(self, changes: Mapping[str, int]) -> dict[str, int]:
        """Every pass that ran, in pipeline order, with its count (0 where it changed
        nothing); without a budget nothing compacts, cuts or truncates (repairs only)."""
        budget_passes = (MICROCOMPACT, SNIP, TRUNCATE)
        return {
            name: changes.get(name, 0)
            for name in PASS_NAMES
            if self.budget is not None or name not in budget_passes or changes.get(name)
        }


def repair_history(pipeline: Pipeline, call: Call) -> None:
    """Step 1: the history repaired group by group (see state/repair_stream.py)."""
    call.previous_request = call.state.previous_request
    call.read = call.state.read(call.messages)


def compact_and_cut(pipeline: Pipeline, call: Call, *, rules_tokens: int = 0) -> None:
    """Step 2: compaction and cuts; no plan without a budget (repairs only).
    `rules_tokens`: what step 3 adds to this call's request (step 4)."""
    if pipeline.budget is None:
        return
    history = call.history
    call.plan = call.state.plan(
        history,
        fixed_tokens=call.fixed_tokens,
        overflows=call.overflows,
        rules_tokens=rules_tokens,
        offload=call.offload,
    )
    if call.plan is None:
        call.plan = _keep_recent_plan(pipeline, call)


def _keep_recent_plan(pipeline: Pipeline, call: Call) -> CompactionPlan:
    """The `compaction="keep_recent"` policy: microcompact, then snip to the budget."""
    assert pipeline.budget is not None and call.read is not None
    compacted, compacted_count = compact_all_but_newest(
        call.history.to_list(), pipeline.compaction, offload=call.offload
    )
    calibration = pipeline.calibration_for(None, call.overflows)
    snipped, removed = snip_history_with_count(
        compacted,
        max_tokens=max(calibration.limit(pipeline.budget), 1),
        counter=pipeline.counter,
        tools_tokens=call.fixed_tokens - pipeline.counter.request_overhead,
        pin_task=pipeline.pin_task,
    )
    return CompactionPlan(
        messages=snipped,
        compacted=compacted_count,
        removed=removed,
        tokens_before=call.fixed_tokens + call.read.raw_tokens,
        tokens_after=pipeline.request_tokens(snipped, call.fixed_tokens),
    )


def user_turn_and_rules(pipeline: Pipeline, call: Call) -> None:
    """Step 3: the request's user turn guaranteed, then the provider rules that need the
    whole request, deciding only what is new where the conversation's previous request
    needed no repair (rules/continued.py)."""
    plan = call.plan
    request = call.history.to_list() if plan is None else plan.messages
    has_conversation = any(not isinstance(message, ToolMessage) for message in call.messages)
    request, added = guarantee_user_turn(request, has_conversation=has_conversation)
    continued = call.state.request_repairs
    if continued is None:
        request, made = pipeline.profile.repair(request)
    elif plan is None or request is not plan.messages:
        request, made = continued.repair(request, prints=None)
    else:
        request, made = continued.repair(
            request, prints=plan.fingerprints, unchanged=plan.unchanged_prefix_messages
        )
    made[ALTERNATION] = made.get(ALTERNATION, 0) + added
    call.request, call.made = request, made


def plan_again_for_the_rules(pipeline: Pipeline, call: Call) -> None:
    """Step 4: where step 3 took a request the cache-aware replay made within budget over
    it (a tool loop written as text where its opening thinking was cut, a user turn
    added), the replay plans this call again with those tokens counted, and cuts what
    they need; step 3 then runs on that plan."""
    plan, budget = call.plan, pipeline.budget
    if plan is None or pipeline.compaction_mode != "cache_aware" or call.request is plan.messages:
        return
    assert budget is not None
    calibration = pipeline.calibration_for(plan, call.overflows)
    if calibration.corrected(plan.tokens_after) > budget:
        return
    tokens = pipeline.request_tokens(call.request, call.fixed_tokens)
    if calibration.corrected(tokens) <= budget:
        return
    call.state.previous_request = call.previous_request
    compact_and_cut(pipeline, call, rules_tokens=tokens - plan.tokens_after)
    user_turn_and_rules(pipeline, call)


def last_resort(pipeline: Pipeline, call: Call) -> None:
    """Step 5: where the request is over budget, compact and cut text (policy/last_resort.py).

    It aims at the budget, and acts only above it: a request within budget is sent as it
    is. Governing the governed request again changes nothing: it is within budget, so this
    step leaves it alone, and the replay finds nothing left to cut in it (what was left
    before the cut is protected, and a cut that would leave nothing out is no cut), nor to
    compact (the last resort compacted all it could). Counts are corrected by the
    calibration.
    """
    call.before_last_resort = call.request
    budget, plan = pipeline.budget, call.plan
    if budget is None or pipeline.on_over_budget == "warn":
        return
    if plan is not None and call.request is plan.messages:
        tokens = plan.tokens_after
    else:
        tokens = pipeline.request_tokens(call.request, call.fixed_tokens)
    calibration = pipeline.calibration_for(plan, call.overflows)
    if calibration.corrected(tokens) <= budget:
        return
    call.fit = fit_to_budget(
        call.request,
        max_tokens=max(calibration.limit(budget), 1),
        counter=pipeline.counter,
        tools_tokens=call.fixed_tokens - pipeline.counter.request_overhead,
        compaction=pipeline.compaction,
        pin_task=pipeline.pin_task,
        offload=call.offload,
    )
    call.request = call.fit.messages


def provider_state(pipeline: Pipeline, call: Call) -> None:
    """Step 6: what the provider checks of its own state (state/binding.py). Where it takes
    its compaction block first (Anthropic), the user turns the repairs put around it go.
    Where it binds reasoning to its prefix, the bound reasoning of every message whose
    prefix changed since its call is left out, on purpose: by the decisions of the replay,
    or wherever the request differs from the repaired history before it; and wherever
    steps 3 to 5 changed the request. `call.reasoning_dropped` gets the indices of those
    messages among the caller's."""
    profile, plan, history = pipeline.profile, call.plan, call.history
    if not profile.bindings and not profile.compactions:
        return
    if plan is not None and plan.origins:
        stale = StaleReasoning.of_replay(
            plan.messages, plan.origins, plan.reasoning_left_out, plan.reasoning_candidates()
        )
    else:
        repaired = history.to_list()
        stale = StaleReasoning.of_repaired(repaired if plan is None else plan.messages, repaired)
    if profile.compactions:
        call.request = without_messages(call.request, turns_around_compaction(call.request))
        stale = stale.without(turns_around_compaction(stale.planned))
    if not profile.bindings:
        return
    copies = call.state.reasoning_copies

    def stripped(message: AIMessage, position: int | None) -> AIMessage:
        if position is None or history[position] is not message:
            return without_bound_reasoning(message)
        copy: AIMessage | None = copies.get(position, (position,), history)
        if copy is None:
            copy = without_bound_reasoning(message)
            copies.put(position, (position,), history, copy)
        return copy

    call.request, positions = stale.leave_out(call.request, stripped)
    given = call.messages
    call.reasoning_dropped = tuple(
        sorted(
            {
                index
                for position in positions
                for index in history.input_indices(position)
                if carries_bound_reasoning(given[index])
            }
        )
    )


def find_summary_job(pipeline: Pipeline, call: Call) -> None:
    """Step 7: what the summary of this call's cut is made of, where one is wanted and
    missing, and the note has room to send one (the governor asks the summary model,
    then runs the steps again); no longer than that room."""
    plan = call.plan
    if not pipeline.summarizes or plan is None or plan.cut == 0 or plan.omitted == 0:
        return
    assert pipeline.budget is not None
    size = summary_size(budget=pipeline.budget, room=plan.summary_room)
    if size is None:
        # A summary the request could not carry is not asked for (policy/summary_job.py).
        return
    call.summary_job = summary_job(call.state.summary, call.history, cut=plan.cut, max_tokens=size)


STEPS: tuple[tuple[str, Step], ...] = (
    ("repair the history", repair_history),
    ("compact and cut", compact_and_cut),
    ("user turn and request rules", user_turn_and_rules),
    ("plan again for what the rules added", plan_again_for_the_rules),
    ("last resort", last_resort),
    ("provider state", provider_state),
    ("summary job", find_summary_job),
)
"""The steps of every call, in order (see the module doc)."""

FALLBACK_STEPS: tuple[tuple[str, PassFunction], ...] = (
    (DROP_ORPHANS, drop_orphan_tool_results_with_count),
    (BACKFILL, backfill_missing_tool_results_with_count),
    (ALTERNATION, enforce_role_alternation_with_count),
)
"""The repairs of a whole list with no state, then the profile's rules (`minimal_repair`)."""


def report_of(
    pipeline: Pipeline,
    original: list[BaseMessage],
    governed: list[BaseMessage],
    changes: Mapping[str, int],
    call: Call | None,
    *,
    fixed_tokens: int,
    calibration: Calibration,
    dropped: tuple[int, ...] = (),
) -> GovernanceReport:
    """The report: token figures from what this call measured where it did, and which
    messages (by input index) were compacted, cut, truncated or kept by protection;
    `call` is None where the steps failed and the fallback was sent (which left out the
    reasoning of `dropped`)."""
    plan = call.plan if call is not None else None
    if call is None or call.read is None:
        tokens_before = pipeline.request_tokens(original, fixed_tokens)
    else:
        tokens_before = fixed_tokens + call.read.raw_tokens
    if plan is not None and plan.messages is governed:
        tokens_after = plan.tokens_after
    else:
        tokens_after = pipeline.request_tokens(governed, fixed_tokens)
    details: dict[str, Any] = {} if call is None else _fates(original, call)
    return GovernanceReport(
        tokens_before=tokens_before,
        tokens_after=tokens_after,
        budget=pipeline.budget,
        changes=pipeline.changes_by_pass(changes),
        messages_before=len(original),
        messages_after=len(governed),
        fell_back=call is None,
        unchanged_prefix_messages=plan.unchanged_prefix_messages if plan else None,
        unchanged_prefix_tokens=plan.unchanged_prefix_tokens if plan else None,
        calibration_factor=calibration.factor,
        profile=pipeline.profile.name,
        reasoning_dropped=call.reasoning_dropped if call is not None else dropped,
        **details,
    )


def _fates(original: list[BaseMessage], call: Call) -> dict[str, Any]:
    """Which input messages the call compacted, cut, truncated or kept by protection.

    Positions of the repaired history are mapped to the caller's indices; the work is
    bounded by what the request holds and what was kept, not by what was cut.
    """
    history, plan, fit = call.history, call.plan, call.fit
    figures: dict[str, Any] = {}
    compacted: set[int] = set()
    if plan is not None:
        compacted = {
            index
            for position in plan.compacted_positions
            for index in _input_indices(history, position)
            if isinstance(original[index], ToolMessage)
        }
        figures["kept"] = _kept_indices(history, plan.kept)
        if plan.omitted > 0:
            figures["cut"] = _cut_ranges(history, plan, len(original))
    if fit is not None and (fit.compacted or fit.truncated):
        sent = call.before_last_resort
        if plan is not None and sent is plan.messages and plan.origins:
            # Through the plan: a message it joined counts for every turn it holds.
            def indices(positions: tuple[int, ...]) -> set[int]:
                return {
                    index
                    for position in positions
                    for origin in plan.origins[position]
                    for index in history.input_indices(origin)
                }
        else:

            def indices(positions: tuple[int, ...]) -> set[int]:
                found = (_input_index(original, sent[position]) for position in positions)
                return {index for index in found if index is not None}

        compacted.update(indices(fit.compacted))
        figures["truncated"] = tuple(sorted(indices(fit.truncated)))
    if compacted:
        figures["compacted"] = tuple(sorted(compacted))
    return figures


def _kept_indices(
    history: RepairedHistory, kept: Sequence[tuple[int, str]]
) -> tuple[tuple[int, str], ...]:
    """The input indices of the messages a cut kept, each once, with its protection class."""
    found: dict[int, str] = {}
    for position, why in kept:
        for index in _input_indices(history, position):
            found.setdefault(index, why)
    return tuple(found.items())


def _input_indices(history: RepairedHistory, position: int) -> tuple[int, ...]:
    """`RepairedHistory.input_indices`, the common case first: most messages of a request
    came from the input as they are, and their own index is all there is to find."""
    own = history.source_index(position)
    return (own,) if own is not None else history.input_indices(position)


def _covered(history: RepairedHistory, position: int, total: int) -> range:
    """The input indices the repaired message at `position` stands for, as one range
    (`RepairedHistory.input_indices`); for a message the repairs added, the (empty) range
    between the nearest messages that stand for input ones."""
    indices = history.input_indices(position)
    if indices:
        return range(min(indices), max(indices) + 1)
    before = next(
        (max(found) for found in map(history.input_indices, range(position - 1, -1, -1)) if found),
        -1,
    )
    after = next(
        (
            min(found)
            for found in map(history.input_indices, range(position + 1, len(history)))
            if found
        ),
        total,
    )
    return range(before + 1, after)


def _cut_ranges(
    history: RepairedHistory, plan: CompactionPlan, total: int
) -> tuple[tuple[int, int], ...]:
    """The input ranges a cut left out: before the cut point, between what it kept."""
    source_index = history.source_index
    kept = sorted({position for position, _ in plan.kept})
    ranges: list[tuple[int, int]] = []
    start = 0
    for stop in [*kept, plan.cut]:
        if stop > start:
            # Where the messages at the range's ends came from the input as they are,
            # their own indices bound it (no look at what a repair made).
            first = source_index(start)
            if first is None:
                first = _covered(history, start, total).start
            last = source_index(stop - 1)
            last = _covered(history, stop - 1, total).stop if last is None else last + 1
            if last > first:
                ranges.append((first, last))
        start = stop + 1
    return tuple(ranges)


def _input_index(original: list[BaseMessage], message: BaseMessage) -> int | None:
    """The input index of `message`: the same object, or the input message with its id
    (a message the repairs joined keeps the id of its first turn). Only run for what the
    last resort changed, which is rare."""
    for index, candidate in enumerate(original):
        if candidate is message:
            return index
    if message.id is not None:
        for index, candidate in enumerate(original):
            if candidate.id == message.id:
                return index
    return None
