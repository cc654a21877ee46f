"""The embedded ContextBase, the remote Client and the AsyncClient offer the same methods,
with the same parameters: code written against one runs against the other."""

from __future__ import annotations

import inspect
from typing import Any

from ctxbase.contextbase import ContextBase
from ctxbase.serve.sdk import AsyncClient, Client

# Embedded only, because they hand out or steer in-process machinery a server keeps to
# itself (its own embedder, searcher, assembler, background workers, chunking), or read
# local files (ingest, anchoring a document the caller holds):
EMBEDDED_ONLY = {
    "anchor_document",  # anchoring runs where the store is; a server anchors what it stores
    "anchor_message",
    "anchor_stats",  # the capture anchorer's thread-local counters
    "assembler",  # the in-process Assembler object
    "check_writable",  # a pre-write check the REST routes call on the server's base
    "chunking",  # the ChunkingConfig this process writes with
    "embedder",  # the Embedder object
    "embedder_error",
    "embedding_worker",  # the background thread
    "embeds",
    "ingest",  # reads files from the caller's disk (the CLI's `ingest` against a db)
    "notify_embedder",  # wakes the local background embedder
    "resolve_project",  # the server resolves projects from the URL and the key
    "searcher",  # the in-process Searcher object
}
# Remote only: none. (`close` and the context-manager protocol exist on both.)
REMOTE_ONLY: set[str] = set()

# Parameters that differ on purpose, by method: (embedded-only, remote-only) names.
PARAMETER_DIFFERENCES: dict[str, tuple[set[str], set[str]]] = {
    # the client forwards every keyword to the server's schema, which checks them
    "assemble_context": (
        {
            "agent_role",
            "user_intent",
            "project_id",
            "session_id",
            "max_tokens",
            "task_id",
            "debug",
            "require_signature",
            "signing_key",
            "repos",
            "strategy",
            "new_project",
            "memory_scope",
            "user_id",
        },
        {"kwargs"},
    ),
    # a server flushes per project; a local bus holds every project's events
    "flush": (set(), {"project"}),
    # a request has no callback to report progress to (`all_projects` is taken remotely
    # and refused by name: every project at once is an operator's command on the server)
    "compact_archived": ({"progress"}, set()),
    # the embedded loop takes the ContextManager's options; the remote one the REST body's
    "record_outcome": (
        {"options"},
        {"project", "session_id", "agent_role", "source", "confidence"},
    ),
}


def _public(cls: type) -> set[str]:
    return {n for n in dir(cls) if not n.startswith("_")}


def _params(fn: Any) -> dict[str, inspect.Parameter]:
    return {n: p for n, p in inspect.signature(fn).parameters.items() if n != "self"}


def test_the_same_public_methods() -> None:
    embedded, remote = _public(ContextBase), _public(Client)
    assert embedded - remote == EMBEDDED_ONLY
    assert remote - embedded == REMOTE_ONLY
    assert _public(AsyncClient) == remote


def test_the_same_parameters() -> None:
    shared = sorted(_public(ContextBase) & _public(Client))
    differences: dict[str, tuple[set[str], set[str]]] = {}
    for name in shared:
        local, remote = getattr(ContextBase, name), getattr(Client, name)
        if not callable(local):
            continue
        lp, rp = _params(local), _params(remote)
        only = (set(lp) - set(rp), set(rp) - set(lp))
        if any(only):
            differences[name] = only
            continue
        for param in lp:  # same kind (positional or keyword) and default
            assert (lp[param].kind, lp[param].default) == (rp[param].kind, rp[param].default), (
                name,
                param,
            )
    assert differences == PARAMETER_DIFFERENCES


def test_the_sdk_fact_and_task_methods_exist_embedded(tmp_path: Any) -> None:
    import ctxbase

    with ctxbase.open(str(tmp_path / "cb.db"), embedder=None) as cb:
        assert cb.health()["status"] == "ready"
        fact = cb.set_fact("db", "postgres", scope_id="s1", scope="session")
        assert cb.get_facts(scope_id="s1", scope="session") == {"db": fact}
        assert cb.list_projects() == ["default"]
