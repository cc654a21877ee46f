"""Over REST and the SDK, on a real server on both backends: an archived session refuses
every capture (409, ConflictError in the SDK) and stores nothing; message lists follow the
library's rule, one-message calls keep repeats, and a keyed call's retry adds nothing; a
list's `shape` ("new", "history") is honoured as embedded, the sync and async SDK alike."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import pytest
from live_server import Live, serve_on_param

import ctxbase
from ctxbase.errors import ConflictError, NotFoundError, ValidationError


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Live]:
    yield from serve_on_param(request, tmp_path_factory, "archive")


@pytest.fixture
def project() -> str:
    return f"arch-{uuid.uuid4().hex[:10]}"


def _event(session: str, text: str) -> dict[str, str]:
    return {"type": "user_message", "session_id": session, "text": text}


def test_rest_capture_into_an_archived_session_is_409(server: Live, project: str) -> None:
    c = server.client(server.key(project))
    base = f"/v1/projects/{project}"
    assert c.post(f"{base}/events", json=_event("s1", "before")).status_code == 201
    assert c.post(f"{base}/sessions/s1/archive", json={}).status_code == 200
    attempts = [
        c.post(f"{base}/events", json=_event("s1", "x")),
        c.post(f"{base}/events/queue", json=_event("s1", "x")),
        c.post(f"{base}/events/batch", json={"events": [_event("s1", "x")]}),
        c.post(
            f"{base}/events/batch",
            json={"events": [_event("s2", "fine"), _event("s1", "x")], "wait": False},
        ),
        c.post(
            f"{base}/messages",
            json={"session_id": "s1", "messages": [{"role": "user", "content": "x"}]},
        ),
    ]
    for r in attempts:
        assert r.status_code == 409, r.text
        assert "archived" in r.json()["error"]["message"]
    assert c.post(f"{base}/flush").status_code == 204
    texts = [e["text"] for e in c.get(f"{base}/events", params={"session_id": "s1"}).json()]
    assert texts == ["before"]
    # the refused batch queued nothing, not even its event for a live session
    assert c.get(f"{base}/events", params={"session_id": "s2"}).status_code == 404


def test_sdk_capture_into_an_archived_session_raises(server: Live, project: str) -> None:
    with ctxbase.connect(server.url, api_key=server.key(project), project=project) as client:
        client.record("user_message", session_id="s1", text="before")
        client.archive_session("s1")
        with pytest.raises(ConflictError):
            client.capture("user_message", session_id="s1", text="x")
        with pytest.raises(ConflictError):
            client.record("user_message", session_id="s1", text="x")
        with pytest.raises(ConflictError):
            client.capture_messages([{"role": "user", "content": "x"}], session_id="s1")
        client.flush()
        assert [e.text for e in client.last_events("s1")] == ["before"]
        assert client.capture_stats().refused == 0  # refused at the call, not by the writer


def test_a_session_archived_by_another_process_is_refused_by_the_writer(
    server: Live, project: str
) -> None:
    c = server.client(server.key(project))
    base = f"/v1/projects/{project}"
    assert c.post(f"{base}/events", json=_event("s1", "before")).status_code == 201
    before = c.get("/v1/capture/stats").json()["refused"]
    other = ctxbase.open(server.db, project=project, embedder="none", anchoring=False)
    try:
        other.archive_session("s1")
    finally:
        other.close()
    # the server does not know yet: a queued event is accepted, then refused when written
    assert c.post(f"{base}/events/queue", json=_event("s1", "y")).status_code == 202
    assert c.post(f"{base}/flush").status_code == 204
    stats = c.get("/v1/capture/stats").json()
    assert stats["refused"] == before + 1 and "'s1' is archived" in stats["last_error"]
    assert stats["last_error_projects"] == [project]
    # a key of another project sees the counters, not the error naming this one's session
    outsider = server.client(server.key(f"other-{uuid.uuid4().hex[:8]}", role="read"))
    theirs = outsider.get("/v1/capture/stats").json()
    assert theirs["refused"] == stats["refused"]
    assert (theirs["last_error"], theirs["last_error_projects"]) == (None, [])
    # now it knows; and a synchronous write reads the session's state anyway
    assert c.post(f"{base}/events/queue", json=_event("s1", "z")).status_code == 409
    assert c.post(f"{base}/events", json=_event("s1", "z")).status_code == 409
    texts = [e["text"] for e in c.get(f"{base}/events", params={"session_id": "s1"}).json()]
    assert texts == ["before"]


def test_rest_message_lists_keep_repeats_and_merge_keyed_retries(
    server: Live, project: str
) -> None:
    c = server.client(server.key(project))
    url = f"/v1/projects/{project}/messages"
    yes = {"session_id": "m", "messages": [{"role": "user", "content": "yes"}], "sync": True}
    ask = {"session_id": "m", "messages": [{"role": "assistant", "content": "Drop orders?"}]}
    first = c.post(url, json=yes).json()["ids"]
    c.post(url, json={**ask, "sync": True})
    second = c.post(url, json=yes).json()["ids"]
    assert first != second
    keyed = c.post(url, json=yes, headers={"Idempotency-Key": "turn-9"}).json()["ids"]
    retry = c.post(url, json=yes, headers={"Idempotency-Key": "turn-9"}).json()["ids"]
    assert keyed == retry
    no = {**yes, "messages": [{"role": "user", "content": "no"}]}
    reused = c.post(url, json=no, headers={"Idempotency-Key": "turn-9"})
    assert reused.status_code == 409 and "'turn-9'" in reused.json()["error"]["message"]
    r = c.post(url, json={**yes, "idempotency_key": "a"}, headers={"Idempotency-Key": "b"})
    assert r.status_code == 422
    events = c.get(f"/v1/projects/{project}/events", params={"session_id": "m"}).json()
    assert [e["text"] for e in events] == ["yes", "Drop orders?", "yes", "yes"]


def test_sdk_message_lists_behave_as_the_library(server: Live, project: str) -> None:
    key = server.key(project, role="admin")  # admin: forget
    with ctxbase.connect(server.url, api_key=key, project=project) as client:
        history = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
        first = client.capture_messages(history, session_id="h", sync=True)
        history.append({"role": "assistant", "content": "hi"})
        again = client.capture_messages(history, session_id="h", sync=True)
        assert again[:2] == first
        # one new message per call: the SDK keys each call, so both are kept
        client.capture_messages([{"role": "user", "content": "hi"}], session_id="h", sync=True)
        client.capture_messages([{"role": "user", "content": "hi"}], session_id="h", sync=True)
        assert [e.text for e in client.last_events("h")] == ["be brief", "hi", "hi", "hi", "hi"]
        # a history re-sent to a forgotten session is a stale retry (the SDK's own keys
        # leave the messages' ids as the library gives them)
        client.forget(session_id="h")
        client.capture_messages(history, session_id="h", sync=True)
        with pytest.raises(NotFoundError):  # nothing written: the session is not made again
            client.last_events("h")


EXCHANGE = [{"role": "user", "content": "yes"}, {"role": "assistant", "content": "ok"}]


def test_rest_message_list_shapes(server: Live, project: str) -> None:
    c = server.client(server.key(project))
    base = f"/v1/projects/{project}"
    new = {"session_id": "n", "messages": EXCHANGE, "shape": "new", "sync": True}
    first = c.post(f"{base}/messages", json=new).json()["ids"]
    second = c.post(f"{base}/messages", json=new).json()["ids"]
    assert len(set(first + second)) == 4
    texts = [e["text"] for e in c.get(f"{base}/events", params={"session_id": "n"}).json()]
    assert texts == ["yes", "ok", "yes", "ok"]
    history = {**new, "shape": "history", "messages": [{"role": "user", "content": "hi"}]}
    r = c.post(f"{base}/messages", json=history)
    assert r.status_code == 409 and "shape='history'" in r.json()["error"]["message"]
    bad = c.post(f"{base}/messages", json={**new, "shape": "whole"})
    assert bad.status_code == 422 and "shape" in bad.text
    texts = [e["text"] for e in c.get(f"{base}/events", params={"session_id": "n"}).json()]
    assert len(texts) == 4  # neither refused list wrote anything


def test_sdk_message_list_shapes(server: Live, project: str) -> None:
    key = server.key(project)
    with ctxbase.connect(server.url, api_key=key, project=project) as client:
        client.capture_messages(EXCHANGE, session_id="n", shape="new", sync=True)
        client.capture_messages(EXCHANGE, session_id="n", shape="new", sync=True)
        assert [e.text for e in client.last_events("n")] == ["yes", "ok", "yes", "ok"]
        history = [*EXCHANGE, *EXCHANGE, {"role": "user", "content": "bye"}]
        ids = client.capture_messages(history, session_id="n", shape="history", sync=True)
        assert len(ids) == 5 and len(client.last_events("n")) == 5
        with pytest.raises(ConflictError, match="shape='history'"):
            client.capture_messages(EXCHANGE[1:], session_id="n", shape="history")
        with pytest.raises(ValidationError) as err:  # refused before anything is sent
            client.capture_messages(EXCHANGE, session_id="n", shape="all")  # type: ignore[arg-type]
        assert err.value.field == "shape"
        # auto: the same exchange again is taken as sent before, as embedded
        client.capture_messages(EXCHANGE, session_id="a", sync=True)
        client.capture_messages(EXCHANGE, session_id="a", sync=True)
        assert [e.text for e in client.last_events("a")] == ["yes", "ok"]

    async def run() -> list[str | None]:
        async with ctxbase.connect_async(server.url, api_key=key, project=project) as ac:
            for _ in range(2):
                await ac.capture_messages(EXCHANGE, session_id="as", shape="new", sync=True)
            return [e.text for e in await ac.last_events("as")]

    assert asyncio.run(run()) == ["yes", "ok", "yes", "ok"]
