"""Protection classes: why a message stays when a request must give way, in one vocabulary.

A cut (the cache-aware policy) and the last resort (`policy/last_resort.py`) both keep what
matters most longest; they name it with these classes, and the report's `kept` reasons
are the same words. `LOWEST_FIRST` is the order in which classes give way: the last
resort cuts the text of a class only once cutting every class before it could not make
the request fit; a cut keeps the classes from `EARLIER_USER` up across it (the earlier
user messages and the results of excluded tools while they fit, the others always).

Example:
    >>> LOWEST_FIRST.index(EXCLUDED_TOOL) < LOWEST_FIRST.index(TASK)
    True
    >>> LOWEST_FIRST[: LOWEST_FIRST.index(EXCLUDED_TOOL)]
    ('rest', 'earlier-user')
"""

from __future__ import annotations

REST = "rest"
"""Everything else: older results, older assistant messages; it goes by age."""
EARLIER_USER = "earlier-user"
"""A user's message before the current turn (but the task): their own words."""
EXCLUDED_TOOL = "excluded-tool"
"""A result of one of `exclude_tools` (and, in a cut, the group it belongs to)."""
TASK = "task"
"""The conversation's first user message, pinned after the system messages."""
CURRENT_TURN = "current-turn"
"""The current turn's messages: the newest call's results the model has not seen yet."""
LATEST_USER = "latest-user"
"""The latest user message: what the user asks now."""
SYSTEM = "system"
"""The system messages: never cut."""

LOWEST_FIRST: tuple[str, ...] = (
    REST,
    EARLIER_USER,
    EXCLUDED_TOOL,
    TASK,
    CURRENT_TURN,
    LATEST_USER,
    SYSTEM,
)
