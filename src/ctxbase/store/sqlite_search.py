"""Keyword search, item reads and filters, vectors and the index generation of the SQLite
backend (a mixin of SQLiteStore).

Keywords: FTS5's bm25 over item_fts (each item's own terms plus its live context's terms),
ranked inside FTS5 first; only the best rows are then checked against the project and filter.
Vectors: stored as float32 blobs; there is no native vector index, the retriever searches
them in memory.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from ..errors import StorageError
from .base import OWN_TERMS_WEIGHT, KeywordDelta, KeywordHit, VectorBlock, VectorDelta, VectorRow
from .dialect import filter_sql
from .records import ItemFilter, SearchItem
from .rows import KEYWORD_ROW_COLS, item_row, keyword_rows
from .sqlite_base import (
    ITEM_COLS,
    SQLITE,
    SQLiteBase,
    chunks,
    item_seq,
    placeholders,
    reserve_rowids,
)
from .vector_block import BATCH_ROWS, VectorFill

if TYPE_CHECKING:  # the vector methods load it: a command that reads no vector never does
    import numpy as np
    import numpy.typing as npt

__all__ = ["SQLiteSearch", "reserve_vector_rowids"]


_VECTOR_SEQ = "vector_rowid"
# The active vectors of a (project, model). NOT INDEXED: walk the table's rowid order (the
# primary key index would read every vector of the project to find the few new ones)
_ACTIVE_VECTORS = (
    "FROM item_vectors v NOT INDEXED JOIN items i "
    "ON i.project_id = v.project_id AND i.item_id = v.item_id "
    "WHERE v.project_id=? AND v.model=? AND i.active=1"
)

# Keyword search ranks the best matches of the whole index first (see keyword_search).
_RANKED_SQL = (
    f"SELECT rowid, bm25(item_fts, 1.0, {OWN_TERMS_WEIGHT}) AS rank FROM item_fts "
    "WHERE item_fts MATCH ? ORDER BY rank LIMIT ?"
)
_FIRST_WINDOW = 64
_WIDEST_WINDOW = 20_000
# A filter that admits fewer items than this (a session, some entity types) is ranked
# joined to items at once.
_FEW_ADMITTED = 2_000


def reserve_vector_rowids(conn: sqlite3.Connection, n: int) -> int:
    """The first of `n` fresh item_vectors rowids (vector_changes reads what was stored
    after a rowid; see reserve_rowids)."""
    return reserve_rowids(conn, _VECTOR_SEQ, "item_vectors", n)


class SQLiteSearch(SQLiteBase):
    # -- search index --------------------------------------------------------------------
    def keyword_search(
        self, project_id: str, match: str, flt: ItemFilter | None, limit: int
    ) -> list[KeywordHit]:
        # FTS5 ranks first, in its own sorter, and only the best rows are looked up in
        # items for the project and filter; the window widens until `limit` pass or every
        # match was ranked. Joining items to every match first cost a lookup per match,
        # which grew with the project. Same hits as ranking all matches then filtering.
        where, args = filter_sql(SQLITE, flt)
        window = max(4 * int(limit), _FIRST_WINDOW)
        with self._read() as conn:
            if where and self._admits_few(conn, project_id, where, args):
                # the best matches of the index would rarely pass: no windows to widen
                return self._keyword_joined(conn, match, project_id, where, args, limit)
            while True:
                if window > _WIDEST_WINDOW:  # a narrow filter: rank its matches at once
                    return self._keyword_joined(conn, match, project_id, where, args, limit)
                try:
                    ranked = conn.execute(_RANKED_SQL, (match, window)).fetchall()
                except sqlite3.OperationalError as exc:
                    raise StorageError(f"keyword query {match!r} failed: {exc}") from exc
                ids: dict[int, str] = {}
                for part in chunks([r[0] for r in ranked]):
                    ids.update(
                        conn.execute(
                            # NOT INDEXED: look the rowids up; an index on project_id
                            # would walk the whole project
                            "SELECT i.rowid, i.item_id FROM items i NOT INDEXED "
                            "WHERE i.rowid IN "
                            f"({placeholders(len(part))}) AND i.project_id = ? "
                            f"AND i.active = 1{where}",
                            (*part, project_id, *args),
                        ).fetchall()
                    )
                hits = [KeywordHit(ids[r], -float(rank)) for r, rank in ranked if r in ids]
                if len(hits) >= limit or len(ranked) < window:
                    return hits[: max(int(limit), 0)]
                window *= 8

    @staticmethod
    def _admits_few(
        conn: sqlite3.Connection, project_id: str, where: str, args: list[object]
    ) -> bool:
        row = conn.execute(
            "SELECT count(*) FROM (SELECT 1 FROM items i WHERE i.project_id = ? "
            f"AND i.active = 1{where} LIMIT ?)",
            (project_id, *args, _FEW_ADMITTED),
        ).fetchone()
        return int(row[0]) < _FEW_ADMITTED

    def _keyword_joined(
        self,
        conn: sqlite3.Connection,
        match: str,
        project_id: str,
        where: str,
        args: list[object],
        limit: int,
    ) -> list[KeywordHit]:
        sql = (
            f"SELECT i.item_id, bm25(item_fts, 1.0, {OWN_TERMS_WEIGHT}) AS rank FROM item_fts "
            "JOIN items i ON i.rowid = item_fts.rowid "
            f"WHERE item_fts MATCH ? AND i.project_id = ? AND i.active = 1{where} "
            "ORDER BY rank LIMIT ?"
        )
        try:
            rows = conn.execute(sql, (match, project_id, *args, int(limit))).fetchall()
        except sqlite3.OperationalError as exc:
            raise StorageError(f"keyword query {match!r} failed: {exc}") from exc
        return [KeywordHit(r[0], -float(r[1])) for r in rows]

    def keyword_changes(self, project_id: str, after: int) -> KeywordDelta:
        # Item rowids are change numbers from a counter that only grows (reserve_rowids),
        # taken one writer at a time, so their order is the order of committing; a replaced
        # item is deleted and gets a new rowid. Rows that left the index are recorded under
        # numbers of the same counter (triggers of schema v6). The reads see one snapshot.
        # NOT INDEXED: walk the table's rowid order from `after`, not the project's index.
        removed: list[int] | None = []
        with self._read() as conn:
            conn.execute("BEGIN")
            try:
                rows = keyword_rows(  # row by row: no second copy of a large project
                    conn.execute(
                        f"SELECT {KEYWORD_ROW_COLS}, rowid FROM items NOT INDEXED "
                        "WHERE rowid > ? AND project_id = ? AND active = 1 ORDER BY rowid",
                        (after, project_id),
                    )
                )
                if after:
                    removed = [
                        int(r[0])
                        for r in conn.execute(
                            "SELECT seq FROM keyword_removed WHERE project_id=? AND at > ?",
                            (project_id, after),
                        )
                    ]
                    if 0 in removed:  # the record was cut after `after`
                        removed = None
                removals = conn.execute(
                    "SELECT n FROM vector_removals WHERE project_id=?", (project_id,)
                ).fetchone()
                last = item_seq(conn)
            finally:
                conn.execute("COMMIT")
        return KeywordDelta(
            rows=rows,
            marker=max(int(after), last),
            removals=int(removals[0]) if removals else 0,
            removed=removed,
        )

    def get_items(self, project_id: str, ids: Sequence[str]) -> list[SearchItem]:
        out: dict[str, SearchItem] = {}
        with self._read() as conn:
            for part in chunks(list(dict.fromkeys(ids))):
                rows = conn.execute(
                    f"SELECT {ITEM_COLS} FROM items WHERE project_id=? AND active=1 "
                    f"AND item_id IN ({placeholders(len(part))})",
                    (project_id, *part),
                ).fetchall()
                for r in rows:
                    out[r[0]] = item_row(r)
        return [out[i] for i in ids if i in out]

    # -- vectors -------------------------------------------------------------------------
    def put_vectors(
        self, model: str, rows: Sequence[tuple[str, str, npt.NDArray[np.float32]]]
    ) -> int:
        import numpy as np

        written = 0
        with self._write() as conn:
            rowid = reserve_vector_rowids(conn, len(rows))  # one per row; skipped ones unused
            for n, (project_id, item_id, vec) in enumerate(rows):
                present = conn.execute(
                    "SELECT 1 FROM items WHERE project_id=? AND item_id=?", (project_id, item_id)
                ).fetchone()
                if not present:  # forgotten while it was being embedded
                    continue
                arr = np.asarray(vec, dtype=np.float32)
                conn.execute(
                    "DELETE FROM item_vectors WHERE project_id=? AND item_id=? AND model<>?",
                    (project_id, item_id, model),
                )
                conn.execute(
                    "INSERT OR REPLACE INTO item_vectors(rowid, project_id, item_id, model, dim, "
                    "vec) VALUES (?,?,?,?,?,?)",
                    (
                        rowid + n,
                        project_id,
                        item_id,
                        model,
                        int(arr.shape[0]),
                        arr.tobytes(),
                    ),
                )
                conn.execute(
                    "UPDATE items SET embedded_model=? WHERE project_id=? AND item_id=?",
                    (model, project_id, item_id),
                )
                written += 1
            for project_id in {r[0] for r in rows}:
                self._bump(conn, project_id)
        return written

    def iter_vectors(
        self, project_id: str, model: str, batch: int = 4096
    ) -> Iterator[list[VectorRow]]:
        import numpy as np

        with self._read() as conn:
            rows = conn.execute(
                "SELECT v.item_id, v.vec FROM item_vectors v JOIN items i "
                "ON i.project_id = v.project_id AND i.item_id = v.item_id "
                "WHERE v.project_id=? AND v.model=? AND i.active=1",
                (project_id, model),
            ).fetchall()
        for i in range(0, len(rows), batch):
            yield [
                VectorRow(r[0], np.frombuffer(r[1], dtype=np.float32)) for r in rows[i : i + batch]
            ]

    def vector_block(self, project_id: str, model: str) -> VectorBlock:
        # the rows are counted first (the index of items by embedded model) so the matrix
        # is allocated once; then read a batch at a time, in the order of storing
        fill = VectorFill()
        with self._read() as conn:
            conn.execute("BEGIN")
            try:
                (fill.expected,) = conn.execute(
                    "SELECT count(*) FROM items "
                    "WHERE embedded_model=? AND active=1 AND project_id=?",
                    (model, project_id),
                ).fetchone()
                cursor = conn.execute(
                    f"SELECT v.item_id, v.vec {_ACTIVE_VECTORS} ORDER BY v.rowid",
                    (project_id, model),
                )
                while batch := cursor.fetchmany(BATCH_ROWS):
                    fill.add_rows(batch)
                marker, removals = self._vector_marks(conn, project_id, model, 0)
            finally:
                conn.execute("COMMIT")
        return fill.block(marker, removals)

    def vector_ids(self, project_id: str, model: str) -> VectorBlock:
        import numpy as np

        with self._read() as conn:
            conn.execute("BEGIN")
            try:
                ids = [
                    r[0]
                    for r in conn.execute(
                        f"SELECT v.item_id {_ACTIVE_VECTORS} ORDER BY v.rowid", (project_id, model)
                    )
                ]
                marker, removals = self._vector_marks(conn, project_id, model, 0)
            finally:
                conn.execute("COMMIT")
        return VectorBlock(ids, np.zeros((0, 0), dtype=np.float32), marker, removals)

    def _vector_marks(
        self, conn: sqlite3.Connection, project_id: str, model: str, after: int
    ) -> tuple[int, int]:
        """The marker for vector_changes after what was read, and the removal count."""
        removals = conn.execute(
            "SELECT n FROM vector_removals WHERE project_id=?", (project_id,)
        ).fetchone()
        last = conn.execute(
            "SELECT max(rowid) FROM item_vectors WHERE project_id=? AND model=?",
            (project_id, model),
        ).fetchone()
        return max(after, int(last[0] or 0)), int(removals[0]) if removals else 0

    def vector_changes(self, project_id: str, model: str, after: int) -> VectorDelta | None:
        # Rowids come from reserve_vector_rowids, so rowid order is the order of storing
        # (a replaced vector gets a new one); the reads see one snapshot.
        import numpy as np

        sql = _ACTIVE_VECTORS
        with self._read() as conn:
            conn.execute("BEGIN")
            try:
                rows = conn.execute(
                    f"SELECT v.rowid, v.item_id, v.vec {sql} AND v.rowid > ? ORDER BY v.rowid",
                    (project_id, model, after),
                ).fetchall()
                marker, removals = self._vector_marks(conn, project_id, model, after)
            finally:
                conn.execute("COMMIT")
        return VectorDelta(
            rows=[VectorRow(r[1], np.frombuffer(r[2], dtype=np.float32)) for r in rows],
            marker=marker,
            removals=removals,
        )

    def vector_search(
        self,
        project_id: str,
        model: str,
        query: npt.NDArray[np.float32],
        limit: int,
        allowed_ids: set[str] | None = None,
    ) -> list[tuple[str, float]] | None:
        return None  # no native vector index: the retriever searches in memory
