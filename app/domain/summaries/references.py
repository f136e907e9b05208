r"""File paths, URLs and identifiers: what a summary never drops.

Text is scanned in passes; each blanks what it took, so the next sees only the rest (a URL's path
is not listed again as a file path, nor a path's file name as an identifier):

1. URLs: ``scheme://`` and the non-space characters after it, less trailing punctuation
   (``.,;:!?'"*`` and unbalanced closing brackets).
2. Paths: a run of ``[\w.~@+-/\\]`` (a drive letter may lead) holding a letter or digit and a
   ``/`` (``src/app.py``, ``/etc/hosts``, ``./run.sh``, ``~/x``, ``a/b``), or a ``\`` after a
   drive, ``\\``, ``.\``, ``..\`` or ``~\`` (``C:\tmp\a.txt``); a trailing ``.`` is punctuation.
3. Code spans: text in backticks with no whitespace (```main```) is an identifier.
4. Words, runs of ``[\w.#$-]`` less trailing ``.`` and ``-``. A word is a *path* when it is a
   file name: ``name.ext`` with ``ext`` in ``EXTENSIONS``, a dotfile in ``DOTFILES`` (``.env``,
   ``.env.local``; ``.join`` is a method, not a file) or a name in ``BARE_FILES``
   (``Makefile``). It is an *identifier* when it is a snake_case, SCREAMING_CASE or
   dunder name (a ``_`` and a letter or digit), a camelCase or PascalCase name (lower and upper
   case letters, an upper one not first), a word that starts with a letter and holds a digit
   (``E501``, ``gpt-4o``, ``v1.2``), a dotted name of identifier segments, not all of one letter
   (``os.path.join``), a hash (7+ hex digits, a letter and a digit among them), a UUID, an issue
   number (``#123``), a ticket (``ABC-123``, ``CVE-2024-1234``) or a long flag (``--dry-run``).

Each reference also has a rank (``References.ranked``): mentioned more often first, then paths
before URLs before identifiers, then the one mentioned last; a summary over its budget keeps the
best ranked (see ``extractive``).

Plain words, numbers and prose are not references. Runs longer than ``MAX_RUN`` characters
(``MAX_URL`` for URLs) are data (base64, minified code), not references. Tool names and tool call
ids are identifiers whatever they look like; callers pass them in ``names``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal

MAX_RUN = 512
MAX_URL = 4096

# File extensions that make ``name.ext`` a file name (lower case compared).
_EXTENSION_LIST = """
py pyi pyx ipynb js mjs cjs jsx ts tsx vue svelte json jsonl ndjson yaml yml toml ini cfg conf
env lock md mdx rst txt csv tsv xml html htm css scss sass less svg png jpg jpeg gif webp ico pdf
sh bash zsh fish ps1 bat cmd c h cc cpp cxx hpp hh cs java kt kts scala go rs rb php pl pm swift
m mm r jl lua dart ex exs erl hrl hs ml mli clj cljs elm sql graphql gql proto tf tfvars hcl mk
cmake gradle sbt nix zig wasm log out patch diff gz tgz zip tar bz2 xz whl jar so dll exe dylib
bin db sqlite sqlite3 parquet pem crt pub
"""
_DOTFILE_LIST = """
env gitignore gitattributes gitmodules gitkeep dockerignore editorconfig bashrc bash_profile zshrc
profile npmrc nvmrc yarnrc eslintrc prettierrc babelrc pylintrc flake8 coveragerc pypirc netrc
python-version node-version tool-versions envrc
"""
_BARE_FILE_LIST = """
Makefile Dockerfile Containerfile Jenkinsfile Procfile Gemfile Rakefile Vagrantfile Justfile
Brewfile Pipfile LICENSE README CHANGELOG CODEOWNERS
"""
EXTENSIONS = frozenset(_EXTENSION_LIST.split())
BARE_FILES = frozenset(_BARE_FILE_LIST.split())
DOTFILES = frozenset(_DOTFILE_LIST.split())

Kind = Literal["path", "url", "identifier"]

_URL = re.compile(r"(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]*://[^\s<>\"'`]+")
_RUN = re.compile(r"(?:[A-Za-z]:)?[\w.~@+\-/\\]+")
_BACKSLASH_ROOT = re.compile(r"(?:[A-Za-z]:|\\|\.\.?|~)\\")
_CODE_SPAN = re.compile(r"`([^`\s]{1,128})`")
_WORD = re.compile(r"[\w#$.\-][\w.#$\-]*")
_DOTFILE = re.compile(rf"\.(?:{'|'.join(map(re.escape, sorted(DOTFILES)))})(?:\.[\w\-]+)*")
_SEGMENT = re.compile(r"[A-Za-z_$][\w$]*")
_SHAPES = (
    re.compile(r"#\d+"),
    re.compile(r"[A-Z][A-Z0-9]*(?:-\d+)+"),
    re.compile(r"--[A-Za-z][\w\-]*"),
    re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"),
)
_HEX = re.compile(r"(?=[0-9a-fA-F]*[0-9])(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{7,}")
_TRAILING = ".,;:!?'\"*"
_OPENING = {")": "(", "]": "[", "}": "{"}


@dataclass(frozen=True)
class References:
    """Every file path, URL and identifier found, each once, in order of first appearance."""

    paths: tuple[str, ...] = ()
    urls: tuple[str, ...] = ()
    identifiers: tuple[str, ...] = ()
    # Every reference, most valuable first: the most mentions, then paths before URLs before
    # identifiers, then the latest mention.
    ranked: tuple[str, ...] = field(default=(), compare=False)

    def values(self) -> tuple[str, ...]:
        """Every reference: paths, then URLs, then identifiers."""
        return (*self.paths, *self.urls, *self.identifiers)


def find_references(texts: Iterable[str], names: Iterable[str] = ()) -> References:
    """The references in ``texts`` (as the module docstring defines them), plus ``names``."""
    found: dict[Kind, dict[str, None]] = {"path": {}, "url": {}, "identifier": {}}
    mentions: dict[str, list[int]] = {}  # value -> [mentions, position of the latest]
    clock = iter(range(1 << 62))

    def add(kind: Kind, value: str, latest: bool = True) -> None:
        if not value:
            return
        seen = mentions.setdefault(value, [0, -1])
        seen[0] += 1
        seen[1] = next(clock) if latest else seen[1]
        if not any(value in kinds for kinds in found.values()):
            found[kind][value] = None

    for text in texts:
        _scan(text, add)
    for name in names:  # a mention each, but none the latest
        add("identifier", name, latest=False)
    kind_of = {v: n for n, kind in enumerate(found.values()) for v in kind}  # path, url, id
    ranked = sorted(mentions, key=lambda v: (-mentions[v][0], kind_of[v], -mentions[v][1]))
    return References(
        tuple(found["path"]), tuple(found["url"]), tuple(found["identifier"]), tuple(ranked)
    )


Add = Callable[[Kind, str], None]


def _scan(text: str, add: Add) -> None:
    text = _URL.sub(lambda m: _take_url(m.group(), add), text)
    text = _RUN.sub(lambda m: _take_path(m.group(), add), text)
    text = _CODE_SPAN.sub(lambda m: _take_span(m.group(), add), text)
    for match in _WORD.finditer(text):
        word = _trim_word(match.group())
        kind = word_kind(word) if len(word) <= MAX_RUN else None
        if kind is not None:
            add(kind, word)


def _take_url(candidate: str, add: Add) -> str:
    url = _trim_url(candidate)
    if len(url) <= url.index("://") + 3:
        return candidate
    if len(url) <= MAX_URL:
        add("url", url)
    return " " * len(url) + candidate[len(url) :]


def _trim_url(url: str) -> str:
    while url:
        last = url[-1]
        unbalanced = last in _OPENING and url.count(last) > url.count(_OPENING[last])
        if last not in _TRAILING and not unbalanced:
            break
        url = url[:-1]
    return url


def _take_path(run: str, add: Add) -> str:
    if len(run) > MAX_RUN:
        return " " * len(run)  # data, and its pieces are no identifiers either
    path = run.rstrip(".")
    if not _is_path(path):
        return run
    add("path", path)
    return " " * len(path) + run[len(path) :]


def _is_path(run: str) -> bool:
    if not any(c.isalnum() for c in run):
        return False
    return "/" in run or ("\\" in run and _BACKSLASH_ROOT.match(run) is not None)


def _take_span(span: str, add: Add) -> str:
    add("identifier", span[1:-1])
    return " " * len(span)


def _trim_word(word: str) -> str:
    word = word.rstrip(".-")
    if word.startswith(".") and not _DOTFILE.fullmatch(word):
        word = word.lstrip(".")
    return word


@lru_cache(maxsize=1 << 16)  # words repeat: a history is mostly the same few thousand
def word_kind(word: str) -> Kind | None:
    """``path`` for a file name, ``identifier`` for a code-like word, else None."""
    if not word:
        return None
    if word in BARE_FILES or _DOTFILE.fullmatch(word) or _has_extension(word):
        return "path"
    return "identifier" if _is_identifier(word) else None


def _has_extension(word: str) -> bool:
    stem, dot, extension = word.rpartition(".")
    return bool(dot) and extension.lower() in EXTENSIONS and any(c.isalnum() for c in stem)


def _is_identifier(word: str) -> bool:
    if any(shape.fullmatch(word) for shape in _SHAPES) or _HEX.fullmatch(word):
        return True
    if not (word[0].isalpha() or word[0] in "_$"):
        return False
    if "_" in word:
        return any(c.isalnum() for c in word)
    if any(c.isdigit() for c in word):
        return True
    if "." in word:
        segments = word.split(".")
        return all(_SEGMENT.fullmatch(s) for s in segments) and any(len(s) > 1 for s in segments)
    return any(c.islower() for c in word) and any(c.isupper() for c in word[1:])
