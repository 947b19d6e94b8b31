"""The name of each pass, as the report's `changes` counts it: defined here once."""

from __future__ import annotations

DROP_ORPHANS = "drop_orphan_tool_results"
BACKFILL = "backfill_missing_tool_results"
MICROCOMPACT = "microcompact"
SNIP = "snip_history"
ALTERNATION = "enforce_role_alternation"
PROVIDER_RULES = "apply_provider_rules"
TRUNCATE = "truncate"
# In the order the pipeline runs them (the report lists them so).
PASS_NAMES = (DROP_ORPHANS, BACKFILL, MICROCOMPACT, SNIP, ALTERNATION, PROVIDER_RULES, TRUNCATE)
