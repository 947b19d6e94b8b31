"""Errors the package raises on purpose."""

from __future__ import annotations


class ContextBudgetExceeded(ValueError):
    """The governed request is still larger than the input budget after every reduction.

    Raised by `ContextGovernor(on_over_budget="raise")` where even the last resort
    (clearing every compactable result and cutting the text of the largest messages)
    cannot fit: the system messages, or the parts that are never cut, are too large.
    """

    def __init__(self, *, budget: int, tokens: int) -> None:
        self.budget = budget
        self.tokens = tokens
        super().__init__(
            f"the request takes {tokens:,} tokens, over the input budget of {budget:,} "
            "(context_window_tokens - max_output_tokens - safety_buffer) even after "
            "compaction, cutting and truncation"
        )


class ChatTemplateLimitExceeded(ValueError):
    """One render of a chat template took too long or produced too much; names the limit.

    Public as `langchain_context_governance.rules.templates.ChatTemplateLimitExceeded`.
    """
