"""Governance as a named run ("ContextGovernor") in LangChain's callbacks and LangSmith.

Every integration path (the Runnable, the LangGraph pre-model node, the middleware) governs
through `govern_in_run`, so a trace shows one child run per model call whose outputs hold
the governed messages and the report: tokens before and after, the budget, changes per
pass, the unchanged prefix.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import (
    ensure_config,
    get_async_callback_manager_for_config,
    get_callback_manager_for_config,
)

from langchain_context_governance.report import GovernanceReport, GovernanceResult, GovernorInput
from langchain_context_governance.state.conversation import thread_id_of
from langchain_context_governance.tokens.calibration import Overflow

__all__ = ["Governs", "agovern_in_run", "govern_in_run", "report_as_dict"]


class Governs(Protocol):
    """What the integrations call on a governor (`ContextGovernor` is one): they depend on
    this, not on the governor's module, so no import circle runs through them."""

    overflow_retries: int
    # A LangGraph BaseStore keeping records and offloaded content, or None.
    store: Any

    def govern(
        self,
        messages: GovernorInput,
        *,
        thread_id: str | None = None,
        tools: Sequence[Any] | None = None,
        record: Mapping[str, Any] | None = None,
        overflows: Sequence[Overflow] = (),
    ) -> GovernanceResult: ...

    async def agovern(
        self,
        messages: GovernorInput,
        *,
        thread_id: str | None = None,
        tools: Sequence[Any] | None = None,
        record: Mapping[str, Any] | None = None,
        overflows: Sequence[Overflow] = (),
    ) -> GovernanceResult: ...

    def get_name(self, suffix: str | None = None, *, name: str | None = None) -> str: ...


def report_as_dict(report: GovernanceReport) -> dict[str, Any]:
    """The report as plain JSON data (tuples as lists), `within_budget` and
    `corrected_tokens_after` included.

    Built field by field rather than with `dataclasses.asdict`, whose recursive copy costs
    more than the governance run itself on a report naming hundreds of messages.
    """
    data = {field.name: _plain(getattr(report, field.name)) for field in dataclasses.fields(report)}
    data["within_budget"] = report.within_budget
    data["corrected_tokens_after"] = report.corrected_tokens_after
    return data


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, tuple):
        return [list(item) if isinstance(item, tuple) else item for item in value]
    return value


def _run_outputs(result: GovernanceResult) -> dict[str, Any]:
    return {"messages": result.messages, "report": report_as_dict(result.report)}


def govern_in_run(
    governor: Governs,
    messages: GovernorInput,
    config: RunnableConfig | None = None,
    *,
    tools: Sequence[Any] | None = None,
    record: Mapping[str, Any] | None = None,
    overflows: Sequence[Overflow] = (),
) -> GovernanceResult:
    """`governor.govern(messages, tools=..., record=...)` as a chain run named after the
    governor.

    Without `config`, the run nests under the run that is current (a graph node, a
    middleware's model call), as LangChain's own runnables do. The conversation is the
    config's LangGraph thread.
    """
    config = ensure_config(config)
    run_manager = get_callback_manager_for_config(config).on_chain_start(
        None,
        {"messages": messages},
        name=config.get("run_name") or governor.get_name(),
        run_id=config.pop("run_id", None),
    )
    try:
        result = governor.govern(
            messages,
            thread_id=thread_id_of(config),
            tools=tools,
            record=record,
            overflows=overflows,
        )
    except BaseException as error:
        run_manager.on_chain_error(error)
        raise
    run_manager.on_chain_end(_run_outputs(result))
    return result


async def agovern_in_run(
    governor: Governs,
    messages: GovernorInput,
    config: RunnableConfig | None = None,
    *,
    tools: Sequence[Any] | None = None,
    record: Mapping[str, Any] | None = None,
    overflows: Sequence[Overflow] = (),
) -> GovernanceResult:
    """`govern_in_run` for async callers: async callback handlers are awaited."""
    config = ensure_config(config)
    run_manager = await get_async_callback_manager_for_config(config).on_chain_start(
        None,
        {"messages": messages},
        name=config.get("run_name") or governor.get_name(),
        run_id=config.pop("run_id", None),
    )
    try:
        result = await governor.agovern(
            messages,
            thread_id=thread_id_of(config),
            tools=tools,
            record=record,
            overflows=overflows,
        )
    except BaseException as error:
        await run_manager.on_chain_error(error)
        raise
    await run_manager.on_chain_end(_run_outputs(result))
    return result
