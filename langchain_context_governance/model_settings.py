"""What `ContextGovernor.from_model` reads from a chat model, without touching the network."""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseLanguageModel
from langchain_core.runnables import Runnable, RunnableBinding

from langchain_context_governance.tokens.counter import counter_spec_for_model

__all__ = ["chat_model_from_string", "settings_for_model", "unwrap_model"]

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


def settings_for_model(chat_model: Runnable[Any, Any]) -> dict[str, Any]:
    """Governor settings read from `chat_model`: window, output, tools, counter, template.

    The window is `profile["max_input_tokens"]` (absent when the profile has none); the
    output reservation is the model's own `max_tokens` where set, else
    `profile["max_output_tokens"]`.
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
    if isinstance(model, BaseLanguageModel):
        settings["token_counter"] = counter_spec_for_model(model)
    # e.g. ChatHuggingFace: the tokenizer's Jinja chat template.
    chat_template = getattr(getattr(model, "tokenizer", None), "chat_template", None)
    if isinstance(chat_template, str):
        settings["chat_template"] = chat_template
    return settings


def model_label(chat_model: Runnable[Any, Any]) -> str:
    """A short name for messages: the model name where it has one, else its class."""
    model = unwrap_model(chat_model)
    name = getattr(model, "model_name", None) or getattr(model, "model", None)
    return f"{type(model).__name__}({name!r})" if isinstance(name, str) else type(model).__name__
