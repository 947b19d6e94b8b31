"""Settings that fail loudly: an unknown keyword names itself and the setting it resembles."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def reject_unknown_settings(given: Iterable[str], known: Iterable[str], *, where: str) -> None:
    """Raise TypeError for the first name in `given` that is not in `known`.

    >>> reject_unknown_settings(["contex_window_tokens"], ["context_window_tokens"],
    ...     where="ContextGovernor")
    Traceback (most recent call last):
    ...
    TypeError: ContextGovernor got an unknown setting 'contex_window_tokens'; did you mean 'context_window_tokens'?
    """  # noqa: E501
    known_names = sorted(known)
    for name in given:
        if name in known_names:
            continue
        close = difflib.get_close_matches(name, known_names, n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"known: {', '.join(known_names)}"
        raise TypeError(f"{where} got an unknown setting {name!r}; {hint}")
