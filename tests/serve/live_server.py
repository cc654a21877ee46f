"""The live-server helpers of the serve tests: a real ctxbase server (uvicorn on a free
local port, in a thread) with API keys. A module of its own, not the conftest, so a test
imports them by a name no other directory's conftest shares."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

import ctxbase
from ctxbase.serve.keys import create_key
from ctxbase.serve.server import BackgroundServer
from ctxbase.serve.settings import ServerSettings
from ctxbase.store import open_store

__all__ = [
    "Live",
    "embedded_and_remote",
    "embedded_or_remote",
    "make_project",
    "serve_on_param",
    "start",
]


@dataclass
class Live:
    url: str
    db: str
    server: BackgroundServer

    def key(self, *projects: str, role: str = "write") -> str:
        """A new key, created the way `ctxbase keys create` does: in the database."""
        store = open_store(self.db)
        try:
            return create_key(store, projects=list(projects), role=role, name="test").key
        finally:
            store.close()

    def make_project(self, project: str) -> None:
        """`project` exists, holding nothing, as after its first write (an assembly of a
        project that does not exist is a 404). Written in the database, not through the
        API, so it takes nothing from a key's rate limit."""
        make_project(self.db, project)

    def client(self, key: str | None) -> httpx.Client:
        headers = {} if key is None else {"Authorization": f"Bearer {key}"}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)


T = TypeVar("T")


def embedded_and_remote(
    server: Live, tmp_path: Path, request: pytest.FixtureRequest, scenario: Callable[[Any], T]
) -> tuple[T, T]:
    """`scenario` run on an embedded base of the test's backend, then on the remote SDK of
    `server` (an admin key), each in a new project: what each answered, to compare."""
    postgres = "postgres" in request.node.callspec.id
    target = request.getfixturevalue("pg_url") if postgres else str(tmp_path / "embedded.db")
    embedded = ctxbase.open(target, project=f"emb-{uuid.uuid4().hex[:8]}", embedder="hash")
    try:
        local = scenario(embedded)
    finally:
        embedded.close()
    project = f"rem-{uuid.uuid4().hex[:8]}"
    key = server.key(project, role="admin")
    with ctxbase.connect(server.url, api_key=key, project=project) as client:
        remote = scenario(client)
    return local, remote


def embedded_or_remote(kind: str, server: Live, db: Path, project: str) -> Iterator[Any]:
    """An embedded base on `db` ("embedded") or the remote SDK of `server` with an admin
    key ("remote"), for `project`; closed after the test. For an `api` fixture whose
    params are the two kinds."""
    if kind == "embedded":
        api: Any = ctxbase.open(str(db), project=project, embedder="hash")
    else:
        api = ctxbase.connect(
            server.url, api_key=server.key(project, role="admin"), project=project
        )
    try:
        yield api
    finally:
        api.close()


def make_project(db: str, project: str) -> None:
    store = open_store(db)
    try:
        store.ensure_project(project)
    finally:
        store.close()


def start(tmp: Path, **overrides: object) -> BackgroundServer:
    fields: dict[str, object] = {
        "db": str(tmp / "serve.db"),
        "port": 0,
        "embedder": "hash",
        "rate_limit_per_s": 0,
    }
    fields.update(overrides)
    return BackgroundServer(ServerSettings.model_validate(fields)).start()


def serve_on_param(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, name: str
) -> Iterator[Live]:
    """A server on the backend a fixture is parametrised with ("sqlite" or "postgres", the
    shared PostgreSQL database): the body of the modules' `server` fixtures."""
    overrides: dict[str, object] = {}
    if request.param == "postgres":
        overrides["db"] = request.getfixturevalue("pg_url")
    bg = start(tmp_path_factory.mktemp(name), **overrides)
    try:
        yield Live(bg.url, bg.settings.db, bg)
    finally:
        bg.stop()
