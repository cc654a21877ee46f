"""Copy one project between stores (any backend to any backend), with a row-count check.

Only Store protocol methods are used (`export_rows` / `import_rows` / `count_rows`), so the
copy needs no knowledge of either dialect. Rows are copied verbatim: ids, session `seq`
values, versions, vectors and tombstones included, so the copy continues where the source
stopped. The destination's keyword index is built by its backend as items arrive.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext

from .base import Store
from .schema import TABLES

__all__ = ["copy_project"]


def copy_project(
    src: Store,
    dst: Store,
    project_id: str,
    *,
    batch: int = 1000,
    progress: Callable[[str, int], None] | None = None,
    bulk: bool = False,
) -> dict[str, tuple[int, int]]:
    """Copy every row of `project_id` from `src` to `dst`; rows already in `dst` are kept.

    Returns table -> (source rows, destination rows) counted after the copy; they are equal
    when the destination had nothing of this project before. `progress(table, rows)` is
    called after each batch. `bulk`: the copy runs in `dst.bulk_load()` (PostgreSQL builds
    its vector indexes once, after the copy).
    """
    counts: dict[str, tuple[int, int]] = {}
    with dst.bulk_load() if bulk else nullcontext():
        for table in TABLES:  # parents first (projects, sessions, ...): readers see whole rows
            copied = 0
            for rows in src.export_rows(project_id, table, batch):
                dst.import_rows(project_id, table, rows)
                copied += len(rows)
                if progress is not None:
                    progress(table, copied)
    for table in TABLES:
        counts[table] = (src.count_rows(project_id, table), dst.count_rows(project_id, table))
    return counts
