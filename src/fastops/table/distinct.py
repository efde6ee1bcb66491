"""Several DISTINCT aggregates over different arguments, with or without plain
aggregates beside them, in one GROUP BY (Nexmark q15 / q16's shape)::

    SELECT day, COUNT(*), COUNT(DISTINCT bidder), COUNT(DISTINCT auction) FILTER (WHERE ...)
    FROM bid GROUP BY day

Planned as Calcite's expansion of distinct aggregates: the input is copied once
per distinct argument ``i`` (branch ``__g = i``, the argument in ``__v<i>``, NULL
elsewhere) and once for the plain aggregates (``__g = 0``); a first GROUP BY of
the keys, ``__g`` and the ``__v`` columns makes each argument's values unique
per group and computes the plain aggregates' partial results (counts, sums,
minima, maxima; AVG as a sum and a count) on branch 0; a second GROUP BY of the
keys aggregates ``__v<i>`` for the distinct aggregates (its NULLs are skipped,
as DISTINCT skips them) and combines the partial results of branch 0. In
streaming mode the first aggregate is a changelog, which the second takes with
retractions.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa

from fastops.table.expressions import AggCall, Call, Case, Cast, Col, Expr, Lit
from fastops.table.plan import PlanError, PlanNode, Project, infer_type

__all__ = ["expand_distinct"]

_PLAIN = ("count", "sum", "avg", "min", "max")
_DISTINCT = ("count", "sum", "avg", "min", "max")


def _aggs(exprs: Sequence[Expr]) -> list[AggCall]:
    out: list[AggCall] = []

    def visit(e: Expr) -> None:
        if isinstance(e, AggCall):
            out.append(e)
            return
        for c in e.children():
            visit(c)

    for e in exprs:
        visit(e)
    return out


def expand_distinct(child: PlanNode, key_exprs: Sequence[Expr], items: Sequence[tuple[str, Expr]],
                    having: Expr | None, streaming: bool, build: Callable[..., PlanNode],
                    union: Callable[[list[PlanNode]], PlanNode]) -> PlanNode:
    """GROUP BY ``key_exprs`` SELECT ``items`` [HAVING ``having``] with DISTINCT
    aggregates over several arguments (``build`` is ``build_aggregate``, ``union``
    a UNION ALL of plans)."""
    exprs = [e for _, e in items] + ([having] if having is not None else [])
    calls = _aggs(exprs)
    args: dict[str, Expr] = {}  # repr -> argument of a distinct aggregate, numbered from 1 in order
    for c in calls:
        if c.distinct and c.fn not in ("min", "max"):
            if c.fn not in _DISTINCT or c.udaf is not None or c.arg is None:
                raise PlanError(f"{c!r} beside other DISTINCT aggregates is not supported")
            args.setdefault(repr(c.arg), c.arg)
        elif c.fn not in _PLAIN or c.udaf is not None:
            raise PlanError(f"{c!r} beside DISTINCT aggregates over different arguments is not supported "
                            "(COUNT, SUM, AVG, MIN and MAX are)")
    keys: dict[str, str] = {}  # repr(key expression) -> its column
    key_items: list[tuple[str, Expr]] = []
    for j, k in enumerate(key_exprs):
        name = k.col if isinstance(k, Col) else f"__gk{j}"
        if repr(k) not in keys:
            keys[repr(k)] = name
            key_items.append((name, k))
    vnames = {r: f"__v{i + 1}" for i, r in enumerate(args)}
    vtypes = {r: infer_type(a, child.schema) for r, a in args.items()}
    plain_args: dict[str, tuple[str, Expr]] = {}
    for c in calls:
        if not (c.distinct and c.fn not in ("min", "max")) and c.arg is not None:
            plain_args.setdefault(repr(c.arg), (f"__p{len(plain_args)}", c.arg))
    branches: list[PlanNode] = []
    for i in range(len(args) + 1):
        row: list[tuple[str, Expr]] = list(key_items) + [("__g", Cast(Lit(i), pa.int64()))]
        for j, r in enumerate(args):
            row.append((vnames[r], args[r] if j + 1 == i else Cast(Lit(None), vtypes[r])))
        row += [(n, a) for n, a in plain_args.values()]
        branches.append(Project(child, row))
    inner_cols = [Col(n) for n, _ in key_items] + [Col("__g")] + [Col(v) for v in vnames.values()]
    inner_keys: list[Expr] = list(inner_cols)
    inner_items: list[tuple[str, Expr]] = [(c.col, c) for c in inner_cols]
    partial: dict[str, Any] = {}  # repr(plain call) -> how the outer aggregate combines its partials
    for c in calls:
        if (c.distinct and c.fn not in ("min", "max")) or repr(c) in partial:
            continue
        arg = Col(plain_args[repr(c.arg)][0]) if c.arg is not None else None
        n = len(inner_items)
        if c.fn == "avg":
            inner_items += [(f"__s{n}", AggCall("sum", arg)), (f"__c{n}", AggCall("count", arg))]
            partial[repr(c)] = ("avg", f"__s{n}", f"__c{n}")
        else:
            inner_items.append((f"__a{n}", AggCall(c.fn, arg)))
            partial[repr(c)] = ({"count": "sum"}.get(c.fn, c.fn), f"__a{n}")
    inner = build(union(branches), inner_keys, inner_items, None, None, streaming)

    def on_branch0(col: str) -> Expr:
        return Case([(Call("equal", [Col("__g"), Lit(0)]), Col(col))], None)

    def outer(e: Expr) -> Expr:
        def fn(node: Expr) -> Expr | None:
            if isinstance(node, AggCall):
                if node.distinct and node.fn not in ("min", "max"):
                    assert node.arg is not None
                    return AggCall(node.fn, Col(vnames[repr(node.arg)]))
                how = partial[repr(node)]
                if how[0] == "avg":
                    s = Cast(AggCall("sum", on_branch0(how[1])), pa.float64())
                    return Call("divide", [s, Call("nullif", [AggCall("sum", on_branch0(how[2])), Lit(0)])])
                return AggCall(how[0], on_branch0(how[1]))
            if repr(node) in keys:
                return Col(keys[repr(node)])
            return None
        return e.transform(fn)

    return build(inner, [Col(n) for n, _ in key_items], [(n, outer(e)) for n, e in items],
                 outer(having) if having is not None else None, None, streaming)
