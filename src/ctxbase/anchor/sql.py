"""SQL text -> one unit per statement (plus table/view units for DDL), with sqlglot.

What relationship weaving needs from SQL is which tables a statement reads and writes, which
columns it touches and what it filters on; that is what each statement unit carries. When no
dialect is given, a few are tried, most likely first (from cheap textual cues such as `::`,
backticks or `TOP`), and the first that parses every statement is reported.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import SqlglotError

from .parsed import ParsedReference, ParsedUnit, ParseResult
from .plaintext import plain_text_result

__all__ = ["CANDIDATE_DIALECTS", "SQL_DIALECT_ALIASES", "normalize_dialect", "parse_sql"]

# Tried in this order when nothing in the text points elsewhere.
CANDIDATE_DIALECTS: tuple[str, ...] = (
    "postgres",
    "mysql",
    "sqlite",
    "tsql",
    "bigquery",
    "snowflake",
    "duckdb",
    "oracle",
)

# Names people (and fenced-block tags) use for dialects -> sqlglot's names.
SQL_DIALECT_ALIASES: dict[str, str] = {
    "postgresql": "postgres",
    "pgsql": "postgres",
    "psql": "postgres",
    "pg": "postgres",
    "plpgsql": "postgres",
    "mariadb": "mysql",
    "mssql": "tsql",
    "sqlserver": "tsql",
    "t-sql": "tsql",
    "plsql": "oracle",
    "sparksql": "spark",
    "googlesql": "bigquery",
}

# Textual cues -> dialects they suggest, with a weight; used only to order the attempts.
_DIALECT_CUES: tuple[tuple[re.Pattern[str], dict[str, int]], ...] = (
    (re.compile(r"\w::\w"), {"postgres": 3, "duckdb": 1, "snowflake": 1}),
    (re.compile(r"\bRETURNING\b", re.I), {"postgres": 2, "sqlite": 1}),
    (re.compile(r"\$\$|\bILIKE\b|\b(?:BIG)?SERIAL\b|\bJSONB\b", re.I), {"postgres": 2}),
    (re.compile(r"`[^`.\s]+\.[^`.\s]+\.[^`\s]+`"), {"bigquery": 4}),
    (re.compile(r"`"), {"mysql": 2, "bigquery": 1}),
    (re.compile(r"\bAUTO_INCREMENT\b|\bENGINE\s*=|\bUNSIGNED\b", re.I), {"mysql": 3}),
    (re.compile(r"\bSELECT\s+(?:DISTINCT\s+)?TOP\b", re.I), {"tsql": 4}),
    (
        re.compile(r"\[[A-Za-z_][\w ]*\]\.|\bNVARCHAR\b|\bGETDATE\s*\(|\bIDENTITY\s*\(", re.I),
        {"tsql": 3},
    ),
    (re.compile(r"\bAUTOINCREMENT\b|\bPRAGMA\b", re.I), {"sqlite": 3}),
    (re.compile(r"\bQUALIFY\b|\bFLATTEN\s*\(|\bVARIANT\b", re.I), {"snowflake": 3}),
    (re.compile(r"\bSAFE_CAST\b|\bSTRUCT<|\bARRAY<|\bEXCEPT\s*\(", re.I), {"bigquery": 3}),
    (re.compile(r"\bNVL\s*\(|\bVARCHAR2\b|\bSYSDATE\b|\bDUAL\b", re.I), {"oracle": 3}),
)

_WRITE_STATEMENTS = (exp.Insert, exp.Update, exp.Delete, exp.Merge)
# A column belongs to the nearest of these above it; their own sources qualify it.
_QUERY_NODES = (exp.Select, exp.Update, exp.Delete, exp.Insert, exp.Merge, exp.Create)


def normalize_dialect(name: str | None) -> str | None:
    """sqlglot's name for a dialect name or alias (`postgresql` -> `postgres`); None stays."""
    if name is None or not name.strip():
        return None
    key = name.strip().lower()
    return SQL_DIALECT_ALIASES.get(key, key)


def parse_sql(sql: str, dialect: str | None = None, path: str | None = None) -> ParseResult:
    """Split SQL into statements and describe each one; never raises on bad SQL."""
    wanted = normalize_dialect(dialect)
    warnings: list[str] = []
    if wanted is not None:
        try:
            Dialect.get_or_raise(wanted)
        except (ValueError, SqlglotError):
            warnings.append(f"unknown SQL dialect {dialect!r}; detecting one instead")
            wanted = None

    candidates = [wanted] if wanted else _dialects_by_cues(sql)
    attempts = [attempt for name in candidates if (attempt := _attempt(sql, name)) is not None]
    if not attempts or all(attempt.parsed == 0 for attempt in attempts):
        reason = attempts[0].first_error if attempts and attempts[0].first_error else "no parse"
        warnings.append(f"SQL did not parse ({reason}); anchored as plain text")
        return plain_text_result(sql, path, "sql", tuple(warnings))

    # The first attempt that parsed everything wins; otherwise the one that parsed the most.
    best = next((attempt for attempt in attempts if attempt.clean), None)
    if best is None:
        best = max(attempts, key=lambda attempt: (attempt.parsed, -attempt.commands))
    if wanted:
        dialect_source = "given"
    elif _cue_scores(sql).get(best.dialect, 0) > 0:
        dialect_source = "cues"
    else:
        dialect_source = "first_clean_parse" if best.clean else "most_statements_parsed"

    units: list[ParsedUnit] = []
    references: list[ParsedReference] = []
    taken_names: set[str] = set()
    for index, piece in enumerate(best.pieces, start=1):
        qualname = f"statement_{index}"
        if piece.expression is None:
            warnings.append(
                f"statement {index} (line {piece.start_line}) did not parse: {piece.error}"
            )
            units.append(_unparsed_unit(piece, qualname, best.dialect))
            continue
        described = _describe_statement(piece, qualname, best.dialect, taken_names)
        units.extend(described.units)
        references.extend(described.references)
        warnings.extend(described.warnings)

    return ParseResult(
        path=path,
        language="sql",
        units=tuple(units),
        references=tuple(references),
        warnings=tuple(warnings),
        fallback=False,
        parser="sqlglot",
        properties={"dialect": best.dialect, "dialect_source": dialect_source},
    )


@dataclass(frozen=True)
class _Piece:
    """One statement's text and where it sits, with its parse (or the parse error)."""

    text: str
    start_line: int
    end_line: int
    expression: exp.Expr | None
    error: str | None


@dataclass(frozen=True)
class _Attempt:
    dialect: str
    pieces: tuple[_Piece, ...]

    @property
    def parsed(self) -> int:
        return sum(1 for piece in self.pieces if piece.expression is not None)

    @property
    def commands(self) -> int:
        # sqlglot keeps statements it does not understand as opaque Commands.
        return sum(1 for piece in self.pieces if isinstance(piece.expression, exp.Command))

    @property
    def clean(self) -> bool:
        return self.parsed == len(self.pieces) and self.commands == 0

    @property
    def first_error(self) -> str | None:
        return next((piece.error for piece in self.pieces if piece.error), None)


@dataclass(frozen=True)
class _Described:
    units: tuple[ParsedUnit, ...]
    references: tuple[ParsedReference, ...]
    warnings: tuple[str, ...]


def _cue_scores(sql: str) -> dict[str, int]:
    scores: dict[str, int] = {}
    for pattern, weights in _DIALECT_CUES:
        if pattern.search(sql):
            for name, weight in weights.items():
                scores[name] = scores.get(name, 0) + weight
    return scores


def _dialects_by_cues(sql: str) -> list[str]:
    scores = _cue_scores(sql)
    order = {name: position for position, name in enumerate(CANDIDATE_DIALECTS)}
    return sorted(CANDIDATE_DIALECTS, key=lambda name: (-scores.get(name, 0), order[name]))


def _attempt(sql: str, dialect: str) -> _Attempt | None:
    """Split and parse with one dialect; None when even its tokenizer rejects the text."""
    try:
        dialect_impl = Dialect.get_or_raise(dialect)
        tokens = dialect_impl.tokenize(sql)
    except (SqlglotError, ValueError, RecursionError):
        return None
    pieces: list[_Piece] = []
    for start, end in _statement_spans(sql, tokens):
        text = sql[start:end].strip()
        leading = len(sql[start:end]) - len(sql[start:end].lstrip())
        start_line = sql.count("\n", 0, start + leading) + 1
        end_line = start_line + text.count("\n")
        try:
            parsed = [item for item in dialect_impl.parse(text) if item is not None]
        except (SqlglotError, ValueError, RecursionError) as error:
            message = str(error).splitlines()[0] if str(error) else type(error).__name__
            pieces.append(_Piece(text, start_line, end_line, None, message))
            continue
        if not parsed:
            continue
        pieces.append(_Piece(text, start_line, end_line, parsed[0], None))
    if not pieces:
        return None
    return _Attempt(dialect, tuple(pieces))


def _statement_spans(sql: str, tokens: list[Any]) -> Iterator[tuple[int, int]]:
    """Character spans of statements: between semicolon tokens, comments included."""
    span_start = 0
    has_tokens = False
    for token in tokens:
        if token.token_type == sqlglot.TokenType.SEMICOLON:
            if has_tokens:
                yield span_start, token.start
            span_start = token.end + 1
            has_tokens = False
        else:
            has_tokens = True
    if has_tokens:
        yield span_start, len(sql)


def _unparsed_unit(piece: _Piece, qualname: str, dialect: str) -> ParsedUnit:
    return ParsedUnit(
        kind="sql_statement",
        name="unparsed statement",
        qualname=qualname,
        language="sql",
        text=piece.text,
        start_line=piece.start_line,
        end_line=piece.end_line,
        properties={"statement_kind": "unparsed", "dialect": dialect, "error": piece.error},
    )


def _table_name(table: exp.Table) -> str:
    """`catalog.db.name` as written, without quotes; empty for table functions."""
    return ".".join(part for part in (table.catalog, table.db, table.name) if part)


def _statement_kind(expression: exp.Expr) -> str:
    if isinstance(expression, exp.Query):
        return "select"
    if isinstance(expression, exp.Create | exp.Drop):
        verb = "create" if isinstance(expression, exp.Create) else "drop"
        kind = str(expression.args.get("kind") or "").lower()
        return f"{verb}_{kind}" if kind else verb
    if isinstance(expression, exp.Alter):
        kind = str(expression.args.get("kind") or "table").lower()
        return f"alter_{kind}"
    if isinstance(expression, exp.TruncateTable):
        return "truncate"
    if isinstance(expression, exp.Command):
        return str(expression.this or "command").lower()
    return expression.key.lower()


def _written_tables(expression: exp.Expr) -> list[exp.Table]:
    """The tables a statement changes (insert/update/delete/merge targets, DDL subjects)."""
    target: exp.Expr | None = None
    if isinstance(expression, (*_WRITE_STATEMENTS, exp.Drop, exp.Alter)):
        target = expression.this
    elif isinstance(expression, exp.Create):
        subject = expression.this
        target = subject.args.get("table") if isinstance(subject, exp.Index) else subject
    elif isinstance(expression, exp.TruncateTable):
        return [table for table in expression.expressions if isinstance(table, exp.Table)]
    if isinstance(target, exp.Schema):
        target = target.this
    return [target] if isinstance(target, exp.Table) else []


def _describe_statement(
    piece: _Piece, qualname: str, dialect: str, taken_names: set[str]
) -> _Described:
    statement = piece.expression
    assert statement is not None  # only parsed pieces are described
    kind = _statement_kind(statement)
    ctes = [cte.alias for cte in statement.find_all(exp.CTE) if cte.alias]
    cte_names = {name.lower() for name in ctes}

    written_nodes = _written_tables(statement)
    written_ids = {id(node) for node in written_nodes}
    written = _unique(_table_name(node) for node in written_nodes)
    read: list[str] = []
    for table in statement.find_all(exp.Table):
        name = _table_name(table)
        if not name or id(table) in written_ids or table.find_ancestor(exp.Reference):
            continue
        if not table.db and name.lower() in cte_names:
            continue  # a CTE is a named subquery, not a table
        read.append(name)
    read = _unique(read)

    aliases = _alias_map(statement, cte_names)
    columns = _unique(
        [
            *(_qualified_column(column, aliases) for column in statement.find_all(exp.Column)),
            *_insert_columns(statement),
        ]
    )
    predicates: list[str] = []
    filter_columns: list[str] = []
    for where in statement.find_all(exp.Where):
        predicates.extend(_sql(part, dialect) for part in _conjuncts(where.this))
        filter_columns.extend(
            _qualified_column(column, aliases) for column in where.this.find_all(exp.Column)
        )
    join_conditions = [
        _sql(join.args["on"], dialect)
        for join in statement.find_all(exp.Join)
        if join.args.get("on") is not None
    ]

    main_table = (written or read or [""])[0]
    warnings: list[str] = []
    if isinstance(statement, exp.Command):
        warnings.append(
            f"statement {qualname.rsplit('_', 1)[-1]} (line {piece.start_line}) is only "
            f"partly understood by the {dialect} parser"
        )
    unit = ParsedUnit(
        kind="sql_statement",
        name=f"{kind} {main_table}".strip(),
        qualname=qualname,
        language="sql",
        text=piece.text,
        start_line=piece.start_line,
        end_line=piece.end_line,
        properties={
            "statement_kind": kind,
            "dialect": dialect,
            "tables_read": read,
            "tables_written": written,
            "columns": columns,
            "where": predicates,
            "filter_columns": _unique(filter_columns),
            "join_conditions": join_conditions,
            "ctes": ctes,
        },
    )
    units = [unit]
    references = [
        ParsedReference(qualname, "reads_table", name, piece.start_line) for name in read
    ] + [ParsedReference(qualname, "writes_table", name, piece.start_line) for name in written]

    if isinstance(statement, exp.Create) and kind in ("create_table", "create_view") and written:
        defined = _defined_relation(
            piece, statement, qualname, written[0], kind, dialect, taken_names
        )
        units.append(defined)
        references.extend(
            ParsedReference(defined.qualname, "references_table", target, piece.start_line)
            for target in defined.properties.get("foreign_tables", ())
        )
    return _Described(tuple(units), tuple(references), tuple(warnings))


def _defined_relation(
    piece: _Piece,
    statement: exp.Create,
    parent: str,
    name: str,
    kind: str,
    dialect: str,
    taken_names: set[str],
) -> ParsedUnit:
    """The `table` (or `view`) unit a CREATE statement defines, with its column definitions."""
    qualname = name
    suffix = 2
    while qualname in taken_names:
        qualname = f"{name}#{suffix}"
        suffix += 1
    taken_names.add(qualname)

    columns: list[dict[str, Any]] = []
    primary_key: list[str] = []
    foreign_keys: list[dict[str, Any]] = []
    schema = statement.this if isinstance(statement.this, exp.Schema) else None
    for item in schema.expressions if schema else []:
        if isinstance(item, exp.ColumnDef):
            constraints = [constraint.kind for constraint in item.constraints]
            is_primary = any(isinstance(c, exp.PrimaryKeyColumnConstraint) for c in constraints)
            if is_primary:
                primary_key.append(item.name)
            for constraint in constraints:
                if isinstance(constraint, exp.Reference):
                    foreign_keys.append(_foreign_key([item.name], constraint))
            columns.append(
                {
                    "name": item.name,
                    "type": _sql(item.args["kind"], dialect) if item.args.get("kind") else None,
                    "nullable": not any(
                        isinstance(c, exp.NotNullColumnConstraint) for c in constraints
                    )
                    and not is_primary,
                    "primary_key": is_primary,
                    "constraints": [_sql(c, dialect) for c in item.constraints],
                }
            )
        for key in item.find_all(exp.PrimaryKey):
            primary_key.extend(part.name for part in key.expressions)
        for foreign in item.find_all(exp.ForeignKey):
            reference = foreign.args.get("reference")
            if isinstance(reference, exp.Reference):
                local = [part.name for part in foreign.expressions]
                foreign_keys.append(_foreign_key(local, reference))

    query = statement.expression
    return ParsedUnit(
        kind="table" if kind == "create_table" else "view",
        name=name,
        qualname=qualname,
        language="sql",
        text=piece.text,
        start_line=piece.start_line,
        end_line=piece.end_line,
        parent=parent,
        properties={
            "dialect": dialect,
            "columns": columns,
            "primary_key": _unique(primary_key),
            "foreign_keys": foreign_keys,
            "foreign_tables": _unique(fk["table"] for fk in foreign_keys),
            "query": _sql(query, dialect) if isinstance(query, exp.Query) else None,
        },
    )


def _foreign_key(local: list[str], reference: exp.Reference) -> dict[str, Any]:
    target = reference.this
    table = target.this if isinstance(target, exp.Schema) else target
    remote = [part.name for part in target.expressions] if isinstance(target, exp.Schema) else []
    return {
        "columns": local,
        "table": _table_name(table) if isinstance(table, exp.Table) else str(table),
        "ref_columns": remote,
    }


def _alias_map(statement: exp.Expr, cte_names: set[str]) -> dict[str, str]:
    """Alias or bare name -> the table (or CTE / subquery alias) it stands for."""
    aliases: dict[str, str] = {}
    for table in statement.find_all(exp.Table):
        name = _table_name(table)
        if not name:
            continue
        aliases[table.name.lower()] = name
        if table.alias:
            aliases[table.alias.lower()] = name
    for subquery in statement.find_all(exp.Subquery):
        if subquery.alias:
            aliases[subquery.alias.lower()] = subquery.alias
    for name in cte_names:
        aliases.setdefault(name, name)
    return aliases


def _own_sources(query: exp.Expr) -> list[str]:
    """Names of the tables and aliased subqueries directly in a query's FROM/JOIN/target."""
    sources: list[str] = []
    for node in query.find_all(exp.Table, exp.Subquery):
        if node is query or node.find_ancestor(*_QUERY_NODES) is not query:
            continue
        if isinstance(node, exp.Table):
            if node.find_ancestor(exp.Reference) is None and _table_name(node):
                sources.append(_table_name(node))
        elif node.alias:
            sources.append(node.alias)
    return _unique(sources)


def _qualified_column(column: exp.Column, aliases: dict[str, str]) -> str:
    """`table.column` when the qualifier or a lone source says which table; else the name."""
    name = column.name or "*"
    if column.table:
        return f"{aliases.get(column.table.lower(), column.table)}.{name}"
    query = column.find_ancestor(*_QUERY_NODES)
    if query is not None:
        sources = _own_sources(query)
        if len(sources) == 1:
            return f"{sources[0]}.{name}"
    return name


def _insert_columns(statement: exp.Expr) -> list[str]:
    """The target column list of `INSERT INTO t (a, b)`, qualified by the table."""
    if not isinstance(statement, exp.Insert) or not isinstance(statement.this, exp.Schema):
        return []
    table = statement.this.this
    prefix = _table_name(table) if isinstance(table, exp.Table) else ""
    return [f"{prefix}.{item.name}" if prefix else item.name for item in statement.this.expressions]


def _conjuncts(condition: exp.Expr) -> list[exp.Expr]:
    """`a AND (b AND c)` -> [a, b, c]; anything else is a single predicate."""
    if isinstance(condition, exp.And):
        return [*_conjuncts(condition.this), *_conjuncts(condition.expression)]
    if isinstance(condition, exp.Paren) and isinstance(condition.this, exp.And):
        return _conjuncts(condition.this)
    return [condition]


def _sql(node: exp.Expr, dialect: str) -> str:
    try:
        return node.sql(dialect=dialect)
    except (SqlglotError, ValueError):  # pragma: no cover - generation of a parsed tree
        return str(node)


def _unique(items: Any) -> list[str]:
    """Distinct items in first-seen order."""
    seen: dict[str, None] = {}
    for item in items:
        seen.setdefault(item, None)
    return list(seen)
