"""tiktoken with the package's bundled encoding files against `bpe-openai`, offline.

For each of cl100k_base and o200k_base: the time to load the encoding, the time to encode
every text the "tiktoken" counter encodes in the bundled sample transcript (contents, tool
names and arguments, ids), and whether both give the same tokens for every text.

    python benchmarks/encodings.py [--repeat 20]

`bpe-openai` is an optional comparison (`pip install bpe-openai`); without it only tiktoken
is measured. Output is Markdown on stdout.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from langchain_context_governance.tokens.encodings import ENCODING_NAMES, get_encoding
from langchain_context_governance.tokens.encodings import _load as load_bundled
from langchain_context_governance.transcripts import load_transcript, sample_transcript_path


def transcript_texts(messages: list[BaseMessage]) -> list[str]:
    """Every text the tiktoken counter encodes for `messages`."""
    return [text for message in messages for text in _message_texts(message)]


def _message_texts(message: BaseMessage) -> Iterator[str]:
    yield message.type
    yield message.text
    if isinstance(message, AIMessage):
        for call in message.tool_calls:
            yield call["name"]
            yield json.dumps(call["args"], ensure_ascii=False)
    if isinstance(message, ToolMessage):
        yield message.tool_call_id


def _best_of(repeat: int, run: Callable[[], Any]) -> float:
    timings = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        timings.append(time.perf_counter() - started)
    return statistics.median(timings)


def _load_bpe_openai(name: str) -> Any | None:
    try:
        import bpe_openai
    except ImportError:
        return None
    return bpe_openai.get_encoding(name)


def measure(name: str, texts: list[str], repeat: int) -> list[str]:
    rows = []
    load_bundled.cache_clear()
    started = time.perf_counter()
    ours = get_encoding(name)
    tiktoken_load = time.perf_counter() - started
    encode_ours = _best_of(repeat, lambda: [ours.encode_ordinary(text) for text in texts])
    ours_tokens = [ours.encode_ordinary(text) for text in texts]
    total = sum(len(tokens) for tokens in ours_tokens)
    rows.append(
        f"| {name} | tiktoken + bundled file | {tiktoken_load * 1e3:.0f} ms | "
        f"{encode_ours * 1e3:.1f} ms | {total:,} | reference |"
    )
    started = time.perf_counter()
    theirs = _load_bpe_openai(name)
    bpe_load = time.perf_counter() - started
    if theirs is None:
        rows.append(f"| {name} | bpe-openai | not installed | | | |")
        return rows
    encode_theirs = _best_of(repeat, lambda: [theirs.encode_ordinary(text) for text in texts])
    theirs_tokens = [theirs.encode_ordinary(text) for text in texts]
    differing = sum(a != b for a, b in zip(ours_tokens, theirs_tokens, strict=True))
    equal = "equal" if differing == 0 else f"{differing} of {len(texts)} texts differ"
    rows.append(
        f"| {name} | bpe-openai | {bpe_load * 1e3:.0f} ms | {encode_theirs * 1e3:.1f} ms | "
        f"{sum(len(tokens) for tokens in theirs_tokens):,} | {equal} |"
    )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20, help="encode runs; the median is kept")
    arguments = parser.parse_args()
    messages = load_transcript(sample_transcript_path()).messages
    texts = transcript_texts(messages)
    characters = sum(len(text) for text in texts)
    print(
        f"Sample transcript: {len(messages)} messages, {len(texts)} texts, "
        f"{characters:,} characters; encode time is the median of {arguments.repeat} runs.\n"
    )
    print("| encoding | tokenizer | load | encode all texts | tokens | tokens vs tiktoken |")
    print("|---|---|---:|---:|---:|---|")
    for name in ENCODING_NAMES:
        for row in measure(name, texts, arguments.repeat):
            print(row)


if __name__ == "__main__":
    main()
