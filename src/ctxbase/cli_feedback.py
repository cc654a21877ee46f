"""`ctxbase feedback`: mark a memory liked, helpful, disliked, wrong or neutral, or show
the feedback on it (memory_feedback.py). cli_parser.py adds the arguments; cli.py's
handler opens the base and runs `run_feedback`. `ctxbase search` shows the ratings with
`rating` and `note_rated_out`."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from .errors import ValidationError

if TYPE_CHECKING:  # `ctxbase --help` loads no pydantic: the library checks the label
    from .contextbase import ContextBase
    from .memory_feedback import Feedback
    from .retrieve.search import Candidate

__all__ = ["add_feedback_arguments", "note_rated_out", "rating", "run_feedback"]

# Rated-out matches named in the note by id; more are counted.
_NAMED = 5


def add_feedback_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("node_id", help="an event, entity or search unit id")
    p.add_argument(
        "label",
        nargs="?",
        help="liked, helpful, disliked, wrong or neutral (undoes it); without it, show the "
        "feedback given on the node",
    )
    p.add_argument(
        "--confidence", type=float, help="0..1 in place of the label's (wrong is 0: left out)"
    )
    p.add_argument("--context", dest="context_id", help="the context id it was seen in")
    p.add_argument("--note", help="why, in a few words")
    p.add_argument("--by", help="who gives it (default: the local user)")
    p.add_argument("--json", action="store_true", help="print the feedback as JSON")


def _line(f: Feedback) -> str:
    where = f" in {f.context_id}" if f.context_id else ""
    note = f": {f.note}" if f.note else ""
    return f"{f.node_id} {f.label} (confidence {f.confidence:g}) by {f.by}{where}{note}"


def _print_json(value: Any) -> None:
    print(json.dumps(value, ensure_ascii=False, indent=2, default=str))


def run_feedback(cb: ContextBase, args: argparse.Namespace) -> int:
    """Give the feedback `args` names on `cb`, or show the feedback on the node."""
    if args.label is None:
        if args.confidence is not None or args.context_id or args.note or args.by:
            raise ValidationError(
                "label", "give a label with --confidence, --context, --note or --by"
            )
        current = cb.get_feedback(args.node_id)
        history = cb.feedback_history(args.node_id)
        if args.json:
            _print_json(
                {
                    "current": None if current is None else current.model_dump(mode="json"),
                    "history": [h.model_dump(mode="json") for h in history],
                }
            )
        elif current is None:
            print(f"{args.node_id}: no feedback")
        else:
            print(_line(current))
            for h in history[:-1]:
                print(f"  before: {_line(h)}")
        return 0
    given = cb.feedback(
        args.node_id,
        args.label,
        confidence=args.confidence,
        context_id=args.context_id,
        note=args.note,
        by=args.by,
    )
    if args.json:
        _print_json(given.model_dump(mode="json"))
    else:
        print(_line(given))
        if given.same_text:  # the copies a search folds into the hit: rated with it
            print(f"  the same text, rated with it: {_named(given.same_text)}")
    return 0


def rating(c: Candidate) -> str:
    """A search hit's rating where it is not the default (neutral): " (liked 0.75)",
    " (tool error 0.3)", " [retracted]", " [expired]", else ""."""
    source = c.confidence_source
    marks = " [retracted]" if c.retracted else " [expired]" if c.expired else ""
    if c.confidence is None or source is None or source == "feedback:neutral":
        return marks
    return f" ({source.removeprefix('feedback:').replace('_', ' ')} {c.confidence:g}){marks}"


def _named(ids: list[str]) -> str:
    return ", ".join(ids[:_NAMED]) + (f" and {len(ids) - _NAMED} more" if len(ids) > _NAMED else "")


def note_rated_out(
    considered: Iterable[Candidate],
    min_confidence: float,
    results: Sequence[Candidate] = (),
    wanted: int | None = None,
    most_boost: float = 1.0,
) -> None:
    """A note on stderr naming the matches left out for their rating (below
    `min_confidence`, as "wrong" is), as retracted messages or as expired ones (per-turn
    tool results of earlier turns, entities past their expires_at): search and assembly
    leave them out without a trace in the results; feedback "neutral" brings a rated one
    back. A rating's note follows, as an assembly shows it in the memory's place
    (`correction of ev_1 (rated wrong): ...`): one line per note, the matches it was
    given on named together. With `results` and `wanted` (the hits asked for), only the
    matches that could have ranked among them are named: those scoring at least the last
    hit shown divided by `most_boost` (the most a rating raises a score; a match left out
    for its rating was not scaled by one). One far below would not have been seen either
    way, and naming it on every search reads as if each query had matched it."""
    full = wanted is not None and len(results) >= wanted and bool(results)
    cutoff = min(r.score for r in results) / most_boost if full else float("-inf")
    considered = [c for c in considered if c.score >= cutoff]
    out: dict[str, str] = {}
    corrections: dict[str, dict[str, str]] = {}  # note -> rated id -> its label
    retracted: dict[str, None] = {}
    expired: dict[str, None] = {}
    for c in considered:
        if c.dropped is not None and c.confidence is not None and c.confidence < min_confidence:
            label = (c.confidence_source or "").removeprefix("feedback:")
            out.setdefault(c.item.owner_id, label)
            if c.correction:
                corrections.setdefault(c.correction, {}).setdefault(c.item.owner_id, label)
        elif c.dropped is not None and c.retracted:
            retracted[c.item.owner_id] = None
        elif c.dropped is not None and c.expired:
            expired[c.item.owner_id] = None
    sys.stdout.flush()
    for marked, why in (
        (
            retracted,
            "retracted (a retracted message, a statement cut from one, or an answer repeating one)",
        ),
        (
            expired,
            "expired (a per-turn tool result of an earlier turn, or cut from one, or an item"
            " past its expires_at)",
        ),
    ):
        if marked:
            ids = list(marked)
            one = len(ids) == 1
            print(
                f"note: {len(ids)} match{'' if one else 'es'} left out, {why}: {_named(ids)}",
                file=sys.stderr,
            )
    if not out:
        return
    ids = list(out)
    one = len(ids) == 1
    back = "ctxbase feedback " + (f"{ids[0]} neutral brings it" if one else "ID neutral brings one")
    print(
        f"note: {len(ids)} match{'' if one else 'es'} left out, rated"
        f" {' or '.join(sorted(set(out.values())))}: {_named(ids)}"
        f" (confidence below {min_confidence:g}; {back} back)",
        file=sys.stderr,
    )
    for note, rated in corrections.items():
        labels = " or ".join(sorted(set(rated.values())))
        print(
            f"note: correction of {_named(list(rated))} (rated {labels}): {note}", file=sys.stderr
        )
