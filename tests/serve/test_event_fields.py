"""Seed 001's event field names (event_type, content, timestamp, event_id) beside the native
ones, on the embedded base, the remote SDK and POST /events, on both backends; a field
neither spelling has is a ValidationError naming it and the accepted ones."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from live_server import Live, embedded_and_remote, serve_on_param

import ctxbase
from ctxbase.capture.events import build_event
from ctxbase.errors import ValidationError
from ctxbase.serve.sdk import Client

JAN_31 = datetime(2025, 1, 31, 8, 30, tzinfo=UTC).timestamp()


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Live]:
    yield from serve_on_param(request, tmp_path_factory, "event-fields")


def _refused(call: Any) -> tuple[str, str]:
    with pytest.raises(ValidationError) as info:
        call()
    return info.value.field, info.value.message


def _scenario(api: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    said = api.record(
        session_id="s1",
        event_type="user_message",
        content="把预算控制在5万以内",
        timestamp="2025-01-31T08:30:00Z",
    )
    out["article"] = (said.type, said.text, said.data, said.ts)
    result = api.record(
        "tool_result", session_id="s1", content={"rows": 3}, parent_event_ids=[said.id]
    )
    out["structured"] = (result.text, result.data, result.parent_event_ids == [said.id])
    out["read_names"] = (result.event_type, result.content, result.event_id == result.id)
    native = api.record("user_message", session_id="s1", text="hi", ts=JAN_31)
    out["native"] = (native.type, native.text, native.ts)
    queued = api.capture(session_id="s1", event_type="assistant_message", content="好的")
    api.flush()
    got = api.get_event(queued)
    out["capture"] = (got.type, got.text, got.timestamp > 0)
    # the same value under both names is one value, not a conflict
    same = api.record("user_message", session_id="s1", text="x", content="x", timestamp=5)
    out["same_twice"] = (same.text, same.ts)
    events = [
        build_event(
            project_id=api.project,
            session_id="s2",
            event_type="user_message",
            content="first",
            timestamp=datetime(2025, 1, 31, 8, 30),  # no offset: UTC
        ),
        build_event(project_id=api.project, session_id="s2", type="tool_result", content=[1], ts=7),
    ]
    out["batch"] = [(e.type, e.text, e.data, e.ts, e.seq) for e in api.record_events(events)]
    out["last"] = [(e.event_type, e.content) for e in api.last_events("s2", 5)]
    out["errors"] = [
        _refused(lambda: api.record("user_message", session_id="s1", contnt="x")),
        _refused(lambda: api.capture("user_message", session_id="s1", text="x", colour=1)),
        _refused(
            lambda: api.record(
                "user_message", session_id="s1", event_type="tool_result", content="x"
            )
        ),
        _refused(lambda: api.record("user_message", session_id="s1", text="a", content="b")),
        _refused(
            lambda: api.record("tool_result", session_id="s1", data={"a": 1}, content={"a": 2})
        ),
        _refused(lambda: api.record("user_message", session_id="s1", text="x", ts=1, timestamp=2)),
        _refused(lambda: api.record(session_id="s1", content="x")),
        _refused(lambda: api.record("user_message", session_id="s1", text="x", timestamp="no")),
        _refused(lambda: api.record(session_id="s1", event_type="no_such_type", content="x")),
        _refused(lambda: api.record("user_message", session_id="s1", content="  ")),
    ]
    out["errors"] = [(field, message.split(";")[0]) for field, message in out["errors"]]
    out["count"] = len(api.last_events("s1", 50))
    return out


def test_the_article_names_work_embedded_and_remote_alike(
    server: Live, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    local, remote = embedded_and_remote(server, tmp_path, request, _scenario)
    assert remote == local
    assert local["article"] == ("user_message", "把预算控制在5万以内", None, JAN_31)
    assert local["structured"] == (None, {"rows": 3}, True)
    assert local["read_names"] == ("tool_result", {"rows": 3}, True)
    assert local["native"] == ("user_message", "hi", JAN_31)
    assert local["capture"] == ("assistant_message", "好的", True)
    assert local["same_twice"] == ("x", 5.0)
    assert local["batch"] == [
        ("user_message", "first", None, JAN_31, 1),
        ("tool_result", None, [1], 7.0, 2),
    ]
    assert local["last"] == [("user_message", "first"), ("tool_result", [1])]
    assert local["errors"] == [
        ("contnt", "is not an event field (did you mean 'content'?)"),
        ("colour", "is not an event field"),
        ("event_type", "give either 'type' or 'event_type', not both"),
        ("content", "give either 'text' or 'content', not both"),
        ("content", "give either 'data' or 'content', not both"),
        ("timestamp", "give either 'ts' or 'timestamp', not both"),
        ("type", "is missing (type= or event_type=)"),
        ("timestamp", local["errors"][7][1]),
        ("event_type", "unknown event type 'no_such_type'"),
        ("content", "is blank (an event needs text or data)"),
    ]
    assert local["errors"][7][1].startswith("must be epoch seconds or an ISO-8601 time")
    assert local["count"] == 5  # nothing refused was written


def test_an_unknown_field_lists_the_accepted_ones(tmp_path: Path) -> None:
    with ctxbase.open(str(tmp_path / "x.db"), project="p", embedder="hash") as cb:
        field, message = _refused(lambda: cb.capture("user_message", session_id="s", txt="x"))
    assert field == "txt"
    accepted = message.split("the fields are: ")[1].split(", ")
    assert {"type", "event_type", "text", "content", "data", "ts", "timestamp"} <= set(accepted)
    assert {"session_id", "parent_event_ids", "event_id", "project"} <= set(accepted)


def test_the_sdk_refuses_an_unknown_field_before_sending() -> None:
    with socket.socket() as s:  # a port nothing listens on: a sent request would fail
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with Client(f"http://127.0.0.1:{port}", project="p", retries=0) as client:
        assert (
            _refused(lambda: client.record("user_message", session_id="s", contnt="x"))[0]
            == "contnt"
        )
        assert _refused(lambda: client.capture(session_id="s", content="x"))[0] == "type"


def test_rest_takes_the_article_names(server: Live, pid: str) -> None:
    base = f"/v1/projects/{pid}"
    with server.client(server.key(pid)) as c:
        r = c.post(
            f"{base}/events",
            json={
                "event_id": "ev_article_1",
                "session_id": "s1",
                "event_type": "user_message",
                "content": "hello",
                "timestamp": "2025-01-31T08:30:00+00:00",
            },
        )
        assert r.status_code == 201, r.text
        event = r.json()
        assert (event["id"], event["type"], event["text"], event["ts"]) == (
            "ev_article_1",
            "user_message",
            "hello",
            JAN_31,
        )
        assert "content" not in event and "event_type" not in event  # native names only
        r = c.post(
            f"{base}/events/batch",
            json={
                "events": [
                    {"session_id": "s1", "event_type": "tool_result", "content": {"ok": True}},
                    {"session_id": "s1", "type": "user_message", "text": "x", "ts": JAN_31},
                ]
            },
        )
        assert r.status_code == 201, r.text
        stored = r.json()["events"]
        assert [(e["type"], e["text"], e["data"]) for e in stored] == [
            ("tool_result", None, {"ok": True}),
            ("user_message", "x", None),
        ]
        r = c.post(
            f"{base}/events/queue",
            json={"session_id": "s1", "event_type": "assistant_message", "content": "ok"},
        )
        assert r.status_code == 202, r.text
        c.post(f"{base}/flush")
        assert c.get(f"{base}/events/{r.json()['id']}").json()["text"] == "ok"


@pytest.mark.parametrize(
    ("path", "body", "field", "words"),
    [
        (
            "events",
            {"session_id": "s", "type": "user_message", "contnt": "x"},
            "contnt",
            "is not an event field (did you mean 'content'?)",
        ),
        (
            "events/batch",
            {"events": [{"session_id": "s", "type": "user_message", "text": "x", "colour": 1}]},
            "events[0].colour",
            "is not an event field",
        ),
        (
            "events",
            {"session_id": "s", "type": "user_message", "text": "a", "content": "b"},
            "content",
            "give either 'text' or 'content', not both",
        ),
        (
            "events/batch",
            {"events": [{"session_id": "s", "type": "user_message", "event_type": "x"}]},
            "events[0].event_type",
            "give either 'type' or 'event_type', not both",
        ),
        (
            "events",
            {"session_id": "s", "id": "ev_a", "event_id": "ev_b", "type": "user_message"},
            "event_id",
            "give either 'id' or 'event_id', not both",
        ),
        (
            "events/queue",
            {"session_id": "s", "type": "user_message", "text": "x", "timestamp": "soon"},
            "timestamp",
            "must be epoch seconds or an ISO-8601 time",
        ),
        # JSON true or false is no time: read as a number it dated the memory 1970-01-01
        (
            "events",
            {"session_id": "s", "type": "user_message", "ts": True},
            "ts",
            "must be a number",
        ),
        (
            "events/batch",
            {"events": [{"session_id": "s", "type": "user_message", "text": "x", "ts": False}]},
            "events[0].ts",
            "must be a number (got bool)",
        ),
        (
            "events/queue",
            {"session_id": "s", "type": "user_message", "text": "x", "ts": True},
            "ts",
            "must be a number (got bool)",
        ),
    ],
)
def test_rest_names_the_field_it_refuses(
    server: Live, pid: str, path: str, body: dict[str, Any], field: str, words: str
) -> None:
    with server.client(server.key(pid)) as c:
        r = c.post(f"/v1/projects/{pid}/{path}", json=body)
        assert r.status_code == 422, r.text
        error = r.json()["error"]
        assert error["field"] == field
        assert error["message"].startswith(f"{field}: {words}")
        if "is not an event field" in words:
            accepted = error["message"].split("the fields are: ")[1].split(", ")
            assert {"type", "event_type", "text", "content", "id", "event_id"} <= set(accepted)
        # nothing stored, not even the session
        assert c.get(f"/v1/projects/{pid}/events", params={"session_id": "s"}).status_code == 404
