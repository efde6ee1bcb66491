"""The runtime depends on the connectors' protocols only (connectors/base.py),
never on a concrete source or sink: a new connector plugs in without
touching the runtime. Every import counts, also inside functions."""
from __future__ import annotations

import ast
from pathlib import Path

import fastops
from fastops.connectors import base

RUNTIME = Path(fastops.__file__).parent / "runtime"

EXEMPT: set[tuple[str, str, tuple[str, ...]]] = set()  # concrete connector imports still allowed: none


def connector_imports(path: Path) -> set[tuple[str, str, tuple[str, ...]]]:
    """(file, module, names) for every import of a fastops.connectors module in ``path``."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "fastops.connectors":  # from fastops.connectors import sources
                for alias in node.names:
                    found.add((path.name, f"fastops.connectors.{alias.name}", ()))
            elif node.module.startswith("fastops.connectors."):
                found.add((path.name, node.module, tuple(sorted(a.name for a in node.names))))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("fastops.connectors"):
                    found.add((path.name, alias.name, ()))
    return found


def test_the_runtime_imports_only_the_connector_protocols():
    files = sorted(RUNTIME.rglob("*.py"))
    assert len(files) > 12 and any(f.parent.name == "executors" for f in files)
    imports = set().union(*(connector_imports(f) for f in files))
    assert imports, "the runtime reads sources and commits sinks through connectors.base"
    others = {i for i in imports if i[1] != "fastops.connectors.base"}
    assert others == EXEMPT, f"concrete connector imports in the runtime: {sorted(others - EXEMPT)}"
    names = {n for _, module, ns in imports if module == "fastops.connectors.base" for n in ns}
    allowed = {"END", "Reader", "Source", "Sink", "TransactionalSink", "is_transactional"}
    assert names <= allowed, names - allowed
    for name in names - {"END", "is_transactional"}:
        assert getattr(getattr(base, name), "_is_protocol", False), f"{name} is not a typing.Protocol"
