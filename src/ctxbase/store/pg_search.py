"""Keyword and vector search of the PostgreSQL backend (a mixin of PostgresStore).

Keywords: BM25 with SQLite FTS5's formula over the verbatim terms in items.tsv (own plus
context terms) and items.tsv_own (own terms, weighed again), see pg_sql.keyword_sql.
Vectors: pgvector, one partial HNSW expression index per dimension (cosine), created the
first time a vector of that dimension is stored; a project with few vectors is searched
exactly (pg_sql.vector_search_sql).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from . import pg_sql as q
from .base import KeywordDelta, KeywordHit, VectorBlock, VectorRow
from .dialect import filter_sql
from .pg_base import Conn, PgBase, as_array
from .records import ItemFilter, SearchItem
from .rows import generation_key, item_row, keyword_rows
from .vector_block import BATCH_ROWS, VectorFill

__all__ = ["PgSearch"]


class PgSearch(PgBase):
    # -- search index --------------------------------------------------------------------
    def _doc_stats(self, conn: Conn, project_id: str) -> tuple[int, float, float]:
        """(active items, mean indexed terms per item, mean own terms per item), cached until
        the project's generation moves."""
        gen = generation_key(
            self._x(
                conn,
                "SELECT generation, created_at FROM projects WHERE project_id=%s",
                (project_id,),
            ).fetchone()
        )
        cached = self._stats.get(project_id)
        if cached is not None and cached[0] == gen:
            return cached[1], cached[2], cached[3]
        row = self._x(
            conn,
            "SELECT count(*), coalesce(sum(nterms), 0), coalesce(sum(nterms_own), 0) "
            "FROM items WHERE project_id=%s AND active=1",
            (project_id,),
        ).fetchone()
        n = int(row[0]) if row else 0
        avg, avg_own = (float(row[1]) / n, float(row[2]) / n) if row and n else (0.0, 0.0)
        self._stats[project_id] = (gen, n, avg, avg_own)
        return n, avg, avg_own

    def keyword_search(
        self, project_id: str, match: str, flt: ItemFilter | None, limit: int
    ) -> list[KeywordHit]:
        terms, mode = q.match_terms(match)
        if not terms:
            return []
        lexemes = [q.tsquery_lexeme(t) for t in terms]
        tsquery = (" & " if mode == "and" else " | ").join(lexemes)
        where, fargs = filter_sql(q.PG, flt)
        with self._read() as conn:
            n, avg, avg_own = self._doc_stats(conn, project_id)
            # FTS5 normalises by the whole row's length (both columns) against its mean.
            avgdl = max(avg + avg_own, 1.0)
            rows = self._x(
                conn,
                q.keyword_sql(where),
                (lexemes, *fargs, project_id, tsquery, n, avgdl, int(limit)),
            ).fetchall()
        return [KeywordHit(r[0], float(r[1])) for r in rows]

    def keyword_changes(self, project_id: str, after: int) -> KeywordDelta:
        # Read in this order, each statement seeing what committed before it: a removal
        # after the first read moves the count seen next time, and an item or a record of
        # a removal numbered after the second read is above `marker`, so the next call
        # returns it (a project's numbers become visible in order: see pg_sql v6).
        removed: list[int] | None = []
        with self._read() as conn:
            row = self._x(
                conn, "SELECT n FROM item_removals WHERE project_id=%s", (project_id,)
            ).fetchone()
            removals = int(row[0]) if row else 0
            top = self._x(
                conn,
                "SELECT greatest((SELECT max(change_seq) FROM items WHERE project_id=%s), "
                "(SELECT max(at) FROM keyword_removed WHERE project_id=%s))",
                (project_id, project_id),
            ).fetchone()
            marker = max(int(after), int(top[0]) if top and top[0] is not None else 0)
            rows = keyword_rows(self._x(conn, q.KEYWORD_CHANGES_SQL, (project_id, after, marker)))
            if after:
                removed = [
                    int(r[0])
                    for r in self._x(
                        conn,
                        "SELECT seq FROM keyword_removed WHERE project_id=%s "
                        "AND at > %s AND at <= %s",
                        (project_id, after, marker),
                    ).fetchall()
                ]
                if 0 in removed:  # the record was cut after `after`
                    removed = None
        return KeywordDelta(rows=rows, marker=marker, removals=removals, removed=removed)

    def get_items(self, project_id: str, ids: Sequence[str]) -> list[SearchItem]:
        uniq = list(dict.fromkeys(ids))
        if not uniq:
            return []
        with self._read() as conn:
            rows = self._x(
                conn,
                f"SELECT {q.ITEM_COLS} FROM items WHERE project_id=%s AND active=1 "
                "AND item_id = ANY(%s)",
                (project_id, uniq),
            ).fetchall()
        found = {r[0]: item_row(r) for r in rows}
        return [found[i] for i in ids if i in found]

    # -- vectors -------------------------------------------------------------------------
    def put_vectors(
        self, model: str, rows: Sequence[tuple[str, str, npt.NDArray[np.float32]]]
    ) -> int:
        if not rows:
            return 0
        arrays = [(p, i, np.asarray(v, dtype=np.float32)) for p, i, v in rows]
        for dim in sorted({int(a.shape[0]) for _, _, a in arrays}):
            self._ensure_hnsw(dim)
        written = 0
        by_project: dict[str, list[tuple[str, npt.NDArray[np.float32]]]] = {}
        for pid, item_id, arr in arrays:
            by_project.setdefault(pid, []).append((item_id, arr))
        with self._tx() as conn:
            self._lock(conn, list(by_project), ensure=False, bump=True)
            for pid in sorted(by_project):
                wanted = dict(by_project[pid])
                present = {
                    r[0]
                    for r in self._x(
                        conn,
                        "SELECT item_id FROM items WHERE project_id=%s AND item_id = ANY(%s)",
                        (pid, list(wanted)),
                    ).fetchall()
                }  # an item forgotten while it was being embedded gets no vector
                ids = [i for i in wanted if i in present]
                if not ids:
                    continue
                self._x(
                    conn,
                    "DELETE FROM item_vectors WHERE project_id=%s AND item_id = ANY(%s) "
                    "AND model<>%s",
                    (pid, ids, model),
                )
                self._many(
                    conn,
                    "INSERT INTO item_vectors(project_id, item_id, model, dim, vec) "
                    "VALUES (%s,%s,%s,%s,%s) ON CONFLICT (project_id, item_id, model) "
                    "DO UPDATE SET dim=EXCLUDED.dim, vec=EXCLUDED.vec",
                    [(pid, i, model, int(wanted[i].shape[0]), wanted[i]) for i in ids],
                )
                self._x(
                    conn,
                    "UPDATE items SET embedded_model=%s WHERE project_id=%s AND item_id = ANY(%s)",
                    (model, pid, ids),
                )
                written += len(ids)
        return written

    def iter_vectors(
        self, project_id: str, model: str, batch: int = 4096
    ) -> Iterator[list[VectorRow]]:
        sql = (
            "SELECT v.item_id, v.vec FROM item_vectors v JOIN items i "
            "ON i.project_id = v.project_id AND i.item_id = v.item_id "
            "WHERE v.project_id=%s AND v.model=%s AND i.active=1"
        )
        with self._tx() as conn:
            if self._on_statement is not None:
                self._on_statement(sql)
            with conn.cursor(name="ctxbase_vectors") as cur:
                cur.execute(sql, (project_id, model))
                while rows := cur.fetchmany(batch):
                    yield [VectorRow(r[0], as_array(r[1])) for r in rows]

    def get_vectors(
        self, project_id: str, model: str, ids: Sequence[str]
    ) -> dict[str, npt.NDArray[np.float32]]:
        if not ids:
            return {}
        sql = (
            "SELECT v.item_id, v.vec FROM item_vectors v JOIN items i "
            "ON i.project_id = v.project_id AND i.item_id = v.item_id "
            "WHERE v.project_id=%s AND v.model=%s AND i.active=1 AND v.item_id = ANY(%s)"
        )
        with self._read() as conn:
            rows = self._x(conn, sql, (project_id, model, sorted(set(ids)))).fetchall()
        return {r[0]: as_array(r[1]) for r in rows}

    def vector_block(self, project_id: str, model: str) -> VectorBlock:
        # counted first so the matrix is allocated once, then read a batch at a time
        # (no marker: PostgreSQL searches by pgvector and keeps no vectors in memory)
        fill = VectorFill()
        where = (
            "FROM item_vectors v JOIN items i "
            "ON i.project_id = v.project_id AND i.item_id = v.item_id "
            "WHERE v.project_id=%s AND v.model=%s AND i.active=1"
        )
        with self._tx() as conn:
            count = conn.execute(f"SELECT count(*) {where}", (project_id, model)).fetchone()
            fill.expected = int(count[0]) if count else 0
            with conn.cursor(name="ctxbase_vector_block") as cur:
                cur.execute(f"SELECT v.item_id, v.vec {where}", (project_id, model))
                while rows := cur.fetchmany(BATCH_ROWS):
                    fill.add_rows((r[0], as_array(r[1])) for r in rows)
        return fill.block(0, 0)

    def vector_search(
        self,
        project_id: str,
        model: str,
        query: npt.NDArray[np.float32],
        limit: int,
        allowed_ids: set[str] | None = None,
    ) -> list[tuple[str, float]] | None:
        vec = np.asarray(query, dtype=np.float32).ravel()
        dim = int(vec.shape[0])
        if limit <= 0 or dim == 0 or (allowed_ids is not None and not allowed_ids):
            return []
        among = allowed_ids is not None
        exact = allowed_ids is not None and len(allowed_ids) <= q.EXACT_VECTORS
        sql = q.vector_search_sql(dim, among=among, exact=exact)
        branch: list[Any] = [vec, project_id, model]
        if allowed_ids is not None:
            branch.append(sorted(allowed_ids))
        branch.append(int(limit))
        args = branch if exact else [project_id, model, *branch, *branch]
        with self._read() as conn:
            rows = self._x(conn, sql, args).fetchall()
        # A zero vector has no cosine (NaN distance): it matches nothing.
        return [(r[0], 1.0 - float(r[1])) for r in rows if r[1] is not None and r[1] == r[1]]
