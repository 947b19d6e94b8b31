"""Keep every chat-model request of a LangChain/LangGraph agent legal and inside its window."""

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _installed_version
from typing import TYPE_CHECKING, Any

from langchain_context_governance.errors import ContextBudgetExceeded
from langchain_context_governance.governor import ContextGovernor
from langchain_context_governance.offload import (
    MAX_BYTES_PER_THREAD,
    BoundedMemoryStore,
    OffloadStore,
    read_context_tool,
)
from langchain_context_governance.passes import (
    BACKFILL_CONTENT,
    DEFAULT_COMPACTABLE_TOOLS,
    DEFAULT_PLACEHOLDER,
    SYNTHETIC_USER_CONTENT,
    backfill_missing_tool_results,
    drop_orphan_tool_results,
    enforce_role_alternation,
    microcompact,
    snip_history,
    truncate_oversized_messages,
)
from langchain_context_governance.policy.note import cut_note
from langchain_context_governance.report import GovernanceReport, GovernanceResult
from langchain_context_governance.rules import (
    PROVIDERS,
    Violation,
    apply_provider_rules,
    validate_messages,
)
from langchain_context_governance.state.cache_aware import compact_in_batches
from langchain_context_governance.state.summary import DEFAULT_SUMMARY_PROMPT
from langchain_context_governance.tokens import (
    CacheStats,
    MessageTokenCounter,
    TokenCounterFallbackWarning,
    TokenCounterSpec,
    get_token_counter,
)

try:
    __version__ = _installed_version("langchain-context-governance")
except PackageNotFoundError:  # a source tree on sys.path, not installed
    __version__ = "0+unknown"
"""The installed distribution's version (PEP 440); "0+unknown" where it is not installed."""

__all__ = [
    "BACKFILL_CONTENT",
    "DEFAULT_COMPACTABLE_TOOLS",
    "DEFAULT_PLACEHOLDER",
    "DEFAULT_SUMMARY_PROMPT",
    "MAX_BYTES_PER_THREAD",
    "PROVIDERS",
    "SYNTHETIC_USER_CONTENT",
    "BoundedMemoryStore",
    "CacheStats",
    "ContextBudgetExceeded",
    "ContextGovernor",
    "GovernanceReport",
    "GovernanceResult",
    "MessageTokenCounter",
    "OffloadStore",
    "TokenCounterFallbackWarning",
    "TokenCounterSpec",
    "Violation",
    "apply_provider_rules",
    "backfill_missing_tool_results",
    "compact_in_batches",
    "cut_note",
    "drop_orphan_tool_results",
    "enforce_role_alternation",
    "get_token_counter",
    "microcompact",
    "read_context_tool",
    "snip_history",
    "truncate_oversized_messages",
    "validate_messages",
]

if TYPE_CHECKING:
    from langchain_context_governance.middleware import (
        ContextGovernanceMiddleware as ContextGovernanceMiddleware,
    )


def __getattr__(name: str) -> Any:
    # The middleware needs langchain (the `agents` extra); import it only when asked for,
    # so the package itself imports without langchain.
    if name == "ContextGovernanceMiddleware":
        from langchain_context_governance.middleware import ContextGovernanceMiddleware

        return ContextGovernanceMiddleware
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
