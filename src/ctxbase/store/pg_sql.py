"""SQL pieces of the PostgreSQL backend: schema extras, keyword queries, the dialect.

Kept apart from postgres.py so the store class stays readable; nothing here opens a
connection. The keyword index stores the exact terms the SQLite backend indexes (see
`TERMS_TSVECTOR`), so both backends match the same documents for the same query.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from ..errors import StorageError
from .base import OWN_TERMS_WEIGHT
from .dialect import Dialect
from .rows import EVENT_COLS, ITEM_COLS, KEYWORD_ROW_COLS

__all__ = [
    "BM25_B",
    "BM25_K1",
    "CROSS_PROJECT",
    "EVENT_COLS",
    "EXACT_VECTORS",
    "HNSW_BUILD_MEMORY_MAX_KB",
    "HNSW_BUILD_MEMORY_MIN_KB",
    "HNSW_INDEXES_SQL",
    "HNSW_INDEX_NAMES",
    "HNSW_MAX_DIM",
    "ITEM_CHANGE_SEQ",
    "ITEM_COLS",
    "KEYWORD_CHANGES_SQL",
    "NEXT_CHANGE_SEQ",
    "PG",
    "POST_MIGRATIONS",
    "PRE_MIGRATIONS",
    "PgDialect",
    "clean_json",
    "clean_text",
    "hnsw_build_memory_kb",
    "hnsw_index_sql",
    "keyword_sql",
    "match_terms",
    "tsquery_lexeme",
    "vector_search_sql",
]

# Marks the deliberate cross-project reads (listing projects, the embedding worker's queue).
CROSS_PROJECT = "/* cross-project */ "

# Okapi BM25 constants, the same as SQLite FTS5's bm25().
BM25_K1 = 1.2
BM25_B = 0.75

# pgvector's HNSW indexes `vector` columns of at most 2000 dimensions.
HNSW_MAX_DIM = 2000

# Up to this many vectors (of a project and model) a vector search compares the query with
# every one, sorted by distance and then id: exact, and in the same order on every run. Left
# to the planner, HNSW may serve a small project too (by the table's statistics, which move
# with autovacuum): its filtered scan stops after hnsw.max_scan_tuples rows of the index,
# every project's, and a project among many loses some of its nearest vectors.
EXACT_VECTORS = 2_000

# Terms are at most 64 characters for words; this bound only guards tsvector's lexeme limit.
_MAX_LEXEME_CHARS = 500

# to_tsvector() would re-parse the terms with PostgreSQL's own parser, which splits
# identifiers (user_id -> user, id) and URLs differently from the SQLite index. Casting
# "'term':position ..." text to tsvector keeps every term verbatim, with positions (for term
# frequencies) and without any stemming or stop words: the same terms FTS5 sees.
TERMS_TSVECTOR = """CREATE OR REPLACE FUNCTION ctxbase_terms_tsvector(terms TEXT)
RETURNS tsvector LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $fn$
    SELECT coalesce(string_agg(
        '''' || replace(replace(left(t, 500), '\\', '\\\\'), '''', '''''')
        || ''':' || least(n, 16383), ' '), '')::tsvector
    FROM unnest(string_to_array(terms, ' ')) WITH ORDINALITY AS u(t, n)
    WHERE t <> ''
$fn$"""

# What the keyword index holds for an item: its own terms plus its live context's (the
# words of the event it follows, unless that event is hidden).
INDEXED_TERMS = (
    "(terms || CASE WHEN context_hidden = 0 AND context_terms <> '' "
    "THEN ' ' || context_terms ELSE '' END)"
)


def _term_count(terms: str) -> str:
    """Number of terms in a space-joined terms expression (FTS5 counts tokens the same way)."""
    return f"cardinality(array_remove(string_to_array({terms}, ' '), ''))"


ITEM_CHANGE_SEQ = "items_change_seq"


def _items_removed_fn(on_delete: str = "", on_update: str = "") -> str:
    """The statement-level trigger function for deletes and updates of items: counts, per
    project, the statements that removed an item or changed whether/what it is indexed by,
    then runs what a schema version adds to each branch."""
    return f"""CREATE OR REPLACE FUNCTION ctxbase_items_removed()
RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    IF TG_OP = 'DELETE' THEN
        INSERT INTO item_removals(project_id, n)
        SELECT DISTINCT project_id, 1 FROM old_rows
        ON CONFLICT (project_id) DO UPDATE SET n = item_removals.n + 1;{on_delete}
    ELSE
        INSERT INTO item_removals(project_id, n)
        SELECT DISTINCT o.project_id, 1 FROM old_rows o JOIN new_rows n
            ON n.project_id = o.project_id AND n.item_id = o.item_id
        WHERE o.active <> n.active OR o.context_hidden <> n.context_hidden
            OR o.context_terms <> n.context_terms OR o.change_seq <> n.change_seq
        ON CONFLICT (project_id) DO UPDATE SET n = item_removals.n + 1;{on_update}
    END IF;
    RETURN NULL;
END
$fn$"""


ITEMS_REMOVED_FN = _items_removed_fn()

# v6: the same counts, and each row that left the keyword index (deleted, hidden, or
# renumbered: replaced, restored, or its context words changed) recorded with its change
# number under the next one, for keyword_changes. Writers hold the project's row lock, so a
# project's records become visible in order, as its items' numbers do.
ITEMS_REMOVED_FN_V6 = _items_removed_fn(
    on_delete=f"""
        INSERT INTO keyword_removed(project_id, at, seq)
        SELECT project_id, nextval('{ITEM_CHANGE_SEQ}'), change_seq FROM old_rows
        WHERE active = 1;""",
    on_update=f"""
        INSERT INTO keyword_removed(project_id, at, seq)
        SELECT o.project_id, nextval('{ITEM_CHANGE_SEQ}'), o.change_seq
        FROM old_rows o JOIN new_rows n
            ON n.project_id = o.project_id AND n.item_id = o.item_id
        WHERE o.active = 1 AND (n.active = 0 OR o.change_seq <> n.change_seq);""",
)

# Statements run before / after the shared schema of a version.
PRE_MIGRATIONS: dict[int, list[str]] = {1: ["CREATE EXTENSION IF NOT EXISTS vector"]}
POST_MIGRATIONS: dict[int, list[str]] = {
    1: [
        TERMS_TSVECTOR,
        # The two keyword columns: indexed (own plus live context terms), and own terms
        # only, which ranking weighs again (OWN_TERMS_WEIGHT); matching uses `tsv` alone.
        "ALTER TABLE items ADD COLUMN IF NOT EXISTS tsv tsvector "
        f"GENERATED ALWAYS AS (ctxbase_terms_tsvector({INDEXED_TERMS})) STORED",
        "ALTER TABLE items ADD COLUMN IF NOT EXISTS tsv_own tsvector "
        "GENERATED ALWAYS AS (ctxbase_terms_tsvector(terms)) STORED",
        # Column lengths for BM25.
        "ALTER TABLE items ADD COLUMN IF NOT EXISTS nterms INTEGER "
        f"GENERATED ALWAYS AS ({_term_count(INDEXED_TERMS)}) STORED",
        "ALTER TABLE items ADD COLUMN IF NOT EXISTS nterms_own INTEGER "
        f"GENERATED ALWAYS AS ({_term_count('terms')}) STORED",
        "CREATE INDEX IF NOT EXISTS items_tsv ON items USING gin (tsv)",
    ],
    3: [
        "ALTER TABLE items ADD COLUMN IF NOT EXISTS repo TEXT",
        # who a context was assembled for: multi_agent_consensus finds an agent's last one
        "ALTER TABLE traces ADD COLUMN IF NOT EXISTS agent_role TEXT",
        "ALTER TABLE traces ADD COLUMN IF NOT EXISTS session_id TEXT",
        "ALTER TABLE traces ADD COLUMN IF NOT EXISTS task_id TEXT",
        "CREATE INDEX IF NOT EXISTS traces_by_role ON traces (project_id, agent_role, created_at)",
    ],
    5: [
        # In-memory keyword readers append the items written after their last read: every
        # insert or replacement of an item takes the next change number. Writers hold the
        # project's row lock (pg_base._lock) when they take it, so a project's numbers
        # become visible in order.
        f"CREATE SEQUENCE IF NOT EXISTS {ITEM_CHANGE_SEQ}",
        "ALTER TABLE items ADD COLUMN IF NOT EXISTS change_seq BIGINT NOT NULL "
        f"DEFAULT nextval('{ITEM_CHANGE_SEQ}')",
        "CREATE INDEX IF NOT EXISTS items_changes ON items (project_id, change_seq)",
        # ... and reload when this count moves: an item removed, hidden, shown, or its
        # context words changed in place.
        "CREATE TABLE IF NOT EXISTS item_removals (project_id TEXT PRIMARY KEY, n BIGINT NOT NULL)",
        ITEMS_REMOVED_FN,
        "DROP TRIGGER IF EXISTS items_removed ON items",
        "CREATE TRIGGER items_removed AFTER DELETE ON items REFERENCING OLD TABLE AS old_rows "
        "FOR EACH STATEMENT EXECUTE FUNCTION ctxbase_items_removed()",
        "DROP TRIGGER IF EXISTS items_changed ON items",
        "CREATE TRIGGER items_changed AFTER UPDATE ON items "
        "REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows "
        "FOR EACH STATEMENT EXECUTE FUNCTION ctxbase_items_removed()",
    ],
    6: [ITEMS_REMOVED_FN_V6],
    9: ["ALTER TABLE tombstones ADD COLUMN IF NOT EXISTS forgotten_at DOUBLE PRECISION"],
    # the aliases of the aggregated events stored before (the rule of rows.merged_ids); a
    # CASE keeps each JSON function to the values it takes
    11: [
        "INSERT INTO event_aliases(project_id, alias_id, event_id) "
        "SELECT e.project_id, p->>'id', e.event_id FROM events e "
        "CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN jsonb_typeof(e.data) = 'object' "
        "THEN CASE WHEN jsonb_typeof(e.data->'aggregated') = 'array' "
        "AND e.data - 'aggregated' = '{}'::jsonb "
        "AND e.metadata->>'aggregated_count' = jsonb_array_length(e.data->'aggregated')::text "
        "AND jsonb_array_length(e.data->'aggregated') >= 2 "
        "THEN e.data->'aggregated' ELSE '[]'::jsonb END ELSE '[]'::jsonb END) p "
        "WHERE e.data ? 'aggregated' AND jsonb_typeof(p->'id') = 'string' "
        "AND p->>'id' <> '' AND p->>'id' <> e.event_id "
        "ON CONFLICT (project_id, alias_id) DO NOTHING"
    ],
    12: [
        "ALTER TABLE state ADD COLUMN IF NOT EXISTS ttl DOUBLE PRECISION",
        "ALTER TABLE state_history ADD COLUMN IF NOT EXISTS ttl DOUBLE PRECISION",
    ],
}

# Takes the next change number: a row that changes what it is indexed by is numbered again.
NEXT_CHANGE_SEQ = f"change_seq=nextval('{ITEM_CHANGE_SEQ}')"


# The active items of a project numbered in (after, upto]: own terms and live context terms.
KEYWORD_CHANGES_SQL = (
    f"SELECT {KEYWORD_ROW_COLS}, change_seq "
    "FROM items WHERE project_id = %s AND change_seq > %s AND change_seq <= %s AND active = 1 "
    "ORDER BY change_seq"
)


# pgvector builds an HNSW index fast while its graph fits in maintenance_work_mem and row by
# row on disk after it ("hnsw graph no longer fits"): several times slower. Per element the
# graph holds the vector (4 bytes a dimension) and its neighbour lists (m = 16: 32 at the
# ground level, ~700 bytes with the element's header); the margin covers the upper levels.
_HNSW_ELEMENT_BYTES = 700
_HNSW_MEMORY_MARGIN = 1.25
HNSW_BUILD_MEMORY_MIN_KB = 1024 * 1024  # 1 GB, what a build asked for before it was sized
HNSW_BUILD_MEMORY_MAX_KB = 16 * 1024 * 1024


def hnsw_build_memory_kb(vectors: int, dim: int) -> int:
    """maintenance_work_mem (kB) for building the HNSW index of `vectors` vectors of `dim`
    dimensions in memory: at least 1 GB, at most 16 GB."""
    need = vectors * (4 * dim + _HNSW_ELEMENT_BYTES) * _HNSW_MEMORY_MARGIN / 1024
    return int(min(max(need, HNSW_BUILD_MEMORY_MIN_KB), HNSW_BUILD_MEMORY_MAX_KB))


def hnsw_index_sql(dim: int) -> str:
    """A partial expression index for one dimension: `vector` columns of mixed dimension
    cannot be indexed as a whole, `vec::vector(dim)` over the rows `WHERE dim = dim` can."""
    return (
        f"CREATE INDEX IF NOT EXISTS item_vectors_hnsw_{dim} ON item_vectors "
        f"USING hnsw ((vec::vector({dim})) vector_cosine_ops) WHERE dim = {dim}"
    )


def vector_search_sql(
    dim: int, *, among: bool, exact: bool, exact_up_to: int = EXACT_VECTORS
) -> str:
    """The nearest vectors of a project, with the arguments (query, project, model, the
    allowed ids when `among`, limit). Exact when `exact`; else exact while the project holds
    at most `exact_up_to` of them (counted up to one more), by HNSW above, with the
    arguments (project, model) and those above twice: one statement, whose branch not
    taken is never run (its gate is a one-time filter)."""
    rows = (
        "FROM item_vectors v JOIN items i "
        "ON i.project_id = v.project_id AND i.item_id = v.item_id "
        f"WHERE v.project_id = %s AND v.model = %s AND v.dim = {dim} AND i.active = 1"
        + (" AND v.item_id = ANY(%s)" if among else "")
    )
    # `v.vec <=> q` is not the indexed expression, so no HNSW scan can answer it
    compared = f"SELECT v.item_id, v.vec <=> %s AS distance {rows}"
    if exact:
        return f"{compared} ORDER BY distance, v.item_id LIMIT %s"
    # the ORDER BY must be the indexed expression, `vec::vector(dim)`, for HNSW
    indexed = f"SELECT v.item_id, v.vec::vector({dim}) <=> %s AS distance {rows}"
    n = exact_up_to
    return (
        f"WITH few AS (SELECT count(*) <= {n} AS yes FROM (SELECT 1 FROM item_vectors "
        f"WHERE project_id = %s AND model = %s LIMIT {n + 1}) AS held) "
        f"({compared} AND (SELECT yes FROM few) ORDER BY distance, v.item_id LIMIT %s) "
        f"UNION ALL ({indexed} AND NOT (SELECT yes FROM few) ORDER BY distance LIMIT %s)"
    )


# The HNSW indexes of hnsw_index_sql (one per dimension), by name; the argument is
# HNSW_INDEX_NAMES.
HNSW_INDEXES_SQL = (
    f"{CROSS_PROJECT}SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() "
    "AND tablename = 'item_vectors' AND indexname LIKE %s"
)
HNSW_INDEX_NAMES = "item\\_vectors\\_hnsw\\_%"


def clean_text(value: str | None) -> str | None:
    """PostgreSQL text cannot hold NUL characters: they become U+FFFD."""
    if value is None or "\x00" not in value:
        return value
    return value.replace("\x00", "\ufffd")


def _scrub(value: Any) -> Any:
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {clean_text(str(k)): _scrub(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_scrub(v) for v in value]
    return value


def clean_json(value: Any) -> str:
    """JSON text for a jsonb column (jsonb refuses \\u0000 inside strings)."""
    text = json.dumps(value, ensure_ascii=False)
    if "\\u0000" in text:
        text = json.dumps(_scrub(value), ensure_ascii=False)
    return text


_QUOTED = re.compile(r'"((?:[^"]|"")*)"')


def match_terms(match: str) -> tuple[list[str], str]:
    """Terms and mode ("or"/"and") of an FTS5 MATCH string built by
    retrieve.tokenize.fts_match_expression: quoted terms joined by OR (or by AND)."""
    terms = [m.group(1).replace('""', '"') for m in _QUOTED.finditer(match)]
    words = _QUOTED.sub(" ", match).split()
    ops = {w for w in words if w in ("OR", "AND")}
    if len(ops) > 1:
        raise StorageError(f"keyword query {match!r} mixes AND and OR")
    # A bare word (hand-written query) is a term; FTS5 syntax beyond AND/OR is not supported.
    terms += [w for w in words if w not in ("OR", "AND")]
    terms = [clean_text(t) or "" for t in dict.fromkeys(terms)]
    return [t[:_MAX_LEXEME_CHARS] for t in terms if t.strip()], ("and" if ops == {"AND"} else "or")


def tsquery_lexeme(term: str) -> str:
    """One verbatim lexeme in tsquery syntax (quoted, so operators inside are literal)."""
    return "'" + term.replace("\\", "\\\\").replace("'", "''") + "'"


def keyword_sql(where: str) -> str:
    """BM25 over the matching items, computed like FTS5's `bm25(fts, 1.0, OWN_TERMS_WEIGHT)`
    over the two columns (indexed terms, own terms).

    Per query term: one idf, from the items matching the term in either column (own terms
    are part of the indexed ones, so: matching `tsv`); a term frequency summed over the
    columns with their weights, f = tf(indexed) + OWN_TERMS_WEIGHT * tf(own); and FTS5's
    length normalisation by the whole row, nterms + nterms_own, against the mean row length.

    Parameters, in order: per-term tsquery texts, the filter's arguments, project id, the
    whole tsquery, document count, mean row length (both columns), limit. Document
    frequencies come from the project's matching active items before the structured filter,
    as FTS5's come from the whole index; the filter only decides which items are returned.
    The document count may lag behind (it is cached per index generation, and concurrent
    writes commit between statements), so it is never taken below a term's document
    frequency.
    """
    return f"""WITH q AS (
    SELECT n, t::tsquery AS tq FROM unnest(%s::text[]) WITH ORDINALITY AS u(t, n)
), m AS (
    SELECT i.item_id, i.tsv, i.tsv_own, i.nterms + i.nterms_own AS dl, (TRUE{where}) AS ok
    FROM items i
    WHERE i.project_id = %s AND i.active = 1 AND i.tsv @@ %s::tsquery
), tf AS (
    SELECT m.item_id, m.dl, m.ok,
        ts_rank_cd('{{1,1,1,1}}', m.tsv, q.tq, 0)
        + {OWN_TERMS_WEIGHT} * ts_rank_cd('{{1,1,1,1}}', m.tsv_own, q.tq, 0) AS f,
        count(*) OVER (PARTITION BY q.n) AS df
    FROM m JOIN q ON m.tsv @@ q.tq
)
SELECT item_id, sum(
    greatest(ln((greatest(%s, df) - df + 0.5) / (df + 0.5)), 1e-6)
    * f * {BM25_K1 + 1} / (f + {BM25_K1} * ({1 - BM25_B} + {BM25_B} * dl / %s))
) AS score
FROM tf WHERE ok GROUP BY item_id ORDER BY score DESC, item_id LIMIT %s"""


class PgDialect(Dialect):
    """psycopg's `%s` placeholders, JSON decoded by the driver, `= ANY(%s)` arrays."""

    placeholder = "%s"
    cross_project = CROSS_PROJECT

    def load(self, value: Any) -> Any:
        return value

    def any_of(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        return f"{column} = ANY(?)", [list(values)]

    def starts_with(self, column: str, prefix: str) -> tuple[str, list[Any]]:
        return f"starts_with({column}, ?)", [prefix]

    def json_text(self, column: str, key: str) -> str:
        return f"{column}->>'{key}'"

    def contains(self, column: str) -> str:
        return f"strpos({column}::text, ?) > 0"

    def store_json(self, value: Any) -> Any:
        from psycopg.types.json import Jsonb

        return None if value is None else Jsonb(value, dumps=clean_json)


PG = PgDialect()
