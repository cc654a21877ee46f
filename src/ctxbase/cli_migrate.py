"""`ctxbase migrate-data` around the copy (cli.py runs it; store/transfer.py copies): the
checks before it (a source holding the project, a destination that is another database)
and what it prints after: each table's rows in the source, written by this copy and in the
destination, the rows the destination held already, the rows left out because the
destination hard-forgot them (the whole project included), the rows it held of its own
(tombstones; rows of a session, or of the whole project, written to again after its forget
there), the rows written
redacted, the rows replaced by the source's changes since an earlier copy, those kept that
differ from the source's (exit 1, naming --source-wins), and whether the counts agree."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Mapping

from .errors import NotFoundError, ValidationError
from .store.base import Store
from .store.transfer import TableCopy, project_forgotten, project_reborn

__all__ = ["check_files", "check_source", "check_target", "report_copy"]


def _named(target: str) -> str:
    """How a message names a database: a file by its path; a URL (it may carry a
    password) not at all."""
    return "" if "://" in target else f" {target}"


def check_source(src: Store, source: str, project: str) -> None:
    """The source must hold the project: its rows, or only the tombstones a forget left
    (those are copied). Else NotFoundError naming the projects it holds (a mistyped or
    missing --project would copy nothing and pass for done)."""
    known = src.list_projects()
    if project in known or src.has_forgotten(project):
        return
    listed = ", ".join(known[:10]) + (", ..." if len(known) > 10 else "")
    hint = f"its projects: {listed}; choose one with --project" if known else "it is empty"
    where = _named(source) or " the source database"
    raise NotFoundError(
        "project", project, message=f"project {project!r} not found in{where} ({hint})"
    )


def check_files(source: str, target: str) -> None:
    """Before either is opened: two paths of one file are refused (as check_target does),
    so a refused copy does not upgrade the file as a destination first."""
    if "://" in source or "://" in target or not os.path.exists(target):
        return
    with contextlib.suppress(OSError):
        if os.path.samefile(source, target):
            raise ValidationError(
                "--to",
                f"{target} is the --from database itself: a project cannot be copied into itself",
            )


def check_target(src: Store, dst: Store, target: str) -> None:
    """The destination must be another database than the source, however it was named
    (another path, a symlink, another URL of the same PostgreSQL database): a copy into
    itself writes nothing and would report rows copied. ValidationError otherwise."""
    if src.same_database(dst):
        raise ValidationError(
            "--to",
            f"{_named(target).strip() or 'this URL'} is the --from database itself: a project "
            "cannot be copied into itself",
        )


def _per_table(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{table} {n}" for table, n in counts.items())


def _summary(counts: Mapping[str, TableCopy], project: str) -> str:
    """What the copy wrote: new rows, and the source rows the destination held already
    (a re-run writes none)."""
    written = sum(c.written for c in counts.values())
    already = sum(c.already for c in counts.values())
    if project_forgotten(counts):
        return (
            f"copied nothing of project {project}: the destination forgot the whole project "
            "(forget --whole-project); it takes rows again once the project is written to there"
        )
    if project_reborn(counts):
        own = sum(c.own for t, c in counts.items() if t != "tombstones")
        what = f"copied {written} new row(s)" if written else "copied nothing"
        return (
            f"{what} of project {project}: the destination forgot the whole project "
            f"(forget --whole-project) and was written to since: what it forgot stays out, "
            f"its {own} row(s) written since are its own"
        )
    if not written and already:
        return f"copied nothing: all {already} row(s) of project {project} were already there"
    there = f" ({already} already there)" if already else ""
    return f"copied {written} new row(s) of project {project}{there}"


def report_copy(counts: Mapping[str, TableCopy], project: str) -> int:
    """Print the copy's counts; the exit code: 1 when a table's count is not the one
    expected (the destination held other rows of the project, or rows did not arrive), or
    when rows it holds under a source row's key differ from the source's and were kept."""
    for table, c in counts.items():
        notes = [f"{c.forgotten} left out: forgotten there"] if c.forgotten else []
        if c.own:
            since = "forgotten there" if table == "tombstones" else "written since a forget there"
            notes.append(f"{c.own} of its own: {since}")
        if c.removed:
            notes.append(f"{c.removed} forgotten here: forgotten in the source")
        if c.replaced:
            notes.append(f"{c.replaced} replaced: changed in the source since")
        note = f"  ({'; '.join(notes)})" if notes else ""
        mark = "" if c.matches and not c.differ else "   <-- differs"
        print(
            f"{table:<14} source {c.source:>8}  written {c.written:>8}  "
            f"destination {c.destination:>8}{note}{mark}"
        )
    print(_summary(counts, project))
    whose = (
        "of the project, written to again after its whole-project forget there"
        if project_reborn(counts)
        else "of sessions written to again after their forget there"
    )
    lines: list[tuple[str, bool, str]] = [  # (TableCopy figure, tombstones too, the line)
        ("forgotten", True, "left out {n} row(s) the destination has forgotten"),
        ("own", False, f"the destination held {{n}} row(s) of its own, {whose}"),
        ("removed", True, "forgot {n} row(s) in the destination that the source has forgotten"
         " since an earlier copy"),
        ("extra", False, "the destination holds {n} other row(s) of the project that the source"
         " does not (kept)"),
        ("redacted", True, "redacted forgotten content out of {n} row(s)"),
        ("replaced", False, "replaced {n} row(s) the source changed since the destination's"
         " copy of them"),
        ("dropped", False, "took out {n} row(s) the source removed or replaced since the"
         " destination's copy of them"),
    ]  # fmt: skip
    for figure, tombstones, line in lines:
        per = {
            t: getattr(c, figure)
            for t, c in counts.items()
            if getattr(c, figure) and (tombstones or t != "tombstones")
        }
        if per:
            print(f"{line.format(n=sum(per.values()))} ({_per_table(per)})")
    differ = {t: c.differ for t, c in counts.items() if c.differ}
    if differ:
        print(
            f"error: {sum(differ.values())} row(s) differ from the source; kept the "
            f"destination's ({_per_table(differ)}): it changed them later, or the source "
            "changed them with no time to tell which is newer (an event hidden or rated, a "
            "relation closed); run again with --source-wins to take the source's",
            file=sys.stderr,
        )
    if not all(c.matches for c in counts.values()):
        print(
            "error: row counts differ: the destination does not hold what it held before plus"
            " the rows written",
            file=sys.stderr,
        )
        return 1
    return 1 if differ else 0
