"""The architecture page's picture of the layers and packages is the code's own import graph.

The block between the page's ``<!-- layers -->`` markers is generated from the imports of
``app`` (grimp, as import-linter reads them): each layer, its packages with their modules, and
the layers it imports. `python -m tests.contract.test_architecture` writes it again; the test
fails when the code moved and the page did not. import-linter (`make lint`) keeps the arrows
pointing down and forbids cycles.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import grimp

PAGE = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"
START, END = "<!-- layers -->\n", "<!-- /layers -->\n"
# Top to bottom, as import-linter's layers contract (pyproject.toml) has them.
LAYERS = ["cli", "commands", "main", "server", "api", "services", "storage", "adapters", "domain"]


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else None


def _package(graph: grimp.ImportGraph, module: str) -> str:
    return module if graph.find_children(module) else module.rpartition(".")[0]


def render() -> str:
    """The picture: a line per package (its modules), under its layer with the layers it uses."""
    graph = grimp.build_graph("app")
    modules: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    uses: dict[str, set[str]] = defaultdict(set)
    for module in graph.modules:
        layer = _layer(module)
        if layer is None:
            continue
        if not graph.find_children(module):
            modules[layer][_package(graph, module)] += 1
        for imported in graph.find_modules_directly_imported_by(module):
            other = _layer(imported)
            if other is not None and other != layer:
                uses[layer].add(other)
    lines = ["```"]
    for layer in LAYERS:
        below = ", ".join(sorted(uses[layer], key=LAYERS.index)) or "nothing"
        lines.append(f"{layer}  (imports {below})")
        for package, count in sorted(modules[layer].items()):
            lines.append(f"    {_shown(package, layer, count)}")
    lines.append("```")
    return "\n".join(lines) + "\n"


def _shown(package: str, layer: str, count: int) -> str:
    if package == "app":  # the layer is one module
        return f"app/{layer}.py"
    return f"{package.replace('.', '/')}/  {count} module{'s' if count > 1 else ''}"


def _spliced(page: str, block: str) -> str:
    head, rest = page.split(START, 1)
    _, tail = rest.split(END, 1)
    return head + START + block + END + tail


def test_the_architecture_page_shows_the_code_as_it_is() -> None:
    page = PAGE.read_text()
    assert page == _spliced(page, render()), (
        "stale: run `python -m tests.contract.test_architecture`"
    )


def test_no_layer_imports_one_above_it() -> None:
    picture = render()
    for line in picture.splitlines():
        if "(imports " in line:
            layer, _, used = line.partition("  (imports ")
            for other in used.rstrip(")").split(", "):
                if other != "nothing":
                    assert LAYERS.index(other) > LAYERS.index(layer), line


if __name__ == "__main__":
    PAGE.write_text(_spliced(PAGE.read_text(), render()))
