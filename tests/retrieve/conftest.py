"""Fixtures of the retrieval tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ctxbase import ContextBase
from ctxbase.store.base import Store
from ctxbase.store.sqlite import SQLiteStore


@pytest.fixture
def second(cb: ContextBase, request: pytest.FixtureRequest) -> Iterator[ContextBase]:
    """Another ContextBase on the same database and project: another connection (pool)."""
    if isinstance(cb.store, SQLiteStore):
        other: Store = SQLiteStore(cb.store.path)
    else:
        from ctxbase.store.postgres import PostgresStore

        other = PostgresStore(request.getfixturevalue("pg_url"), max_size=2)
    base = ContextBase(other, project=cb.project, embedder="hash", background_embedding=False)
    yield base
    base.close()
