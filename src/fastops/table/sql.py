"""SQL: sqlglot's AST -> Table plans (``sql_query``) and statements (``execute_sql``).

Parsing is sqlglot's. Flink syntax sqlglot does not know is normalised on its
tokens first, keeping every character position (so error positions stay
right): backquoted identifiers become double-quoted, ``TABLE t`` inside a
window TVF becomes ``t``, ``SESSION`` TVF's ``PARTITION BY`` keys are noted
and blanked, plural interval units (``MINUTES``) become singular, and a
``CREATE TABLE``'s ``WATERMARK FOR ts AS ts - INTERVAL ...`` is noted and
blanked. Names of user-defined functions are removed from sqlglot's function
table for the statement, so ``split(s)`` reaches the UDF.

Supported: SELECT with expressions, ``*``, WHERE, GROUP BY, HAVING, ORDER BY,
LIMIT / OFFSET (or FETCH FIRST n ROWS ONLY), DISTINCT,
[INNER | LEFT | RIGHT | FULL] JOIN ... ON at least one equality between the
sides plus any other condition (interval joins when it bounds the time
attributes' difference), comma joins (``FROM a, b WHERE a.k = b.k``: the WHERE's
conditions between the two sides are the join's), subqueries in FROM, ``[NOT] IN`` / ``[NOT] EXISTS``
subqueries as conditions of WHERE (semi and anti joins, ``setops``),
WITH, UNION / INTERSECT / EXCEPT [ALL], VALUES, CAST, CASE, IN, BETWEEN,
LIKE, IS [NOT] NULL, string and math functions, UDF / UDAF calls, LATERAL
TABLE(udtf(...)), ``CROSS JOIN UNNEST(arr) [WITH ORDINALITY] AS t(x)`` and
``LEFT JOIN UNNEST(...) ON TRUE`` (arrays, maps, arrays of rows; ``ARRAY[...]``
as UNNEST's argument), the window TVFs ``TUMBLE``, ``HOP``, ``CUMULATE``,
``SESSION`` (positional or named arguments) with ``GROUP BY window_start,
window_end, ...``, OVER aggregates and the WINDOW clause (``over``), Top-N
and deduplication with ``ROW_NUMBER()`` (``topn``), GROUPING SETS / ROLLUP / CUBE
with GROUPING() (``grouping``),
``APPROX_COUNT_DISTINCT``, ``PERCENTILE_APPROX``.

Refused by name, with what to use instead (``check_supported``), rather than
run with a part ignored: OVER functions other than COUNT / SUM / AVG / MIN /
MAX / ROW_NUMBER, QUALIFY, MATCH_RECOGNIZE, recursive WITH, UNNEST other than
joined to the table before it (of one argument, RIGHT / FULL joins), time
travel (FOR SYSTEM_TIME AS OF outside a temporal join), MINUS,
subqueries inside expressions, cross / natural / semi / anti join syntax,
connectors other than filesystem, print, blackhole, redis-stream and jdbc,
and the statements fastops has no use for (SET, STATEMENT SET, ALTER, ...).

Semantics to know: ``/`` on integers is integer division (Flink); ``AVG``
is DOUBLE (Flink keeps the input type); a ``GROUP BY`` without a window in
streaming mode gives a changelog, and so does a regular outer join.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import pyarrow as pa

try:
    import sqlglot
    from sqlglot import exp
    from sqlglot.dialects.dialect import Dialect
    from sqlglot.errors import ParseError, TokenError
    from sqlglot.parser import Parser
    from sqlglot.tokens import TokenType
except ImportError as _exc:  # SQL is optional; the Table API works without it
    raise ImportError("fastops' SQL face needs sqlglot: pip install 'fastops[table]' "
                      f"(or pip install sqlglot) ({_exc})") from _exc

from fastops.core.durations import parse_duration
from fastops.table.expressions import (
    AggCall,
    Call,
    Case,
    Cast,
    Col,
    Expr,
    ExpressionError,
    InList,
    Interval,
    Lit,
    UdfCall,
    broadcast,
)
from fastops.table.group_windows import legacy_group_window
from fastops.table.grouping import has_grouping, plan_grouping_sets
from fastops.table.over import Frame, OverCall, OverWindow, over_calls, plan_over
from fastops.table.plan import (
    Filter,
    Lateral,
    PlanError,
    PlanNode,
    Project,
    Sort,
    SqlError,
    Unnest,
    UnnestCall,
    WindowDef,
    WindowTVF,
    infer_type,
    join_of,
)
from fastops.table.setops import SemiJoin, SetOp, values_table
from fastops.table.table import _union, build_aggregate, distinct_of
from fastops.table.temporal import temporal_join_of
from fastops.table.topn import drop_unused_rank, rank_filter
from fastops.table.types import to_arrow

__all__ = ["SqlError", "check_supported", "compile_query", "parse", "preprocess"]


# ---------------------------------------------------------------- preprocessing

_TVFS = {"TUMBLE", "HOP", "CUMULATE", "SESSION"}
# Flink's legacy group windows: GROUP BY TUMBLE(ts, INTERVAL ...) and their auxiliary functions
# (SESSION( is SESSWIN( after preprocess).
_GROUP_WINDOW_FUNCTIONS = {"TUMBLE", "HOP", "SESSWIN", "CUMULATE"} | {
    f"{w}_{part}" for w in ("TUMBLE", "HOP", "SESSION") for part in ("START", "END", "ROWTIME", "PROCTIME")}
_UNITS = {"MILLISECONDS": "MILLISECOND", "SECONDS": "SECOND", "MINUTES": "MINUTE", "HOURS": "HOUR",
          "DAYS": "DAY", "WEEKS": "WEEK", "MONTHS": "MONTH", "YEARS": "YEAR"}


@dataclass
class Prepared:
    sql: str
    session_partitions: list = field(default_factory=list)  # per SESSION call, in order
    watermarks: list = field(default_factory=list)  # (column, expression text)


def _backticks(sql: str) -> str:
    out = []
    quote = None
    for ch in sql:
        if quote:
            if ch == quote:
                quote = None
            out.append('"' if ch == "`" and quote is None else ch)
            continue
        if ch == "'":
            quote = "'"
        elif ch == "`":
            out.append('"')
            quote = "`"
            continue
        out.append(ch)
    return "".join(out)


def _argument_end(toks: list, j: int) -> int:
    """Index of the token that ends the function argument starting at ``j``: the
    next comma or closing parenthesis at the same nesting depth (or the end)."""
    level = 0
    while j < len(toks):
        name = toks[j].token_type.name
        if name == "L_PAREN":
            level += 1
        elif name == "R_PAREN":
            if level == 0:
                break
            level -= 1
        elif name == "COMMA" and level == 0:
            break
        j += 1
    return j


def preprocess(sql: str) -> Prepared:
    """Normalise Flink syntax on sqlglot's tokens, keeping positions."""
    sql = _backticks(sql)
    try:
        toks = sqlglot.tokenize(sql)
    except TokenError as exc:
        raise SqlError(f"cannot read the SQL statement: {exc}") from None
    chars = list(sql)
    prep = Prepared(sql)

    def blank(a: int, b: int) -> None:  # inclusive
        for i in range(a, b + 1):
            if chars[i] not in "\n":
                chars[i] = " "

    def put(pos: int, text: str) -> None:
        chars[pos:pos + len(text)] = list(text)

    depth_stack: list[str] = []  # per open paren: the TVF name or ""
    n = len(toks)
    i = 0
    while i < n:
        t = toks[i]
        up = t.text.upper()
        typ = t.token_type.name
        if typ == "L_PAREN":
            prev = toks[i - 1].text.upper() if i else ""
            depth_stack.append(prev if prev in _TVFS else "")
        elif typ == "R_PAREN":
            if depth_stack:
                depth_stack.pop()
        elif up == "SESSION" and i + 1 < n and toks[i + 1].token_type.name == "L_PAREN":
            put(t.start, "SESSWIN")
        elif up == "TABLE" and depth_stack and i + 1 < n and toks[i + 1].token_type.name != "L_PAREN" and \
                toks[i - 1].token_type.name in ("L_PAREN", "COMMA", "FARROW"):
            blank(t.start, t.end)  # TABLE t as a table function argument
        elif typ == "PARTITION_BY" and depth_stack and depth_stack[-1] == "SESSION":
            # keys up to the next comma at this depth: "k" or "(k1, k2)"
            j = _argument_end(toks, i + 1)
            keys = [tj.text for tj in toks[i + 1:j]
                    if tj.token_type.name not in ("L_PAREN", "R_PAREN", "COMMA")]
            prep.session_partitions.append(keys)
            blank(t.start, toks[j - 1].end)
            i = j
            continue
        elif up in _UNITS and i and toks[i - 1].token_type.name in ("STRING", "NUMBER"):
            put(t.start, _UNITS[up].ljust(len(t.text)))
        elif up == "WATERMARK" and i + 1 < n and toks[i + 1].text.upper() == "FOR":
            j = _argument_end(toks, i + 2)
            text = sql[toks[i + 2].start:toks[j - 1].end + 1]
            m = re.match(r"\s*([\"\w]+)\s+AS\s+(.*)$", text, re.IGNORECASE | re.DOTALL)
            if m is None:
                raise SqlError(f"cannot read the WATERMARK clause {text!r} (expected WATERMARK FOR ts AS "
                               f"ts - INTERVAL '2' SECOND)")
            prep.watermarks.append((m.group(1).strip('"'), m.group(2)))
            start = toks[i - 1].start if i and toks[i - 1].token_type.name == "COMMA" else t.start
            blank(start, toks[j - 1].end)
            i = j
            continue
        elif up == "ENFORCED" and i and toks[i - 1].text.upper() == "NOT":
            blank(toks[i - 1].start, t.end)
        i += 1
    prep.sql = "".join(chars)
    return prep


_DIALECTS: dict[frozenset, Any] = {}


def _dialect(udf_names: frozenset) -> Any:
    """A sqlglot dialect whose function table leaves the UDF names alone."""
    d = _DIALECTS.get(udf_names)
    if d is None:
        class _Parser(Parser):
            FUNCTIONS = {k: v for k, v in Parser.FUNCTIONS.items()
                         if k not in udf_names and k not in _PLAIN_CALLS}

            def _parse_types(self, *args: Any, **kwargs: Any) -> Any:
                # Flink's ROW<name type, ...> is sqlglot's STRUCT<...>
                if self._curr is not None and self._curr.token_type == TokenType.ROW and \
                        self._next is not None and self._next.token_type == TokenType.LT:
                    self._curr.token_type = TokenType.STRUCT
                return super()._parse_types(*args, **kwargs)

        d = type(f"_FastopsSQL{len(_DIALECTS)}", (Dialect,), {"Parser": _Parser})()
        _DIALECTS[udf_names] = d
    return d


def parse(sql: str, udf_names: Sequence[str] = ()) -> tuple[exp.Expression, Prepared]:
    prep = preprocess(sql)
    for pattern, what, instead in _UNPARSED_STATEMENTS:  # sqlglot reads some as other statements
        if re.match(pattern, prep.sql, re.IGNORECASE):
            raise _unsupported(what, None, instead)
    try:
        tree = sqlglot.parse_one(prep.sql, dialect=_dialect(frozenset(n.upper() for n in udf_names)))
    except ParseError as exc:
        errs = getattr(exc, "errors", None) or []
        where = ""
        if errs:
            e0 = errs[0]
            where = f" at line {e0.get('line')}, column {e0.get('col')}"
            hl = e0.get("highlight")
            if hl:
                where += f" (near {hl!r})"
            desc = e0.get("description", "")
        else:
            desc = str(exc)
        _raise_if_unsupported_syntax(prep.sql)
        missing = re.search(r"Required keyword: '(\w+)' missing for <class '[\w.]*?(\w+)'>", desc)
        if missing:  # sqlglot's own name for a built-in function called with too few arguments
            desc = (f"the built-in function {missing.group(2).upper()} misses its argument "
                    f"{missing.group(1)!r} (a UDF of that name is used only once it is registered "
                    "with create_temporary_function)")
        raise SqlError(f"SQL parse error{where}: {desc}") from None
    check_supported(tree)
    # newer sqlglot types parse_one as its base class Expr; a parsed statement is an Expression
    return cast(exp.Expression, tree), prep


# ---------------------------------------------------------------- unsupported constructs
# Flink SQL that fastops does not run is refused by name (and what to use instead)
# before planning, instead of failing later on a piece of it or running something else.

def _unsupported(what: str, node: Any = None, instead: str = "") -> SqlError:
    pos = _pos(node) if node is not None else ""
    return SqlError(f"{what} is not supported by fastops SQL{pos}" + (f"; {instead}" if instead else ""))


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def _short(node: Any, limit: int = 60) -> str:
    text = node.sql()
    return text if len(text) <= limit else text[:limit - 3] + "..."


_OVER_INSTEAD = ("the OVER functions are COUNT, SUM, AVG, MIN, MAX (frames ROWS / RANGE BETWEEN ... "
                 "PRECEDING AND CURRENT ROW) and ROW_NUMBER for Top-N; for other per-row state use a "
                 "KeyedProcessFunction in the DataStream API")
_QUALIFY_INSTEAD = ("filter in an outer query, as Flink's Top-N: SELECT * FROM (SELECT ..., ROW_NUMBER() OVER "
                    "(...) AS rn FROM t) WHERE rn <= N")
_SUBQUERY_INSTEAD = ("IN / EXISTS subqueries are conditions of WHERE joined by AND; otherwise join the "
                     "subquery's result (JOIN ... ON)")
_EXCEPT_INSTEAD = "write EXCEPT [ALL]"

# Node types refused wherever they appear: (name, what to do instead).
_UNSUPPORTED_NODES: dict[type, tuple[str, str]] = {
    exp.MatchRecognize: ("MATCH_RECOGNIZE (row pattern matching)",
                         "match patterns with a KeyedProcessFunction (keyed state and timers) in the "
                         "DataStream API"),
    exp.Version: ("FOR SYSTEM_TIME AS OF outside a join (time travel)",
                  "a temporal join reads a versioned table's version at each row's time: "
                  "FROM t JOIN v FOR SYSTEM_TIME AS OF t.ts ON t.k = v.k"),
    exp.Pivot: ("PIVOT / UNPIVOT", "write one aggregate per output column, e.g. "
                "SUM(CASE WHEN k = 'a' THEN v END) AS a"),
    exp.TableSample: ("TABLESAMPLE", "filter on a hash or random value in WHERE"),
}

# Statements that change stored data or catalogs (by class name: older sqlglot lacks some).
_STATEMENTS = {getattr(exp, cls): name for cls, name in [
    ("Alter", "ALTER"), ("AlterTable", "ALTER TABLE"), ("Delete", "DELETE"), ("Update", "UPDATE"),
    ("Merge", "MERGE"), ("TruncateTable", "TRUNCATE TABLE"), ("Analyze", "ANALYZE")] if hasattr(exp, cls)}

# CREATE TABLE connectors the catalog can read or write (environment.py's _connector_scan and
# _insert_into), and the filesystem connector's formats.
_CONNECTORS = {"filesystem": "Parquet or CSV files, source and sink", "print": "sink",
               "blackhole": "sink", "redis-stream": "Redis Streams, source",
               "jdbc": "PostgreSQL, sink, source and lookup source",
               "nexmark": "the Nexmark benchmark's events, source", "datagen": "generated rows, source"}
_FILE_FORMATS = ("parquet", "csv")


def check_supported(tree: Any) -> None:
    """Raise SqlError naming the first construct of ``tree`` fastops does not run."""
    for node in tree.walk():
        if isinstance(node, exp.Version) and isinstance(node.parent, exp.Table) and \
                isinstance(node.parent.parent, exp.Join):
            continue  # a temporal join (JOIN t FOR SYSTEM_TIME AS OF ...): planned by QueryCompiler.join
        named = _UNSUPPORTED_NODES.get(type(node))
        if named is not None:
            raise _unsupported(named[0], node, named[1])
        if isinstance(node, exp.Unnest):
            _check_unnest(node)
        if isinstance(node, exp.Select):
            _check_select(node)
        elif isinstance(node, exp.With) and node.args.get("recursive"):
            _check_recursive(node)
        elif isinstance(node, exp.Join):
            _check_join(node)
        elif isinstance(node, exp.Lateral) and isinstance(node.this, (exp.Subquery, exp.Select)):
            raise _unsupported("LATERAL (subquery)", node,
                               _SUBQUERY_INSTEAD + " or use LATERAL TABLE(udtf(...))")
        elif isinstance(node, exp.Fetch):
            opts = node.args.get("limit_options") or node  # sqlglot < 26 keeps them on the Fetch
            if opts.args.get("percent") or opts.args.get("with_ties"):
                raise _unsupported("FETCH ... PERCENT / WITH TIES", node,
                                   "use FETCH FIRST n ROWS ONLY or LIMIT n")
        elif isinstance(node, exp.Insert):
            _check_insert(node)
        elif isinstance(node, exp.Create):
            _check_create(node)
        elif isinstance(node, exp.Command):  # a statement sqlglot could not parse
            _raise_if_unsupported_syntax(node.sql())
            words = f"{node.this} {node.expression if isinstance(node.expression, str) else ''}".split()
            raise _unsupported("the statement " + " ".join(words[:2]).upper(), node)
        elif type(node) in _STATEMENTS:
            raise _unsupported(f"the statement {_STATEMENTS[type(node)]}", node,
                               "tables are views of data (create_temporary_view) or connector tables "
                               "(CREATE TABLE ... WITH, written by INSERT INTO)")


def _check_select(q: exp.Select) -> None:
    if q.args.get("qualify") is not None:
        raise _unsupported("QUALIFY", q.args["qualify"], _QUALIFY_INSTEAD)
    distinct = q.args.get("distinct")
    if distinct is not None and distinct.args.get("on") is not None:
        raise _unsupported("DISTINCT ON", distinct, "GROUP BY the columns and aggregate the others")
    group = q.args.get("group")
    if group is not None and group.args.get("all"):
        raise _unsupported("GROUP BY ALL", group, "list the grouping columns")


def _check_recursive(with_: exp.With) -> None:
    """WITH RECURSIVE is refused when a CTE reads itself (a plain CTE under it runs as written)."""
    for cte in with_.expressions:
        if any(t.name.lower() == cte.alias.lower() for t in cte.this.find_all(exp.Table)):
            raise _unsupported(f"WITH RECURSIVE (the recursive query {cte.alias!r})", cte,
                               "compute the iterations in Python, or unroll a fixed number of them into "
                               "CTEs that each read the previous one")


_UNNEST_FORM = "FROM t CROSS JOIN UNNEST(t.arr) AS u(x), or LEFT JOIN UNNEST(t.arr) AS u(x) ON TRUE"


def _check_unnest(u: exp.Unnest) -> None:
    """UNNEST runs joined to the table before it, with one ARRAY or MAP argument."""
    if not isinstance(u.parent, exp.Join):
        where = "in FROM without a table before it" if isinstance(u.parent, exp.From) else "in an expression"
        raise _unsupported(f"UNNEST {where}", u, f"expand a column of a table: {_UNNEST_FORM}")
    if len(u.expressions) != 1:
        raise _unsupported(f"UNNEST of {len(u.expressions)} arguments", u,
                           "unnest one ARRAY or MAP per join: ... CROSS JOIN UNNEST(a) AS u(x) CROSS JOIN "
                           "UNNEST(b) AS v(y)")
    j = u.parent
    side = (j.args.get("side") or "").upper()
    on = j.args.get("on")
    if side in ("RIGHT", "FULL"):
        raise _unsupported(f"{side} JOIN UNNEST", j, _UNNEST_FORM)
    if side == "LEFT" and not (isinstance(on, exp.Boolean) and on.this is True):
        raise _unsupported("LEFT JOIN UNNEST without ON TRUE", j,
                           "write LEFT JOIN UNNEST(t.arr) AS u(x) ON TRUE and filter in WHERE")
    if j.args.get("using"):
        raise _unsupported("JOIN UNNEST ... USING", j, _UNNEST_FORM)


def _check_join(j: exp.Join) -> None:
    kind = (j.args.get("kind") or "").upper()
    if kind in ("SEMI", "ANTI"):
        raise _unsupported(f"{(j.args.get('side') or '').upper()} {kind} JOIN".strip(), j,
                           "write a semi join as WHERE [x IN (SELECT ...) | EXISTS (SELECT ... WHERE ...)], "
                           "an anti join with NOT IN / NOT EXISTS")
    if (j.args.get("method") or "").upper() == "NATURAL":
        raise _unsupported("NATURAL JOIN", j, "join with ON a.k = b.k")


def _check_insert(ins: exp.Insert) -> None:
    target = ins.this
    if isinstance(target, exp.Schema) and target.expressions:
        cols = ", ".join(c.name for c in target.expressions)
        raise _unsupported(f"INSERT INTO {target.this.name} ({cols}) (a column list)", ins,
                           "select the columns in the sink table's order, INSERT INTO "
                           f"{target.this.name} SELECT ...")
    if isinstance(target, exp.Table) and target.args.get("partition"):
        raise _unsupported("INSERT ... PARTITION (...)", ins,
                           "the filesystem connector writes unpartitioned files")


def _check_create(create: exp.Create) -> None:
    kind = (create.args.get("kind") or "").upper()
    if kind == "FUNCTION":
        raise _unsupported("CREATE FUNCTION", create, "register a Python function with "
                           "t_env.create_temporary_function(name, udf(...)) (or udaf / udtf)")
    if kind not in ("TABLE", "VIEW"):
        raise _unsupported(f"CREATE {kind}", create, "fastops SQL has one catalog of tables and views")
    props = create.args.get("properties")
    if kind != "TABLE" or props is None:
        return
    opts = {}
    for p in props.expressions:
        if isinstance(p, exp.PartitionedByProperty):
            raise _unsupported("PARTITIONED BY", p, "the filesystem connector writes unpartitioned files")
        if isinstance(p, exp.LikeProperty):
            raise _unsupported("CREATE TABLE ... LIKE", p, "list the columns")
        if isinstance(p, exp.Property):
            key = p.this.this if isinstance(p.this, exp.Literal) else p.name
            val = p.args.get("value")
            opts[str(key).lower()] = (val.this if isinstance(val, exp.Literal) else
                                      (val.sql() if val is not None else None), p)
    if "connector" in opts:
        connector, node = opts["connector"]
        if str(connector).lower() not in _CONNECTORS:
            known = ", ".join(f"'{k}' ({v})" for k, v in _CONNECTORS.items())
            raise _unsupported(f"connector {connector!r}", node,
                               f"the connectors are {known}; read other sources with the DataStream API "
                               "and t_env.from_data_stream(stream)")
        if str(connector).lower() == "filesystem" and "format" in opts and \
                str(opts["format"][0]).lower() not in _FILE_FORMATS:
            raise _unsupported(f"format {opts['format'][0]!r} of the filesystem connector", opts["format"][1],
                               "use 'parquet' or 'csv'")
        csv_options = [k for k in opts if k.startswith("csv.")]
        if str(connector).lower() == "filesystem" and csv_options:
            raise _unsupported(f"the csv format option {csv_options[0]!r}", opts[csv_options[0]][1],
                               "fastops reads and writes Flink's default csv: comma-separated fields, "
                               "double quotes, no header line")


# Statements sqlglot does not read (or reads as something else), by their first words.
_UNPARSED_STATEMENTS = [
    (r"^\s*(BEGIN|EXECUTE)\s+STATEMENT\s+SET\b", "STATEMENT SET", "run each INSERT INTO with execute_sql"),
    (r"^\s*(RE)?SET\b", "the statement SET / RESET (configuration)",
     "configure the TableEnvironment with its arguments: TableEnvironment(mode=..., parallelism=..., "
     "batch_size=...)"),
    (r"^\s*(CHANGELOG_MODE|ESTIMATED_COST|JSON_EXECUTION_PLAN|PLAN_ADVICE)\b", "EXPLAIN with details",
     "EXPLAIN takes the query alone: EXPLAIN SELECT ..."),
]
# Syntax sqlglot cannot parse: the words that name it, looked for after a parse error.
_UNPARSED = _UNPARSED_STATEMENTS + [
    (r"\bMATCH_RECOGNIZE\b", "MATCH_RECOGNIZE (row pattern matching)",
     _UNSUPPORTED_NODES[exp.MatchRecognize][1]),
    (r"\bMETADATA\b", "a METADATA column", "declare physical columns only"),
    (r"\bMINUS\s+(ALL\s+)?\(?\s*SELECT\b", "MINUS (EXCEPT)", _EXCEPT_INSTEAD),
]


def _raise_if_unsupported_syntax(sql: str) -> None:
    """After a parse error: name the unsupported construct ``sql`` holds, if one is there."""
    try:  # the words outside string literals and comments
        words = " ".join(t.text if t.token_type.name != "STRING" else "''" for t in sqlglot.tokenize(sql))
    except TokenError:
        return
    for pattern, what, instead in _UNPARSED:
        if re.search(pattern, words, re.IGNORECASE):
            raise _unsupported(what, None, instead)


# ---------------------------------------------------------------- scopes

def _pos(node: Any) -> str:
    for n in ([node] + list(node.walk()) if isinstance(node, exp.Expression) else []):
        meta = getattr(n, "_meta", None) or {}
        if "line" in meta:
            return f" at line {meta['line']}, column {meta['col'] - (meta['end'] - meta['start'])}"
    return ""


@dataclass
class ScopeCol:
    qualifier: str | None
    name: str  # visible name
    physical: str  # column in the plan


_OUTER = "__outer__."  # a correlated subquery's reference to a column of the enclosing query


class Scope:
    def __init__(self, cols: list[ScopeCol], outer: Scope | None = None):
        self.cols = cols
        self.outer = outer  # a subquery's enclosing query: its columns are found there, marked _OUTER

    @staticmethod
    def of(node: PlanNode, qualifier: str | None) -> Scope:
        return Scope([ScopeCol(qualifier, n, n) for n in node.schema.names])

    def resolve(self, name: str, qualifier: str | None, node: Any) -> str:
        hits = [c for c in self.cols if c.name.lower() == name.lower()
                and (qualifier is None or (c.qualifier or "").lower() == qualifier.lower())]
        exact = [c for c in hits if c.name == name]
        if len(exact) == 1:
            return exact[0].physical
        if len(hits) == 1:
            return hits[0].physical
        full = f"{qualifier}.{name}" if qualifier else name
        own_table = qualifier is not None and any((c.qualifier or "").lower() == qualifier.lower() for c in self.cols)
        if not hits and self.outer is not None and not own_table:
            return _OUTER + self.outer.resolve(name, qualifier, node)
        if not hits:
            known = ", ".join(sorted({(c.qualifier + "." if c.qualifier else "") + c.name for c in self.cols}))
            raise SqlError(f"column {full!r} not found{_pos(node)}; available: {known}")
        raise SqlError(f"column {full!r} is ambiguous{_pos(node)}; qualify it with a table name")

    def star(self, qualifier: str | None) -> list[tuple[str, str]]:
        out = [(c.name, c.physical) for c in self.cols
               if qualifier is None or (c.qualifier or "").lower() == qualifier.lower()]
        return out


# ---------------------------------------------------------------- compiler

_UNIT_MS = {"MILLISECOND": 1, "SECOND": 1000, "MINUTE": 60_000, "HOUR": 3_600_000, "DAY": 86_400_000,
            "WEEK": 7 * 86_400_000}

_BIN = {exp.Add: "add", exp.Sub: "subtract", exp.Mul: "multiply", exp.Div: "divide", exp.Mod: "mod",
        exp.EQ: "equal", exp.NEQ: "not_equal", exp.GT: "greater", exp.GTE: "greater_equal",
        exp.LT: "less", exp.LTE: "less_equal", exp.And: "and_kleene", exp.Or: "or_kleene",
        exp.DPipe: "concat", exp.Pow: "power"}
_UNARY = {exp.Upper: "upper", exp.Lower: "lower", exp.Length: "char_length", exp.Abs: "abs",
          exp.Floor: "floor", exp.Ceil: "ceil", exp.Sqrt: "sqrt", exp.Ln: "ln", exp.Exp: "exp"}
_NAMED = {"UPPER": "upper", "LOWER": "lower", "CHAR_LENGTH": "char_length", "CHARACTER_LENGTH": "char_length",
          "ABS": "abs", "FLOOR": "floor", "CEIL": "ceil", "CEILING": "ceil", "SQRT": "sqrt", "LN": "ln",
          "EXP": "exp", "POWER": "power", "LOG10": "log10", "LTRIM": "ltrim", "RTRIM": "rtrim",
          "CONCAT": "concat", "MOD": "mod"}
# Flink's built-in functions (fastops.table.builtins) that sqlglot reads as plain calls
_NAMED.update({n: n.lower() for n in (
    "DATE_FORMAT", "TO_TIMESTAMP", "TO_DATE", "UNIX_TIMESTAMP", "FROM_UNIXTIME", "TO_TIMESTAMP_LTZ", "REGEXP",
    "SPLIT_INDEX", "BIN", "E", "LOG", "LOG2", "LOG10", "RAND_INTEGER", "SHA224", "SHA256", "SHA384", "SHA512",
    "JSON_VALUE", "JSON_EXISTS", "JSON_QUERY", "IS_DIGIT", "IS_ALPHA", "PROCTIME")})
_NAMED.update({"NOW": "current_timestamp", "CURRENT_ROW_TIMESTAMP": "current_timestamp", "SHA1": "sha1"})
# sqlglot function names left as plain calls, so that Flink's argument order holds (LOG(base, x))
_PLAIN_CALLS = frozenset({"LOG", "LOG2", "LOG10", "TIMESTAMPDIFF", "TIMESTAMPADD"})


def interval_ms(node: Any) -> int:
    """Milliseconds of an ``INTERVAL 'n' UNIT`` literal."""
    if isinstance(node, exp.Interval):
        this = node.this
        unit = node.args.get("unit")
        value = this.this if isinstance(this, exp.Literal) else this.sql()
        if unit is None or not (uname := unit.name.upper().rstrip("S")):
            return parse_duration(str(value))
        uname = {"MILLISECOND": "MILLISECOND", "MS": "MILLISECOND"}.get(uname, uname)
        if uname not in _UNIT_MS:
            raise _unsupported(f"the interval unit {unit.name.upper()!r}", node,
                               "intervals are MILLISECOND, SECOND, MINUTE, HOUR, DAY or WEEK (months and "
                               "years have no fixed length)")
        try:
            return int(float(str(value).strip()) * _UNIT_MS[uname])
        except ValueError:
            raise SqlError(f"cannot read interval {node.sql()!r}{_pos(node)}") from None
    raise SqlError(f"expected an INTERVAL, got {node.sql()!r}{_pos(node)}")


class _ArrayOf(Expr):
    """``ARRAY[e1, ..., ek]`` as UNNEST's argument: per row, the list of the k values
    (integers widen to the widest, mixed numbers to DOUBLE)."""

    def __init__(self, items: list[Expr]):
        self.items = items

    def children(self) -> list[Expr]:
        return list(self.items)

    def with_children(self, kids: list[Expr]) -> Expr:
        return _ArrayOf(kids)

    def eval(self, batch: Any) -> Any:
        n = batch.num_rows
        vals = [broadcast(e.eval(batch), n) for e in self.items]
        types = {v.type for v in vals if not pa.types.is_null(v.type)}
        if not types:
            t: pa.DataType = pa.null()
        elif len(types) == 1:
            t = types.pop()
        elif all(pa.types.is_integer(x) for x in types):
            t = max(types, key=lambda x: x.bit_width)
        elif all(pa.types.is_integer(x) or pa.types.is_floating(x) or pa.types.is_decimal(x) for x in types):
            t = pa.float64()
        else:
            raise ExpressionError(f"ARRAY elements of different types: {', '.join(sorted(map(str, types)))}")
        k = len(vals)
        flat = pa.concat_arrays([v.cast(t) for v in vals])
        order = (np.arange(k)[None, :] * n + np.arange(n)[:, None]).ravel()
        return pa.ListArray.from_arrays(pa.array(np.arange(0, n * k + 1, k, dtype=np.int32)), flat.take(order))

    def __repr__(self) -> str:
        return f"ARRAY[{', '.join(map(repr, self.items))}]"


class QueryCompiler:
    def __init__(self, t_env: Any, prep: Prepared):
        self.t_env = t_env
        self.prep = prep
        self.session_index = 0
        self.ctes: dict[str, PlanNode] = {}
        self.named_windows: dict[str, Any] = {}  # the WINDOW clause of the SELECT being compiled

    @property
    def streaming(self) -> bool:
        return self.t_env.mode == "streaming"

    # -- FROM ----------------------------------------------------------------------
    def table_ref(self, name: str, node: Any) -> PlanNode:
        if name in self.ctes:
            return self.ctes[name]
        try:
            return self.t_env._lookup(name)._node
        except KeyError:
            known = ", ".join(sorted(self.t_env.list_tables())) or "none"
            raise SqlError(f"table {name!r} not found{_pos(node)}; known tables and views: {known}") from None

    def from_item(self, item: Any) -> tuple[PlanNode, Scope]:
        alias = item.alias_or_name if isinstance(item, (exp.Table, exp.Subquery)) else None
        if isinstance(item, exp.Table):
            inner = item.this
            if isinstance(inner, exp.Anonymous) and inner.name.upper() == "TABLE":
                node = self.tvf(inner)
                alias = item.alias or None
                return node, Scope.of(node, alias)
            if isinstance(inner, (exp.Anonymous, exp.Func)) and not isinstance(inner, exp.Identifier):
                raise _unsupported(f"the table expression {_short(inner)!r}", inner)
            name = item.name
            node = self.table_ref(name, item)
            return node, Scope.of(node, item.alias or name)
        if isinstance(item, exp.Subquery):
            node = self.query(item.this)
            return node, Scope.of(node, item.alias or None)
        if isinstance(item, exp.Lateral):
            raise SqlError(f"LATERAL must follow a table{_pos(item)}")
        if isinstance(item, exp.Values):
            node = self.values(item)
            return node, Scope.of(node, item.alias or None)
        raise _unsupported(f"the FROM item {_short(item)!r}", item)

    def semi_join(self, node: PlanNode, scope: Scope, cond: Any) -> PlanNode:
        """``[NOT] EXISTS (subquery)`` / ``x [NOT] IN (subquery)`` over ``node``: a semi
        or anti join. Equalities between the subquery's columns and the enclosing
        query's (in the subquery's WHERE) are join keys; its other correlated
        conditions are evaluated on each pair."""
        negate = False
        inner = cond
        while isinstance(inner, (exp.Paren, exp.Not)):
            negate ^= isinstance(inner, exp.Not)
            inner = inner.this
        if isinstance(inner, exp.Exists):
            sub, lhs = inner.this, []
        else:
            sub = inner.args["query"]
            lhs = inner.this.expressions if isinstance(inner.this, exp.Tuple) else [inner.this]
        while isinstance(sub, exp.Subquery):
            sub = sub.this
        right, selected, correlated = self.subquery(sub, scope, need_select=bool(lhs))
        what = ("NOT " if negate else "") + ("EXISTS" if not lhs else "IN")
        if lhs and len(lhs) != len(selected):
            raise SqlError(f"{what} compares {len(lhs)} value(s) with a subquery of {len(selected)} column(s)"
                           f"{_pos(inner)}")
        null_aware = negate and bool(lhs)
        # NOT IN over several columns or a correlated subquery: an anti join whose pairs match
        # unless some compared column differs with neither side NULL (SQL's three-valued NOT IN)
        by_condition = null_aware and (len(lhs) != 1 or bool(correlated))
        # the subquery's columns, renamed apart from the enclosing query's
        taken = set(node.schema.names)
        rename: dict[str, str] = {}
        ritems: list[tuple[str, Expr]] = []
        for n in right.schema.names:
            new, k = n, 0
            while new in taken:
                new, k = f"{n}{k}", k + 1
            taken.add(new)
            rename[n] = new
            ritems.append((new, Col(n)))
        lpre: list[tuple[str, Expr]] = []
        lkeys, rkeys = [], []
        unless_differ: list[Expr] = []  # by_condition: each compared pair, equal or NULL on a side
        for i, (le, rx) in enumerate(zip(lhs, selected)):
            lx = self.expr(le, scope)
            if lx.contains_agg() or over_calls(lx):
                raise SqlError(f"{what}: the value compared must be a plain expression{_pos(le)}")
            if isinstance(lx, Col):
                lkeys.append(lx.col)
            else:
                lkeys.append(f"__in{i}")
                lpre.append((f"__in{i}", lx))
            if isinstance(rx, Col):
                rkeys.append(rename[rx.col])
            else:
                ritems.append((f"__sub{i}", rx))
                rkeys.append(f"__sub{i}")
            if by_condition:
                mine, theirs = Col(lkeys.pop()), Col(rkeys.pop())
                same_or_null = Call("or_kleene", [Call("equal", [mine, theirs]), Call("is_null", [mine])])
                unless_differ.append(Call("or_kleene", [same_or_null, Call("is_null", [theirs])]))

        def to_pair(e: Expr) -> Expr:
            def fn(x: Expr) -> Expr | None:
                if isinstance(x, Col):
                    return Col(x.col[len(_OUTER):]) if x.col.startswith(_OUTER) else Col(rename.get(x.col, x.col))
                return None
            return e.transform(fn)

        residual: Expr | None = None
        for e in unless_differ:
            residual = e if residual is None else Call("and_kleene", [residual, e])
        null_aware = null_aware and not by_condition
        for e in correlated:
            a = [x for x in e.args if isinstance(x, Col)] if isinstance(e, Call) and e.fn == "equal" else []
            if len(a) == 2 and len([x for x in a if x.col.startswith(_OUTER)]) == 1:
                outer, own = (a[0], a[1]) if a[0].col.startswith(_OUTER) else (a[1], a[0])
                lkeys.append(outer.col[len(_OUTER):])
                rkeys.append(rename[own.col])
                continue
            e = to_pair(e)
            residual = e if residual is None else Call("and_kleene", [residual, e])
        left = node if not lpre else Project(node, [(n, Col(n)) for n in node.schema.names] + lpre)
        needed = set(rkeys) | (residual.columns() if residual is not None else set())
        ritems = [(n, e) for n, e in ritems if n in needed] or ritems[:1]  # the columns the join reads
        try:
            out: PlanNode = SemiJoin(left, Project(right, ritems), lkeys, rkeys, negate, residual, null_aware,
                                     self.streaming)
        except PlanError as exc:
            raise SqlError(f"{exc}{_pos(inner)}") from None
        if lpre:
            out = Project(out, [(n, Col(n)) for n in node.schema.names])
        return out

    def subquery(self, sub: Any, outer: Scope, need_select: bool) -> tuple[PlanNode, list[Expr], list[Expr]]:
        """An IN / EXISTS subquery: its plan, its selected expressions (over the
        plan's columns) and its WHERE conditions that read the enclosing query."""
        plain = isinstance(sub, exp.Select) and not any(
            sub.args.get(k) for k in ("group", "having", "distinct", "limit", "order", "offset", "windows",
                                      "qualify", "with", "with_")) and \
            not any(p.find(exp.AggFunc, exp.Window) for p in sub.expressions)
        if not plain:
            try:
                plan = self.query(sub)
            except SqlError as exc:
                raise SqlError(f"{exc} (a subquery that reads the enclosing query's columns must be a plain "
                               "SELECT ... FROM ... WHERE)") from None
            return plan, [Col(n) for n in plan.schema.names], []
        node, own = self.from_clause(sub)
        if node is None:
            raise _unsupported("a subquery without FROM", sub, "select FROM a table (or VALUES)")
        scope = Scope(own.cols, outer)
        local: list[Expr] = []
        correlated: list[Expr] = []
        where = sub.args.get("where")
        for c in (_and_terms(where.this) if where is not None else []):
            if _subquery_condition(c):
                raise _unsupported("a subquery inside an IN / EXISTS subquery", c, "join the inner one first")
            e = self.expr(c, scope)
            (correlated if _outer_columns(e) else local).append(e)
        if local:
            cond = local[0]
            for e in local[1:]:
                cond = Call("and_kleene", [cond, e])
            node = Filter(node, cond)
        selected: list[Expr] = []
        if need_select:
            for p in sub.expressions:
                if isinstance(p, exp.Star) or (isinstance(p, exp.Column) and isinstance(p.this, exp.Star)):
                    selected.extend(Col(phys) for _, phys in own.star(p.table if isinstance(p, exp.Column) else None))
                    continue
                e = self.expr(p.this if isinstance(p, exp.Alias) else p, scope)
                if _outer_columns(e):
                    raise _unsupported("a column of the enclosing query in an IN subquery's select list", p,
                                       "compare it in the subquery's WHERE")
                selected.append(e)
        return node, selected, correlated

    def values(self, v: exp.Values) -> PlanNode:
        """``VALUES (1, 'a'), (2, 'b') [AS t(x, y)]``: columns EXPR$0, EXPR$1, ... unless named."""
        rows = []
        for r in v.expressions:
            cells = r.expressions if isinstance(r, exp.Tuple) else [r]
            rows.append([self.expr(c, Scope([])) for c in cells])
        alias = v.args.get("alias")
        names = [c.name for c in alias.columns] if alias is not None and alias.columns else \
            [f"EXPR${i}" for i in range(len(rows[0]))]
        if len(names) != len(rows[0]):
            raise SqlError(f"VALUES has {len(rows[0])} columns, its alias names {len(names)}{_pos(v)}")
        try:
            table = values_table(rows, names)
        except PlanError as exc:
            raise SqlError(f"{exc}{_pos(v)}") from None
        return self.t_env.from_arrow(table)._node

    def tvf(self, table_fn: exp.Anonymous) -> PlanNode:
        args = table_fn.expressions
        if len(args) != 1:
            raise SqlError(f"TABLE(...) takes one table function call{_pos(table_fn)}")
        call = args[0]
        fname = call.name.upper() if isinstance(call, (exp.Anonymous, exp.Func)) else ""
        if fname == "SESSWIN":
            fname = "SESSION"
        if fname not in _TVFS:
            raise _unsupported(f"the table function {_short(call)!r} in FROM", call,
                               "the window TVFs are TUMBLE, HOP, CUMULATE and SESSION; join a table "
                               "function with LATERAL TABLE(udtf(...))")
        params = list(call.expressions)
        named: dict[str, Any] = {}
        positional = []
        for p in params:
            if isinstance(p, exp.Kwarg):
                named[p.this.name.upper()] = p.expression
            else:
                positional.append(p)
        order = {"TUMBLE": ["DATA", "TIMECOL", "SIZE", "OFFSET"],
                 "HOP": ["DATA", "TIMECOL", "SLIDE", "SIZE", "OFFSET"],
                 "CUMULATE": ["DATA", "TIMECOL", "STEP", "SIZE", "OFFSET"],
                 "SESSION": ["DATA", "TIMECOL", "GAP"]}[fname]
        if len(positional) > len(order):
            raise _unsupported(f"a {_ordinal(len(order) + 1)} argument of {fname}", positional[len(order)],
                               f"{fname}'s arguments are {', '.join(order)}")
        for k, v in zip(order, positional):
            if k in named:
                raise SqlError(f"{fname}: {k} is given twice (by position and by name){_pos(v)}")
            named[k] = v
        unknown = [k for k in named if k not in order]
        if unknown:
            raise _unsupported(f"the argument {unknown[0]} of {fname}", call,
                               f"{fname}'s arguments are {', '.join(order)}")
        missing = [k for k in order if k != "OFFSET" and k not in named]
        if missing:
            raise SqlError(f"{fname} needs {', '.join(missing)}{_pos(call)}")
        data = named["DATA"]
        if isinstance(data, exp.Column):
            child = self.table_ref(data.name, data)
        elif isinstance(data, (exp.Subquery, exp.Select)):
            child = self.query(data.this if isinstance(data, exp.Subquery) else data)
        else:
            raise SqlError(f"{fname}: DATA must be TABLE name{_pos(data)}")
        tc = named["TIMECOL"]
        if not (isinstance(tc, exp.Anonymous) and tc.name.upper() == "DESCRIPTOR" and tc.expressions):
            raise SqlError(f"{fname}: the time column must be DESCRIPTOR(column){_pos(tc)}")
        if len(tc.expressions) > 1:
            raise _unsupported(f"{fname}: a DESCRIPTOR of {len(tc.expressions)} columns", tc,
                               "give the one time attribute column: DESCRIPTOR(ts)")
        time_col = tc.expressions[0].name
        if time_col not in child.schema.names:
            raise SqlError(f"{fname}: DESCRIPTOR column {time_col!r} not found{_pos(tc)}; "
                           f"columns: {', '.join(child.schema.names)}")
        offset = interval_ms(named["OFFSET"]) if "OFFSET" in named else 0
        if fname == "TUMBLE":
            w = WindowDef("tumble", time_col, size=interval_ms(named["SIZE"]), offset=offset)
        elif fname == "HOP":
            w = WindowDef("hop", time_col, size=interval_ms(named["SIZE"]), slide=interval_ms(named["SLIDE"]),
                          offset=offset)
        elif fname == "CUMULATE":
            w = WindowDef("cumulate", time_col, size=interval_ms(named["SIZE"]),
                          slide=interval_ms(named["STEP"]), offset=offset)
        else:
            part = self.prep.session_partitions[self.session_index] \
                if self.session_index < len(self.prep.session_partitions) else []
            self.session_index += 1
            w = WindowDef("session", time_col, gap=interval_ms(named["GAP"]),
                          partition=[p.strip('"') for p in part])
        return WindowTVF(child, w)

    def from_clause(self, select: exp.Select) -> tuple[PlanNode | None, Scope]:
        frm = select.args.get("from") or select.args.get("from_")
        if frm is None:
            return None, Scope([])
        node, scope = self.from_item(frm.this)
        where = select.args.get("where")
        for j in select.args.get("joins") or []:
            node, scope = self.join(node, scope, j, where.this if where is not None else None)
        return node, scope

    def _comma_join_condition(self, where: Any, scope: Scope, left: PlanNode) -> Any:
        """``FROM a, b WHERE ...``: the WHERE's conjuncts that compare the two
        sides, as the join's ON (the whole WHERE still filters the result);
        None when there is none."""
        parts, todo = [], [where] if where is not None else []
        while todo:
            c = todo.pop()
            if isinstance(c, exp.And):
                todo += [c.expression, c.this]
            elif isinstance(c, exp.Paren) and isinstance(c.this, exp.And):
                todo.append(c.this)
            else:
                parts.append(c)
        ons = []
        for c in parts:
            try:
                cols = self.expr(c, scope).columns()
            except PlanError:  # a column of a table joined later, or a subquery: stays in WHERE
                continue
            if cols & set(left.schema.names) and cols - set(left.schema.names):
                ons.append(c)
        return exp.and_(*ons) if ons else None

    def join(self, left: PlanNode, lscope: Scope, j: exp.Join, where: Any = None) -> tuple[PlanNode, Scope]:
        item = j.this
        if isinstance(item, exp.Lateral):
            return self.lateral(left, lscope, item, j)
        if isinstance(item, exp.Unnest):
            return self.unnest(left, lscope, item, j)
        if isinstance(item, exp.Table) and isinstance(item.this, exp.Anonymous) and \
                item.this.name.upper() == "TABLE" and item.this.expressions and \
                isinstance(item.this.expressions[0], exp.Anonymous) and \
                item.this.expressions[0].name.upper() not in _TVFS | {"SESSWIN"}:
            return self.lateral(left, lscope, item, j)
        right, rscope = self.from_item(item)
        # unique physical names: right columns clashing with the left get a numeric suffix (k -> k0)
        taken = set(left.schema.names)
        items = []
        new_cols = []
        for c in rscope.cols:
            phys = c.physical
            name = phys
            k = 0
            while name in taken:
                name = f"{phys}{k}"
                k += 1
            taken.add(name)
            items.append((name, Col(phys)))
            new_cols.append(ScopeCol(c.qualifier, c.name, name))
        if any(n != e.col for n, e in items):
            right = Project(right, items)
        scope = Scope(lscope.cols + new_cols)
        side = (j.args.get("side") or "").upper()
        kind = (j.args.get("kind") or "").upper()
        how = {"LEFT": "left outer", "RIGHT": "right outer", "FULL": "full outer"}.get(side, "inner")
        on = j.args.get("on")
        if on is None and kind != "CROSS" and not j.args.get("using"):  # FROM a, b WHERE a.k = b.k
            on = self._comma_join_condition(where, scope, left)
        if kind == "CROSS" or on is None:
            if j.args.get("using"):
                raise _unsupported("JOIN ... USING", j, "join with ON a.k = b.k")
            raise _unsupported("a join without ON (CROSS JOIN, FROM a, b)", j,
                               "join ON at least one equality between the two sides")
        cond = self.expr(on, scope)
        version = item.args.get("version") if isinstance(item, exp.Table) else None
        if version is not None:
            return self.temporal_join(left, lscope, right, cond, how, version, item), scope
        try:
            node = join_of(left, right, cond, how, self.streaming)
        except PlanError as exc:
            raise SqlError(f"{exc}{_pos(on)}") from None
        return node, scope

    def temporal_join(self, left: PlanNode, lscope: Scope, right: PlanNode, cond: Expr, how: str,
                      version: exp.Version, item: exp.Table) -> PlanNode:
        """``JOIN item FOR SYSTEM_TIME AS OF left.col ON cond`` (``temporal``)."""
        if str(version.args.get("kind") or "").upper() != "AS OF":
            raise _unsupported(f"FOR SYSTEM_TIME {version.args.get('kind')}", version,
                               "a temporal join reads the version AS OF a column of the probe side")
        as_of = self.expr(version.expression, lscope)
        try:
            return temporal_join_of(left, right, cond, how, as_of, self.streaming, item.name)
        except PlanError as exc:
            raise SqlError(f"{exc}{_pos(version)}") from None

    def unnest(self, left: PlanNode, lscope: Scope, u: exp.Unnest, j: exp.Join) -> tuple[PlanNode, Scope]:
        """``[CROSS | LEFT] JOIN UNNEST(arg) [WITH ORDINALITY] [AS t(names)]``: a ``Lateral``
        whose function is ``Unnest`` (``check_supported`` allowed only these forms). An
        ON condition of an inner join other than TRUE filters the expanded rows."""
        (arg_node,) = u.expressions
        arg = _ArrayOf([self.expr(a, lscope) for a in arg_node.expressions]) \
            if isinstance(arg_node, exp.Array) else self.expr(arg_node, lscope)
        offset = u.args.get("offset")
        try:
            fn = Unnest(infer_type(arg, left.schema), ordinality=bool(offset))
        except PlanError as exc:
            raise SqlError(f"{exc}{_pos(arg_node)}") from None
        alias = u.args.get("alias")
        names = [c.name for c in alias.columns] if alias is not None and alias.columns else []
        if isinstance(offset, exp.Identifier):  # WITH ORDINALITY AS t(x, pos): sqlglot keeps pos apart
            names.append(offset.name)
        if not names:
            names = list(fn.names)
        elif len(names) != len(fn.names):
            cols = f"{len(fn.names)} column{'s' if len(fn.names) > 1 else ''}"
            raise SqlError(f"UNNEST gives {cols} ({', '.join(fn.names)}), its alias names {len(names)}{_pos(u)}")
        taken = set(left.schema.names)
        physical = []
        for n in names:  # unique physical names, as a join's right side gets them (k -> k0)
            name, k = n, 0
            while name in taken:
                name, k = f"{n}{k}", k + 1
            taken.add(name)
            physical.append(name)
        side = (j.args.get("side") or "").upper()
        node: PlanNode = Lateral(left, UnnestCall(arg, fn, physical), left_outer=side == "LEFT")
        qual = alias.name if alias is not None and alias.name else None
        scope = Scope(lscope.cols + [ScopeCol(qual, n, ph) for n, ph in zip(names, physical)])
        on = j.args.get("on")
        if on is not None and side != "LEFT" and not (isinstance(on, exp.Boolean) and on.this is True):
            node = Filter(node, self.expr(on, scope))
        return node, scope

    def lateral(self, left: PlanNode, lscope: Scope, item: Any, j: Any) -> tuple[PlanNode, Scope]:
        fn_call = item.this if isinstance(item, exp.Lateral) else item
        if isinstance(fn_call, exp.Table):
            fn_call = fn_call.this
        if isinstance(fn_call, exp.Anonymous) and fn_call.name.upper() == "TABLE":
            fn_call = fn_call.expressions[0]
        fname = fn_call.name
        f = self.t_env._function(fname)
        if f is None or getattr(f, "kind", "") != "table":
            raise SqlError(f"table function {fname!r} not found{_pos(fn_call)}")
        args = [self.expr(a, lscope) for a in fn_call.expressions]
        call = f(*args)
        alias = item.args.get("alias")
        if alias is not None and alias.columns:
            call.alias(*[c.name for c in alias.columns])
        side = (j.args.get("side") or "").upper() if j is not None else ""
        node = Lateral(left, call, left_outer=side == "LEFT")
        qual = alias.name if alias is not None and alias.name else None
        return node, Scope(lscope.cols + [ScopeCol(qual, n, n) for n in call.names])

    # -- queries ---------------------------------------------------------------------
    def query(self, q: Any) -> PlanNode:
        with_ = q.args.get("with") or q.args.get("with_")
        if with_ is not None:
            for cte in with_.expressions:
                self.ctes[cte.alias] = self.query(cte.this)
        if isinstance(q, exp.Union):
            left = self.query(q.this)
            right = self.query(q.expression)
            node = _union([left, right])
            if q.args.get("distinct"):
                node = distinct_of(node, self.streaming)
            return self.order_limit(q, node, None, [])
        if isinstance(q, (exp.Intersect, exp.Except)):
            kind = "intersect" if isinstance(q, exp.Intersect) else "except"
            left = self.query(q.this)
            right = self.query(q.expression)
            try:
                node = SetOp(left, right, kind, not q.args.get("distinct", True), self.streaming)
            except PlanError as exc:
                raise SqlError(f"{exc}{_pos(q)}") from None
            return self.order_limit(q, node, None, [])
        if isinstance(q, exp.Values):
            return self.values(q)
        if isinstance(q, exp.Subquery):
            return self.query(q.this)
        if not isinstance(q, exp.Select):
            raise SqlError(f"expected a query, got {type(q).__name__.upper()}{_pos(q)}")
        return self.select(q)

    def select(self, q: exp.Select) -> PlanNode:
        node, scope = self.from_clause(q)
        if node is None:
            raise _unsupported("SELECT without FROM", q, "select FROM a table; register literal rows with "
                               "t_env.create_temporary_view(name, t_env.from_elements(rows, column_names))")
        outer_windows = self.named_windows
        self.named_windows = {w.this.name.lower(): w for w in q.args.get("windows") or []}
        try:
            return self._select(q, node, scope)
        finally:
            self.named_windows = outer_windows

    def _select(self, q: exp.Select, node: PlanNode, scope: Scope) -> PlanNode:
        where = q.args.get("where")
        if where is not None:
            conjuncts = _and_terms(where.this)
            subqueries = [c for c in conjuncts if _subquery_condition(c)]
            rest = [c for c in conjuncts if not _subquery_condition(c)]
            if rest:
                cond = self.expr(_and_of(rest), scope)
                if over_calls(cond):
                    raise SqlError(f"an OVER window in WHERE{_pos(where)}; compute it in a subquery and filter "
                                   "the subquery's column")
                node = rank_filter(node, cond)  # a Top-N when it bounds a ROW_NUMBER()
            for c in subqueries:
                node = self.semi_join(node, scope, c)
        legacy = legacy_group_window(self, q, node, scope, interval_ms)  # GROUP BY TUMBLE(ts, ...)
        if legacy is not None:
            q, node = legacy
            scope = Scope(scope.cols + [ScopeCol(None, n, n) for n in ("window_start", "window_end", "window_time")])
        if has_grouping(q):  # GROUPING SETS / ROLLUP / CUBE, GROUPING()
            try:
                grouped = plan_grouping_sets(self, q, node, scope)
            except SqlError:
                raise
            except PlanError as exc:
                raise SqlError(f"{exc}{_pos(q.args.get('group') or q)}") from None
            return self.order_limit(q, grouped, None, [])
        items: list[tuple[str, Expr]] = []
        for i, p in enumerate(q.expressions):
            if isinstance(p, exp.Star) or (isinstance(p, exp.Column) and isinstance(p.this, exp.Star)):
                qual = p.table if isinstance(p, exp.Column) else None
                for vis, phys in scope.star(qual or None):
                    items.append((self._unique(vis, items, phys), Col(phys)))
                continue
            if isinstance(p, exp.Alias):
                name = p.alias
                e = self.expr(p.this, scope)
            else:
                e = self.expr(p, scope)
                name = p.alias_or_name if isinstance(p, exp.Column) else f"EXPR${i}"
            items.append((name, e))
        items = _uniquify(items)
        group = q.args.get("group")
        having = q.args.get("having")
        aliases = dict(items)
        has_agg = any(e.contains_agg() for _, e in items)
        if any(over_calls(e) for _, e in items):
            if group is not None or having is not None or has_agg:
                raise _unsupported("an OVER window in a query with GROUP BY or aggregates", q,
                                   "aggregate in a subquery, then compute the OVER window over its rows")
            try:
                plan = plan_over(node, items, self.streaming)
            except PlanError as exc:
                raise SqlError(f"{exc}{_pos(q.expressions[0])}") from None
            if q.args.get("distinct"):
                plan = distinct_of(plan, self.streaming)
            return self.order_limit(q, plan, scope, items)
        if group is not None or having is not None or has_agg:
            keys = []
            for g in (group.expressions if group is not None else []):
                if isinstance(g, exp.Literal) and not g.is_string:
                    keys.append(items[int(g.this) - 1][1])
                    continue
                if isinstance(g, exp.Column) and not g.table and g.name in aliases and \
                        not any(c.name.lower() == g.name.lower() for c in scope.cols):
                    keys.append(aliases[g.name])
                    continue
                keys.append(self.expr(g, scope))
            hv = self.expr(having.this, scope, aliases) if having is not None else None
            window, src = self.window_source(node, keys)
            plan = build_aggregate(src, keys, items, hv, window, self.streaming)
            if q.args.get("distinct"):
                plan = distinct_of(plan, self.streaming)
            return self.order_limit(q, plan, scope, items)
        used: set[str] = set()
        for _, e in items:
            used |= e.columns()
        plan = Project(drop_unused_rank(node, used), items)
        if q.args.get("distinct"):
            plan = distinct_of(plan, self.streaming)
        return self.order_limit(q, plan, scope, items)

    @staticmethod
    def _unique(name: str, items: list, phys: str) -> str:
        names = {n for n, _ in items}
        return name if name not in names else phys

    def window_source(self, node: PlanNode, keys: list[Expr]) -> tuple[WindowDef | None, PlanNode]:
        """A windowed aggregate if ``node`` is a window TVF (seen through filters
        that do not use the window columns, and through projections that pass
        columns on unchanged, as a subquery ``SELECT * FROM TABLE(TUMBLE(...))``
        does) and the keys include window_start and window_end."""
        wcols = {"window_start", "window_end", "window_time"}
        steps: list[Filter | Project] = []
        cur = node
        while isinstance(cur, (Filter, Project)):
            if isinstance(cur, Project) and not all(isinstance(e, Col) and e.col == n for n, e in cur.items):
                return None, node
            steps.append(cur)
            cur = cur.inputs[0]
        if not isinstance(cur, WindowTVF):
            return None, node
        kc = {k.col for k in keys if isinstance(k, Col)}
        if not {"window_start", "window_end"} <= kc:
            return None, node
        for st in steps:
            if isinstance(st, Filter) and st.predicate.columns() & wcols:
                return None, node
            if isinstance(st, Project) and not {"window_start", "window_end"} <= {n for n, _ in st.items}:
                return None, node
        src = cur.inputs[0]
        tc = cur.window.time_col
        for st in reversed(steps):
            if isinstance(st, Filter):
                src = Filter(src, st.predicate)
            else:  # the same columns, minus the window's, plus its time column
                items = [(n, e) for n, e in st.items if n not in wcols]
                if tc not in {n for n, _ in items}:
                    items.append((tc, Col(tc)))
                src = Project(src, items)
        w = cur.window
        if w.kind == "session" and w.partition:
            kn = {k.col for k in keys if isinstance(k, Col)} - {"window_start", "window_end", "window_time"}
            missing = [p for p in w.partition if p not in kn]
            if missing:
                raise SqlError(f"SESSION partition key(s) {missing} must be in GROUP BY")
        return w, src

    def order_limit(self, q: Any, plan: PlanNode, scope: Scope | None, items: list) -> PlanNode:
        order = q.args.get("order")
        limit = q.args.get("limit")
        offset = q.args.get("offset")
        keys: list[tuple[str, bool]] = []
        if order is not None:
            by_repr = {repr(e): n for n, e in items}
            for o in order.expressions:
                e = o.this
                asc = not o.args.get("desc")
                name = None
                if isinstance(e, exp.Literal) and not e.is_string:
                    name = plan.schema.names[int(e.this) - 1]
                elif isinstance(e, exp.Column) and not e.table and e.name in plan.schema.names:
                    name = e.name
                elif scope is not None:
                    try:
                        r = repr(self.expr(e, scope))
                    except SqlError:
                        r = None
                    name = by_repr.get(r) if r is not None else None
                if name is None:
                    raise SqlError(f"ORDER BY {e.sql()!r} must name a column of the SELECT list{_pos(e)}")
                keys.append((name, asc))
        n = None
        if isinstance(limit, exp.Fetch):  # FETCH FIRST / NEXT n ROWS ONLY is LIMIT n
            le = limit.args.get("count") or exp.Literal.number(1)
        elif limit is not None:
            le = limit.args.get("expression") if limit.args.get("expression") is not None else limit.this
        if limit is not None:
            n = int(le.this) if isinstance(le, exp.Literal) else None
            if n is None:
                raise SqlError(f"LIMIT must be a number, got {le.sql()!r}")
        off = 0
        if offset is not None:
            oe = offset.args.get("expression") if offset.args.get("expression") is not None else offset.this
            off = int(oe.this)
        if keys or n is not None or off:
            return Sort(plan, keys, n, off)
        return plan

    # -- expressions -------------------------------------------------------------------
    def expr(self, e: Any, scope: Scope, aliases: dict | None = None) -> Expr:
        x = self._expr(e, scope, aliases)
        return x

    def _expr(self, e: Any, scope: Scope, aliases: dict | None) -> Expr:
        rec = lambda a: self._expr(a, scope, aliases)
        if isinstance(e, exp.Window):
            return self._over(e, scope)
        if isinstance(e, (exp.Subquery, exp.Select)):
            raise _unsupported("a subquery in an expression", e, _SUBQUERY_INSTEAD)
        if isinstance(e, exp.Exists):
            raise _unsupported("EXISTS (subquery) inside an expression", e, _SUBQUERY_INSTEAD)
        if isinstance(e, exp.Paren):
            return rec(e.this)
        if isinstance(e, exp.Column):
            if isinstance(e.this, exp.Star):
                raise SqlError(f"* is not allowed here{_pos(e)}")
            try:
                return Col(scope.resolve(e.name, e.table or None, e))
            except SqlError:
                if aliases is not None and not e.table and e.name in aliases:
                    return aliases[e.name]
                if e.table:  # row.field: a field of a ROW column (person.id, t.person.id)
                    try:
                        row = scope.resolve(e.table, e.db or None, e)
                    except SqlError:
                        row = None
                    if row is not None:
                        return Call("struct_field", [Col(row), Lit(e.name)])
                raise
        if isinstance(e, exp.Literal):
            if e.is_string:
                return Lit(e.this)
            s = e.this
            try:
                return Lit(int(s))
            except ValueError:
                return Lit(float(s))
        if isinstance(e, exp.Boolean):
            return Lit(bool(e.this))
        if isinstance(e, exp.Null):
            return Lit(None)
        if isinstance(e, exp.Interval):
            return Interval(interval_ms(e))
        for cls, fn in _BIN.items():
            if type(e) is cls:
                return Call(fn, [rec(e.this), rec(e.expression)])
        if isinstance(e, exp.Neg):
            return Call("negate", [rec(e.this)])
        if isinstance(e, exp.Not):
            inner = e.this
            if isinstance(inner, exp.Is):
                return Call("is_valid", [rec(inner.this)])
            return Call("invert", [rec(inner)])
        if isinstance(e, exp.Is):
            if isinstance(e.expression, exp.Null):
                return Call("is_null", [rec(e.this)])
            if isinstance(e.expression, exp.Boolean):
                v = rec(e.this)
                return Call("and_kleene", [Call("is_valid", [v]), Call("equal", [v, Lit(bool(e.expression.this))])])
            raise _unsupported(f"the IS expression {_short(e)!r}", e, "use IS [NOT] NULL, TRUE or FALSE")
        if isinstance(e, exp.Like):
            r = Call("like", [rec(e.this), rec(e.expression)])
            return Call("invert", [r]) if e.args.get("negate") else r
        if isinstance(e, exp.In):
            if e.args.get("query") is not None:
                raise _unsupported("IN (subquery) inside an expression", e, _SUBQUERY_INSTEAD)
            vals = []
            for v in e.expressions:
                lv = rec(v)
                if not isinstance(lv, Lit):
                    raise SqlError(f"IN list values must be literals{_pos(v)}")
                vals.append(lv.value)
            in_list = InList(rec(e.this), vals)
            return Call("invert", [in_list]) if e.args.get("negate") else in_list
        if isinstance(e, exp.Between):
            v = rec(e.this)
            return Call("and_kleene", [Call("greater_equal", [v, rec(e.args["low"])]),
                                       Call("less_equal", [v, rec(e.args["high"])])])
        if isinstance(e, (exp.Cast, exp.TryCast)):
            target = e.args["to"]
            try:
                t = to_arrow(target.sql())
            except ValueError as exc:
                raise SqlError(f"{exc}{_pos(e)}") from None
            inner = rec(e.this)
            if isinstance(inner, Lit) and isinstance(inner.value, str) and pa.types.is_timestamp(t):
                try:
                    return Lit(pa.scalar(inner.value).cast(t))
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                    raise SqlError(f"cannot read {inner.value!r} as {target.sql()}{_pos(e)}") from None
            return Cast(inner, t)
        if isinstance(e, exp.Case):
            subject = rec(e.this) if e.this is not None else None
            whens = []
            for w in e.args.get("ifs") or []:
                c = rec(w.this)
                if subject is not None:
                    c = Call("equal", [subject, c])
                whens.append((c, rec(w.args["true"])))
            d = e.args.get("default")
            return Case(whens, rec(d) if d is not None else None)
        if isinstance(e, exp.If):
            return Case([(rec(e.this), rec(e.args["true"]))],
                        rec(e.args["false"]) if e.args.get("false") is not None else None)
        if isinstance(e, exp.Coalesce):
            return Call("coalesce", [rec(e.this)] + [rec(x) for x in e.expressions])
        builtin = _builtin(e, rec)
        if builtin is not None:
            return builtin
        if isinstance(e, exp.Concat):
            return Call("concat", [rec(x) for x in e.expressions])
        if isinstance(e, exp.Substring):
            args = [rec(e.this), rec(e.args["start"])]
            if e.args.get("length") is not None:
                args.append(rec(e.args["length"]))
            return Call("substring", args)
        if isinstance(e, exp.Trim):
            if e.args.get("expression") is not None:
                raise SqlError(f"TRIM with characters is not supported{_pos(e)}")
            return Call("trim", [rec(e.this)])
        if isinstance(e, exp.Round):
            d = e.args.get("decimals")
            return Call("round", [rec(e.this), rec(d) if d is not None else Lit(0)])
        for unary, fn in _UNARY.items():
            if type(e) is unary:
                return Call(fn, [rec(e.this)])
        agg = self._agg(e, scope, aliases)
        if agg is not None:
            return agg
        if isinstance(e, (exp.Anonymous, exp.Func)):
            name = e.name if isinstance(e, exp.Anonymous) else (e.sql_name() if hasattr(e, "sql_name") else e.key)
            args = [rec(a) for a in (e.expressions if isinstance(e, exp.Anonymous) else _func_args(e))]
            f = self.t_env._function(name)
            if f is not None:
                if f.kind == "scalar":
                    return UdfCall(f, args)
                if f.kind == "aggregate":
                    if not args:
                        raise SqlError(f"aggregate function {name!r} needs an argument{_pos(e)}")
                    return f(*args)
                raise SqlError(f"table function {name!r} used as a scalar{_pos(e)}; use LATERAL TABLE({name}(...))")
            up = name.upper()
            if up in _NAMED:
                return Call(_NAMED[up], args)
            if up in ("PERCENTILE_APPROX", "APPROX_PERCENTILE"):
                return self._percentile(e, args)
            if up in _GROUP_WINDOW_FUNCTIONS:
                raise _unsupported(f"the group window function {'SESSION' if up == 'SESSWIN' else up}() "
                                   "outside GROUP BY TUMBLE(...) / HOP(...) / SESSION(...)", e,
                                   "group by the window: GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE), or use a "
                                   "window TVF: FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) "
                                   "GROUP BY window_start, window_end")
            raise SqlError(f"unknown function {name!r}{_pos(e)}")
        raise _unsupported(f"the expression {_short(e)!r} ({type(e).__name__})", e)

    def _over(self, w: exp.Window, scope: Scope) -> Expr:
        """``fn(...) OVER (...)`` or ``fn(...) OVER name`` (a WINDOW clause's entry)."""
        fn = w.this
        spec: Any = w
        name = w.args.get("alias")
        if name is not None and not w.args.get("partition_by") and w.args.get("order") is None:
            spec = self.named_windows.get(name.name.lower())
            if spec is None:
                raise SqlError(f"window {name.name!r} is not defined{_pos(w)}; define it in the WINDOW clause: "
                               f"WINDOW {name.name} AS (PARTITION BY ... ORDER BY ...)")
        kinds = {exp.Count: "count", exp.Sum: "sum", exp.Avg: "avg", exp.Min: "min", exp.Max: "max",
                 exp.RowNumber: "row_number"}
        kind = kinds.get(type(fn))
        if kind is None:
            fname = fn.sql_name() if isinstance(fn, exp.Func) and not isinstance(fn, exp.Anonymous) else \
                getattr(fn, "name", type(fn).__name__)
            raise _unsupported(f"the function {str(fname).upper()} in an OVER window", w, _OVER_INSTEAD)
        arg: Expr | None = None
        inner = fn.this if kind != "row_number" else None
        if isinstance(inner, exp.Distinct):
            raise _unsupported(f"{kind.upper()}(DISTINCT ...) in an OVER window", w, _OVER_INSTEAD)
        if inner is not None and not isinstance(inner, exp.Star):
            arg = self.expr(inner, scope)
        elif kind not in ("count", "row_number"):
            raise SqlError(f"{kind.upper()} OVER needs an argument{_pos(w)}")
        partition = [self.expr(p, scope) for p in spec.args.get("partition_by") or []]
        order = []
        ob = spec.args.get("order")
        for o in (ob.expressions if ob is not None else []):
            asc = not o.args.get("desc")
            nulls_first = bool(o.args.get("nulls_first"))
            order.append((self.expr(o.this, scope), asc, nulls_first))
        frame = self._frame(spec.args.get("spec"), w, bool(order))
        try:
            return OverCall(kind, arg, OverWindow(partition, order, frame))
        except PlanError as exc:
            raise SqlError(f"{exc}{_pos(w)}") from None

    def _frame(self, spec: Any, w: Any, ordered: bool) -> Frame:
        """ROWS / RANGE BETWEEN <start> PRECEDING AND CURRENT ROW (the default with
        ORDER BY: RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)."""
        if not ordered:
            raise SqlError(f"an OVER window needs ORDER BY{_pos(w)} (Flink's OVER windows are ordered: "
                           "ORDER BY the time attribute)")
        if spec is None:
            return Frame("range", None)
        kind = str(spec.args.get("kind") or "RANGE").lower()
        start, start_side = spec.args.get("start"), str(spec.args.get("start_side") or "").upper()
        end, end_side = spec.args.get("end"), str(spec.args.get("end_side") or "").upper()
        if spec.args.get("exclude"):
            raise _unsupported("EXCLUDE in a window frame", w, _OVER_INSTEAD)
        if (end is not None and str(end).upper() != "CURRENT ROW") or end_side == "FOLLOWING" or \
                start_side == "FOLLOWING":
            raise _unsupported("a window frame ending after the current row (FOLLOWING)", w,
                               "Flink's OVER frames end at CURRENT ROW: ROWS / RANGE BETWEEN ... PRECEDING "
                               "AND CURRENT ROW")
        if isinstance(start, str):
            if start.upper() == "UNBOUNDED":
                return Frame(kind, None)
            if start.upper() == "CURRENT ROW":
                return Frame(kind, 0)
        if isinstance(start, exp.Interval):
            if kind == "rows":
                raise SqlError(f"a ROWS frame counts rows: ROWS BETWEEN n PRECEDING, not an INTERVAL{_pos(w)}")
            return Frame(kind, interval_ms(start))
        if isinstance(start, exp.Literal) and not start.is_string:
            try:
                return Frame(kind, int(start.this))
            except ValueError:
                raise SqlError(f"a frame's PRECEDING must be a whole number, got {start.this}{_pos(w)}") from None
        raise SqlError(f"cannot read the window frame {spec.sql()!r}{_pos(w)}")

    def _percentile(self, e: Any, args: list) -> Expr:
        if len(args) != 2 or not isinstance(args[1], Lit):
            raise SqlError(f"PERCENTILE_APPROX(column, q) needs a literal q{_pos(e)}")
        return AggCall("approx_percentile", args[0], (float(args[1].value),))

    def _filtered(self, e: Any, scope: Scope, aliases: dict | None) -> Expr:
        """``AGG(x) FILTER (WHERE cond)``: the aggregate over the rows where ``cond`` is
        true, computed as ``AGG(CASE WHEN cond THEN x END)`` (aggregates skip NULLs;
        ``COUNT(*)`` counts ``CASE WHEN cond THEN 1 END``)."""
        inner = self._expr(e.this, scope, aliases)
        if not isinstance(inner, AggCall):
            raise SqlError(f"FILTER (WHERE ...) follows an aggregate call, not {_short(e.this)!r}{_pos(e)}")
        if inner.udaf is not None:
            raise _unsupported("FILTER (WHERE ...) on a user-defined aggregate", e,
                               "filter the rows in a subquery, or pass the condition to the aggregate")
        cond = self._expr(e.expression.this, scope, aliases)
        arg = inner.arg if inner.arg is not None else Lit(1)
        return AggCall(inner.fn, Case([(cond, arg)], None), inner.params, None, inner.distinct)

    def _agg(self, e: Any, scope: Scope, aliases: dict | None) -> Expr | None:
        rec = lambda a: self._expr(a, scope, aliases)
        if isinstance(e, exp.Filter):
            return self._filtered(e, scope, aliases)
        if isinstance(e, exp.Count):
            this = e.this
            if this is None or isinstance(this, exp.Star):
                return AggCall("count", None)
            if isinstance(this, exp.Distinct):
                return AggCall("count", rec(this.expressions[0]), distinct=True)
            return AggCall("count", rec(this))
        simple = {exp.Sum: "sum", exp.Avg: "avg", exp.Min: "min", exp.Max: "max",
                  exp.StddevPop: "stddev_pop", exp.StddevSamp: "stddev_samp", exp.Stddev: "stddev_samp",
                  exp.VariancePop: "var_pop", exp.Variance: "var_samp",
                  exp.ApproxDistinct: "approx_count_distinct"}
        for cls, fn in simple.items():
            if type(e) is cls:
                if isinstance(e.this, exp.Distinct):
                    return AggCall(fn, rec(e.this.expressions[0]), distinct=True)
                return AggCall(fn, rec(e.this))
        if type(e).__name__ in ("ApproxQuantile", "PercentileApprox", "ApproxPercentile"):
            q = e.args.get("quantile") or e.args.get("expression")
            return self._percentile(e, [rec(e.this), rec(q)])
        return None


def _and_terms(e: Any) -> list:
    """The AND-ed terms of a sqlglot condition."""
    while isinstance(e, exp.Paren):
        e = e.this
    if isinstance(e, exp.And):
        return _and_terms(e.this) + _and_terms(e.expression)
    return [e]


def _and_of(terms: list) -> Any:
    out = terms[0]
    for t in terms[1:]:
        out = exp.And(this=out, expression=t)
    return out


def _subquery_condition(e: Any) -> bool:
    """``[NOT] EXISTS (...)`` or ``x [NOT] IN (SELECT ...)``: a semi / anti join."""
    while isinstance(e, (exp.Paren, exp.Not)):
        e = e.this
    return isinstance(e, exp.Exists) or (isinstance(e, exp.In) and e.args.get("query") is not None)


def _outer_columns(e: Expr) -> set[str]:
    return {c for c in e.columns() if c.startswith(_OUTER)}


def _through_filters(node: PlanNode) -> PlanNode:
    while isinstance(node, Filter):
        node = node.inputs[0]
    return node


# sqlglot's nodes of Flink's built-in functions: (function of fastops.table.builtins, argument names)
_BUILTIN_NODES: dict[str, tuple[str, tuple[str, ...]]] = {
    "RegexpExtract": ("regexp_extract", ("this", "expression", "position")),
    "RegexpReplace": ("regexp_replace", ("this", "expression", "replacement")),
    "RegexpLike": ("regexp", ("this", "expression")), "StrPosition": ("locate", ("substr", "this", "position")),
    "Repeat": ("repeat", ("this", "times")), "Left": ("left", ("this", "expression")),
    "Right": ("right", ("this", "expression")), "Replace": ("replace", ("this", "expression", "replacement")),
    "ConcatWs": ("concat_ws", ("expressions",)), "Chr": ("chr", ("expressions",)),
    "Nullif": ("nullif", ("this", "expression")), "Greatest": ("greatest", ("this", "expressions")),
    "Least": ("least", ("this", "expressions")), "SHA2": ("sha2", ("this", "length")),
    "Trunc": ("truncate", ("this", "decimals")), "Round": ("round", ("this", "decimals")),
    "NullSafeNEQ": ("is_distinct_from", ("this", "expression")),
    "NullSafeEQ": ("is_not_distinct_from", ("this", "expression")), "Atan2": ("atan2", ("this", "expression")),
    "Rand": ("rand", ("this",)), "Uuid": ("uuid", ()), "Pi": ("pi", ()),
    "CurrentTimestamp": ("current_timestamp", ()), "Localtimestamp": ("localtimestamp", ()),
    "CurrentDate": ("current_date", ()),
    **{c: (c.lower(), ("this",)) for c in ("Hour", "Minute", "Second", "Year", "Month", "Quarter", "Week",
                                           "DayOfYear", "DayOfMonth", "DayOfWeek", "Reverse", "Initcap", "Ascii",
                                           "MD5", "Sign", "Hex", "Sin", "Cos", "Tan",
                                           "Cot", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Tanh", "Degrees",
                                           "Radians")},
    "SHA": ("sha1", ("this",)), "ToBase64": ("to_base64", ("this",)), "FromBase64": ("from_base64", ("this",)),
}


def _builtin(e: Any, rec: Any) -> Expr | None:
    """A call of Flink's built-in functions that sqlglot parses into its own node (or
    with a time unit for an argument), else None."""
    name = type(e).__name__
    if isinstance(e, exp.Anonymous) and e.name.upper() in ("TIMESTAMPADD", "TIMESTAMPDIFF"):
        unit, *rest = e.expressions
        return Call(e.name.lower(), [Lit(unit.name.upper())] + [rec(a) for a in rest])
    if isinstance(e, exp.Extract):
        return Call("extract", [Lit(e.this.name.upper()), rec(e.expression)])
    if isinstance(e, (exp.Floor, exp.Ceil)) and e.args.get("to") is not None:
        fn = "floor_time" if isinstance(e, exp.Floor) else "ceil_time"
        return Call(fn, [rec(e.this), Lit(e.args["to"].name.upper())])
    if isinstance(e, exp.Trim):
        side = str(e.args.get("position") or "BOTH").lower()
        chars = e.args.get("expression")
        return Call(f"trim_{side}", [rec(e.this)] + ([rec(chars)] if chars is not None else []))
    if isinstance(e, exp.Pad):
        return Call("lpad" if e.args.get("is_left") else "rpad",
                    [rec(e.this), rec(e.expression), rec(e.args["fill_pattern"])])
    if name in _BUILTIN_NODES and type(e) is getattr(exp, name, None):
        fn, keys = _BUILTIN_NODES[name]
        args: list[Expr] = []
        for k in keys:
            v = e.args.get(k)
            args.extend(rec(x) for x in (v if isinstance(v, list) else [v] if v is not None else []))
        return Call(fn, args)
    return None


def _uniquify(items: list[tuple[str, Expr]]) -> list[tuple[str, Expr]]:
    """Select-list names made unique as Flink (Calcite's SqlValidatorUtil.uniquify): a
    name already taken gets 0, 1, ... appended (``auction``, ``auction0``)."""
    used: set[str] = set()
    out = []
    for name, e in items:
        new, j = name, 0
        while new in used:
            new, j = f"{name}{j}", j + 1
        used.add(new)
        out.append((new, e))
    return out


def _func_args(e: exp.Func) -> list:
    out = []
    for k in e.arg_types:
        v = e.args.get(k)
        if isinstance(v, list):
            out.extend(v)
        elif isinstance(v, exp.Expression):  # not flags such as Array's value_constructor
            out.append(v)
    return out


def compile_query(t_env: Any, tree: Any, prep: Prepared) -> PlanNode:
    return QueryCompiler(t_env, prep).query(tree)


def watermark_delay(expr_text: str, column: str, udf_names: Sequence[str] = ()) -> int:
    """``ts - INTERVAL '2' SECOND`` -> 2000 (``ts`` alone -> 0)."""
    prep = preprocess(f"SELECT {expr_text}")
    tree = sqlglot.parse_one(prep.sql)
    e = tree.expressions[0]
    if isinstance(e, exp.Column) and e.name == column:
        return 0
    if isinstance(e, exp.Sub) and isinstance(e.this, exp.Column) and e.this.name == column:
        return interval_ms(e.expression)
    raise SqlError(f"unsupported WATERMARK expression {expr_text!r}: use {column} - INTERVAL 'n' UNIT")
