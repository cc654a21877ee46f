"""`ctxbase compact-archived`: compact the sessions archived longer ago than a duration
(assemble/compaction.py), with progress on stderr for many sessions, and say what was done."""

from __future__ import annotations

import argparse
import json
from typing import Any

from .progress import Bar, Progress

__all__ = ["run_compact_archived"]

_LISTED = 20  # sessions named one a line; more are counted


def run_compact_archived(cb: Any, args: argparse.Namespace, progress: Progress) -> int:
    """Compact in `cb`'s project (or every project with --all-projects); prints the report
    (one line each, or JSON with --json)."""
    if args.all_projects and getattr(args, "project_given", False):
        from .errors import ValidationError

        raise ValidationError("--project", "does not apply with --all-projects (every project)")
    bars: list[Bar] = []

    def on_session(done: int, total: int, session_id: str) -> None:
        if done == 1:  # a project starts: its own bar, the last one closed
            if bars:
                bars.pop().close()
            bars.append(progress.bar("compact", total=total, unit="session"))
        bars[0].set_detail(session_id[-50:])
        bars[0].update_to(done)

    try:
        report = cb.compact_archived(
            args.older_than, all_projects=args.all_projects, progress=on_session
        )
    finally:
        for bar in bars:
            bar.close()
    if args.json:
        print(json.dumps(report.as_dict(), ensure_ascii=False, indent=2))
        return 0
    where = "every project" if args.all_projects else f"project {cb.project!r}"
    print(
        f"compacted {len(report.compacted)} archived session(s) in {where}: "
        f"{report.events_hidden} turn(s) hidden, one summary each"
    )
    # over every project a session is named with its project: ids repeat between them
    named = [
        f"{sid} (project {pid!r})"
        for pid, part in report.by_project.items()
        for sid in part.compacted
    ] or report.compacted
    for sid in named[:_LISTED]:
        print(f"  compacted {sid}")
    if len(report.compacted) > _LISTED:  # --json names them all
        print(f"  and {len(report.compacted) - _LISTED} more")
    if report.already_compacted:
        print(f"already compacted: {len(report.already_compacted)}")
    if report.too_recent:
        print(f"archived less than {args.older_than} ago, left: {len(report.too_recent)}")
    if report.nothing_to_compact:
        print(f"with no turn to compact: {len(report.nothing_to_compact)}")
    return 0
