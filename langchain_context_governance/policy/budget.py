"""The budget checks and the task's share, shared by the policies that fit a request to a budget."""

from __future__ import annotations

from langchain_context_governance.tuning import TASK_SHARE_OF_BUDGET


def validate_max_tokens(max_tokens: int, *, setting: str = "max_tokens") -> None:
    if max_tokens <= 0:
        raise ValueError(f"{setting} must be > 0, got {max_tokens}")


def task_pin_limit(max_tokens: int) -> int:
    """Tokens the pinned task may take in a request of `max_tokens`."""
    return max(int(max_tokens * TASK_SHARE_OF_BUDGET), 1)
