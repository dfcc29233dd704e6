"""The operator's shape: every kopf decorator in handlers.py, no import cycle between its
modules (type-only imports included)."""

from __future__ import annotations

import re
from pathlib import Path

import grimp

import llmbench.operator

PACKAGE = Path(llmbench.operator.__file__).parent


def test_every_kopf_decorator_is_in_handlers_py() -> None:
    found = {p.name for p in PACKAGE.glob("*.py")
             if re.search(r"^\s*@kopf\.", p.read_text(), re.MULTILINE)}
    assert found == {"handlers.py"}


def test_the_operators_modules_import_each_other_without_a_cycle() -> None:
    graph = grimp.build_graph("llmbench", cache_dir=None)
    modules = {m for m in graph.modules if m.startswith("llmbench.operator.")}
    imports = {m: graph.find_modules_directly_imported_by(m) & modules for m in modules}
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        if module in path:
            cycle = " -> ".join(path[path.index(module):] + [module])
            raise AssertionError(f"import cycle: {cycle}")
        if module in done:
            return
        for other in sorted(imports[module]):
            visit(other, [*path, module])
        done.add(module)

    for module in sorted(modules):
        visit(module, [])
    # the graph is the real one: finish hands a newer spec to reconcile
    assert "llmbench.operator.reconcile" in imports["llmbench.operator.finish"]
