"""The governance passes: one module per pass, each a pure function over a message list."""

from langchain_context_governance._added import SYNTHETIC_USER_CONTENT
from langchain_context_governance.passes.alternation import enforce_role_alternation
from langchain_context_governance.passes.backfill import (
    BACKFILL_CONTENT,
    backfill_missing_tool_results,
)
from langchain_context_governance.passes.microcompact import microcompact
from langchain_context_governance.passes.orphans import drop_orphan_tool_results
from langchain_context_governance.passes.snip import snip_history
from langchain_context_governance.passes.truncate import truncate_oversized_messages
from langchain_context_governance.policy.compaction import (
    DEFAULT_COMPACTABLE_TOOLS,
    DEFAULT_PLACEHOLDER,
)

__all__ = [
    "BACKFILL_CONTENT",
    "DEFAULT_COMPACTABLE_TOOLS",
    "DEFAULT_PLACEHOLDER",
    "SYNTHETIC_USER_CONTENT",
    "backfill_missing_tool_results",
    "drop_orphan_tool_results",
    "enforce_role_alternation",
    "microcompact",
    "snip_history",
    "truncate_oversized_messages",
]
