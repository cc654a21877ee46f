"""Shared fixtures for the core tests: real SQLite files under tmp_path, real threads."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import ctxbase
from ctxbase import ContextBase

Opener = Callable[..., ContextBase]


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "ctx.db"


@pytest.fixture
def open_base(db_path: Path) -> Iterator[Opener]:
    """Open context bases on the test's file (or another path); all are closed at teardown."""
    opened: list[ContextBase] = []

    def _open(path: Path | str | None = None, **options: Any) -> ContextBase:
        options.setdefault("project", "p")
        options.setdefault("embedder", None)
        base = ctxbase.open(str(path or db_path), **options)
        opened.append(base)
        return base

    yield _open
    for base in opened:
        base.close()


@pytest.fixture
def cb(open_base: Opener) -> ContextBase:
    """A context base without an embedder (no vectors needed)."""
    return open_base()


@pytest.fixture
def cbv(open_base: Opener) -> ContextBase:
    """A context base with the fast fake embedder, for tests that need vectors."""
    return open_base(embedder="hash")
