"""The compaction of old archived sessions over REST and the SDK (sync and async), on a real
server on both backends: the same report as the library, a write key needed, a bad duration
refused before anything is done, and a second run doing nothing."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from live_server import Live, serve_on_param, start

import ctxbase
from ctxbase.assemble.compaction_report import CompactionReport
from ctxbase.errors import ValidationError


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Live]:
    yield from serve_on_param(request, tmp_path_factory, "compaction")


@pytest.fixture
def project() -> str:
    return f"compact-{uuid.uuid4().hex[:10]}"


def _archived(server: Live, project: str, session: str) -> None:
    c = server.client(server.key(project))
    base = f"/v1/projects/{project}"
    for text in ("We decided to ship the refund API on Friday.", "The importer ran 40 batches."):
        body = {"type": "user_message", "session_id": session, "text": text}
        assert c.post(f"{base}/events", json=body).status_code == 201
    assert c.post(f"{base}/sessions/{session}/archive", json={}).status_code == 200


def test_rest_compacts_old_archived_sessions(server: Live, project: str) -> None:
    _archived(server, project, "s1")
    c = server.client(server.key(project))
    url = f"/v1/projects/{project}/sessions/compact-archived"

    recent = c.post(url, json={"older_than": "30d"})
    assert recent.status_code == 200, recent.text
    assert recent.json()["too_recent"] == ["s1"] and recent.json()["compacted"] == []

    done = c.post(url, json={"older_than": 0}).json()
    assert done["compacted"] == ["s1"] and done["events_hidden"] == 2
    again = c.post(url, json={"older_than": "0s"}).json()
    assert again["compacted"] == [] and again["already_compacted"] == ["s1"]

    events = c.get(f"/v1/projects/{project}/events", params={"session_id": "s1"}).json()
    assert [e["type"] for e in events] == ["session_summary"]
    assert "refund API" in events[0]["text"]

    bad = c.post(url, json={"older_than": "soon"})
    assert bad.status_code == 422 and "older_than" in bad.text
    reader = server.client(server.key(project, role="read"))
    assert reader.post(url, json={"older_than": 0}).status_code == 403


def test_the_sdk_compacts_as_the_library_does(server: Live, project: str) -> None:
    _archived(server, project, "s1")
    with ctxbase.connect(server.url, api_key=server.key(project), project=project) as client:
        with pytest.raises(ValidationError, match="older_than"):
            client.compact_archived("a while")
        with pytest.raises(ValidationError, match="clock"):
            client.compact_archived(0, now=1.0)
        # every project at once is refused by name, not a TypeError, and touches nothing
        for call in (
            lambda: client.compact_archived(0, all_projects=True),
            lambda: client.purge_soft_deleted(0, all_projects=True),
        ):
            with pytest.raises(ValidationError, match=r"ctxbase .*--all-projects") as err:
                call()
            assert err.value.field == "all_projects"
        assert [e.type for e in client.last_events("s1")] == ["user_message", "user_message"]
        report = client.compact_archived(0)
        assert isinstance(report, CompactionReport)
        assert report.compacted == ["s1"] and report.events_hidden == 2
        assert [e.type for e in client.last_events("s1")] == ["session_summary"]

    async def run() -> CompactionReport:
        key = server.key(project)
        async with ctxbase.connect_async(server.url, api_key=key, project=project) as ac:
            return await ac.compact_archived("1h")

    later = asyncio.run(run())
    assert later.compacted == [] and later.too_recent == ["s1"]


def test_the_server_compacts_after_its_archive_retention(tmp_path: Path) -> None:
    bg = start(tmp_path, no_auth=True, archive_retention_s=0, archive_compact_interval_s=0.1)
    server = Live(bg.url, bg.settings.db, bg)
    try:
        project = "retained"
        _archived(server, project, "old")
        c = server.client(None)
        url = f"/v1/projects/{project}/events"
        deadline = time.monotonic() + 20
        types: list[str] = []
        while time.monotonic() < deadline:
            types = [e["type"] for e in c.get(url, params={"session_id": "old"}).json()]
            if types == ["session_summary"]:
                break
            time.sleep(0.1)
        assert types == ["session_summary"]
    finally:
        bg.stop()
