"""Token counters for chat requests, with a per-message cache; the bundled encodings."""

from langchain_context_governance.tokens.counter import (
    CacheStats,
    MessageTokenCounter,
    TokenCounterFallbackWarning,
    TokenCounterSpec,
    get_token_counter,
)

__all__ = [
    "CacheStats",
    "MessageTokenCounter",
    "TokenCounterFallbackWarning",
    "TokenCounterSpec",
    "get_token_counter",
]
