"""`ctxbase kb tag|list|pin|unpin`: knowledge-base versions (anchor/kb_versions.py).

    ctxbase kb tag v1.2 [--repo R]   record what the ingested repositories hold now
    ctxbase kb list                  the recorded versions; * marks the pinned one
    ctxbase kb pin v1.2              searches and assemblies see the knowledge base as of v1.2
    ctxbase kb unpin                 back to the latest

cli_parser.py registers the command with `add_kb_command(sub, h)`, `h` being cli.py (as
`build_parser(h)` gets it): the handler opens the base with cli.py's own helpers, and this
module never imports cli.py, so the two form no import circle.
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from typing import Any

__all__ = ["add_kb_command", "cmd_kb"]


def add_kb_command(sub: argparse._SubParsersAction[argparse.ArgumentParser], h: Any) -> None:
    about = "knowledge-base versions: tag the ingested repositories, pin a tag, unpin"
    kb = sub.add_parser("kb", help=about, description=about)
    ks = kb.add_subparsers(
        dest="kb_command", required=True, metavar="ACTION", title="actions", help="what to do"
    )
    p = ks.add_parser(
        "tag",
        help="record the current version of every ingested unit under a name",
        description="record the current version of every ingested unit under a name (a "
        "name is recorded once); a later `kb pin NAME` makes searches see them again",
    )
    p.add_argument("name", help="the version's name, e.g. v1.2")
    p.add_argument("--repo", action="append", help="only this repository (repeatable)")
    p.add_argument("--json", action="store_true", help="print the tag as JSON")
    about = "the recorded versions (* marks the pinned one)"
    p = ks.add_parser("list", help=about, description=about)
    p.add_argument("--json", action="store_true", help="print the versions as JSON")
    p = ks.add_parser(
        "pin",
        help="make searches and assemblies see the knowledge base as of a version",
        description="make searches and assemblies see the knowledge base as of a version "
        "(kept until `kb unpin`; later ingests are stored, and hidden while pinned)",
    )
    p.add_argument("name", help="a version `kb tag` recorded")
    p.add_argument("--json", action="store_true", help="print what the pin hides and shows")
    about = "back to the latest knowledge base (the versions stay recorded)"
    p = ks.add_parser("unpin", help=about, description=about)
    p.add_argument("--json", action="store_true", help="print the version unpinned as JSON")
    for action in ks.choices.values():
        action.set_defaults(func=functools.partial(cmd_kb, h))


def cmd_kb(h: Any, args: argparse.Namespace) -> int:
    """`h`: the module with the CLI's helpers (cli.py)."""
    _print_json = h._print_json
    with h._open_existing(args, embedder=None) as cb:
        command = args.kb_command
        if command == "tag":
            tag = cb.tag_knowledge(args.name, repos=args.repo)
            if args.json:
                _print_json(tag.to_dict())
            else:
                repos = ", ".join(tag.repos)
                print(f"{tag.name}: {tag.entities} units of {repos}")
        elif command == "list":
            tags = cb.knowledge_tags()
            if args.json:
                _print_json([t.to_dict() for t in tags])
            for t in [] if args.json else tags:
                mark = "*" if t.pinned else " "
                when = time.strftime("%Y-%m-%d %H:%M", time.localtime(t.created_at))
                print(f"{mark} {t.name:<16} {when}  {t.entities:>6} units  {', '.join(t.repos)}")
            if not tags:
                print(
                    f"no versions recorded in project {cb.project!r} "
                    "('ctxbase kb tag NAME' records one)",
                    file=sys.stderr,
                )
        elif command == "pin":
            _pinned(cb.pin_knowledge(args.name), args.json, _print_json)
        else:
            was = cb.unpin_knowledge()
            if args.json:
                _print_json({"unpinned": was})
            else:
                print(f"unpinned {was}: latest" if was else "nothing was pinned: latest")
    return 0


def _pinned(report: Any, as_json: bool, print_json: Any) -> None:
    if as_json:
        print_json(report.to_dict())
        return
    replaced = (
        f"; replaces the pin on {report.replaced} (one version is pinned per project)"
        if report.replaced
        else ""
    )
    print(
        f"pinned {report.tag}: {report.hidden} units written since are hidden, "
        f"{report.shown} earlier versions shown{replaced}"
    )
    if report.soft_deleted:
        print(
            f"note: {report.soft_deleted} units of {report.tag} are hidden (forget --soft): "
            "shown once restored (ctxbase restore)"
        )
    if report.missing:
        print(
            f"warning: {report.missing} units of {report.tag} are no longer stored "
            "(forgotten, or changed by an ingest without history)"
        )
