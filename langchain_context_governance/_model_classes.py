"""Which integration package a chat model's class is recognised as, by module name only.

The provider profile (`model_settings.provider_for_model`) and the token counter
(`tokens.counter`) both read a model this way, so a class gets the same treatment from
both: a subclass counts as the class it extends, unless it comes from another integration
package (ChatDeepSeek builds on langchain-openai's base class but talks to another API).
No package is imported, so one that is not installed costs nothing.

Example:
    >>> from langchain_core.language_models import GenericFakeChatModel
    >>> from langchain_context_governance.testing import ScriptedChatModel
    >>> recognised_package(ScriptedChatModel)
    'langchain_context_governance'
    >>> recognised_package(GenericFakeChatModel) is None
    True
"""

from __future__ import annotations

# Integration packages whose API's rules a profile knows, by their top-level module.
PROVIDER_OF_PACKAGE = {
    "langchain_anthropic": "anthropic",
    "langchain_google_genai": "gemini",
    "langchain_mistralai": "mistral",
}
# Packages recognised too, whose profile depends on more than the package.
OTHER_KNOWN_PACKAGES = frozenset(
    {
        "langchain_openai",
        "langchain_google_vertexai",
        "langchain_aws",
        "langchain_huggingface",
        "langchain_community",
        "langchain_context_governance",
    }
)
KNOWN_PACKAGES = frozenset(PROVIDER_OF_PACKAGE) | OTHER_KNOWN_PACKAGES
# Where the class hierarchy stops being a model integration's.
_BASE_PACKAGES = frozenset({"langchain_core", "builtins", "pydantic", "abc", "typing"})


def package_of(cls: type) -> str:
    """The top-level module a class is defined in."""
    return cls.__module__.split(".", 1)[0]


def classes_to_read(model_class: type) -> list[type]:
    """The class of the model and the classes it extends, up to langchain-core's.

    Only the model's own class where it comes from an integration package this module
    does not know: that package talks to its own API through a known client's class.
    """
    package = package_of(model_class)
    if package.startswith("langchain_") and package not in KNOWN_PACKAGES:
        return [model_class]
    classes: list[type] = []
    for cls in model_class.__mro__:
        if package_of(cls) in _BASE_PACKAGES:
            break
        classes.append(cls)
    return classes


def recognised_package(model_class: type) -> str | None:
    """The known integration package `model_class` belongs to or extends, else None."""
    for cls in classes_to_read(model_class):
        if package_of(cls) in KNOWN_PACKAGES:
            return package_of(cls)
    return None


def is_configurable_model(model: object) -> bool:
    """True for what `init_chat_model(configurable_fields=...)` returns: a stand-in that
    builds the model it calls from each call's config, so no class is known before."""
    cls = type(model)
    return cls.__name__ == "_ConfigurableModel" and package_of(cls) == "langchain"
