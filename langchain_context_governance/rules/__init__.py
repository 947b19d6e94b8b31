"""Provider and chat-template rules: each rule's check and repair, the profiles, the validator."""

from langchain_context_governance.rules.apply import apply_provider_rules
from langchain_context_governance.rules.profile import Profile, resolve_profile
from langchain_context_governance.rules.validate import PROVIDERS, Violation, validate_messages

__all__ = [
    "PROVIDERS",
    "Profile",
    "Violation",
    "apply_provider_rules",
    "resolve_profile",
    "validate_messages",
]
