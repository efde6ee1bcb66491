"""Imports point downwards only, and no two modules import each other (directly or round a loop).

The layers, lowest first, as docs/architecture.md draws them: a module may import its own layer
and the layers below it, never one above. Every ``import`` counts, also inside functions (a
deferred import still ties the layers together); imports under ``if TYPE_CHECKING:`` do not.
"""
from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import pytest

import fastops

PACKAGE = Path(fastops.__file__).parent

# module prefix -> layer rank (longest prefix wins)
LAYERS = {
    "fastops._kernels": 0,
    "fastops.core": 1,
    "fastops.operators": 2,
    "fastops.connectors": 3,
    "fastops.runtime": 4,
    "fastops.datastream": 5,
    "fastops.autoscale": 5,  # the DS2 policy and its controller, which the job driver calls back
    "fastops.shedding": 5,  # the QoS monitor and its policy, which the job driver calls back
    "fastops.monitoring": 5,  # the metrics server that execute(ui=...) starts beside the face
    "fastops.table": 6,
    # the public faces and the applications sit on top: nothing inside the engine imports them
    "fastops.agg": 7,
    "fastops.windows": 7,
    "fastops.sketches": 7,
    "fastops.apps": 7,
    "fastops.__main__": 7,
    "fastops": 7,
}


def layer(module: str) -> int:
    for prefix in sorted(LAYERS, key=len, reverse=True):
        if module == prefix or module.startswith(prefix + "."):
            return LAYERS[prefix]
    raise AssertionError(f"{module} belongs to no layer: add it to LAYERS and docs/architecture.md")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def sources() -> dict[str, Path]:
    found = {}
    for root, _, files in os.walk(PACKAGE):
        for name in files:
            if name.endswith((".py", ".pyx")):
                path = Path(root) / name
                found[module_name(path)] = path
    return found


def _type_checking_only(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imports_of(module: str, path: Path, known: set[str]) -> set[str]:
    """The fastops modules ``module`` imports (``from pkg import mod`` counts as ``pkg.mod``)."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".pyx":  # Cython: only its one-line Python imports of fastops matter here
        text = "\n".join(line.strip() for line in text.splitlines()
                         if re.match(r"\s*(from\s+fastops\S*\s+import\s+[\w, ]+$|import\s+fastops)", line))
    tree = ast.parse(text)
    skip = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and _type_checking_only(node)
            for n in ast.walk(node)}
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "fastops")
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            if base.split(".")[0] != "fastops":
                continue
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in known else base)
    found.discard(module)
    return found


def import_graph() -> dict[str, set[str]]:
    mods = sources()
    known = set(mods)
    return {m: imports_of(m, p, known) for m, p in mods.items()}


def test_every_module_belongs_to_a_layer():
    for module in sources():
        layer(module)


def test_imports_point_downwards():
    upward = sorted(f"{m} (layer {layer(m)}) imports {t} (layer {layer(t)})"
                    for m, targets in import_graph().items() for t in targets
                    if layer(t) > layer(m))
    assert upward == [], "\n".join(upward)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles():
    cycles = _cycles(import_graph())
    assert cycles == [], "\n".join(" <-> ".join(c) for c in cycles)


@pytest.mark.parametrize("lower, upper", [("fastops.core.keys", "fastops.runtime.plan"),
                                          ("fastops._kernels.window", "fastops.core.arrow")])
def test_the_check_sees_an_upward_import(lower, upper, tmp_path):
    """The walk finds an upward import where one is written (the test can fail)."""
    path = tmp_path / "m.py"
    path.write_text(f"def f():\n    import {upper}\n", encoding="utf-8")
    assert upper in imports_of(lower, path, {upper})
    assert layer(upper) > layer(lower)
    guarded = tmp_path / "g.py"
    guarded.write_text(f"from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import {upper}\n",
                       encoding="utf-8")
    assert imports_of(lower, guarded, {upper}) == set()


def test_the_check_sees_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
