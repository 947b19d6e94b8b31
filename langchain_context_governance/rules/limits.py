"""The providers' limits on tool-call ids and tool names, each defined once.

The checks and the repairs of `rules/ids.py` both read these, so a limit cannot be
checked one way and repaired another.

Example:
    >>> accepts_anthropic_id("toolu_01"), accepts_anthropic_id("functions.grep:0")
    (True, False)
    >>> accepts_nine_character_id("a1B2c3D4e")
    True
    >>> accepts_tool_name("web search")
    False
"""

from __future__ import annotations

import re

__all__ = [
    "ANTHROPIC_TOOL_CALL_ID",
    "NINE_CHARACTER_TOOL_CALL_ID",
    "OPENAI_MAX_TOOL_CALL_ID_LENGTH",
    "TOOL_NAME",
    "TOOL_NAME_CHARACTER_NOT_ALLOWED",
    "TOOL_NAME_MAX_LENGTH",
    "accepts_anthropic_id",
    "accepts_nine_character_id",
    "accepts_openai_id",
    "accepts_tool_name",
]

# OpenAI: "Invalid 'messages[2].tool_calls[0].id': string too long. Expected a string with
# maximum length 40, but got a string with length 41 instead."
OPENAI_MAX_TOOL_CALL_ID_LENGTH = 40
# Anthropic: tool_use ids "String should match pattern '^[a-zA-Z0-9_-]+$'".
ANTHROPIC_TOOL_CALL_ID = re.compile(r"[a-zA-Z0-9_-]+")
# Mistral: "Tool call id was {id} but must be a-z, A-Z, 0-9, with a length of 9."
NINE_CHARACTER_TOOL_CALL_ID = re.compile(r"[a-zA-Z0-9]{9}")
# Mistral: "Function name was {name} but must be a-z, A-Z, 0-9, or contain underscores and
# dashes, with a maximum length of 64."
TOOL_NAME_MAX_LENGTH = 64
TOOL_NAME = re.compile(rf"[a-zA-Z0-9_-]{{1,{TOOL_NAME_MAX_LENGTH}}}")
TOOL_NAME_CHARACTER_NOT_ALLOWED = re.compile(r"[^a-zA-Z0-9_-]")


def accepts_openai_id(call_id: str) -> bool:
    return len(call_id) <= OPENAI_MAX_TOOL_CALL_ID_LENGTH


def accepts_anthropic_id(call_id: str) -> bool:
    return ANTHROPIC_TOOL_CALL_ID.fullmatch(call_id) is not None


def accepts_nine_character_id(call_id: str) -> bool:
    return NINE_CHARACTER_TOOL_CALL_ID.fullmatch(call_id) is not None


def accepts_tool_name(name: str) -> bool:
    return TOOL_NAME.fullmatch(name) is not None
