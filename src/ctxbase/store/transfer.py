"""Copy one project between stores (any backend to any backend), with a row-count check.

Only Store protocol methods are used (`export_rows` / `import_rows` / `count_rows`), so the
copy needs no knowledge of either dialect. Rows are copied verbatim: ids, session `seq`
values, versions, vectors and tombstones included, so the copy continues where the source
stopped. The destination's keyword index is built by its backend as items arrive. The
upgrade steps the source still has pending (`Store.pending_upgrades`: an older backup's
tool-call turns still without text) are marked pending in the destination, which does
them when a base next opens it; so are the events the source had not anchored yet (its
anchoring backlog), anchored when a base next opens the project there.

What the destination hard-forgot (its tombstones) is not written back, nor what its forget
removed with it (copy_filter.ForgottenThere): a backup taken before a forget does not
undo it, nor bring back the forgotten life of a session (or of the whole project) written
to again since; after a whole-project forget nothing of the project is written while the
destination does not hold it again. The source's tombstones are copied, so the destination
refuses those too. A store is never copied into itself (ValidationError).

The source is read in one snapshot (`Store.read_snapshot`) while bases may go on writing
it, and the destination written in one transaction: a copy interrupted half way leaves
the destination as it was.

A row the destination holds under the key of a source row with other content (the source
changed it in place since an earlier copy, or the destination did) is replaced by the
source's when the source changed it later, and otherwise kept and counted
(`TableCopy.differ`; copy_refresh).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from contextlib import nullcontext
from dataclasses import dataclass

from ..errors import ValidationError
from .base import Store
from .copy_filter import ForgottenThere
from .copy_forgets import forget_what_the_source_forgot
from .copy_refresh import Refresh
from .schema import TABLES

__all__ = ["TableCopy", "copy_project", "project_forgotten", "project_reborn"]


@dataclass(frozen=True)
class TableCopy:
    """One table of a copy: its rows in the source (as of the copy's snapshot) and in the
    destination before (`held`) and after it.

    `written`: source rows this copy inserted; `forgotten`: source rows not written
    because the destination forgot them; `already` (the rest): source rows the
    destination held already (same key; kept as they are); `own`: for tombstones, those
    the destination held that the source does not (what it forgot), for other tables the
    rows it holds beyond the source's of sessions (or the whole project) it forgot and then
    wrote to again (their new lives: copy_reborn); `removed`: destination rows forgotten
    because the source forgot them since an earlier copy (copy_forgets); `extra`: other
    rows the destination holds that the source does not (written there since an earlier
    copy); `redacted`: rows written with forgotten content taken out. The copy is whole
    (`matches`) when the destination holds what it held plus what was written less what
    was removed, and held the rows skipped as already there. `replaced`: rows the
    destination held under a source row's key with other content, replaced by the source's
    (it changed them later); `dropped`: destination rows deleted for the source's later
    change (a state record it deleted, the vectors of items replaced); `differ`: rows held
    under a source row's key with other content, kept as they are (copy_refresh)."""

    source: int
    destination: int
    held: int = 0
    written: int = 0
    removed: int = 0
    forgotten: int = 0
    own: int = 0
    redacted: int = 0
    replaced: int = 0
    dropped: int = 0
    differ: int = 0

    @property
    def already(self) -> int:
        return max(self.source - self.forgotten - self.written, 0)

    @property
    def extra(self) -> int:
        return max(self.destination - (self.source - self.forgotten) - self.own, 0)

    @property
    def matches(self) -> bool:
        whole = self.destination == self.held + self.written - self.removed - self.dropped
        return whole and self.already <= self.held


def copy_project(
    src: Store,
    dst: Store,
    project_id: str,
    *,
    batch: int = 1000,
    progress: Callable[[str, int], None] | None = None,
    bulk: bool = False,
    source_wins: bool = False,
) -> dict[str, TableCopy]:
    """Copy every row of `project_id` from `src` to `dst`; rows already in `dst` are kept,
    and rows `dst` has hard-forgotten are left out (see copy_filter).

    Returns table -> TableCopy, counted after the copy (the source's inside its snapshot).
    The source is read as of one moment and the destination written in one transaction
    (holding the project's write lock): all or nothing. `progress(table, rows)` is
    called after each batch with the source rows read so far. `bulk`: the copy runs in
    `dst.bulk_load()` (PostgreSQL builds its vector indexes once, after the copy).
    `source_wins`: every row the destination holds with other content than the source's is
    replaced by the source's (by default only those the source changed later: copy_refresh).
    ValidationError when `dst` is the database of `src` (however it was named).
    """
    if src.same_database(dst):
        raise ValidationError(
            "dst", "is the database of src: a project cannot be copied into itself"
        )
    # The source is read as of one moment (a base writing it meanwhile does not leave units
    # without their item, or counts from later), and the destination written in one
    # transaction: an interrupted copy leaves nothing (no items marked embedded without
    # their vectors, no rows without the tombstones that come last), a re-run starts over.
    with (
        dst.bulk_load() if bulk else nullcontext(),
        src.read_snapshot(),
        dst.transaction(),
    ):
        held = {table: dst.count_rows(project_id, table) for table in TABLES}
        if held["projects"]:  # no other writer of the project meanwhile (the counts agree)
            dst.hold_project(project_id)
        there = ForgottenThere(src, dst, project_id)
        refresh = Refresh(src, dst, project_id, there.lives, source_wins=source_wins)
        own = 0
        written: dict[str, int] = {}
        for table in TABLES:  # parents first (projects, sessions, ...)
            there.prepare(table)
            copied = inserted = 0
            for rows in src.export_rows(project_id, table, batch):
                kept = there.rows(table, rows)
                inserted += dst.import_rows(project_id, table, kept)
                refresh.batch(table, rows, kept, held=bool(held[table]))
                copied += len(rows)
                if progress is not None:
                    progress(table, copied)
            written[table] = inserted
            if table == "projects" and inserted:  # its row is there now: held from here on
                dst.hold_project(project_id)
            if table == "tombstones":  # held before, less the source's already there
                own = held[table] - (copied - there.skipped[table] - inserted)
        # the source's upgrade steps still to do (an older backup read through an upgraded
        # copy has them): its rows arrived as they are, so the destination does them when a
        # base next opens it
        for step in sorted(src.pending_upgrades()):
            dst.mark_upgrade(step)
        # the events the source stored and had not anchored yet: so are their copies,
        # anchored when a base next opens the project there (those left out as forgotten
        # are not)
        waiting = src.anchor_backlog(project_id)
        if waiting:
            there_now = dst.existing_ids(project_id, waiting)
            dst.add_anchor_backlog(project_id, [i for i in waiting if i in there_now])
        lives = there.own()  # rows of sessions forgotten there and written to again since
        # the source's forgets since an earlier copy: its new tombstones cover rows here
        removed = (
            forget_what_the_source_forgot(src, dst, project_id)
            if written["tombstones"]
            else Counter[str]()
        )
        refresh.finish(held_state=bool(held["state"]))  # as the forgets left the rows
        return {
            table: TableCopy(
                source=src.count_rows(project_id, table),
                destination=dst.count_rows(project_id, table),
                held=held[table],
                written=written[table],
                removed=removed[table],
                forgotten=there.skipped[table],
                own=own if table == "tombstones" else lives[table],
                redacted=there.redacted[table],
                replaced=refresh.replaced[table],
                dropped=refresh.dropped[table],
                differ=refresh.differ[table],
            )
            for table in TABLES
        }


def project_forgotten(counts: Mapping[str, TableCopy]) -> bool:
    """A copy's counts say the destination forgot the whole project (and does not hold it
    again): the project's own row was left out, which only that does, and the destination
    holds none of its own."""
    projects = counts.get("projects")
    return projects is not None and projects.forgotten > 0 and not projects.own


def project_reborn(counts: Mapping[str, TableCopy]) -> bool:
    """A copy's counts say the destination forgot the whole project and was written to
    again since: the source's project row was left out (from before that forget) and the
    destination holds a project row of its own."""
    projects = counts.get("projects")
    return projects is not None and projects.forgotten > 0 and projects.own > 0
