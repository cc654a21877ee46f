"""Rows a copy finds in the destination under the key of a source row, with other content
(migrate-data run again after the source changed rows in place).

A copy inserts the source's rows the destination does not hold; a row it holds under the
same key (schema.KEYS) may differ: the source changed it since an earlier copy (a document
ingested again rewrites its entity and search units under their ids; a session, task or
fact written again), or the destination did (a base writing it on its own). After each
batch is imported, the destination's rows of its keys are read back and compared with
what the copy writes (the source's rows as copy_filter leaves them), the project's
`generation` counter and the tombstones' times aside:

- a row the source changed later is replaced by the source's: its table has a time of
  change (sessions, tasks, entities and state `updated_at`, items `ts`) and the source's is
  the later one (a session also not behind the destination's events, `last_seq`). An item
  replaced takes its vectors with it; the source's (if any) come with item_vectors;
- a state record the source deleted (its last version in the source's history `deleted`)
  later than the destination last wrote it is deleted there too (`dropped`; its history
  stays, with the source's versions);
- every other row that differs is kept as the destination holds it and counted per table
  (`differ`): the destination changed it later, or the source changed it without a time to
  tell (an event hidden or rated, a relation closed). A row copy_filter rewrote (redacted
  as the destination's forget left it) is not compared. Counted after the source's forgets
  are applied (copy_forgets), which change rows here as they did there. `source_wins`
  replaces these too.

Only Store protocol methods are used (`held_rows`, `delete_rows`, `import_rows`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from .base import Store
from .copy_reborn import Lives
from .schema import COLUMNS, KEYS

__all__ = ["Refresh"]

Row = Mapping[str, Any]
Key = tuple[Any, ...]

# columns a copy never makes equal: the project's change counter (each write bumps it),
# when a tombstone's id was forgotten (each store its own)
_IGNORED = frozenset({"generation", "forgotten_at"})
# the column telling when a row last changed, in the tables that have one
_CHANGED_AT = {
    "sessions": "updated_at",
    "tasks": "updated_at",
    "entities": "updated_at",
    "state": "updated_at",
    "items": "ts",
}
_STATE_KEY = ("scope", "scope_id", "key")
# tables whose differing rows are resolved after the source's forgets are applied (a
# repository's forget rewrites the records naming it: copy_forgets)
_AFTER_FORGETS = ("state", "state_history")


def _key(table: str, row: Row) -> Key:
    return tuple(row[k] for k in KEYS[table])


def _value(column: str, value: Any) -> Any:
    if column == "vec" and value is not None:
        import numpy as np  # only a compared vector needs it

        return np.asarray(value, dtype=np.float32).tobytes()
    return value


def same_row(table: str, a: Row, b: Row) -> bool:
    """Whether two exported rows of `table` hold the same content."""
    return all(
        _value(c, a.get(c)) == _value(c, b.get(c)) for c in COLUMNS[table] if c not in _IGNORED
    )


def _later(table: str, src: Row, dst: Row) -> bool:
    """The source changed the row after the destination did (by the table's time)."""
    column = _CHANGED_AT.get(table)
    if column is None:
        return False
    try:
        later = float(src[column]) > float(dst[column])
        if table == "sessions":  # its events there go no further than the source's
            later = later and int(src["last_seq"]) >= int(dst["last_seq"])
        return later
    except (TypeError, ValueError, KeyError):
        return False


class Refresh:
    """One copy's rows held under the same key with other content (see module doc).
    `replaced[table]`: rows replaced by the source's; `dropped[table]`: destination rows
    deleted for the source's later change (state records it deleted, the vectors of items
    replaced); `differ[table]` (after `finish`): rows kept that differ from the source."""

    def __init__(
        self,
        src: Store,
        dst: Store,
        project_id: str,
        lives: Lives,
        *,
        source_wins: bool = False,
    ) -> None:
        self._src, self._dst, self._pid = src, dst, project_id
        self._lives, self._source_wins = lives, source_wins
        self.replaced: Counter[str] = Counter()
        self.dropped: Counter[str] = Counter()
        self.differ: Counter[str] = Counter()
        self._kept: dict[str, list[Row]] = {}
        self._state_keys: set[Key] = set()  # every state record of the source

    def batch(self, table: str, source: Sequence[Row], written: Sequence[Row], held: bool) -> None:
        """After a batch of `table` was imported: `source`, the source's rows as exported;
        `written`, those the copy wrote (filtered); `held`: the destination held rows of
        the table before the copy (else none can differ)."""
        if table == "state":
            self._state_keys.update(_key(table, r) for r in source)
        if not held or not written or table == "tombstones":
            return
        # a row copy_filter rewrote (forgotten content redacted, a record rewritten as the
        # destination's forget left it) is the copy's making, not the source's: the
        # destination's own forget wrote its version
        originals = {id(r) for r in source}
        written = [r for r in written if id(r) in originals]
        if table == "projects" and self._lives.project is not None:
            return  # forgotten whole here and written to again: its row is of its new life
        if table == "sessions":  # those forgotten here and written to again: their new life
            written = [r for r in written if r["session_id"] not in self._lives.forgot]
        if table in _AFTER_FORGETS:
            self._kept.setdefault(table, []).extend(written)
            return
        there = {_key(table, r): r for r in self._dst.held_rows(self._pid, table, written)}
        replace: list[Row] = []
        for row in written:
            old = there.get(_key(table, row))
            if old is None or same_row(table, row, old):
                continue
            if self._source_wins or _later(table, row, old):
                replace.append(row)
            else:
                self._kept.setdefault(table, []).append(row)
        self._replace(table, replace)

    def _replace(self, table: str, replace: Sequence[Row]) -> None:
        if replace:
            deleted = self._dst.delete_rows(self._pid, table, replace)
            self.replaced[table] += self._dst.import_rows(self._pid, table, replace)
            for other, n in deleted.items():
                if other != table:
                    self.dropped[other] += n

    def _drop_deleted_state(self) -> None:
        """The destination's records the source deleted after the destination last wrote
        them (see module doc)."""
        only_here = {
            _key("state", r): r
            for rows in self._dst.export_rows(self._pid, "state")
            for r in rows
            if _key("state", r) not in self._state_keys
        }
        if not only_here:
            return
        last: dict[Key, Row] = {}
        for rows in self._src.export_rows(self._pid, "state_history"):
            for r in rows:
                key = tuple(r[k] for k in _STATE_KEY)
                if key in only_here and (key not in last or r["version"] > last[key]["version"]):
                    last[key] = r
        gone = [
            row
            for key, row in only_here.items()
            if key in last
            and last[key]["deleted"]
            and last[key]["version"] > row["version"]
            and float(last[key]["ts"]) >= float(row["updated_at"])
        ]
        if gone:
            self.dropped["state"] += self._dst.delete_rows(self._pid, "state", gone).get("state", 0)

    def finish(self, held_state: bool) -> None:
        """After the source's forgets are applied here (they rewrite records and redact
        rows here as they did there): the state records and versions that differ are
        replaced or kept, those the source deleted since dropped (`held_state`: the
        destination held records before the copy), and the rows kept that still differ
        from the source's counted."""
        for table, rows in self._kept.items():
            there = {_key(table, r): r for r in self._dst.held_rows(self._pid, table, rows)}
            differ = [
                r
                for r in rows
                if (old := there.get(_key(table, r))) is not None and not same_row(table, r, old)
            ]
            if table in _AFTER_FORGETS:
                replace = [
                    r
                    for r in differ
                    if self._source_wins or _later(table, r, there[_key(table, r)])
                ]
                self._replace(table, replace)
                self.differ[table] = len(differ) - len(replace)
            else:
                self.differ[table] = len(differ)
        if held_state:
            self._drop_deleted_state()
