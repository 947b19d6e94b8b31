"""The tiktoken encodings of OpenAI chat models, from files bundled with the package.

OpenAI's gpt-4o, gpt-4.1, gpt-4.5, gpt-5 and o-series models use ``o200k_base``; gpt-4 and
gpt-3.5 use ``cl100k_base``. tiktoken downloads these files on first use; this package
ships both (gzipped, 2.4 MB) and checks each against the sha256 tiktoken itself expects,
so exact counting works offline from a plain install and nothing is downloaded at run time.

Example:
    >>> encoding_name_for_model("gpt-4o-mini"), encoding_name_for_model("gpt-4")
    ('o200k_base', 'cl100k_base')
    >>> len(get_encoding("o200k_base").encode_ordinary("hello world"))
    2
"""

from __future__ import annotations

import base64
import functools
import gzip
import hashlib
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import tiktoken
import tiktoken.model

__all__ = [
    "ENCODING_NAMES",
    "encoding_name_for_model",
    "get_encoding",
    "write_tiktoken_cache",
]

_ENDOFTEXT = "<|endoftext|>"
_ENDOFPROMPT = "<|endofprompt|>"


@dataclass(frozen=True)
class _BundledEncoding:
    """What tiktoken's own constructor for the encoding holds, with our file in place of the URL.

    The pattern and special tokens are copied from ``tiktoken_ext.openai_public``; a test
    compares them with tiktoken's constructor.
    """

    name: str
    sha256: str
    pat_str: str
    special_tokens: Mapping[str, int]

    @property
    def file_name(self) -> str:
        return f"{self.name}.tiktoken"


_O200K_PATTERN = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
_CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+|"""
    r""" ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)

_BUNDLED: dict[str, _BundledEncoding] = {
    "o200k_base": _BundledEncoding(
        name="o200k_base",
        sha256="446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        pat_str=_O200K_PATTERN,
        special_tokens={_ENDOFTEXT: 199999, _ENDOFPROMPT: 200018},
    ),
    "cl100k_base": _BundledEncoding(
        name="cl100k_base",
        sha256="223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        pat_str=_CL100K_PATTERN,
        special_tokens={
            _ENDOFTEXT: 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            _ENDOFPROMPT: 100276,
        },
    ),
}

ENCODING_NAMES: tuple[str, ...] = tuple(_BUNDLED)
"""The encodings bundled with the package."""

# gpt-oss uses o200k_harmony: o200k_base plus special tokens, which plain text never encodes to.
_SAME_ORDINARY_ENCODING = {"o200k_harmony": "o200k_base"}
# Names tiktoken's table does not know yet, as langchain-openai maps them.
_O200K_PREFIXES = ("gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "gpt-6", "o1", "o3", "o4", "chatgpt-4o")
_CL100K_PREFIXES = ("gpt-4", "gpt-3.5", "gpt-35")

_LOCK = threading.Lock()


def encoding_name_for_model(model_name: str) -> str:
    """The bundled encoding an OpenAI model uses; ValueError for a model it cannot name.

    An encoding name is returned as it is; an ``openai:`` prefix is ignored.

    >>> encoding_name_for_model("openai:o3-mini")
    'o200k_base'
    """
    name = model_name.removeprefix("openai:").strip()
    if name in _BUNDLED:
        return name
    lowered = name.lower()
    try:
        found = tiktoken.model.encoding_name_for_model(lowered)
    except KeyError:
        found = None
    found = _SAME_ORDINARY_ENCODING.get(found or "", found)
    if found in _BUNDLED:
        return found
    if lowered.startswith(_O200K_PREFIXES):
        return "o200k_base"
    if lowered.startswith(_CL100K_PREFIXES):
        return "cl100k_base"
    raise ValueError(
        f"no bundled tiktoken encoding is known for model {model_name!r}; name an OpenAI "
        f"model or one of {', '.join(ENCODING_NAMES)}"
    )


def get_encoding(name: str) -> tiktoken.Encoding:
    """The tiktoken encoding `name` (one of `ENCODING_NAMES`), loaded once from the package."""
    if name not in _BUNDLED:
        raise ValueError(f"encoding must be one of {', '.join(ENCODING_NAMES)}, got {name!r}")
    with _LOCK:
        return _load(name)


@functools.cache
def _load(name: str) -> tiktoken.Encoding:
    bundled = _BUNDLED[name]
    return tiktoken.Encoding(
        name=bundled.name,
        pat_str=bundled.pat_str,
        mergeable_ranks=_mergeable_ranks(_bundled_bytes(bundled)),
        special_tokens=dict(bundled.special_tokens),
    )


def _bundled_bytes(bundled: _BundledEncoding) -> bytes:
    path = resources.files("langchain_context_governance") / "data" / "encodings"
    data = gzip.decompress((path / f"{bundled.file_name}.gz").read_bytes())
    if hashlib.sha256(data).hexdigest() != bundled.sha256:
        raise ValueError(f"the bundled {bundled.file_name} does not match its sha256")
    return data


def _mergeable_ranks(data: bytes) -> dict[bytes, int]:
    # tiktoken.load.load_tiktoken_bpe parses the same "base64-token rank" lines, but it also
    # copies any file it reads into tiktoken's cache directory; reading ours must not write.
    ranks: dict[bytes, int] = {}
    for line in data.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def write_tiktoken_cache(directory: str | os.PathLike[str]) -> list[Path]:
    """Put the bundled files where tiktoken looks for its downloads; return the paths written.

    With ``TIKTOKEN_CACHE_DIR`` set to `directory`, tiktoken itself, and so
    ``ChatOpenAI.get_num_tokens_from_messages``, loads both encodings offline. tiktoken
    names a cached file by the sha1 of the URL it would download, which is read here from
    tiktoken's own encoding constructors.
    """
    target = Path(directory)
    target.mkdir(parents=True, exist_ok=True)
    written = []
    for bundled in _BUNDLED.values():
        url = _tiktoken_download_url(bundled)
        path = target / hashlib.sha1(url.encode()).hexdigest()
        path.write_bytes(_bundled_bytes(bundled))
        written.append(path)
    return written


def _tiktoken_download_url(bundled: _BundledEncoding) -> str:
    from tiktoken_ext import openai_public

    constructor: Any = getattr(openai_public, bundled.name)
    constants = [value for value in constructor.__code__.co_consts if isinstance(value, str)]
    urls = [value for value in constants if value.endswith("/" + bundled.file_name)]
    if len(urls) != 1:
        raise RuntimeError(f"tiktoken's {bundled.name} constructor names no single file URL")
    return urls[0]
