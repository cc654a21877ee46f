"""Notes the commands print on stderr beside an answer: what a search or an assembly
left out and why (a signature, a type nothing has, a pin, hidden sessions), so an empty
answer is never mistaken for nothing stored."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

__all__ = ["note_hidden", "note_no_match", "note_pinned", "note_signatures"]


def note_signatures(tampered: Sequence[str], unsigned: int, *, events: bool = False) -> None:
    """What a --require-signature search or assembly left out, on stderr (an assembly
    verifies captured events too: `events`)."""
    if tampered:
        print(f"note: left out as tampered: {', '.join(tampered)}", file=sys.stderr)
    if unsigned:
        what = "entity" if unsigned == 1 else "entities"
        if events:
            what += " or event" if unsigned == 1 else " or events"
        hint = "; captures are signed when a key is set" if events else ""
        print(
            f"note: {unsigned} unsigned {what} left out"
            f" (--require-signature; `ctxbase ingest --sign` signs what it writes{hint})",
            file=sys.stderr,
        )


def note_pinned(cb: Any) -> None:
    """An empty answer under a pin: what was ingested since is hidden, not missing."""
    from .anchor.kb_versions import pinned_version

    pinned = pinned_version(cb.components)
    if pinned is not None:
        print(
            f"note: project {cb.project!r} is pinned at {pinned} (kb pin): what was ingested"
            " since is not searched; --kb-version latest looks past it",
            file=sys.stderr,
        )


def note_hidden(hidden: dict[str, int], what: str) -> None:
    """A note per session whose events forget --soft or compact-archived hid: they are there,
    not gone."""
    sys.stdout.flush()
    for session, n in hidden.items():
        print(
            f"note: {n} event(s) of session {session!r} are hidden (forget --soft or"
            f" compact-archived), {what}; restore --session {session} brings them back",
            file=sys.stderr,
        )


def note_no_match(query: str, project: str, narrowed: bool) -> None:
    """An empty search answer that exits 0 must not read as a search that did not run."""
    where = " within the filters given" if narrowed else ""
    print(f"no match for {query!r} in project {project!r}{where}", file=sys.stderr)
