"""The architecture page's compile path is the code's: each step it names is a function of that
module, and the session compile calls its steps in the order the page lists them."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "architecture.md"
SERVICE = "app/services/compiling/session.py"


def steps() -> list[tuple[str, str]]:
    """The (module path, function) of each step, in the page's order."""
    block = PAGE.read_text().split("<!-- compile path -->", 1)[1].split("<!-- /compile path -->")[0]
    return re.findall(r"`(app/[\w/]+\.py)::(\w+)`", block)


def test_every_step_is_a_function_of_its_module() -> None:
    assert len(steps()) >= 6
    for path, name in steps():
        module = importlib.import_module(path.removesuffix(".py").replace("/", "."))
        owner = getattr(module, "AppState", None) if name == "compile_context" else module
        assert callable(getattr(owner, name, None)), f"{path} has no {name}"


def test_the_session_compile_calls_its_steps_in_order() -> None:
    tree = ast.parse((ROOT / SERVICE).read_text())
    [use_case] = [
        n for n in tree.body if isinstance(n, ast.AsyncFunctionDef) and n.name == "compile_session"
    ]
    calls = [
        n for n in ast.walk(use_case) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
    ]
    called = [c.func.id for c in sorted(calls, key=lambda c: (c.lineno, c.col_offset))]
    listed = [name for path, name in steps() if path == SERVICE and name != "compile_session"]
    positions = [called.index(name) for name in listed]
    assert positions == sorted(positions), (listed, called)
