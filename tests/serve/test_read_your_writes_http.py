"""Over a real server, what the SDK just captured is there: the wait for vectors covers it,
its ids work at once, and the event reads mark a retracted or wrong-rated message as the
library does. The server's writer lingers 30 s, so only the calls themselves write the
queued captures."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from live_server import Live

import ctxbase
from ctxbase import ContextBase
from ctxbase.capture.bus import BusConfig
from ctxbase.retrieve.embed.hashing import HashingEmbedder
from ctxbase.serve.server import BackgroundServer
from ctxbase.serve.settings import ServerSettings
from ctxbase.store import open_store

MESSAGES = [
    {"role": "user", "content": "Project B: the invoice PDF export must use A4 paper."},
    {"role": "assistant", "content": "Understood, A4 for invoice PDFs."},
    {"role": "user", "content": "And the footer shows the VAT number."},
]


@pytest.fixture
def lingering(tmp_path: Path) -> Iterator[Live]:
    db = str(tmp_path / "linger.db")
    cb = ContextBase(db, embedder="hash", bus_config=BusConfig(linger_s=30.0, batch_size=10_000))
    settings = ServerSettings(db=db, port=0, embedder="hash", rate_limit_per_s=0)
    server = BackgroundServer(settings, cb).start()
    try:
        yield Live(server.url, db, server)
    finally:
        server.stop()
        cb.close()


def _stored_and_pending(db: str, project: str) -> tuple[int, int]:
    """(events of the session "b1" stored, items without a vector) of the project, read
    from the file through a store of its own."""
    store = open_store(db)
    try:
        stored = len(store.list_events(project, "b1"))
        return stored, store.count_pending_embeddings(HashingEmbedder().name, 100, project)
    finally:
        store.close()


def _retract_and_rate(cb: Any) -> list[tuple[str, str | None, list[str], bool]]:
    """Capture three messages, use their ids at once; the session as last_events lists it."""
    ids = cb.capture_messages(MESSAGES, session_id="b1")
    cb.expire_message("b1", ids[0])
    cb.feedback(ids[1], "wrong")
    assert cb.get_event(ids[0]).marks == ["retracted"]
    return [(e.type, e.text, e.marks, e.active) for e in cb.last_events("b1")]


def test_the_sdk_wait_covers_the_messages_it_just_captured(lingering: Live) -> None:
    key = lingering.key("pb")
    with ctxbase.connect(lingering.url, api_key=key, project="pb") as sdk:
        ids = sdk.capture_messages(MESSAGES, session_id="b1")
        started = time.monotonic()
        assert sdk.wait_for_embeddings(30) is True
        assert time.monotonic() - started < 10  # the wait wrote them, not the linger
        assert _stored_and_pending(lingering.db, "pb") == (3, 0)
        found = sdk.search("invoice paper size", top_k=3)
        assert found.pending_vectors == 0
        assert ids[0] in {c.item.owner_id for c in found.results}
    with lingering.client(key) as http:
        idle = http.post("/v1/embeddings/wait", params={"timeout": 0, "project": "pb"}).json()
        assert (idle["idle"], idle["pending_vectors"]) == (True, 0)


def test_ids_work_at_once_and_event_reads_mark_as_embedded(lingering: Live, tmp_path: Path) -> None:
    with ctxbase.open(str(tmp_path / "embedded.db"), project="pe", embedder="hash") as cb:
        embedded = _retract_and_rate(cb)
    key = lingering.key("pr", role="admin")
    with ctxbase.connect(lingering.url, api_key=key, project="pr") as sdk:
        remote = _retract_and_rate(sdk)
    assert remote == embedded
    assert [(marks, active) for _, _, marks, active in remote] == [
        (["retracted"], True),
        (["wrong"], True),
        ([], True),
    ]
    with lingering.client(key) as http:
        listed = http.get("/v1/projects/pr/events", params={"session_id": "b1"}).json()
        assert [e["marks"] for e in listed] == [["retracted"], ["wrong"], []]
