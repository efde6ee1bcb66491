"""Table API expressions: ``col``, ``lit``, operators, functions and aggregates.

The one expression type of the Table API is :class:`Expr`::

    from fastops.table import col, lit
    t.where(col("amount") > 10).select(col("id"), (col("amount") * 2).alias("twice"))
    t.group_by(col("k")).select(col("k"), col("v").sum.alias("total"))

An ``Expr`` is a small tree evaluated column-at-a-time with
``pyarrow.compute`` over a record batch (no per-row Python). SQL compiles to
the same trees. ``pyarrow.compute`` expressions (``fastops.col("x") > 0``) are
accepted too, wherever a scalar expression is, and are wrapped as they are.

Aggregates are properties or methods of an expression (PyFlink spelling):
``.count``, ``.sum``, ``.avg``, ``.min``, ``.max``, ``.approx_count_distinct``,
``.approx_percentile(q)``. Window properties: ``col("w").start`` / ``.end``.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.types as pat

from fastops.core.arrow import as_batch
from fastops.operators.basic import evaluate
from fastops.table.builtins import FUNCTIONS as _BUILTINS
from fastops.table.builtins import NEEDS_ROWS, FunctionError
from fastops.table.types import to_arrow, to_sql

__all__ = [
    "AggCall",
    "Expr",
    "ExpressionError",
    "as_expr",
    "call",
    "coalesce",
    "col",
    "concat",
    "concat_ws",
    "current_timestamp",
    "date_format",
    "from_unixtime",
    "if_then_else",
    "lit",
    "timestamp_diff",
    "unix_timestamp",
]


class ExpressionError(TypeError):
    """An expression cannot be evaluated (unknown column, type mismatch)."""


def _len(batch: Any) -> int:
    return batch.num_rows


def broadcast(value: Any, n: int) -> pa.Array:
    """An array of ``n`` values from an array or a scalar."""
    if isinstance(value, pa.ChunkedArray):
        return value.combine_chunks()
    if isinstance(value, pa.Scalar):
        if not value.is_valid:
            return pa.nulls(n, value.type)
        return pa.repeat(value, n)
    return value


class Expr:
    """A scalar (or aggregate) expression over the columns of a table."""

    # -- tree -----------------------------------------------------------------
    def children(self) -> list[Expr]:
        return []

    def with_children(self, kids: list[Expr]) -> Expr:
        return self

    def eval(self, batch: Any) -> Any:  # pa.Array | pa.Scalar
        raise NotImplementedError

    def name(self) -> str | None:
        """The output name a projection gives this expression by default."""
        return None

    def columns(self) -> set[str]:
        out: set[str] = set()
        for c in self.children():
            out |= c.columns()
        return out

    def contains_agg(self) -> bool:
        return any(c.contains_agg() for c in self.children())

    def transform(self, fn: Callable[[Expr], Expr | None]) -> Expr:
        """Rewrite bottom-up-first: ``fn(node)`` returns a replacement or None."""
        rep = fn(self)
        if rep is not None:
            return rep
        kids = self.children()
        if not kids:
            return self
        return self.with_children([k.transform(fn) for k in kids])

    # -- naming ---------------------------------------------------------------
    def alias(self, *names: str) -> Expr:
        if len(names) != 1:
            raise ValueError("alias of a scalar expression takes one name")
        return Alias(self, names[0])

    # -- operators ------------------------------------------------------------
    def _bin(self, op: str, other: Any, reverse: bool = False) -> Expr:
        o = as_expr(other)
        return Call(op, [o, self] if reverse else [self, o])

    def __add__(self, o): return self._bin("add", o)
    def __radd__(self, o): return self._bin("add", o, True)
    def __sub__(self, o): return self._bin("subtract", o)
    def __rsub__(self, o): return self._bin("subtract", o, True)
    def __mul__(self, o): return self._bin("multiply", o)
    def __rmul__(self, o): return self._bin("multiply", o, True)
    def __truediv__(self, o): return self._bin("divide", o)
    def __rtruediv__(self, o): return self._bin("divide", o, True)
    def __mod__(self, o): return self._bin("mod", o)
    def __rmod__(self, o): return self._bin("mod", o, True)
    def __neg__(self): return Call("negate", [self])
    def __eq__(self, o): return self._bin("equal", o)
    def __ne__(self, o): return self._bin("not_equal", o)
    def __lt__(self, o): return self._bin("less", o)
    def __le__(self, o): return self._bin("less_equal", o)
    def __gt__(self, o): return self._bin("greater", o)
    def __ge__(self, o): return self._bin("greater_equal", o)
    def __and__(self, o): return self._bin("and_kleene", o)
    def __rand__(self, o): return self._bin("and_kleene", o, True)
    def __or__(self, o): return self._bin("or_kleene", o)
    def __ror__(self, o): return self._bin("or_kleene", o, True)
    def __invert__(self): return Call("invert", [self])

    __hash__ = object.__hash__

    def __bool__(self) -> bool:
        raise TypeError("an expression has no truth value: combine conditions with & and |, not and/or")

    # -- predicates and functions ---------------------------------------------
    @property
    def is_null(self) -> Expr:
        return Call("is_null", [self])

    @property
    def is_not_null(self) -> Expr:
        return Call("is_valid", [self])

    def cast(self, t: Any) -> Expr:
        return Cast(self, to_arrow(t))

    def is_in(self, *values: Any) -> Expr:
        """``col("a").in_(1, 2)``; ``col("a").in_(table)``: a value of ``table``'s one column (a semi join)."""
        if len(values) == 1 and hasattr(values[0], "_node"):  # a Table
            return InTable(self, values[0])
        vals = list(values[0]) if len(values) == 1 and isinstance(values[0], (list, tuple, set)) else list(values)
        return InList(self, vals)

    in_ = is_in

    def between(self, lo: Any, hi: Any) -> Expr:
        return (self >= lo) & (self <= hi)

    def like(self, pattern: str) -> Expr:
        return Call("like", [self, as_expr(pattern)])

    @property
    def upper_case(self) -> Expr:
        return Call("upper", [self])

    @property
    def lower_case(self) -> Expr:
        return Call("lower", [self])

    @property
    def char_length(self) -> Expr:
        return Call("char_length", [self])

    @property
    def trim(self) -> Expr:
        return Call("trim", [self])

    def substring(self, start: Any, length: Any = None) -> Expr:
        args = [self, as_expr(start)] + ([] if length is None else [as_expr(length)])
        return Call("substring", args)

    @property
    def abs(self) -> Expr:
        return Call("abs", [self])

    @property
    def floor(self) -> Expr:
        return Call("floor", [self])

    @property
    def ceil(self) -> Expr:
        return Call("ceil", [self])

    def round(self, digits: int = 0) -> Expr:
        return Call("round", [self, as_expr(digits)])

    # -- Flink's built-in functions, PyFlink's names (fastops.table.builtins) --
    def _fn(self, fn: str, *args: Any) -> Expr:
        return Call(fn, [self] + [as_expr(a) for a in args])

    def regexp(self, regex: str) -> Expr:
        return self._fn("regexp", regex)

    def regexp_replace(self, regex: str, replacement: str) -> Expr:
        return self._fn("regexp_replace", regex, replacement)

    def regexp_extract(self, regex: str, extract_index: int | None = None) -> Expr:
        return self._fn("regexp_extract", regex, *([] if extract_index is None else [extract_index]))

    def split_index(self, separator: str, index: Any) -> Expr:
        return self._fn("split_index", separator, index)

    def lpad(self, length: int, pad: str) -> Expr:
        return self._fn("lpad", length, pad)

    def rpad(self, length: int, pad: str) -> Expr:
        return self._fn("rpad", length, pad)

    def instr(self, s: Any) -> Expr:
        return self._fn("instr", s)

    def locate(self, s: Any, pos: int | None = None) -> Expr:
        """PyFlink's ``s1.locate(s2)``: where ``s1`` occurs in ``s2``."""
        return Call("locate", [self, as_expr(s)] + ([] if pos is None else [as_expr(pos)]))

    def left(self, length: int) -> Expr:
        return self._fn("left", length)

    def right(self, length: int) -> Expr:
        return self._fn("right", length)

    def repeat(self, n: Any) -> Expr:
        return self._fn("repeat", n)

    def replace(self, search: str, replacement: str) -> Expr:
        return self._fn("replace", search, replacement)

    def substr(self, begin_index: Any, length: Any = None) -> Expr:
        return self.substring(begin_index, length)

    def sha2(self, hash_length: int) -> Expr:
        return self._fn("sha2", hash_length)

    def truncate(self, n: int = 0) -> Expr:
        return self._fn("truncate", n)

    def log(self, base: Any = None) -> Expr:
        """``x.log()``: ln(x); ``x.log(b)``: the logarithm of x to base ``b``."""
        return self._fn("log") if base is None else Call("log", [as_expr(base), self])

    def power(self, other: Any) -> Expr:
        return self._fn("power", other)

    def if_null(self, null_replacement: Any) -> Expr:
        return Call("coalesce", [self, as_expr(null_replacement)])

    def json_value(self, path: str) -> Expr:
        return self._fn("json_value", path)

    def json_exists(self, path: str) -> Expr:
        return self._fn("json_exists", path)

    def json_query(self, path: str) -> Expr:
        return self._fn("json_query", path)

    def date_format(self, fmt: str) -> Expr:
        return self._fn("date_format", fmt)

    def extract(self, time_interval_unit: Any) -> Expr:
        """``col("ts").extract("HOUR")`` (a unit name or an enum member such as TimeIntervalUnit.HOUR)."""
        unit = getattr(time_interval_unit, "name", time_interval_unit)
        return Call("extract", [Lit(str(unit).upper()), self])

    md5 = property(lambda self: self._fn("md5"))
    sha1 = property(lambda self: self._fn("sha1"))
    sha224 = property(lambda self: self._fn("sha224"))
    sha256 = property(lambda self: self._fn("sha256"))
    sha384 = property(lambda self: self._fn("sha384"))
    sha512 = property(lambda self: self._fn("sha512"))
    reverse = property(lambda self: self._fn("reverse"))
    init_cap = property(lambda self: self._fn("initcap"))
    ltrim = property(lambda self: self._fn("trim_leading"))
    rtrim = property(lambda self: self._fn("trim_trailing"))
    to_base64 = property(lambda self: self._fn("to_base64"))
    from_base64 = property(lambda self: self._fn("from_base64"))
    ascii = property(lambda self: self._fn("ascii"))
    chr = property(lambda self: self._fn("chr"))
    bin = property(lambda self: self._fn("bin"))
    hex = property(lambda self: self._fn("hex"))
    sign = property(lambda self: self._fn("sign"))
    sqrt = property(lambda self: self._fn("sqrt"))
    ln = property(lambda self: self._fn("ln"))
    exp = property(lambda self: self._fn("exp"))
    log2 = property(lambda self: self._fn("log2"))
    log10 = property(lambda self: self._fn("log10"))
    to_date = property(lambda self: self._fn("to_date"))
    to_timestamp = property(lambda self: self._fn("to_timestamp"))

    # -- intervals (lit(10).minutes) ------------------------------------------
    def _interval(self, ms: int) -> Expr:
        if not isinstance(self, Lit) or not isinstance(self.value, (int, float)):
            raise TypeError("interval units apply to numeric literals: lit(10).minutes")
        return Interval(int(self.value * ms))

    millis = property(lambda self: self._interval(1))
    second = seconds = property(lambda self: self._interval(1000))
    minute = minutes = property(lambda self: self._interval(60_000))
    hour = hours = property(lambda self: self._interval(3_600_000))
    day = days = property(lambda self: self._interval(86_400_000))

    # -- aggregates -----------------------------------------------------------
    count = property(lambda self: AggCall("count", self))
    sum = property(lambda self: AggCall("sum", self))
    avg = property(lambda self: AggCall("avg", self))
    min = property(lambda self: AggCall("min", self))
    max = property(lambda self: AggCall("max", self))
    stddev_pop = property(lambda self: AggCall("stddev_pop", self))
    stddev_samp = property(lambda self: AggCall("stddev_samp", self))
    var_pop = property(lambda self: AggCall("var_pop", self))
    var_samp = property(lambda self: AggCall("var_samp", self))
    approx_count_distinct = property(lambda self: AggCall("approx_count_distinct", self))

    def approx_percentile(self, q: float) -> Expr:
        return AggCall("approx_percentile", self, (float(q),))

    def over(self, window: Any) -> Expr:
        """This aggregate over the OVER window ``window`` (its alias) of
        ``table.over_window(Over.partition_by(...).order_by(...).alias("w"))``."""
        return OverRef(self, as_column_expr(window))

    # -- window properties ----------------------------------------------------
    @property
    def start(self) -> Expr:
        return WindowProp(self, "start")

    @property
    def end(self) -> Expr:
        return WindowProp(self, "end")

    @property
    def rowtime(self) -> Expr:
        return WindowProp(self, "rowtime")


class Col(Expr):
    def __init__(self, name: str):
        if not isinstance(name, str):
            raise TypeError(f"col() needs a column name, got {name!r}")
        self.col = name

    def eval(self, batch):
        i = batch.schema.get_field_index(self.col)
        if i < 0:
            raise ExpressionError(f"column {self.col!r} not found (columns: {batch.schema.names})")
        return batch.column(i)

    def name(self):
        return self.col

    def columns(self):
        return {self.col}

    def __repr__(self):
        return self.col


class Lit(Expr):
    def __init__(self, value: Any, type: Any = None):
        self.value = value
        self.type = None if type is None else to_arrow(type)

    def eval(self, batch):
        if isinstance(self.value, pa.Scalar):
            return self.value
        return pa.scalar(self.value, type=self.type)

    def __repr__(self):
        return repr(self.value)


class Interval(Expr):
    """A duration literal in milliseconds (``INTERVAL '1' MINUTE``, ``lit(1).minutes``)."""

    def __init__(self, ms: int):
        self.ms = int(ms)

    def eval(self, batch):
        return pa.scalar(self.ms, pa.duration("ms"))

    def __repr__(self):
        return f"INTERVAL {self.ms} ms"


class Alias(Expr):
    def __init__(self, expr: Expr, alias: str):
        if not isinstance(alias, str):
            raise TypeError(f"alias needs a name, got {alias!r}")
        self.expr = expr
        self.alias_name = alias

    def children(self):
        return [self.expr]

    def with_children(self, kids):
        return Alias(kids[0], self.alias_name)

    def eval(self, batch):
        return self.expr.eval(batch)

    def name(self):
        return self.alias_name

    def __repr__(self):
        return f"{self.expr!r} AS {self.alias_name}"


class PyArrowExpr(Expr):
    """A ``pyarrow.compute.Expression`` used as it is."""

    def __init__(self, expr: pc.Expression):
        self.expr = expr

    def eval(self, batch):
        return evaluate(as_batch(batch), {"_": self.expr}).column(0)

    def name(self):
        s = str(self.expr)
        return s if s.isidentifier() else None

    def columns(self):
        s = str(self.expr)
        return {s} if s.isidentifier() else set()

    def __repr__(self):
        return str(self.expr)


def _num(t: pa.DataType) -> bool:
    return pat.is_integer(t) or pat.is_floating(t) or pat.is_decimal(t)


def _temporal_arith(op: str, a: Any, b: Any) -> Any:
    """timestamp +/- duration (and timestamp - timestamp)."""
    return pc.call_function(op, [a, b])


def _sql_mod(a: Any, b: Any) -> Any:
    if pat.is_floating(a.type) or pat.is_floating(b.type):
        q = pc.trunc(pc.divide(pc.cast(a, pa.float64()), pc.cast(b, pa.float64())))
        return pc.subtract(a, pc.multiply(q, b))
    # integers: truncated division (the sign follows the dividend), as SQL MOD
    return pc.subtract(a, pc.multiply(pc.divide(a, b), b))


def _substring(s: Any, start: Any, length: Any = None) -> Any:
    st = start.as_py() if isinstance(start, pa.Scalar) else None
    ln = length.as_py() if isinstance(length, pa.Scalar) else None
    if st is None or (length is not None and ln is None):
        raise ExpressionError("SUBSTRING needs literal start and length")
    begin = max(st - 1, 0)
    stop = None if length is None else max(st - 1 + ln, begin)
    return pc.utf8_slice_codeunits(s, begin, stop)


_FUNCS: dict[str, Callable[..., Any]] = {
    "add": pc.add, "subtract": pc.subtract, "multiply": pc.multiply, "divide": pc.divide,
    "negate": pc.negate, "mod": _sql_mod,
    "equal": pc.equal, "not_equal": pc.not_equal, "less": pc.less, "less_equal": pc.less_equal,
    "greater": pc.greater, "greater_equal": pc.greater_equal,
    "and_kleene": pc.and_kleene, "or_kleene": pc.or_kleene, "invert": pc.invert,
    "is_null": lambda a: pc.is_null(a), "is_valid": pc.is_valid,
    "like": lambda a, p: pc.match_like(a, p.as_py()),
    "upper": pc.utf8_upper, "lower": pc.utf8_lower, "char_length": pc.utf8_length,
    "trim": pc.utf8_trim_whitespace, "ltrim": pc.utf8_ltrim_whitespace, "rtrim": pc.utf8_rtrim_whitespace,
    "substring": _substring, "abs": pc.abs, "floor": pc.floor, "ceil": pc.ceil,
    "round": lambda a, d: pc.round(a, int(d.as_py())), "sqrt": pc.sqrt, "ln": pc.ln, "exp": pc.exp,
    "power": pc.power, "log10": pc.log10,
    "concat": lambda *a: pc.binary_join_element_wise(*a, ""),
    "coalesce": pc.coalesce,
    "struct_field": lambda s, name: pc.struct_field(s, [name.as_py()]),  # ROW column . field
}
_FUNCS.update(_BUILTINS)  # Flink's built-in functions (fastops.table.builtins)

_SYMBOL = {"add": "+", "subtract": "-", "multiply": "*", "divide": "/", "mod": "%", "equal": "=",
           "not_equal": "<>", "less": "<", "less_equal": "<=", "greater": ">", "greater_equal": ">=",
           "and_kleene": "AND", "or_kleene": "OR"}


def _describe(v: Any) -> str:
    t = v.type if hasattr(v, "type") else type(v)
    return to_sql(t) if isinstance(t, pa.DataType) else str(t)


class Call(Expr):
    """A built-in scalar function over its arguments."""

    def __init__(self, fn: str, args: Sequence[Expr]):
        if fn not in _FUNCS:
            raise ValueError(f"unknown function {fn!r}")
        self.fn = fn
        self.args = list(args)

    def children(self):
        return list(self.args)

    def with_children(self, kids):
        return Call(self.fn, kids)

    def eval(self, batch):
        vals = [a.eval(batch) for a in self.args]
        fn = _FUNCS[self.fn]
        if self.fn in ("add", "subtract") and any(isinstance(v.type, pa.DurationType) for v in vals):
            return _temporal_arith(self.fn, vals[0], vals[1])
        if self.fn in ("concat", "coalesce") or (self.fn in ("is_null", "is_valid")):
            n = _len(batch)
            vals = [broadcast(v, n) if isinstance(v, pa.Scalar) and self.fn != "concat" else v for v in vals]
        try:
            out = fn(_len(batch), *vals) if self.fn in NEEDS_ROWS else fn(*vals)
        except FunctionError as exc:
            raise ExpressionError(f"{self!r}: {exc}") from None
        except (pa.ArrowNotImplementedError, pa.ArrowTypeError, pa.ArrowInvalid) as exc:
            raise ExpressionError(f"{self!r}: cannot apply {self.fn} to "
                                  f"{', '.join(_describe(v) for v in vals)} ({exc})") from None
        return out

    def __repr__(self):
        if self.fn in _SYMBOL and len(self.args) == 2:
            return f"({self.args[0]!r} {_SYMBOL[self.fn]} {self.args[1]!r})"
        if self.fn == "invert":
            return f"NOT {self.args[0]!r}"
        return f"{self.fn.upper()}({', '.join(repr(a) for a in self.args)})"


class InList(Expr):
    def __init__(self, expr: Expr, values: list):
        self.expr = expr
        self.values = values

    def children(self):
        return [self.expr]

    def with_children(self, kids):
        return InList(kids[0], self.values)

    def eval(self, batch):
        v = broadcast(self.expr.eval(batch), _len(batch))
        if pat.is_null(v.type):
            return pa.nulls(len(v), pa.bool_())
        vs = pa.array(self.values)
        if vs.type != v.type:
            try:
                vs = vs.cast(v.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
                raise ExpressionError(f"{self!r}: IN list of {_describe(vs)} for {_describe(v)} ({exc})") from None
        res = pc.is_in(v, value_set=vs)
        # SQL: x IN (...) is null when x is null
        return pc.if_else(pc.is_null(v), pa.scalar(None, pa.bool_()), res)

    def __repr__(self):
        return f"{self.expr!r} IN ({', '.join(repr(v) for v in self.values)})"


class InTable(Expr):
    """``col("a").in_(table)``: planned as a semi join by ``Table.where``."""

    def __init__(self, expr: Expr, table: Any):
        self.expr = expr
        self.table = table

    def children(self):
        return [self.expr]

    def with_children(self, kids):
        return InTable(kids[0], self.table)

    def eval(self, batch):
        raise ExpressionError(f"{self!r}: IN of a table is a condition of where() / filter() (joined by &)")

    def __repr__(self):
        return f"{self.expr!r} IN ({self.table!r})"


class Cast(Expr):
    def __init__(self, expr: Expr, to: pa.DataType):
        self.expr = expr
        self.to = to

    def children(self):
        return [self.expr]

    def with_children(self, kids):
        return Cast(kids[0], self.to)

    def eval(self, batch):
        v = self.expr.eval(batch)
        if isinstance(v, pa.Scalar):
            v = broadcast(v, _len(batch))
        src = v.type
        try:
            if pat.is_floating(src) and pat.is_integer(self.to):
                return pc.cast(pc.trunc(v), self.to, safe=False)
            if pat.is_floating(src) and pat.is_decimal(self.to):
                return pc.cast(pc.round(v, self.to.scale), self.to)
            if pat.is_boolean(src) and pat.is_string(self.to):
                return pc.if_else(v, "TRUE", "FALSE")
            if pat.is_timestamp(src) and pat.is_string(self.to):
                return pc.strftime(v, "%Y-%m-%d %H:%M:%S")
            return pc.cast(v, self.to)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
            raise ExpressionError(f"CAST({self.expr!r} AS {to_sql(self.to)}): cannot cast "
                                  f"{to_sql(src)} ({exc})") from None

    def __repr__(self):
        return f"CAST({self.expr!r} AS {to_sql(self.to)})"


class Case(Expr):
    """``CASE WHEN c1 THEN v1 ... ELSE d END`` (a null condition counts as false)."""

    def __init__(self, whens: list[tuple[Expr, Expr]], default: Expr | None):
        self.whens = whens
        self.default = default

    def children(self):
        out = [x for w in self.whens for x in w]
        return out + ([self.default] if self.default is not None else [])

    def with_children(self, kids):
        n = len(self.whens)
        whens = [(kids[2 * i], kids[2 * i + 1]) for i in range(n)]
        return Case(whens, kids[2 * n] if self.default is not None else None)

    def eval(self, batch):
        n = _len(batch)
        conds = [pc.fill_null(broadcast(c.eval(batch), n), False) for c, _ in self.whens]
        vals = [broadcast(v.eval(batch), n) for _, v in self.whens]
        if self.default is not None:
            vals.append(broadcast(self.default.eval(batch), n))
        types = {v.type for v in vals if not pat.is_null(v.type)}
        if len(types) > 1:
            if all(_num(t) for t in types):
                target = pa.float64() if any(pat.is_floating(t) for t in types) else pa.int64()
            elif all(pat.is_string(t) for t in types):
                target = pa.string()
            else:
                raise ExpressionError(f"{self!r}: branches have types {sorted(to_sql(t) for t in types)}")
            vals = [v.cast(target) for v in vals]
        elif types:
            target = types.pop()
            vals = [v.cast(target) if pat.is_null(v.type) else v for v in vals]
        return pc.case_when(pc.make_struct(*conds, field_names=[f"c{i}" for i in range(len(conds))]), *vals)

    def __repr__(self):
        parts = " ".join(f"WHEN {c!r} THEN {v!r}" for c, v in self.whens)
        d = f" ELSE {self.default!r}" if self.default is not None else ""
        return f"CASE {parts}{d} END"


class UdfCall(Expr):
    """A call of a scalar user-defined function (see :mod:`fastops.table.functions`)."""

    def __init__(self, udf: Any, args: Sequence[Expr]):
        self.udf = udf
        self.args = list(args)

    def children(self):
        return list(self.args)

    def with_children(self, kids):
        return UdfCall(self.udf, kids)

    def eval(self, batch):
        n = _len(batch)
        vals = [broadcast(a.eval(batch), n) for a in self.args]
        if n == 0:  # no rows (also: planning): the declared type, without calling the function
            return pa.array([], self.udf.result_type)
        return self.udf.evaluate(vals, n)

    def __repr__(self):
        return f"{self.udf.name}({', '.join(repr(a) for a in self.args)})"


class Pack(Expr):
    """Several expressions as one struct column (fields ``__arg0``, ``__arg1``, ...):
    how a multi-argument aggregate UDF receives its inputs."""

    def __init__(self, args: Sequence[Expr]):
        self.args = list(args)

    def children(self):
        return list(self.args)

    def with_children(self, kids):
        return Pack(kids)

    def eval(self, batch):
        n = _len(batch)
        vals = [broadcast(a.eval(batch), n) for a in self.args]
        return pc.make_struct(*vals, field_names=[f"__arg{i}" for i in range(len(vals))])

    def __repr__(self):
        return ", ".join(repr(a) for a in self.args)


class AggCall(Expr):
    """An aggregate: ``count`` (``arg=None``: rows), ``sum``, ``avg``, ``min``,
    ``max``, ``approx_count_distinct``, ``approx_percentile`` or a UDAF."""

    def __init__(self, fn: str, arg: Expr | None, params: tuple = (), udaf: Any = None,
                 distinct: bool = False):
        self.fn = fn
        self.arg = arg
        self.params = params
        self.udaf = udaf
        self.distinct = distinct

    def children(self):
        return [] if self.arg is None else [self.arg]

    def with_children(self, kids):
        return AggCall(self.fn, kids[0] if kids else None, self.params, self.udaf, self.distinct)

    def contains_agg(self):
        return True

    def eval(self, batch):
        raise ExpressionError(f"aggregate {self!r} used outside a group_by / aggregation")

    def __repr__(self):
        name = self.udaf.name if self.udaf is not None else self.fn.upper()
        arg = "*" if self.arg is None else repr(self.arg)
        p = "".join(f", {x!r}" for x in self.params)
        return f"{name}({'DISTINCT ' if self.distinct else ''}{arg}{p})"


class WindowProp(Expr):
    """``w.start`` / ``w.end`` of a Table API group window alias."""

    def __init__(self, ref: Expr, prop: str):
        self.ref = ref
        self.prop = prop

    def eval(self, batch):
        raise ExpressionError(f"window property {self!r} outside a windowed group_by")

    def __repr__(self):
        return f"{self.ref!r}.{self.prop}"


class OverRef(Expr):
    """``col("v").sum.over(col("w"))``: an aggregate over a Table API OVER window,
    resolved by ``over_window(...).select(...)``."""

    def __init__(self, agg: Expr, window: Expr):
        self.agg = agg
        self.window = window

    def children(self):
        return [self.agg]

    def with_children(self, kids):
        return OverRef(kids[0], self.window)

    def contains_agg(self):
        return False

    def eval(self, batch):
        raise ExpressionError(f"{self!r}: an OVER aggregate is selected from table.over_window(...)")

    def __repr__(self):
        return f"{self.agg!r} OVER {self.window!r}"


def col(name: str) -> Expr:
    """A column reference."""
    return Col(name)


def lit(value: Any, type: Any = None) -> Expr:
    """A literal; ``type`` (SQL name or Arrow type) fixes its type."""
    return Lit(value, type)


def call(fn: Any, *args: Any) -> Expr:
    """Call a user-defined function object (or a built-in by name) on expressions."""
    exprs = [as_expr(a) for a in args]
    if isinstance(fn, str):
        return Call(fn, exprs)
    return fn(*exprs)


def if_then_else(cond: Any, a: Any, b: Any) -> Expr:
    return Case([(as_expr(cond), as_expr(a))], as_expr(b))


def date_format(timestamp: Any, fmt: str) -> Expr:
    """``DATE_FORMAT(timestamp, 'yyyy-MM-dd HH:mm')`` (a Java date pattern)."""
    return Call("date_format", [as_expr(timestamp), as_expr(fmt)])


def timestamp_diff(time_point_unit: Any, time_point1: Any, time_point2: Any) -> Expr:
    """``TIMESTAMPDIFF(unit, t1, t2)``: whole units from ``t1`` to ``t2``."""
    unit = str(getattr(time_point_unit, "name", time_point_unit)).upper()
    return Call("timestampdiff", [Lit(unit), as_expr(time_point1), as_expr(time_point2)])


def from_unixtime(unix_time: Any, fmt: str | None = None) -> Expr:
    return Call("from_unixtime", [as_expr(unix_time)] + ([] if fmt is None else [as_expr(fmt)]))


def unix_timestamp(date_str: Any = None, fmt: str | None = None) -> Expr:
    args = [] if date_str is None else [as_expr(date_str)] + ([] if fmt is None else [as_expr(fmt)])
    return Call("unix_timestamp", args)


def current_timestamp() -> Expr:
    return Call("current_timestamp", [])


def concat_ws(separator: Any, *strings: Any) -> Expr:
    return Call("concat_ws", [as_expr(separator)] + [as_expr(s) for s in strings])


def concat(*args: Any) -> Expr:
    return Call("concat", [as_expr(a) for a in args])


def coalesce(*args: Any) -> Expr:
    return Call("coalesce", [as_expr(a) for a in args])


def as_expr(v: Any) -> Expr:
    """An :class:`Expr` from an expression, a pyarrow expression or a Python literal."""
    if isinstance(v, Expr):
        return v
    if isinstance(v, pc.Expression):
        s = str(v)
        if s.isidentifier() and v.equals(pc.field(s)):
            return Col(s)  # fastops.col("x") is a plain column reference
        return PyArrowExpr(v)
    if v is None or isinstance(v, (bool, int, float, str, bytes, np.generic)) or hasattr(v, "isoformat"):
        return Lit(v)
    raise TypeError(f"expected an expression (fastops.table.col / lit) or a literal, got {type(v).__name__}")


def as_column_expr(v: Any) -> Expr:
    """Like :func:`as_expr`, but a bare string names a column."""
    if isinstance(v, str):
        return Col(v)
    return as_expr(v)
