"""Token counters for chat requests, with a per-message cache; the bundled encodings; the
calibration learned from the provider's reported counts."""

from langchain_context_governance.tokens.calibration import Calibration, Overflow
from langchain_context_governance.tokens.counter import (
    CacheStats,
    MessageTokenCounter,
    TokenCounterFallbackWarning,
    TokenCounterSpec,
    get_token_counter,
)

__all__ = [
    "CacheStats",
    "Calibration",
    "MessageTokenCounter",
    "Overflow",
    "TokenCounterFallbackWarning",
    "TokenCounterSpec",
    "get_token_counter",
]
