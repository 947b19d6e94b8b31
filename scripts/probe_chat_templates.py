"""Probe every chat template of a directory (llama.cpp's models/templates) as the governor does.

    python scripts/probe_chat_templates.py DIR

For each `*.jinja` file: the rules `ContextGovernor(chat_template=...)` adds for it, or why
it cannot be used, and how long the probe took; and whether the governed requests of the
bundled sample transcript (292 messages of a coding agent, whole and cut to an 8,000-token
window) render through it with no broken rule. Then how many templates pass both.
llama.cpp ships its templates in `models/templates/`; llama-cpp-python's source
distribution vendors the same tree under `vendor/llama.cpp/models/templates/`. Nothing is
downloaded here; the directory is read at run time and nothing of it is copied.
Exits 1 when any template cannot be used.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from langchain_core.messages import BaseMessage

from langchain_context_governance import ContextGovernor, validate_messages
from langchain_context_governance.rules.templates import rules_for_chat_template
from langchain_context_governance.transcripts import load_transcript, sample_transcript_path

WINDOWS = (None, 8_000)


def probe(directory: Path) -> int:
    """Print one line per template and a summary; the number of templates that fail."""
    paths = sorted(directory.glob("*.jinja"))
    history = load_transcript(sample_transcript_path()).messages
    failed = 0
    for path in paths:
        started = time.monotonic()
        try:
            verdict = _verdict(path.read_text(encoding="utf-8"), history)
        except (ValueError, UnicodeDecodeError) as error:
            verdict = f"REFUSED: {error}"
        failed += not verdict.startswith("rules")
        print(f"{time.monotonic() - started:6.2f} s  {path.name}: {verdict}")
    print(f"{len(paths) - failed} of {len(paths)} templates load and render governed requests")
    return failed


def _verdict(template: str, history: list[BaseMessage]) -> str:
    rules = rules_for_chat_template(template)
    for window in WINDOWS:
        governor = ContextGovernor(chat_template=template, context_window_tokens=window)
        broken = validate_messages(governor.invoke(history), chat_template=template)
        if broken:
            return f"BROKEN with window {window}: {broken[0]}"
    return f"rules: {', '.join(rules) or 'none beyond the profile'}"


def main() -> None:
    if len(sys.argv) != 2 or not Path(sys.argv[1]).is_dir():
        sys.exit("usage: python scripts/probe_chat_templates.py DIR")
    sys.exit(1 if probe(Path(sys.argv[1])) else 0)


if __name__ == "__main__":
    main()
