"""Operators add compilers as installed packages (entry point group `ctxc.compilers`)."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.settings import Settings
from tests.conftest import LiveServer

PLUGIN = '''
"""A ctxc compiler plug-in: the newest message only, and a decorator that shouts."""
from app.domain.compilers.base import Compiled
from app.domain.compilers.registry import Registry
from app.domain.messages import TextPart


def newest_only():
    def compile(snapshot):
        return Compiled.of(snapshot.items[-1:])
    return compile


def shout(inner):
    def compile(snapshot):
        done = inner(snapshot)
        loud = [
            type(i)(i.seq, i.section, i.message.model_copy(update={"content": tuple(
                TextPart(text=p.text.upper()) if isinstance(p, TextPart) else p
                for p in i.message.content)}), i.tokens)
            for i in done.items
        ]
        return done.then(loud)
    return compile


registry = Registry(bases={"newest_only": newest_only}, decorators={"shout": shout})
'''


@pytest.fixture
def installed_plugin(tmp_path: Path) -> Iterator[None]:
    """A real distribution on sys.path: a module plus its dist-info with entry points."""
    (tmp_path / "ctxc_demo_plugin.py").write_text(textwrap.dedent(PLUGIN))
    info = tmp_path / "ctxc_demo_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ctxc-demo-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[ctxc.compilers]\ndemo = ctxc_demo_plugin:registry\n")
    sys.path.insert(0, str(tmp_path))
    try:
        yield
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("ctxc_demo_plugin", None)


def test_an_installed_plugin_compiler_is_used(installed_plugin: None, database_url: str) -> None:
    with LiveServer(Settings(database_url=database_url, auth="local")) as server:
        history = [{"role": "user", "content": "first"}, {"role": "user", "content": "last one"}]
        spec = {"base": "newest_only", "decorators": ["shout"]}
        answer = httpx.post(
            f"{server.url}/v1/compile", json={"messages": history, "compiler": spec}
        )
        assert answer.status_code == 200, answer.text
        assert answer.json()["messages"] == [{"role": "user", "content": "LAST ONE"}]
        unknown = httpx.post(
            f"{server.url}/v1/compile", json={"messages": history, "compiler": {"base": "nope"}}
        )
        assert "newest_only" in unknown.json()["errors"][0]["message"]
