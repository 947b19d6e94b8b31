"""How far the "approximate" counter is from tiktoken, on real agent transcripts.

For the bundled sample transcript and every OpenAI-format JSON transcript in a folder
(default: the team's shared real trajectories, read where they are, never copied), the
whole request is counted with `token_counter="approximate"` (langchain-core's
`count_tokens_approximately`) and with `"tiktoken:o200k_base"` and `"tiktoken:cl100k_base"`.
The error is `approximate / tiktoken - 1`: positive means the approximation over-counts,
so a budget set with it trims early; negative means it under-counts, so a request it
lets through can still be too long.

tiktoken is the tokenizer of OpenAI models only; for Claude, Gemini or DeepSeek models it is
a reference point, not their count (their own count APIs need the network).

    python benchmarks/approximation.py [FOLDER]
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from langchain_core.messages import BaseMessage

from langchain_context_governance.tokens.counter import get_token_counter
from langchain_context_governance.transcripts import (
    TranscriptError,
    load_transcript,
    sample_transcript_path,
)

DEFAULT_FOLDER = Path("/work/shared/real-trajectories")
REFERENCES = ("o200k_base", "cl100k_base")


def errors(messages: list[BaseMessage]) -> tuple[int, dict[str, float]]:
    """Approximate tokens of the request, and its relative error against each encoding."""
    approximate = get_token_counter("approximate").count_messages(messages)
    found = {}
    for encoding in REFERENCES:
        exact = get_token_counter(f"tiktoken:{encoding}").count_messages(messages)
        found[encoding] = approximate / exact - 1
    return approximate, found


def transcripts(folder: Path) -> list[tuple[str, list[BaseMessage]]]:
    found = [("bundled sample_transcript.json", load_transcript(sample_transcript_path()).messages)]
    for path in sorted(folder.glob("*.json")):
        if path.name == "MANIFEST.json":
            continue
        try:
            found.append((path.name, load_transcript(path).messages))
        except TranscriptError as error:
            print(f"skipped: {error}")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", type=Path, default=DEFAULT_FOLDER)
    arguments = parser.parse_args()
    rows = transcripts(arguments.folder)
    print("| transcript | messages | approximate tokens | vs o200k_base | vs cl100k_base |")
    print("|---|---:|---:|---:|---:|")
    real: dict[str, list[float]] = {encoding: [] for encoding in REFERENCES}
    for name, messages in rows:
        approximate, found = errors(messages)
        cells = " | ".join(f"{found[encoding]:+.1%}" for encoding in REFERENCES)
        print(f"| {name} | {len(messages)} | {approximate:,} | {cells} |")
        if not name.startswith("bundled"):
            for encoding in REFERENCES:
                real[encoding].append(found[encoding])
    if not real[REFERENCES[0]]:
        return
    print(f"\nReal transcripts ({len(real[REFERENCES[0]])} files):")
    for encoding, values in real.items():
        print(
            f"- vs {encoding}: median {statistics.median(values):+.1%}, "
            f"min {min(values):+.1%}, max {max(values):+.1%}, "
            f"mean absolute {statistics.mean(abs(value) for value in values):.1%}"
        )


if __name__ == "__main__":
    main()
