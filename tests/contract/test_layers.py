"""Imports go one way: the domain imports nothing outside itself but the stdlib, pydantic and
re2 (the linear-time stand-in for the stdlib's ``re``: pure, no I/O)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

APP = Path(__file__).resolve().parents[2] / "app"
DOMAIN_MAY_IMPORT = {"pydantic", "re2", "app"}


def imported_roots(path: Path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            roots |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module)
    return roots


def test_domain_imports_only_stdlib_pydantic_and_itself() -> None:
    for path in (APP / "domain").rglob("*.py"):
        for name in imported_roots(path):
            top = name.split(".")[0]
            if top == "app":
                assert name.startswith("app.domain"), f"{path.name} imports {name}"
            else:
                assert top in sys.stdlib_module_names or top in DOMAIN_MAY_IMPORT, (
                    f"{path.name}: {name}"
                )


def test_storage_and_services_never_import_the_http_layer() -> None:
    for layer in ("storage", "services", "adapters"):
        for path in (APP / layer).rglob("*.py"):
            assert not any(n.startswith(("app.api", "fastapi")) for n in imported_roots(path)), path


def test_benchmarks_still_import() -> None:
    """Benchmarks do not run in CI; at least they must not rot."""
    import importlib

    for module in (
        "bench.common",
        "bench.append",
        "bench.compile",
        "bench.delta",
        "bench.compaction",
        "bench.events",
        "bench.summarising",
        "bench.transfer",
        "bench.session_compile",
        "bench.executions",
        "bench.load",
        "bench.bodies",
        "bench.redact",
        "bench.tenancy",
        "bench.proxy",
        "bench.prefix_cache",
        "bench.compaction_latency",
        "bench.facts",
    ):
        importlib.import_module(module)
