"""Each project's record of keyword removals kept bounded (table `keyword_removed`, v6).

Triggers add a row per item that leaves the keyword index (`at`: the change number taken
when it left, `seq`: the row's own), so an in-memory keyword index that last read at some
number applies the removals since in place (`Store.keyword_changes`). Left alone the record
grows with every hide, forget and replacement. A write that can add to it counts, per
project and store, the writes since the record was last measured; every
`keyword_log_check_every` of them (the first included: a short-lived process checks too)
the record is measured in the same transaction, and past `keyword_log_limit` rows its
oldest are dropped: the newest `keyword_log_limit - 1` stay, and a mark (seq 0) takes the
number of the newest one dropped. A reader that last read before that number is told the
store cannot say what it removed (it reloads); one that read at or after it had seen every
dropped row and keeps applying removals in place. Between checks the record may grow by
what the writes in between removed.

Statements are written with `?` placeholders and run through the backend's `_run`, inside
a write transaction that holds the project (SQLite's writer lock, PostgreSQL's project row
lock), so a project's record is trimmed by one writer at a time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from .dialect import Dialect

__all__ = ["KeywordLog"]

# Projects whose write counts are kept before the counts start again (each project is then
# checked at its next write).
_TRACKED = 4096


class KeywordLog:
    """The bound on `keyword_removed`; a backend supplies its dialect and `_run`, and calls
    `_keep_keyword_log` in each write that can remove a row from the keyword index."""

    _dialect: ClassVar[Dialect]
    # Declared on Store (defaults KEYWORD_LOG_LIMIT and KEYWORD_LOG_CHECK_EVERY).
    keyword_log_limit: int
    keyword_log_check_every: int

    def _run(self, conn: Any, sql: str, args: Sequence[Any] = ()) -> Any:
        """Execute one statement (already in the driver's placeholder style); the cursor."""
        raise NotImplementedError

    def _keep_keyword_log(self, conn: Any, project_id: str) -> None:
        """Count a write of the project; on every `keyword_log_check_every`-th (starting
        with the first) trim its record of removals to `keyword_log_limit` rows."""
        writes: dict[str, int] | None = self.__dict__.get("_keyword_log_writes")
        if writes is None or len(writes) >= _TRACKED:
            writes = self.__dict__["_keyword_log_writes"] = {}
        n = writes.get(project_id, 0)
        writes[project_id] = n + 1
        if n % max(int(self.keyword_log_check_every), 1) == 0:
            self._trim_keyword_log(conn, project_id)

    def _trim_keyword_log(self, conn: Any, project_id: str) -> bool:
        """Past `keyword_log_limit` rows, drop the project's oldest records of removals,
        leaving the newest `keyword_log_limit - 1` and a mark (seq 0) at the number of the
        newest one dropped. Whether it dropped any. Walks at most `keyword_log_limit + 1`
        entries of the index on (project_id, at)."""
        limit = max(int(self.keyword_log_limit), 2)
        newest_first = (
            "SELECT at FROM keyword_removed WHERE project_id=? ORDER BY at DESC LIMIT 1 OFFSET ?"
        )
        sql = self._dialect.sql(newest_first)
        if self._run(conn, sql, (project_id, limit)).fetchone() is None:
            return False  # at most `limit` rows
        (cut,) = self._run(conn, sql, (project_id, limit - 1)).fetchone()
        self._run(
            conn,
            self._dialect.sql("DELETE FROM keyword_removed WHERE project_id=? AND at <= ?"),
            (project_id, cut),
        )
        self._run(
            conn,
            self._dialect.sql("INSERT INTO keyword_removed(project_id, at, seq) VALUES (?, ?, 0)"),
            (project_id, cut),
        )
        return True
