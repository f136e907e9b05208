"""Offline tiktoken encodings, verified against tiktoken's published sha256.

The rank files come from the ``bpe-openai`` wheel (a declared dependency), so nothing is
downloaded at run time. A file whose hash differs from tiktoken's is refused.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import importlib.util
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import tiktoken

from app.domain.tokens import TokenCounter

ENDOFTEXT = "<|endoftext|>"
FIM_PREFIX = "<|fim_prefix|>"
FIM_MIDDLE = "<|fim_middle|>"
FIM_SUFFIX = "<|fim_suffix|>"
ENDOFPROMPT = "<|endofprompt|>"


@dataclass(frozen=True)
class EncodingSpec:
    """What tiktoken's registry says about one encoding (tiktoken_ext.openai_public)."""

    name: str
    sha256: str
    pat_str: str
    special_tokens: dict[str, int]


O200K_PAT = "|".join(
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
CL100K_PAT = r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""  # noqa: E501 (tiktoken's pattern, verbatim)

SPECS: dict[str, EncodingSpec] = {
    "o200k_base": EncodingSpec(
        "o200k_base",
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        O200K_PAT,
        {ENDOFTEXT: 199999, ENDOFPROMPT: 200018},
    ),
    "cl100k_base": EncodingSpec(
        "cl100k_base",
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        CL100K_PAT,
        {
            ENDOFTEXT: 100257,
            FIM_PREFIX: 100258,
            FIM_MIDDLE: 100259,
            FIM_SUFFIX: 100260,
            ENDOFPROMPT: 100276,
        },
    ),
}


class RankFileError(RuntimeError):
    """A rank file is missing or does not match tiktoken's published hash."""


def rank_file_bytes(name: str) -> bytes:
    """The verified, uncompressed rank file of an encoding."""
    spec = SPECS[name]
    try:
        data = gzip.decompress((_data_dir() / f"{name}.tiktoken.gz").read_bytes())
    except (FileNotFoundError, OSError) as exc:
        raise RankFileError(f"{name}: rank file unreadable ({exc}); reinstall bpe-openai") from exc
    digest = hashlib.sha256(data).hexdigest()
    if digest != spec.sha256:
        raise RankFileError(f"{name}: sha256 {digest} does not match tiktoken's {spec.sha256}")
    return data


def _data_dir() -> Path:
    # Located without importing bpe_openai: its __init__ builds its own tokenizers.
    spec = importlib.util.find_spec("bpe_openai")
    if spec is None or not spec.submodule_search_locations:
        raise RankFileError("the bpe-openai package is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "data"


def _parse_ranks(data: bytes) -> dict[bytes, int]:
    ranks: dict[bytes, int] = {}
    for line in data.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


@cache
def load_encoding(name: str) -> tiktoken.Encoding:
    """A tiktoken Encoding built from the verified local rank file (loaded once per process)."""
    spec = SPECS[name]
    return tiktoken.Encoding(
        name=spec.name,
        pat_str=spec.pat_str,
        mergeable_ranks=_parse_ranks(rank_file_bytes(name)),
        special_tokens=spec.special_tokens,
    )


class TiktokenEncoder:
    """The domain's Encoder over a tiktoken Encoding."""

    def __init__(self, encoding: tiktoken.Encoding) -> None:
        self.name: str = encoding.name
        self._encoding = encoding

    def count(self, text: str) -> int:
        return len(self._encoding.encode_ordinary(text)) if text else 0


def load_counter() -> TokenCounter:
    """The counter over every encoding the store keeps counts for."""
    return TokenCounter({name: TiktokenEncoder(load_encoding(name)) for name in SPECS})
