"""Offline encodings are tiktoken's own, load with no network, and tampered rank files are
refused."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st

from app.adapters import tokenizers
from app.adapters.tokenizers import RankFileError, TiktokenEncoder, load_encoding, rank_file_bytes

SHA256_NAMES = ("o200k_base", "cl100k_base")
BLOB = "https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"

CORPUS = [
    "",
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog. " * 20,
    "def f(x: int) -> int:\n    return x ** 2  # squares\n\n\n\tindented\r\n",
    "日本語のテキストと中文文本、한국어 텍스트.",
    "emoji 🤖🧠🔥 and combining é é",
    "مرحبا بالعالم — שלום עולם",
    "1234567890 3.14159 -42 0xdeadbeef 1e-9",
    "special <|endoftext|> and <|fim_prefix|> strings are plain text here",
    "    many    spaces\t\t\ttabs\n\n\n\nnewlines   ",
    '{"path": "src/app/main.py", "args": [1, 2, {"k": null}]}',
    "I'M SHOUTING, you're WHISPERING; they'll've done it",
    "\u0000\u0001 control \u200b zero width \ufeff bom",
]


_OFFICIAL: dict[str, tiktoken.Encoding] = {}


def official(name: str) -> tiktoken.Encoding:
    """tiktoken's own registry definition of ``name``, fed from a pre-seeded cache (no download)."""
    if name not in _OFFICIAL:
        from tiktoken_ext.openai_public import ENCODING_CONSTRUCTORS

        with tempfile.TemporaryDirectory() as cache, pytest.MonkeyPatch.context() as mp:
            key = hashlib.sha1(BLOB.format(name=name).encode()).hexdigest()
            Path(cache, key).write_bytes(rank_file_bytes(name))
            mp.setenv("TIKTOKEN_CACHE_DIR", cache)
            _OFFICIAL[name] = tiktoken.Encoding(**ENCODING_CONSTRUCTORS[name]())
    return _OFFICIAL[name]


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
def test_definitions_match_tiktokens_registry(name: str) -> None:
    ours = load_encoding(name)
    assert ours._pat_str == official(name)._pat_str
    assert ours._special_tokens == official(name)._special_tokens
    assert ours.n_vocab == official(name).n_vocab


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
@pytest.mark.parametrize("text", CORPUS)
def test_counts_equal_tiktoken_on_the_corpus(name: str, text: str) -> None:
    expected = len(official(name).encode_ordinary(text))
    assert TiktokenEncoder(load_encoding(name)).count(text) == expected


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=400))
def test_counts_equal_tiktoken_on_generated_text(text: str) -> None:
    for name in tokenizers.SHA256:
        assert TiktokenEncoder(load_encoding(name)).count(text) == len(
            official(name).encode_ordinary(text)
        )


def test_a_tampered_rank_file_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    good = rank_file_bytes("cl100k_base")
    (tmp_path / "cl100k_base.tiktoken.gz").write_bytes(
        gzip.compress(good.replace(b" 1\n", b" 2\n", 1))
    )
    monkeypatch.setattr(tokenizers, "_data_dir", lambda: tmp_path)
    with pytest.raises(RankFileError, match="does not match tiktoken"):
        rank_file_bytes("cl100k_base")


def test_a_missing_rank_file_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tokenizers, "_data_dir", lambda: tmp_path)
    with pytest.raises(RankFileError, match="unreadable"):
        rank_file_bytes("o200k_base")


# Run in a fresh interpreter: no encoding loaded yet, every socket refused, proxies pointing at a
# closed port, and a user's own tiktoken cache directory that must stay as it was.
OFFLINE_LOAD = """
import json, os, socket, sys

def refuse(*args, **kwargs):
    raise OSError("network access attempted")

socket.socket.connect = refuse
socket.create_connection = refuse
import tiktoken
from app.adapters.tokenizers import load_counter, load_encoding

counter = load_counter()
print(json.dumps({
    "counts": {n: counter.encoder(n).count(sys.argv[1]) for n in ("o200k_base", "cl100k_base")},
    "registered": all(tiktoken.get_encoding(n) is load_encoding(n)
                      for n in ("o200k_base", "cl100k_base")),
    "cache_dir": os.environ.get("TIKTOKEN_CACHE_DIR"),
}))
"""


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_encodings_are_tiktokens_own_and_load_with_no_network(tmp_path: Path) -> None:
    proxy = f"http://127.0.0.1:{closed_port()}"
    user_cache = tmp_path / "user-cache"
    user_cache.mkdir()
    env = {
        **os.environ,
        "HTTP_PROXY": proxy,
        "HTTPS_PROXY": proxy,
        "NO_PROXY": "",
        "TIKTOKEN_CACHE_DIR": str(user_cache),
    }
    text = "Hello <|endoftext|> wörld 12345"
    done = subprocess.run(
        [sys.executable, "-c", OFFLINE_LOAD, text],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["counts"] == {n: len(official(n).encode_ordinary(text)) for n in SHA256_NAMES}
    assert result["registered"]  # tiktoken.get_encoding answers with the same encodings
    assert result["cache_dir"] == str(user_cache)  # the user's setting is back as it was
    assert list(user_cache.iterdir()) == []  # and their cache untouched
