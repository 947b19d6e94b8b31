"""Keep every chat-model request of a LangChain/LangGraph agent legal and inside its window."""

from langchain_context_governance.governor import (
    ContextGovernor,
    GovernanceReport,
    GovernanceResult,
)
from langchain_context_governance.passes import (
    BACKFILL_CONTENT,
    DEFAULT_COMPACTABLE_TOOLS,
    SYNTHETIC_USER_CONTENT,
    backfill_missing_tool_results,
    drop_orphan_tool_results,
    enforce_role_alternation,
    microcompact,
    snip_history,
)
from langchain_context_governance.providers import PROVIDERS, Violation, validate_messages
from langchain_context_governance.tokens import (
    CacheStats,
    MessageTokenCounter,
    TokenCounterFallbackWarning,
    TokenCounterSpec,
    get_token_counter,
)

__all__ = [
    "BACKFILL_CONTENT",
    "DEFAULT_COMPACTABLE_TOOLS",
    "PROVIDERS",
    "SYNTHETIC_USER_CONTENT",
    "CacheStats",
    "ContextGovernor",
    "GovernanceReport",
    "GovernanceResult",
    "MessageTokenCounter",
    "TokenCounterFallbackWarning",
    "TokenCounterSpec",
    "Violation",
    "backfill_missing_tool_results",
    "drop_orphan_tool_results",
    "enforce_role_alternation",
    "get_token_counter",
    "microcompact",
    "snip_history",
    "validate_messages",
]
