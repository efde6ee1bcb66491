"""Several DISTINCT aggregates over different arguments, with or without plain
aggregates beside them, in one GROUP BY (Nexmark q15 / q16's shape)::

    SELECT day, COUNT(*), COUNT(DISTINCT bidder), COUNT(DISTINCT auction) FILTER (WHERE ...)
    FROM bid GROUP BY day

Planned as Calcite expands distinct aggregates, in two steps. The keys and the
arguments are computed once. Branch 0 is the plain aggregates' partial results
per group of the keys (counts, sums, minima, maxima; AVG as a sum and a count);
branch ``i`` is the distinct non-NULL values of distinct argument ``i`` per
group (DISTINCT skips NULLs), each once: a first-occurrence filter (a GROUP BY
of its columns when the input is an updating table). Their union (``__g`` the
branch, ``__v<i>`` argument ``i``, NULL elsewhere) feeds a second GROUP BY of
the keys that aggregates ``__v<i>`` for the distinct aggregates and combines
branch 0's partial results. In streaming mode it takes branch 0's changelog
with retractions; a distinct branch only ever inserts.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa

from fastops.table.expressions import AggCall, Call, Cast, Col, Expr, Lit
from fastops.table.plan import Distinct, Filter, PlanError, PlanNode, Project, infer_type

__all__ = ["agg_calls", "expand_distinct"]

_PLAIN = ("count", "sum", "avg", "min", "max")
_DISTINCT = ("count", "sum", "avg", "min", "max")


def agg_calls(items: Sequence[tuple[str, Expr]], having: Expr | None) -> list[AggCall]:
    """The aggregate calls of ``items`` and ``having``, outermost ones, in order."""
    found: list[AggCall] = []

    def visit(e: Expr) -> None:
        if isinstance(e, AggCall):
            found.append(e)
            return
        for c in e.children():
            visit(c)

    for _, e in items:
        visit(e)
    if having is not None:
        visit(having)
    return found


def expand_distinct(child: PlanNode, key_exprs: Sequence[Expr], items: Sequence[tuple[str, Expr]],
                    having: Expr | None, streaming: bool, build: Callable[..., PlanNode],
                    union: Callable[[list[PlanNode]], PlanNode]) -> PlanNode:
    """GROUP BY ``key_exprs`` SELECT ``items`` [HAVING ``having``] with DISTINCT
    aggregates over several arguments (``build`` is ``build_aggregate``, ``union``
    a UNION ALL of plans)."""
    calls = agg_calls(items, having)
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
    # keys, arguments and plain arguments computed once, then read by every branch
    pre = Project(child, list(key_items) + [(vnames[r], a) for r, a in args.items()] +
                  [(n, a) for n, a in plain_args.values()])
    # branch 0: the plain aggregates' partial results per group of the keys
    key_cols = [n for n, _ in key_items]
    part_items: list[tuple[str, Expr]] = [(n, Col(n)) for n in key_cols]
    partial: dict[str, Any] = {}  # repr(plain call) -> how the outer aggregate combines its partials
    for c in calls:
        if (c.distinct and c.fn not in ("min", "max")) or repr(c) in partial:
            continue
        arg = Col(plain_args[repr(c.arg)][0]) if c.arg is not None else None
        n = len(part_items)
        if c.fn == "avg":
            part_items += [(f"__s{n}", AggCall("sum", arg)), (f"__c{n}", AggCall("count", arg))]
            partial[repr(c)] = ("avg", f"__s{n}", f"__c{n}")
        else:
            part_items.append((f"__a{n}", AggCall(c.fn, arg)))
            partial[repr(c)] = ({"count": "sum"}.get(c.fn, c.fn), f"__a{n}")
    part = build(pre, [Col(n) for n in key_cols], part_items, None, None, streaming)
    pcols = {n: part.schema.field(n).type for n, _ in part_items[len(key_cols):]}
    nulls: list[tuple[str, Expr]] = [(v, Cast(Lit(None), vtypes[r])) for r, v in vnames.items()]
    branches: list[PlanNode] = [Project(part, [(n, Col(n)) for n in key_cols] + [("__g", Cast(Lit(0), pa.int64()))]
                                        + nulls + [(n, Col(n)) for n in pcols])]
    # branch i: the distinct values of argument i per group (DISTINCT skips NULLs), each once
    for i, v in enumerate(vnames.values(), start=1):
        row: list[tuple[str, Expr]] = [(n, Col(n)) for n in key_cols] + [("__g", Cast(Lit(i), pa.int64()))]
        row += [(v2, Col(v2)) if v2 == v else (v2, e) for v2, e in nulls]
        values: PlanNode = Filter(Project(pre, row), Call("is_valid", [Col(v)]))
        cols = [n for n, _ in row]
        values = Distinct(values) if not values.changelog else \
            build(values, [Col(n) for n in cols], [(n, Col(n)) for n in cols], None, None, streaming)
        branches.append(Project(values, [(n, Col(n)) for n in cols] +
                                [(n, Cast(Lit(None), t)) for n, t in pcols.items()]))
    inner = union(branches)

    def outer(e: Expr) -> Expr:
        def fn(node: Expr) -> Expr | None:
            if isinstance(node, AggCall):
                if node.distinct and node.fn not in ("min", "max"):
                    assert node.arg is not None
                    return AggCall(node.fn, Col(vnames[repr(node.arg)]))
                how = partial[repr(node)]
                if how[0] == "avg":
                    # the partial columns are NULL outside branch 0
                    s = Cast(AggCall("sum", Col(how[1])), pa.float64())
                    return Call("divide", [s, Call("nullif", [AggCall("sum", Col(how[2])), Lit(0)])])
                return AggCall(how[0], Col(how[1]))
            if repr(node) in keys:
                return Col(keys[repr(node)])
            return None
        return e.transform(fn)

    return build(inner, [Col(n) for n, _ in key_items], [(n, outer(e)) for n, e in items],
                 outer(having) if having is not None else None, None, streaming)
