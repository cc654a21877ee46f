"""A real ctxbase server shared by the module's tests (the helpers: live_server.py); each
test gets fresh project ids so tests stay independent."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from live_server import Live, embedded_and_remote, make_project, serve_on_param, start

__all__ = ["Live", "embedded_and_remote", "make_project", "serve_on_param", "start"]


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    tmp = tmp_path_factory.mktemp("serve")
    server = start(tmp)
    try:
        yield Live(server.url, server.settings.db, server)
    finally:
        server.stop()


@pytest.fixture
def pid() -> str:
    return f"p-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def other_pid() -> str:
    return f"q-{uuid.uuid4().hex[:10]}"
