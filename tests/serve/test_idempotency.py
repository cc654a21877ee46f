"""Event identity over HTTP, on both backends: every request stores a new event; a retry that
carries the same Idempotency-Key (header or body) or the same client-assigned id stores
nothing new; the SDK assigns ids before sending, so its own retry after a lost answer is
harmless; a stale retry of a forgotten event stays out."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from live_server import Live, serve_on_param

import ctxbase
from ctxbase.model import keyed_event_id, new_event_id


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Live]:
    yield from serve_on_param(request, tmp_path_factory, "idem")


def _texts(c: httpx.Client, base: str, session_id: str) -> list[str] | None:
    """The session's texts; None when the session is not found (404)."""
    r = c.get(f"{base}/events", params={"session_id": session_id, "n": 100})
    if r.status_code == 404 and r.json()["error"]["kind"] == "session":
        return None
    assert r.status_code == 200, r.text
    return [e["text"] for e in r.json()]


def test_rest_retries_with_a_key_store_one_event(server: Live, pid: str) -> None:
    base = f"/v1/projects/{pid}"
    body = {"type": "user_message", "session_id": "s", "text": "yes"}
    with server.client(server.key(pid, role="admin")) as c:
        # no key: the same content twice is two events
        a = c.post(f"{base}/events", json=body).json()
        b = c.post(f"{base}/events", json=body).json()
        assert a["id"] != b["id"] and (a["seq"], b["seq"]) == (1, 2)
        # header key: a retry answers with the event stored the first time
        h = {"Idempotency-Key": "req-1"}
        first = c.post(f"{base}/events", json=body, headers=h)
        retry = c.post(f"{base}/events", json=body, headers=h)
        assert first.status_code == retry.status_code == 201
        # the key reused for other content is refused, not answered with the first event
        other = c.post(f"{base}/events", json={**body, "text": "yes!"}, headers=h)
        assert other.status_code == 409 and "'req-1'" in other.json()["error"]["message"]
        assert first.json()["id"] == retry.json()["id"] == keyed_event_id(pid, "s", "req-1")
        assert retry.json()["text"] == "yes" and retry.json()["seq"] == 3
        # body key, on the queue route
        queued = {**body, "idempotency_key": "req-2"}
        q1 = c.post(f"{base}/events/queue", json=queued).json()["id"]
        q2 = c.post(f"{base}/events/queue", json=queued).json()["id"]
        assert c.post(f"{base}/flush").status_code == 204
        assert q1 == q2 == keyed_event_id(pid, "s", "req-2")
        # a client-assigned id
        own = new_event_id()
        for _ in range(2):
            assert c.post(f"{base}/events", json={**body, "id": own}).json()["id"] == own
        assert _texts(c, base, "s") == ["yes"] * 5
        # a batch retried whole under one header key
        batch = {"events": [body, {**body, "text": "no"}]}
        hb = {"Idempotency-Key": "batch-1"}
        r1 = c.post(f"{base}/events/batch", json=batch, headers=hb).json()
        r2 = c.post(f"{base}/events/batch", json=batch, headers=hb).json()
        assert r1["ids"] == r2["ids"] and len(set(r1["ids"])) == 2
        assert r1["ids"] == [keyed_event_id(pid, "s", f"batch-1/{i}") for i in (0, 1)]
        assert _texts(c, base, "s") == ["yes"] * 6 + ["no"]


def test_rest_refuses_bad_ids_and_conflicting_keys(server: Live, pid: str) -> None:
    base = f"/v1/projects/{pid}"
    body = {"type": "user_message", "session_id": "s", "text": "x"}
    with server.client(server.key(pid)) as c:
        cases = [
            ({**body, "id": "custom-1"}, {}, "id"),
            ({**body, "idempotency_key": "a"}, {"Idempotency-Key": "b"}, "idempotency_key"),
            ({**body, "idempotency_key": "k", "id": "ev_1"}, {}, "idempotency_key"),
            ({**body, "idempotency_key": ""}, {}, "idempotency_key"),
        ]
        for payload, headers, field in cases:
            r = c.post(f"{base}/events", json=payload, headers=headers)
            assert r.status_code == 422, (payload, r.text)
            assert r.json()["error"]["field"] == field, r.text
        r = c.post(f"{base}/events/batch", json={"events": [body, {**body, "id": "bad"}]})
        assert r.status_code == 422 and r.json()["error"]["field"] == "events[1].id", r.text
        assert _texts(c, base, "s") is None


def test_rest_stale_retry_of_a_forgotten_event_is_ignored(server: Live, pid: str) -> None:
    base = f"/v1/projects/{pid}"
    body = {"type": "user_message", "session_id": "s", "text": "my token is 1234"}
    h = {"Idempotency-Key": "secret"}
    with server.client(server.key(pid, role="admin")) as c:
        gone = c.post(f"{base}/events", json=body, headers=h).json()["id"]
        r = c.post(f"{base}/forget", json={"session_id": "s"})
        assert r.status_code == 200, r.text
        assert c.post(f"{base}/events", json=body, headers=h).json()["id"] == gone
        assert _texts(c, base, "s") is None
        assert c.get(f"{base}/events/{gone}").status_code == 404
        fresh = c.post(f"{base}/events", json=body).json()
        assert fresh["id"] != gone and fresh["seq"] == 1
        assert _texts(c, base, "s") == ["my token is 1234"]


def test_rest_queued_low_events_with_keys_are_found_by_a_late_retry(server: Live, pid: str) -> None:
    base = f"/v1/projects/{pid}"
    with server.client(server.key(pid, role="admin")) as c:

        def queue(text: str, **named: str) -> str:
            body = {"type": "internal_thought", "session_id": "th", "text": text, **named}
            r = c.post(f"{base}/events/queue", json=body)
            assert r.status_code == 202, r.text
            return str(r.json()["id"])

        a = queue("thought 0", idempotency_key="kA")
        b = queue("thought 1", idempotency_key="kB")
        own = queue("thought 2", id="ev_own_thought")
        assert c.post(f"{base}/flush").status_code == 204
        assert a == keyed_event_id(pid, "th", "kA") and b == keyed_event_id(pid, "th", "kB")
        # retried after the write (an answer lost to a timeout): found, nothing added
        assert queue("thought 1", idempotency_key="kB") == b
        assert queue("thought 2", id="ev_own_thought") == own == "ev_own_thought"
        assert c.post(f"{base}/flush").status_code == 204
        assert _texts(c, base, "th") == ["thought 0", "thought 1", "thought 2"]
        got = c.get(f"{base}/events/{b}").json()
        assert got["text"] == "thought 1" and "aggregated" not in (got["data"] or {})


def test_sdk_retries_with_a_key_store_one_event(server: Live, pid: str) -> None:
    with ctxbase.connect(server.url, api_key=server.key(pid), project=pid) as client:
        a = client.capture("tool_result", session_id="s", text="exit 0", idempotency_key="k")
        b = client.capture("tool_result", session_id="s", text="exit 0", idempotency_key="k")
        client.flush()
        c = client.record("tool_result", session_id="s", text="exit 0", idempotency_key="k")
        d = client.record("tool_result", session_id="s", text="exit 0")
        assert a == b == c.id == keyed_event_id(pid, "s", "k")
        assert d.id != a and [e.seq for e in client.last_events("s")] == [1, 2]


class _LoseFirstAnswer(BaseHTTPRequestHandler):
    """Forwards every request to the server; the first POST is stored there but its answer
    never reaches the client (the connection drops), as when a response times out."""

    upstream = ""
    lost = 0
    lock = threading.Lock()

    def log_message(self, *args: Any) -> None:
        pass

    def _forward(self) -> httpx.Response:
        length = int(self.headers.get("content-length") or 0)
        wanted = ("authorization", "content-type")
        headers = {k: v for k, v in self.headers.items() if k.lower() in wanted}
        return httpx.request(
            self.command,
            self.upstream + self.path,
            content=self.rfile.read(length) if length else None,
            headers=headers,
            timeout=30,
        )

    def _answer(self, response: httpx.Response) -> None:
        self.send_response(response.status_code)
        self.send_header("Content-Type", response.headers.get("content-type", "application/json"))
        self.send_header("Content-Length", str(len(response.content)))
        self.end_headers()
        self.wfile.write(response.content)

    def do_GET(self) -> None:
        self._answer(self._forward())

    def do_POST(self) -> None:
        response = self._forward()
        with self.lock:
            drop = type(self).lost == 0
            type(self).lost += 1
        if drop:
            self.close_connection = True  # stored upstream; the client sees no answer
            return
        self._answer(response)


def test_sdk_own_retry_after_a_lost_answer_stores_nothing_twice(server: Live, pid: str) -> None:
    handler = type("Lose", (_LoseFirstAnswer,), {"upstream": server.url, "lost": 0})
    proxy = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{proxy.server_address[1]}"
        with ctxbase.connect(url, api_key=server.key(pid), project=pid, backoff=0.01) as client:
            ev = client.record("user_message", session_id="s", text="deploy it")
            assert handler.lost == 2  # the request went twice
            events = client.last_events("s")
            assert [(e.id, e.seq) for e in events] == [(ev.id, 1)]
    finally:
        proxy.shutdown()
        proxy.server_close()
