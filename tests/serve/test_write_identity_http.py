"""What a write of events is stored as, embedded and remote alike, on both backends: an
event built without an id gets a fresh one (each is its own event, none is merged into
another); a reused idempotency key or event id with different content is refused
(ConflictError, HTTP 409) while an identical retry returns the stored event."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import Live, embedded_and_remote, serve_on_param
from ctxbase.errors import CtxbaseError
from ctxbase.model import Event


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Live]:
    yield from serve_on_param(request, tmp_path_factory, "write-identity")


def _error(call: Any) -> str:
    try:
        call()
    except CtxbaseError as exc:
        return type(exc).__name__
    return "no error"


def _idless(api: Any) -> dict[str, Any]:
    built = [
        Event(project_id=api.project, session_id="x", type="user_message", text=t)
        for t in ("alpha", "beta", "gamma")
    ]
    report = api.record_events_report(built)
    again = api.record_events(built)
    return {
        "report": [(e.seq, e.text, bool(e.id)) for e in report.events],
        "forgotten": report.forgotten,
        "distinct ids": len({e.id for e in [*report.events, *again]}),
        "again": [(e.seq, e.text) for e in again],
        "stored": [(e.seq, e.text) for e in api.last_events("x", 10)],
        "by id": [api.get_event(e.id).text for e in report.events],
        "empty id": _error(lambda: api.get_event("")),
    }


def test_events_without_an_id_are_each_stored(
    server: Live, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    local, remote = embedded_and_remote(server, tmp_path, request, _idless)
    assert remote == local
    assert local == {
        "report": [(1, "alpha", True), (2, "beta", True), (3, "gamma", True)],
        "forgotten": [],
        "distinct ids": 6,
        "again": [(4, "alpha"), (5, "beta"), (6, "gamma")],
        "stored": [(n, t) for n, t in enumerate(["alpha", "beta", "gamma"] * 2, 1)],
        "by id": ["alpha", "beta", "gamma"],
        "empty id": "ValidationError",
    }
