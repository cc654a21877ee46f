"""What a write of events is stored as, embedded and remote alike, on both backends: an
event built without an id gets a fresh one (each is its own event, none is merged into
another); a reused idempotency key or event id with different content is refused
(ConflictError, HTTP 409) while an identical retry returns the stored event."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from live_server import Live, embedded_and_remote, serve_on_param

from ctxbase.capture.events import build_event
from ctxbase.errors import ConflictError, CtxbaseError
from ctxbase.integrations.tools import session_events
from ctxbase.model import Event, keyed_event_id


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Live]:
    yield from serve_on_param(request, tmp_path_factory, "write-identity")


def _error(call: Any) -> str:
    try:
        call()
    except ConflictError:  # embedded: its subclass IdempotencyConflict
        return "ConflictError"
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


def _reused_key(api: Any) -> dict[str, Any]:
    yes = api.record("user_message", session_id="s", text="yes", idempotency_key="k1")
    out: dict[str, Any] = {}
    try:
        api.record("user_message", session_id="s", text="no", idempotency_key="k1")
    except ConflictError as exc:
        out["conflict"] = str(exc)
    retry = api.record("user_message", session_id="s", text="yes", idempotency_key="k1")
    out["retry"] = (retry.id == yes.id, retry.seq, retry.text)
    batch = [
        build_event(
            project_id=api.project, session_id="s", type="user_message", text=text,
            idempotency_key=key,
        )
        for key, text in (("k2", "new"), ("k1", "changed"))
    ]  # fmt: skip
    out["batch"] = _error(lambda: api.record_events(batch))
    out["stored"] = [(e.seq, e.text) for e in api.last_events("s", 10)]
    return out


def test_a_reused_key_with_other_content_is_a_conflict(
    server: Live, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    local, remote = embedded_and_remote(server, tmp_path, request, _reused_key)
    assert remote == local
    assert local == {
        "conflict": "idempotency key 'k1' was already used for an event with a different text:"
        " a retry must resend the same request; give a new request a new key",
        "retry": (True, 1, "yes"),
        "batch": "ConflictError",
        "stored": [(1, "yes")],
    }


def test_rest_answers_409_naming_the_key(server: Live, pid: str) -> None:
    base = f"/v1/projects/{pid}"
    body = {"type": "user_message", "session_id": "s1", "text": "yes"}
    with server.client(server.key(pid)) as c:
        first = c.post(f"{base}/events", json=body, headers={"Idempotency-Key": "k1"})
        assert first.status_code == 201, first.text
        retry = c.post(f"{base}/events", json={**body, "idempotency_key": "k1"})
        assert (retry.status_code, retry.json()) == (201, first.json())
        other = c.post(
            f"{base}/events", json={**body, "text": "no"}, headers={"Idempotency-Key": "k1"}
        )
        assert other.status_code == 409, other.text
        assert other.json()["error"]["code"] == "conflict"
        assert "idempotency key 'k1'" in other.json()["error"]["message"]
        batch = c.post(
            f"{base}/events/batch",
            json={"events": [{**body, "text": "fresh"}, {**body, "text": "no"}]},
            headers={"Idempotency-Key": "b"},
        )
        assert batch.status_code == 201, batch.text
        again = c.post(
            f"{base}/events/batch",
            json={"events": [{**body, "text": "fresh"}, {**body, "text": "changed"}]},
            headers={"Idempotency-Key": "b"},
        )
        assert again.status_code == 409, again.text
        assert "idempotency key 'b/1' " in again.json()["error"]["message"]
        by_id = c.post(f"{base}/events", json={**body, "text": "no", "id": first.json()["id"]})
        assert by_id.status_code == 409 and "event id" in by_id.json()["error"]["message"]
        texts = [e["text"] for e in c.get(f"{base}/events", params={"session_id": "s1"}).json()]
        assert texts == ["yes", "fresh", "no"]


def _reused_message_key(api: Any) -> dict[str, Any]:
    def say(*texts: str, sync: bool = True) -> list[str]:
        msgs = [{"role": "user", "content": t} for t in texts]
        out: list[str] = api.capture_messages(
            msgs, session_id="m", idempotency_key="turn-1", sync=sync
        )
        return out

    first = say("yes")
    out: dict[str, Any] = {"retry": say("yes") == first}
    for name, texts, sync in (
        ("other", ("no",), True),
        ("queued", ("no",), False),
        ("grown", ("yes", "and drop orders too"), True),
    ):
        try:
            say(*texts, sync=sync)
            out[name] = "no error"
        except ConflictError as exc:
            out[name] = str(exc)
    api.flush()
    out["stored"] = [(e.text, e.metadata.get("capture_call")) for e in api.last_events("m", 10)]
    return out


def test_a_message_list_key_reused_for_other_messages_is_a_conflict(
    server: Live, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    local, remote = embedded_and_remote(server, tmp_path, request, _reused_message_key)
    assert remote == local
    refused = (
        "idempotency key 'turn-1' was already used for a call with other messages:"
        " a retry must resend the same request; give a new request a new key"
    )
    assert local == {
        "retry": True,
        "other": refused,
        "queued": refused,
        "grown": refused,
        "stored": [("yes", "turn-1")],
    }


def _same_id_twice(api: Any) -> dict[str, Any]:
    def batch(*texts: str, **ident: str) -> list[Event]:
        return [
            build_event(
                project_id=api.project, session_id="d", type="user_message", text=t, **ident
            )
            for t in texts
        ]

    first = build_event(project_id=api.project, session_id="d", type="user_message", text="hi")
    out: dict[str, Any] = {}
    for name, events in (
        ("by id", [first, *batch("yes", "no", event_id="ev_0000000000000000000000000000d0d0")]),
        ("by key", batch("yes", "no", idempotency_key="turn-4")),
    ):
        try:
            api.record_events(events)
            out[name] = "no error"
        except ConflictError as exc:  # a key's id is the project's: named the same here
            out[name] = str(exc).replace(keyed_event_id(api.project, "d", "turn-4"), "ID")
    out["stored"] = [e.text for e in session_events(api, "d", 10)]  # none: no session
    # the same event twice, unchanged, is one event
    twice = batch("once", event_id="ev_0000000000000000000000000000d0d1") * 2
    out["twice"] = [(e.seq, e.text) for e in api.record_events(twice)]
    return out


def test_a_batch_holding_one_id_twice_says_which_events_and_writes_nothing(
    server: Live, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    local, remote = embedded_and_remote(server, tmp_path, request, _same_id_twice)
    assert remote == local
    assert local == {
        "by id": "events[2] has the id of events[1] ('ev_0000000000000000000000000000d0d0')"
        " with a different text: a batch may hold an event twice only unchanged;"
        " give each event its own id",
        "by key": "events[1] has the id of events[0] ('ID') with a different text:"
        " a batch may hold an event twice only unchanged; give each event its own id",
        "stored": [],
        "twice": [(1, "once"), (1, "once")],
    }


def test_rest_batch_names_the_repeated_key_and_the_positions(server: Live, pid: str) -> None:
    base = f"/v1/projects/{pid}"
    body = {"type": "user_message", "session_id": "b", "idempotency_key": "k7"}
    with server.client(server.key(pid)) as c:
        r = c.post(
            f"{base}/events/batch",
            json={"events": [{**body, "text": "yes"}, {**body, "text": "no"}]},
        )
        assert r.status_code == 409, r.text
        assert r.json()["error"]["message"] == (
            "events[1] has the idempotency key of events[0] ('k7') with a different text:"
            " a batch may hold an event twice only unchanged; give each event its own key"
        )
        # nothing written, not even the session: its events are not found
        assert c.get(f"{base}/events", params={"session_id": "b"}).status_code == 404
