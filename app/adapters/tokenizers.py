"""Offline tiktoken encodings: tiktoken's own constructors over a cache ctxc fills itself.

tiktoken's registry (``tiktoken_ext.openai_public``) defines each encoding, its pattern and its
special tokens, and reads the rank file through a cache directory (``TIKTOKEN_CACHE_DIR``, one
file named by the sha1 of the file's URL), downloading it when it is not there. ctxc writes the
rank files shipped in the ``bpe-openai`` wheel (a declared dependency) into a private temporary
directory, after checking them against tiktoken's published sha256, and points tiktoken at it
only while an encoding loads. So nothing is downloaded at run time, and a file whose hash
differs is refused here: tiktoken itself would delete it and fetch the file from the network.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import os
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path

import tiktoken

from app.domain.tokens import TokenCounter

# The URL tiktoken's constructors read each rank file from (their cache is keyed by it), and
# the sha256 they expect of it.
BLOB_URL = "https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"
SHA256 = {
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
}
CACHE_ENV = "TIKTOKEN_CACHE_DIR"

_environ_lock = threading.Lock()


class RankFileError(RuntimeError):
    """A rank file is missing or does not match tiktoken's published hash."""


def rank_file_bytes(name: str) -> bytes:
    """The verified, uncompressed rank file of an encoding."""
    expected = SHA256[name]
    try:
        data = gzip.decompress((_data_dir() / f"{name}.tiktoken.gz").read_bytes())
    except (FileNotFoundError, OSError) as exc:
        raise RankFileError(f"{name}: rank file unreadable ({exc}); reinstall bpe-openai") from exc
    digest = hashlib.sha256(data).hexdigest()
    if digest != expected:
        raise RankFileError(f"{name}: sha256 {digest} does not match tiktoken's {expected}")
    return data


def _data_dir() -> Path:
    # Located without importing bpe_openai: its __init__ builds its own tokenizers.
    spec = importlib.util.find_spec("bpe_openai")
    if spec is None or not spec.submodule_search_locations:
        raise RankFileError("the bpe-openai package is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "data"


def cache_key(name: str) -> str:
    """The file name tiktoken looks for in its cache directory: the sha1 of the rank file's URL."""
    return hashlib.sha1(BLOB_URL.format(name=name).encode()).hexdigest()


@cache
def load_encoding(name: str) -> tiktoken.Encoding:
    """tiktoken's own encoding ``name``, read from the verified local rank file (once)."""
    data = rank_file_bytes(name)
    with tempfile.TemporaryDirectory(prefix="ctxc-tiktoken-") as directory:
        Path(directory, cache_key(name)).write_bytes(data)
        with _tiktoken_cache(directory):
            return tiktoken.get_encoding(name)


@contextmanager
def _tiktoken_cache(directory: str) -> Iterator[None]:
    """``TIKTOKEN_CACHE_DIR`` set to ``directory`` for the ``with`` block, then as it was.

    tiktoken reads the variable on every load and has no parameter for it. Encodings load at
    start-up, before requests are served; the lock keeps two loads from mixing their values.
    """
    with _environ_lock:
        before = os.environ.get(CACHE_ENV)
        os.environ[CACHE_ENV] = directory
        try:
            yield
        finally:
            if before is None:
                del os.environ[CACHE_ENV]
            else:
                os.environ[CACHE_ENV] = before


class TiktokenEncoder:
    """The domain's Encoder over a tiktoken Encoding."""

    def __init__(self, encoding: tiktoken.Encoding) -> None:
        self.name: str = encoding.name
        self._encoding = encoding

    def count(self, text: str) -> int:
        return len(self._encoding.encode_ordinary(text)) if text else 0


def load_counter() -> TokenCounter:
    """The counter over every encoding the store keeps counts for."""
    return TokenCounter({name: TiktokenEncoder(load_encoding(name)) for name in SHA256})
