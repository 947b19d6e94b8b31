"""What `ContextGovernor.from_model` reads from a chat model, without touching the network.

The window and the output reservation come from the model's profile, the token counter
from its class, and the provider profile (the rules its API enforces) from the package
and class of the model: langchain-anthropic is "anthropic", langchain-openai "openai"
when it talks to OpenAI's own API, and so on (`provider_for_model`). The packages are
recognised by module name, never imported, so a package that is not installed costs
nothing.

Example:
    >>> from langchain_context_governance.testing import ScriptedChatModel
    >>> model = ScriptedChatModel([], provider="mistral", max_input_tokens=32_000)
    >>> settings = settings_for_model(model)
    >>> settings["provider"], settings["context_window_tokens"]
    ('mistral', 32000)
"""

from __future__ import annotations

import contextlib
import logging
import threading
import weakref
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from langchain_core.language_models import BaseLanguageModel
from langchain_core.runnables import Runnable, RunnableBinding

from langchain_context_governance._model_classes import (
    PROVIDER_OF_PACKAGE,
    classes_to_read,
    is_configurable_model,
    package_of,
)
from langchain_context_governance.tokens.counter import counter_spec_for_model

__all__ = [
    "ProviderChoice",
    "chat_model_from_string",
    "provider_for_model",
    "settings_for_model",
    "unwrap_model",
]

logger = logging.getLogger(__name__)

# The profile for a model nothing is known about: every hosted API's rules at once.
UNKNOWN_MODEL_PROVIDER = "strict"
# The share of the window reserved for the answer when a model's output limit is not
# below its window (Mistral's profiles list both as 262,144).
OUTPUT_SHARE_OF_WINDOW = 4
_OPENAI_HOSTS = frozenset({"api.openai.com"})
# Zhipu's OpenAI-compatible endpoints (BigModel in China, Z.ai elsewhere).
_ZHIPU_HOSTS = frozenset({"open.bigmodel.cn", "api.z.ai"})
# Bedrock model ids name their family first, after an optional inference-profile region.
_BEDROCK_FAMILIES = {"anthropic": "anthropic", "mistral": "mistral"}
# Said once per model (the output reservation), not on every call.
_logged: set[str] = set()
_logged_lock = threading.Lock()


def _log_once(key: str, message: str, *args: Any) -> None:
    with _logged_lock:
        if key in _logged:
            return
        _logged.add(key)
    logger.info(message, *args)


# The model built from a "provider:model" string is only read (profile, name, max_tokens),
# never called; its integration may insist on a key at construction, so it gets this one.
_PLACEHOLDER_API_KEY = "unused-context-governance-profile-lookup"


def chat_model_from_string(model: str) -> Runnable[Any, Any]:
    """The chat model `langchain.chat_models.init_chat_model(model)` builds, only to read it.

    Needs `langchain` (the `agents` extra) and the provider's integration package.
    """
    try:
        from langchain.chat_models import init_chat_model
    except ImportError as error:
        raise ImportError(
            f"reading the model {model!r} needs langchain's init_chat_model: "
            'pip install "langchain-context-governance[agents]", or pass a chat model object'
        ) from error
    try:
        built: Runnable[Any, Any] = init_chat_model(model, api_key=_PLACEHOLDER_API_KEY)
    except ImportError as error:
        raise ImportError(f"model {model!r}: {_first_line(error)}") from error
    except (ValueError, TypeError) as error:
        raise ValueError(f"model {model!r}: {_first_line(error)}") from error
    return built


def _first_line(error: Exception) -> str:
    return str(error).splitlines()[0].rstrip(".") if str(error) else type(error).__name__


def unwrap_model(model: Runnable[Any, Any]) -> Runnable[Any, Any]:
    """The chat model behind `bind_tools` / `with_config` bindings."""
    while isinstance(model, RunnableBinding):
        model = model.bound
    return model


def bound_tools(model: Runnable[Any, Any]) -> list[Any]:
    """Tool definitions that `bind_tools` bound to the model; they are sent with each request."""
    while isinstance(model, RunnableBinding):
        tools = model.kwargs.get("tools")
        if tools:
            return list(tools)
        model = model.bound
    return []


@dataclass(frozen=True)
class ProviderChoice:
    """The provider profile picked for a model, and why (for the log and the docs)."""

    provider: str
    reason: str


def _host(url: Any) -> str | None:
    if url is None:
        return None
    host = urlsplit(str(url)).hostname
    return host.lower() if host else None


def _openai_choice(model: Any, class_name: str, *, chat_template: str | None) -> ProviderChoice:
    """ChatOpenAI: "openai" on OpenAI's API or Azure; "glm" on Zhipu's; else "strict"."""
    if class_name.startswith("Azure"):
        return ProviderChoice("openai", "Azure OpenAI (langchain-openai)")
    client = getattr(model, "root_client", None)
    host = _host(getattr(client, "base_url", None) or getattr(model, "openai_api_base", None))
    if host is None or host in _OPENAI_HOSTS:
        return ProviderChoice("openai", "langchain-openai on OpenAI's API")
    if host in _ZHIPU_HOSTS:
        return ProviderChoice("glm", f"langchain-openai on Zhipu's API ({host})")
    if chat_template is not None:
        return ProviderChoice("openai", f"langchain-openai on {host}, with its chat template")
    return ProviderChoice(
        UNKNOWN_MODEL_PROVIDER,
        f"langchain-openai on {host}, not OpenAI's API: an OpenAI-compatible server whose "
        "model's rules are unknown (pass chat_template=... or provider=...)",
    )


def _bedrock_choice(model: Any) -> ProviderChoice:
    """Bedrock: the family the model id names (after an inference-profile region)."""
    model_id = str(getattr(model, "model_id", None) or getattr(model, "model", None) or "")
    # An inference-profile ARN ends with the profile id.
    segments = model_id.rsplit("/", 1)[-1].split(".")
    for segment in segments[:2]:
        if segment in _BEDROCK_FAMILIES:
            return ProviderChoice(_BEDROCK_FAMILIES[segment], f"Bedrock model {model_id!r}")
    family = getattr(model, "provider", None)
    if isinstance(family, str) and family in _BEDROCK_FAMILIES:
        return ProviderChoice(_BEDROCK_FAMILIES[family], f"Bedrock model of {family!r}")
    return ProviderChoice(
        UNKNOWN_MODEL_PROVIDER, f"Bedrock model {model_id!r}, of a family without a profile"
    )


def _vertex_choice(class_name: str) -> ProviderChoice:
    if "Anthropic" in class_name:
        return ProviderChoice("anthropic", f"{class_name} (Claude on Vertex AI)")
    if "Mistral" in class_name:
        return ProviderChoice("mistral", f"{class_name} (Mistral on Vertex AI)")
    if class_name == "ChatVertexAI":
        return ProviderChoice("gemini", "langchain-google-vertexai")
    return ProviderChoice(UNKNOWN_MODEL_PROVIDER, f"{class_name} (a Vertex AI Model Garden model)")


def _choice_by_package(
    model: Any, cls: type, *, chat_template: str | None
) -> ProviderChoice | None:
    package, name = package_of(cls), cls.__name__
    if package in PROVIDER_OF_PACKAGE:
        return ProviderChoice(PROVIDER_OF_PACKAGE[package], package.replace("_", "-"))
    if package == "langchain_openai":
        return _openai_choice(model, name, chat_template=chat_template)
    if package == "langchain_google_vertexai":
        return _vertex_choice(name)
    if package == "langchain_aws":
        return _bedrock_choice(model)
    if "zhipu" in cls.__module__.lower() or "Zhipu" in name:
        return ProviderChoice("glm", f"{name} (Zhipu GLM)")
    if package == "langchain_context_governance":
        provider = getattr(model, "provider", None)
        if isinstance(provider, str):
            return ProviderChoice(provider, f"{name}(provider={provider!r})")
    return None


def provider_for_model(
    chat_model: Runnable[Any, Any], *, chat_template: str | None = None
) -> ProviderChoice:
    """The provider profile for `chat_model`, from its package and class (never imported).

    langchain-anthropic -> "anthropic"; langchain-google-genai and ChatVertexAI ->
    "gemini"; langchain-mistralai -> "mistral"; langchain-openai -> "openai" on OpenAI's
    API or Azure, "glm" on Zhipu's, "strict" on any other server unless `chat_template`
    is given (then "openai", with the template's rules); Zhipu's own clients -> "glm";
    Bedrock -> the family of the model id ("anthropic", "mistral", else "strict"); a
    model with a tokenizer chat template (ChatHuggingFace) -> "openai" with its template.
    Any other model, and a configurable one (`init_chat_model(configurable_fields=...)`,
    which picks its model per call), gets "strict". A subclass counts as its base class,
    unless it comes from another integration package (ChatDeepSeek builds on
    langchain-openai's base class but talks to another API).

    Example:
        >>> from langchain_core.language_models import GenericFakeChatModel
        >>> provider_for_model(GenericFakeChatModel(messages=iter([]))).provider
        'strict'
    """
    model = unwrap_model(chat_model)
    if is_configurable_model(model):
        return ProviderChoice(
            UNKNOWN_MODEL_PROVIDER,
            "a configurable model (init_chat_model(configurable_fields=...)) picks the model "
            "it calls on each call, so its class is not known when the governor is built",
        )
    template = chat_template or _tokenizer_chat_template(model)
    for cls in classes_to_read(type(model)):
        choice = _choice_by_package(model, cls, chat_template=template)
        if choice is not None:
            return choice
    name = type(model).__name__
    if template is not None:
        return ProviderChoice("openai", f"{name} with a tokenizer chat template")
    return ProviderChoice(
        UNKNOWN_MODEL_PROVIDER,
        f"{type(model).__module__}.{name} is not a model class whose API rules are known",
    )


def _tokenizer_chat_template(model: Any) -> str | None:
    # e.g. ChatHuggingFace: the tokenizer's Jinja chat template.
    chat_template = getattr(getattr(model, "tokenizer", None), "chat_template", None)
    return chat_template if isinstance(chat_template, str) else None


def settings_for_model(
    chat_model: Runnable[Any, Any],
    *,
    chat_template: str | None = None,
    provider: str | None = None,
) -> dict[str, Any]:
    """Governor settings read from `chat_model`: window, output, tools, counter, profile.

    The window is `profile["max_input_tokens"]` (absent when the profile has none); the
    output reservation is the model's own `max_tokens` where set, else
    `profile["max_output_tokens"]`, and a quarter of the window where that is not below
    the window (an INFO line says so). `provider` is the caller's where given, else
    `provider_for_model`'s pick (with `chat_template`, the one the caller will pass); where
    that is "strict" for want of knowing the model's API, one WARNING per model object says
    what the profile does and to pass `provider=`. `chat_template` is the tokenizer's,
    where the model has one.
    """
    model = unwrap_model(chat_model)
    profile = getattr(model, "profile", None) or {}
    settings: dict[str, Any] = {}
    tools = bound_tools(chat_model)
    if tools:
        settings["tools"] = tools
    if profile.get("max_input_tokens"):
        settings["context_window_tokens"] = int(profile["max_input_tokens"])
    max_tokens = getattr(model, "max_tokens", None)
    if isinstance(max_tokens, int) and not isinstance(max_tokens, bool) and max_tokens > 0:
        settings["max_output_tokens"] = max_tokens
    elif profile.get("max_output_tokens"):
        settings["max_output_tokens"] = int(profile["max_output_tokens"])
    _reserve_a_share_of_a_window_the_output_fills(settings, model_label(chat_model))
    if isinstance(model, BaseLanguageModel):
        settings["token_counter"] = counter_spec_for_model(model)
    own_template = _tokenizer_chat_template(model)
    if own_template is not None:
        settings["chat_template"] = own_template
    if provider is None:
        choice = provider_for_model(model, chat_template=chat_template)
        if choice.provider == UNKNOWN_MODEL_PROVIDER:
            _warn_strict_once_per_model(model, choice)
        provider = choice.provider
    settings["provider"] = provider
    return settings


# The models told about the strict profile (by id, holding each weakly: a chat model is
# a pydantic model, which cannot be hashed).
_warned_models: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()


def _warn_strict_once_per_model(model: Any, choice: ProviderChoice) -> None:
    """One WARNING per model object: the strict profile rewrites requests a great deal."""
    with _logged_lock:
        if _warned_models.get(id(model)) is model:
            return
        with contextlib.suppress(TypeError):  # an object without weak references: each time
            _warned_models[id(model)] = model
    logger.warning(
        "context governance: %s; its requests are held to the %r profile, which applies "
        "every provider's rules at once: it renames every tool-call id that is not 9 "
        "letters or digits (Mistral's rule), keeps one system message, first, and takes out "
        "what any hosted API refuses. Pass provider=... (for example provider='openai' for "
        "an OpenAI-compatible API) to ContextGovernor.from_model or the middleware to hold "
        "them to the rules of the API the model really uses.",
        choice.reason,
        choice.provider,
    )


def _reserve_a_share_of_a_window_the_output_fills(settings: dict[str, Any], label: str) -> None:
    """Where the output limit is not below the window, reserve a quarter of the window.

    A model's profile gives the most it can write, which for some models is its whole
    window (the API then shortens the answer to what is left); reserving all of it
    would leave no room for the request.
    """
    window = settings.get("context_window_tokens")
    output = settings.get("max_output_tokens")
    if window is None or output is None or output < window:
        return
    share = window // OUTPUT_SHARE_OF_WINDOW
    settings["max_output_tokens"] = share
    _log_once(
        f"output:{label}",
        "context governance: %s can write up to %d tokens, not less than its %d-token "
        "window; where max_output_tokens=N is not given, a quarter of the window (%d "
        "tokens) is reserved for the answer.",
        label,
        output,
        window,
        share,
    )


def model_label(chat_model: Runnable[Any, Any]) -> str:
    """A short name for messages: the model name where it has one, an Azure deployment's
    name where it has no model name, else its class."""
    model = unwrap_model(chat_model)
    name = getattr(model, "model_name", None) or getattr(model, "model", None)
    if isinstance(name, str):
        return f"{type(model).__name__}({name!r})"
    deployment = getattr(model, "deployment_name", None)
    if isinstance(deployment, str):
        return f"{type(model).__name__}(azure_deployment={deployment!r})"
    return type(model).__name__
