"""``GROUPING SETS``, ``ROLLUP`` and ``CUBE``, with ``GROUPING(...)`` / ``GROUPING_ID(...)``.

``GROUP BY a, ROLLUP(b, c)`` is the grouping sets ``(a, b, c), (a, b), (a)``:
the plain keys crossed with each list of sets (``ROLLUP(b, c)`` gives the
prefixes, ``CUBE(b, c)`` every subset, ``GROUPING SETS (...)`` its sets, where
a nested ``ROLLUP`` / ``CUBE`` expands in place). Each set is aggregated on
its own (the input is read once and shared) and the results are a
``UNION ALL``: a key column not in a set is NULL in that set's rows (an
aggregate's argument still reads the real column), and ``GROUPING(x, y)`` is
the bit vector of ``x, y`` with a bit 1 for a key not grouped (``GROUPING_ID``
the same), as Flink's. Windowed (``GROUP BY window_start, window_end,
GROUPING SETS (...)`` over a window TVF), every set is a window aggregate of
the same windows. In streaming mode each set's changelog (or insert-only
window results) goes through the union as it is.
"""
from __future__ import annotations

import itertools
from typing import Any

from sqlglot import exp

from fastops.table.expressions import AggCall, Cast, Expr, Lit
from fastops.table.plan import PlanNode, SqlError, infer_type
from fastops.table.table import _union, build_aggregate, distinct_of

__all__ = ["expand_group", "has_grouping", "plan_grouping_sets"]

_SETS = (exp.GroupingSets, exp.Rollup, exp.Cube)
_GROUPING_FNS = tuple(c for c in (getattr(exp, "Grouping", None), getattr(exp, "GroupingId", None)) if c is not None)


def has_grouping(q: exp.Select) -> bool:
    """Whether the query groups by sets (GROUPING SETS / ROLLUP / CUBE) or calls GROUPING()."""
    group = q.args.get("group")
    if group is not None and any(isinstance(g, _SETS) for g in group.expressions):
        return True
    return any(isinstance(n, _GROUPING_FNS) or (isinstance(n, exp.Anonymous) and n.name.upper() == "GROUPING_ID")
               for p in q.expressions + [q.args.get("having")] if p is not None for n in p.walk())


def _items(e: Any) -> list:
    """The expressions of one grouping set: ``(a, b)``, ``(a)``, ``a`` or ``()``."""
    if isinstance(e, exp.Tuple):
        return list(e.expressions)
    if isinstance(e, exp.Paren):
        return _items(e.this)
    return [e]


def _sets_of(g: Any) -> list[list]:
    """The grouping sets one GROUP BY element stands for."""
    if isinstance(g, exp.Rollup):
        cols = [_items(e) for e in g.expressions]
        return [[x for c in cols[:i] for x in c] for i in range(len(cols), -1, -1)]
    if isinstance(g, exp.Cube):
        cols = [_items(e) for e in g.expressions]
        out = []
        for mask in itertools.product([True, False], repeat=len(cols)):
            out.append([x for c, m in zip(cols, mask) if m for x in c])
        return out
    if isinstance(g, exp.GroupingSets):
        return [s for e in g.expressions for s in (_sets_of(e) if isinstance(e, _SETS) else [_items(e)])]
    return [[g]]


def expand_group(group: Any) -> list[list]:
    """The grouping sets of a GROUP BY clause (sqlglot expressions): the cross product of its elements."""
    out: list[list] = [[]]
    for g in (group.expressions if group is not None else []):
        out = [a + b for a in out for b in _sets_of(g)]
    return out


def plan_grouping_sets(compiler: Any, q: exp.Select, node: PlanNode, scope: Any) -> PlanNode:
    """The plan of a SELECT whose GROUP BY has grouping sets (or whose list calls GROUPING()):
    one aggregate per set, their union. ``compiler`` is the SQL QueryCompiler, ``node`` the
    FROM / WHERE plan and ``scope`` its columns."""
    streaming = compiler.streaming
    group = q.args.get("group")
    having = q.args.get("having")
    for p in q.expressions:
        if isinstance(p, exp.Star) or (isinstance(p, exp.Column) and isinstance(p.this, exp.Star)):
            raise SqlError("SELECT * with GROUPING SETS / ROLLUP / CUBE is not supported; list the columns")
    base = _compile_items(compiler, q.expressions, scope, lambda args: 0)
    aliases = dict(base)
    sets: list[list[Expr]] = []
    for s in expand_group(group):
        keys = []
        for g in s:
            if isinstance(g, exp.Literal) and not g.is_string:
                keys.append(base[int(g.this) - 1][1])
            elif isinstance(g, exp.Column) and not g.table and g.name in aliases and \
                    not any(c.name.lower() == g.name.lower() for c in scope.cols):
                keys.append(aliases[g.name])
            else:
                keys.append(compiler.expr(g, scope))
        sets.append(keys)
    every: dict[str, Expr] = {}
    for s in sets:
        for k in s:
            every.setdefault(repr(k), k)
    branches = []
    for keys in sets:
        grouped = {repr(k) for k in keys}
        nulls = {r: Cast(Lit(None), infer_type(k, node.schema)) for r, k in every.items() if r not in grouped}

        def bits(args: list, grouped: set = grouped) -> int:
            flags = [0 if repr(compiler.expr(a, scope)) in grouped else 1 for a in args]
            return sum(f << (len(flags) - 1 - i) for i, f in enumerate(flags))

        def ungroup(e: Expr, grouped: set = grouped, nulls: dict = nulls) -> Expr:
            def fn(x: Expr) -> Expr | None:
                if isinstance(x, AggCall) or repr(x) in grouped:
                    return x
                return nulls.get(repr(x))
            return e.transform(fn)

        items = [(n, ungroup(e)) for n, e in _compile_items(compiler, q.expressions, scope, bits)]
        hv = None
        if having is not None:
            h = _grouping_values(having.this, bits)
            hv = ungroup(compiler.expr(h, scope, dict(items)))
        window, src = compiler.window_source(node, keys)
        branches.append(build_aggregate(src, keys, items, hv, window, streaming))
    out = branches[0] if len(branches) == 1 else _union(branches)
    return distinct_of(out, streaming) if q.args.get("distinct") else out


def _grouping_values(e: Any, bits: Any) -> Any:
    """``e`` (sqlglot) with every GROUPING(...) / GROUPING_ID(...) replaced by its number."""
    def fn(n: Any) -> Any:
        if isinstance(n, _GROUPING_FNS) or (isinstance(n, exp.Anonymous) and n.name.upper() == "GROUPING_ID"):
            return exp.Literal.number(bits(list(n.expressions)))
        return n
    return e.copy().transform(fn)


def _compile_items(compiler: Any, exprs: list, scope: Any, bits: Any) -> list[tuple[str, Expr]]:
    """The select list (names as a plain SELECT gives them), GROUPING() calls evaluated by ``bits``."""
    items: list[tuple[str, Expr]] = []
    for i, p in enumerate(exprs):
        if isinstance(p, exp.Alias):
            items.append((p.alias, compiler.expr(_grouping_values(p.this, bits), scope)))
        else:
            name = p.alias_or_name if isinstance(p, exp.Column) else f"EXPR${i}"
            items.append((name, compiler.expr(_grouping_values(p, bits), scope)))
    return items
