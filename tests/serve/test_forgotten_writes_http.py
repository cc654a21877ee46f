"""Writes of an event id the project forgot, over HTTP on both backends: POST /events
answers 200 (not 201) with the event as sent and `"stored": false, "reason": "forgotten"`;
POST /events/batch names such ids in `forgotten` (200 when that is every event). The
remote SDK gives what the embedded API gives."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from live_server import Live, embedded_and_remote, serve_on_param

import ctxbase
from ctxbase.capture.events import build_event


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Live]:
    yield from serve_on_param(request, tmp_path_factory, "stale-writes")


def test_rest_a_forgotten_id_is_answered_as_not_written(server: Live, pid: str) -> None:
    base = f"/v1/projects/{pid}"
    body = {"type": "user_message", "session_id": "s1", "text": "the token is abc123"}
    with server.client(server.key(pid, role="admin")) as c:
        first = c.post(f"{base}/events", json=body, headers={"Idempotency-Key": "k1"})
        assert first.status_code == 201, first.text
        assert "stored" not in first.json()  # a stored event's answer is the event, as before
        gone = first.json()["id"]
        # a retry of a stored one is still 201 with the event stored the first time
        retry = c.post(f"{base}/events", json={**body, "id": gone})
        assert (retry.status_code, retry.json()) == (201, first.json())
        assert c.post(f"{base}/forget", json={"event_ids": [gone]}).status_code == 200

        stale = c.post(f"{base}/events", json=body, headers={"Idempotency-Key": "k1"})
        assert stale.status_code == 200, stale.text
        answer = stale.json()
        assert (answer["stored"], answer["reason"]) == (False, "forgotten")
        assert (answer["id"], answer["seq"], answer["text"]) == (gone, None, body["text"])
        assert c.get(f"{base}/events/{gone}").status_code == 404

        fresh = {**body, "text": "a new note", "idempotency_key": "k2"}
        both = c.post(f"{base}/events/batch", json={"events": [{**body, "id": gone}, fresh]})
        assert both.status_code == 201, both.text
        assert both.json()["forgotten"] == [gone] and both.json()["durable"] is True
        seqs = [e["seq"] for e in both.json()["events"]]
        assert seqs[0] is None and isinstance(seqs[1], int)
        only = c.post(f"{base}/events/batch", json={"events": [{**body, "id": gone}]})
        assert (only.status_code, only.json()["forgotten"]) == (200, [gone])
        assert c.get(f"{base}/events/{gone}").status_code == 404
        queued = c.post(f"{base}/events/batch", json={"events": [fresh], "wait": False})
        assert queued.status_code == 202 and queued.json()["forgotten"] is None  # not known yet


def _scenario(api: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    first = api.record("user_message", session_id="s1", text="secret", idempotency_key="k1")
    api.forget(event_ids=[first.id])
    again = api.record("user_message", session_id="s1", text="secret", idempotency_key="k1")
    out["record"] = (again.id == first.id, again.seq, again.text)
    events = [
        build_event(
            project_id=api.project, session_id="s1", type="user_message", text=text,
            idempotency_key=key,
        )
        for key, text in (("k1", "secret"), ("k2", "new"))
    ]  # fmt: skip
    report = api.record_events_report(events)
    out["report"] = (
        report.forgotten == [first.id],
        [e.seq for e in report.events],
        [e.text for e in report.stored],
    )
    out["list"] = [e.seq for e in api.record_events(events)]
    return out


def test_the_remote_sdk_answers_as_the_embedded_api(
    server: Live, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    local, remote = embedded_and_remote(server, tmp_path, request, _scenario)
    assert remote == local
    assert local == {
        "record": (True, None, "secret"),
        "report": (True, [None, 2], ["new"]),  # seqs go on after a forgotten one
        "list": [None, 2],
    }


def test_the_async_client_reports_forgotten_writes(server: Live, pid: str) -> None:
    async def run() -> tuple[list[str], int | None]:
        key = server.key(pid, role="admin")
        async with ctxbase.connect_async(server.url, api_key=key, project=pid) as ac:
            ev = await ac.record("user_message", session_id="s", text="x", idempotency_key="a")
            await ac.forget(event_ids=[ev.id])
            again = await ac.record("user_message", session_id="s", text="x", idempotency_key="a")
            report = await ac.record_events_report([again])
            return report.forgotten, again.seq

    forgotten, seq = asyncio.run(run())
    assert len(forgotten) == 1 and seq is None
