"""Flink's legacy group windows.

``GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE), k`` (also ``HOP(ts, slide, size)``
and ``SESSION(ts, gap)``) with ``TUMBLE_START`` / ``TUMBLE_END`` /
``TUMBLE_ROWTIME`` (``HOP_*``, ``SESSION_*``) in the select list is planned as
the window TVF query it stands for: ``FROM TABLE(TUMBLE(TABLE t,
DESCRIPTOR(ts), INTERVAL '1' MINUTE)) GROUP BY window_start, window_end, k``
with ``window_start`` / ``window_end`` / ``window_time`` for the auxiliary
functions (``*_ROWTIME`` is the rowtime of the result, ``end - 1 ms``). A
``SESSION`` group window is per group key, as Flink's.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlglot import exp

from fastops.table.expressions import Col
from fastops.table.plan import PlanNode, SqlError, WindowDef, WindowTVF

__all__ = ["legacy_group_window"]

_KINDS = {"TUMBLE": "TUMBLE", "HOP": "HOP", "SESSWIN": "SESSION"}  # SESSION( is SESSWIN( after preprocess
_PARTS = {"START": "window_start", "END": "window_end", "ROWTIME": "window_time"}


def _window_call(g: Any) -> str | None:
    if isinstance(g, exp.Anonymous) and g.name.upper() in _KINDS:
        return _KINDS[g.name.upper()]
    return None


def legacy_group_window(compiler: Any, q: exp.Select, node: PlanNode, scope: Any,
                        interval_ms: Callable[[Any], int]) -> tuple[exp.Select, PlanNode] | None:
    """``(q, node)`` rewritten onto a window TVF if ``q`` groups by a legacy group window, else None.

    ``compiler`` is the SQL QueryCompiler (for ``expr``), ``interval_ms`` reads an INTERVAL,
    ``scope`` the columns of ``node``; the rewritten query reads ``window_start`` /
    ``window_end`` / ``window_time``."""
    group = q.args.get("group")
    calls = [g for g in (group.expressions if group is not None else []) if _window_call(g)]
    if not calls:
        return None
    if len(calls) > 1:
        raise SqlError("GROUP BY names more than one group window (TUMBLE / HOP / SESSION)")
    call = calls[0]
    kind = _KINDS[call.name.upper()]
    args = call.expressions
    want = {"TUMBLE": 2, "HOP": 3, "SESSION": 2}[kind]
    if len(args) != want:
        form = {"TUMBLE": "TUMBLE(time_attr, size)", "HOP": "HOP(time_attr, slide, size)",
                "SESSION": "SESSION(time_attr, gap)"}[kind]
        raise SqlError(f"the group window {kind}() takes {want} arguments: {form}")
    ts = compiler.expr(args[0], scope)
    if not isinstance(ts, Col):
        raise SqlError(f"the time attribute of {kind}() must be a column, got {args[0].sql()!r}")
    ms = [interval_ms(a) for a in args[1:]]
    if kind == "TUMBLE":
        w = WindowDef("tumble", ts.col, size=ms[0])
    elif kind == "HOP":
        w = WindowDef("hop", ts.col, size=ms[1], slide=ms[0])
    else:
        w = WindowDef("session", ts.col, gap=ms[0])
    tvf = WindowTVF(node, w)
    q = q.copy()

    def aux(n: Any) -> Any:
        if isinstance(n, exp.Anonymous) and "_" in n.name:
            head, _, part = n.name.upper().rpartition("_")
            if head in ("TUMBLE", "HOP", "SESSION") and part in _PARTS | {"PROCTIME": ""}:
                if head != kind:
                    raise SqlError(f"{n.name.upper()}() does not match the group window {kind}() of GROUP BY")
                if part == "PROCTIME":  # the processing-time attribute of the row the window emits
                    return exp.Anonymous(this="PROCTIME", expressions=[])
                return exp.column(_PARTS[part])
        return n

    items = []
    for i, p in enumerate(q.expressions):
        if isinstance(p, exp.Anonymous) and aux(p) is not p:  # unnamed: EXPR$i, as Flink names it
            p = exp.alias_(p, f"EXPR${i}", quoted=True)
        items.append(p.transform(aux))
    q.set("expressions", items)
    keys = []
    for g in q.args["group"].expressions:
        keys += [exp.column("window_start"), exp.column("window_end")] if _window_call(g) else [g]
    q.args["group"].set("expressions", keys)
    for part in ("having", "order"):
        if q.args.get(part) is not None:
            q.set(part, q.args[part].transform(aux))
    return q, tvf
