"""`ctxbase forget` and `ctxbase restore`: delete what an agent should no longer remember
(events, entities, a session, an ingested repository: `--repo`), hide it (`forget --soft`)
or bring back what was hidden (forgetting.py, repo_forget.py). cli_parser.py adds
the arguments; cli.py's handlers check them, open the base and run `run_forget` or
`set_hidden`, which say what was done and what was not (a typo must not pass for done)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from .errors import NotFoundError, ValidationError

__all__ = ["run_forget", "set_hidden"]


class _NothingMatched(NotFoundError):
    """A forget whose events, entities or session match nothing: most likely a mistyped id,
    which must not pass for done."""

    def __init__(self, verb: str, args: argparse.Namespace, state: str = "not found") -> None:
        named = [f"event {i!r}" for i in args.event or []]
        named += [f"entity {i!r}" for i in args.entity or []]
        named += [f"session {args.session!r}"] if args.session else []
        super().__init__("item", ", ".join(named))
        where = f"{state} in project {args.project!r}"
        self.args = (f"nothing to {verb}: {', '.join(named)} {where}",)


def _note_unknown(cb: Any, unknown: Sequence[str]) -> None:
    if unknown:  # the rest was done: say what was not, so a typo does not pass for done
        print(
            f"note: not found in project {cb.project!r}, nothing done for: {', '.join(unknown)}",
            file=sys.stderr,
        )


def _named_in(args: argparse.Namespace, ids: Sequence[str]) -> list[str]:
    """The --event / --entity ids, the --session and the --repo names among `ids`, each as
    the option named it."""
    wanted = set(ids)
    named = [f"event {i!r}" for i in dict.fromkeys(args.event or []) if i in wanted]
    named += [f"entity {i!r}" for i in dict.fromkeys(args.entity or []) if i in wanted]
    session = getattr(args, "session", None)
    named += [f"session {session!r}"] if session and session in wanted else []
    repos = getattr(args, "repo", None) or []
    return named + [f"repo {r!r}" for r in dict.fromkeys(repos) if r in wanted]


def _confirm_whole_project(project: str, db: str) -> None:
    """`forget --whole-project` removes everything: on a terminal the user types the
    project's name; otherwise --yes must say so (exit 2 without it, nothing done)."""
    if not sys.stdin.isatty():
        raise ValidationError(
            "--whole-project",
            f"removes everything project {project!r} holds; pass --yes to confirm "
            "(no terminal to ask on)",
        )
    print(
        f"forget --whole-project removes everything project {project!r} holds in {db}, "
        "for good.\nType the project's name to confirm: ",
        end="",
        file=sys.stderr,
        flush=True,
    )
    typed = sys.stdin.readline().strip()
    if typed != project:
        raise ValidationError(
            "--whole-project",
            f"not confirmed (typed {typed!r}, not {project!r}): nothing forgotten",
        )


def set_hidden(cb: Any, args: argparse.Namespace, hidden: bool = True) -> int:
    """`forget --soft` (hidden) or `restore`: an id already in that state, or hard-forgotten
    before (a session too), is said so and is no error (a retried soft delete succeeds);
    exit 3 only when nothing named exists or ever did."""
    verb, done, already = (
        ("hide", "hidden", "hidden already")
        if hidden
        else ("restore", "restored", "visible already")
    )
    if getattr(args, "repo", None):
        raise ValidationError(
            "--soft",
            "a repository cannot be hidden (its next ingest would bring its files back): "
            "forget it with --repo and no --soft, or hide its entities by --entity",
        )
    ids = (args.event or []) + (args.entity or [])
    if getattr(args, "whole_project", False) or not (ids or args.session):
        what = "--soft hides" if hidden else "restore brings back"
        raise ValidationError(
            "forget" if hidden else "restore", f"{what} --event, --entity or --session"
        )
    forgotten: list[str] = []
    session_same = False  # the session's events are all in that state already
    if args.session:
        cb.flush()
        try:
            cb.get_session(args.session)
        except NotFoundError:
            if not cb.store.forgotten_ids(cb.project, [args.session], ("session",)):
                raise
            forgotten.append(args.session)  # hard-forgotten: no events left to change
        every = cb.store.list_events(cb.project, args.session, include_inactive=True)
        # hiding: the visible ones (a hidden one keeps when it was hidden); restoring: what
        # a soft forget hid (forgetting.restorable)
        from .forgetting import restorable

        events = (
            [e for e in every if e.active] if hidden else restorable(cb.store, cb.project, every)
        )
        session_same = bool(every) and all(e.active != hidden for e in every)
        ids += [e.id for e in events]
    try:
        report = cb.set_hidden(ids, hidden)
    except NotFoundError:
        if args.session:  # ids named beside the session's: its error stands
            raise
        raise _NothingMatched(verb, args) from None  # each id named as its option named it
    print(f"{done} {report.changed} item(s)")
    if hidden:
        _note_same_text(report.same_text_still_visible)
    same = _named_in(args, report.unchanged)
    same += [f"session {args.session!r}"] if session_same else []
    if same:
        print(f"note: {already} in project {cb.project!r}: {', '.join(same)}", file=sys.stderr)
    gone = _named_in(args, [*report.already_forgotten, *forgotten])
    if gone:
        print(
            f"note: already forgotten in project {cb.project!r}: {', '.join(gone)}", file=sys.stderr
        )
    _note_unknown(cb, _named_in(args, report.not_found))
    return 0


def run_forget(cb: Any, args: argparse.Namespace, db: str) -> int:
    """Forget what `args` names in `cb` (whose database `db` names, for the question
    --whole-project asks), or hide it with --soft."""
    if args.soft:
        return set_hidden(cb, args)
    unknown: list[str] = []
    already: list[str] = []
    older = args.soft_deleted_older_than
    if args.all_projects:
        named = args.event or args.entity or args.session or args.repo or args.whole_project
        if older is None or named:
            raise ValidationError("--all-projects", "goes with --soft-deleted-older-than only")
        report = cb.purge_soft_deleted(older, all_projects=True)
    else:
        if args.whole_project and not args.yes:
            _confirm_whole_project(cb.project, db)
        report = cb.forget(
            event_ids=args.event or [],
            entity_ids=args.entity or [],
            session_id=args.session,
            whole_project=args.whole_project,
            soft_deleted_older_than=older,
            repos=args.repo or [],
        )
        by_id = args.event or args.entity or args.session
        if report.total == 0 and by_id and not report.already_forgotten:
            raise _NothingMatched("forget", args)
        unknown = _named_in(args, report.not_found)
        already = _named_in(args, report.already_forgotten)
        if args.whole_project and report.total == 0:  # a repeat: nothing left to forget
            print(f"note: project {cb.project!r} was forgotten before", file=sys.stderr)
    print(json.dumps(report.as_dict(), ensure_ascii=False, indent=2, default=str))
    _note_same_text(report.same_text_still_visible)
    if already:  # forgotten by an earlier forget: nothing left, and no error
        print(
            f"note: already forgotten in project {cb.project!r}: {', '.join(already)}",
            file=sys.stderr,
        )
    _note_unknown(cb, unknown)
    return 0


def _note_same_text(ids: list[str]) -> None:
    """Other events saying what was forgotten keep saying it: name them."""
    if ids:
        print(
            f"note: {len(ids)} other event(s) say the same and stay visible: {', '.join(ids)}"
            " (forget them too to remove it)",
            file=sys.stderr,
        )
