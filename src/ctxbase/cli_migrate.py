"""What `ctxbase migrate-data` prints after the copy (cli.py runs it; store/transfer.py
copies): each table's rows in the source and destination, the rows left out because the
destination hard-forgot them, the rows written redacted, and whether the counts agree."""

from __future__ import annotations

import sys
from collections.abc import Mapping

from .store.transfer import TableCopy

__all__ = ["report_copy"]


def _per_table(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{table} {n}" for table, n in counts.items())


def report_copy(counts: Mapping[str, TableCopy], project: str) -> int:
    """Print the copy's counts; the exit code: 1 when a table's count is not the one
    expected (the destination held other rows of the project, or rows did not arrive)."""
    for table, c in counts.items():
        note = ""
        if c.forgotten:
            note = f"  ({c.forgotten} left out: forgotten there)"
        elif c.own:
            note = f"  ({c.own} of its own: forgotten there)"
        mark = "" if c.matches else "   <-- differs"
        print(f"{table:<14} source {c.source:>8}  destination {c.destination:>8}{note}{mark}")
    print(
        f"copied {sum(c.source - c.forgotten for c in counts.values())} row(s) of project {project}"
    )
    left_out = {t: c.forgotten for t, c in counts.items() if c.forgotten}
    if left_out:
        print(
            f"left out {sum(left_out.values())} row(s) the destination has forgotten "
            f"({_per_table(left_out)})"
        )
    redacted = {t: c.redacted for t, c in counts.items() if c.redacted}
    if redacted:
        print(
            f"redacted forgotten content out of {sum(redacted.values())} row(s) "
            f"({_per_table(redacted)})"
        )
    if not all(c.matches for c in counts.values()):
        print(
            "error: row counts differ (the destination already held rows of this project?)",
            file=sys.stderr,
        )
        return 1
    return 0
