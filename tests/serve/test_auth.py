"""Auth, roles, isolation between projects, limits: real server, real HTTP."""

from __future__ import annotations

import json
import random
import threading
from pathlib import Path

import httpx
import pytest
from live_server import Live, start

from ctxbase.errors import ValidationError
from ctxbase.serve.keys import create_key, list_keys, parse_key, revoke_key
from ctxbase.serve.server import BackgroundServer
from ctxbase.serve.settings import ServerSettings
from ctxbase.store import open_store


def _code(r: httpx.Response) -> str:
    return str(r.json()["error"]["code"])


def test_missing_malformed_and_unknown_keys_get_401(live: Live, pid: str) -> None:
    path = f"/v1/projects/{pid}/sessions"
    assert live.client(None).get(path).status_code == 401
    assert _code(live.client(None).get(path)) == "unauthorized"
    assert live.client("not-a-key").get(path).status_code == 401
    real = live.key(pid, role="read")
    key_id = real.split("_")[1]
    forged = f"cb_{key_id}_{'x' * 43}"  # right id, wrong secret
    assert live.client(forged).get(path).status_code == 401
    basic = httpx.get(live.url + path, headers={"Authorization": "Basic abc"})
    assert basic.status_code == 401
    assert live.client(real).get(path).status_code == 200
    ok = httpx.get(live.url + path, headers={"X-API-Key": real})
    assert ok.status_code == 200


def test_revoked_key_is_refused_at_once(live: Live, pid: str) -> None:
    key = live.key(pid, role="write")
    c = live.client(key)
    assert c.get(f"/v1/projects/{pid}/sessions").status_code == 200
    store = open_store(live.db)
    try:
        parsed = parse_key(key)
        assert parsed is not None
        record = revoke_key(store, parsed[0])
        assert record.revoked_at is not None
        assert [k.revoked_at is not None for k in list_keys(store) if k.key_id == parsed[0]] == [
            True
        ]
    finally:
        store.close()
    r = c.get(f"/v1/projects/{pid}/sessions")
    assert r.status_code == 401 and "revoked" in r.json()["error"]["message"]


def test_keys_are_stored_hashed_and_shown_once(live: Live, pid: str) -> None:
    store = open_store(live.db)
    try:
        created = create_key(store, projects=[pid], role="read", name="ci")
        secret = created.key.split("_", 2)[2]
        stored = next(k for k in list_keys(store) if k.key_id == created.record.key_id)
        assert secret not in repr(stored) and stored.key_hash != secret
        assert len(stored.key_hash) == 64
        with pytest.raises(ValidationError) as err:
            create_key(store, projects=[pid], role="owner")
        assert err.value.field == "role"
        with pytest.raises(ValidationError) as err:
            create_key(store, projects=[])
        assert err.value.field == "projects"
    finally:
        store.close()


def test_roles_read_cannot_write_write_cannot_forget(live: Live, pid: str) -> None:
    reader = live.client(live.key(pid, role="read"))
    writer = live.client(live.key(pid, role="write"))
    base = f"/v1/projects/{pid}"
    event = {"type": "user_message", "session_id": "s", "text": "hi"}
    r = reader.post(f"{base}/events", json=event)
    assert r.status_code == 403 and _code(r) == "forbidden"
    assert reader.post(f"{base}/entities", json={"type": "doc", "name": "x"}).status_code == 403
    assert reader.put(f"{base}/sessions/s", json={}).status_code == 403
    assert writer.post(f"{base}/events", json=event).status_code == 201
    assert reader.get(f"{base}/events", params={"session_id": "s"}).status_code == 200
    r = reader.post(
        "/v1/context/assemble", json={"project_id": pid, "agent_role": "qa", "user_intent": "hi"}
    )
    assert r.status_code == 200  # assembling is reading
    r = writer.post(f"{base}/forget", json={"whole_project": True})
    assert r.status_code == 403
    assert writer.get(f"{base}/events", params={"session_id": "s"}).json() != []


def _seed(live: Live, pid: str, label: str = "B") -> dict[str, str]:
    """Some data in a project; returns its ids by kind."""
    c = live.client(live.key(pid, role="admin"))
    base = f"/v1/projects/{pid}"
    session, task = f"{label}-secret-session", f"{label}-secret-task"
    c.put(f"{base}/sessions/{session}", json={"title": f"{label} only"})
    c.put(f"{base}/tasks/{task}", json={"session_id": session})
    ev = c.post(
        f"{base}/events",
        json={"type": "user_message", "session_id": session, "text": f"{label} 的机密预算"},
    ).json()
    ent = c.post(f"{base}/entities", json={"type": "document", "name": f"{label} plan"}).json()
    rel = c.post(
        f"{base}/relations",
        json={"from_id": ev["id"], "type": "REFERENCES", "to_id": ent["id"], "source": "human"},
    ).json()
    c.put(
        f"{base}/state",
        params={"key": "budget", "scope": "project", "scope_id": "all"},
        json={"value": 1},
    )
    ctx = c.post(
        "/v1/context/assemble", json={"project_id": pid, "agent_role": "qa", "user_intent": "预算"}
    ).json()
    return {
        "event": ev["id"],
        "entity": ent["id"],
        "relation": rel["id"],
        "session": session,
        "task": task,
        "context": ctx["context_id"],
    }


def test_a_key_of_project_a_never_sees_project_b(live: Live, pid: str, other_pid: str) -> None:
    b_ids = _seed(live, other_pid)
    a = live.client(live.key(pid, role="admin"))  # even an admin key of A
    _seed(live, pid, "A")
    secrets_of_b = ["B 的机密预算", "B plan", "B only", *b_ids.values()]
    ghosts = {v: f"{v[:3]}ghost{i}" for i, v in enumerate(b_ids.values())}
    rng = random.Random(7)
    for i in range(200):
        target = rng.choice([pid, other_pid, f"missing-{i}"])  # A's paths, B's, a ghost's
        base = f"/v1/projects/{target}"
        some_id = rng.choice(list(b_ids.values()))
        method, path, kwargs = rng.choice(
            [
                ("GET", f"{base}/events/{b_ids['event']}", {}),
                ("GET", f"{base}/events/{b_ids['event']}/causes", {}),
                ("GET", f"{base}/entities/{b_ids['entity']}", {}),
                ("GET", f"{base}/sessions/{b_ids['session']}", {}),
                ("GET", f"{base}/tasks/{b_ids['task']}", {}),
                ("GET", f"/v1/traces/{b_ids['context']}", {}),
                ("GET", f"/v1/traces/{b_ids['context']}", {"params": {"project_id": target}}),
                ("GET", f"{base}/events/{some_id}", {}),
                ("POST", f"{base}/relations/{b_ids['relation']}/close", {"json": {}}),
                ("POST", f"{base}/contexts/{b_ids['context']}/outcome", {"json": {"answer": "x"}}),
            ]
        )
        r = a.request(method, path, **kwargs)
        # B's edge is unknown in A's project too: closing it is a 404 as in the library
        assert r.status_code == 404, (method, path, r.status_code, r.text)
        assert _code(r) == "not_found"
        # exactly the answer for ids that never existed: nothing is learnt, no data comes back
        ghost_path = path
        for real, fake in ghosts.items():
            ghost_path = ghost_path.replace(real, fake)
        g = a.request(method, ghost_path, **kwargs)
        masked = r.text
        for real, fake in ghosts.items():
            masked = masked.replace(real, fake)
        assert (g.status_code, g.text) == (r.status_code, masked)
        assert not any(s in r.text for s in secrets_of_b[:3]), r.text
    # listing and searching inside A shows nothing of B, and B's paths answer like a ghost's
    base = f"/v1/projects/{pid}"
    listed = " ".join(
        a.get(p, params=q).text
        for p, q in [
            (f"{base}/sessions", {}),
            (f"{base}/entities", {}),
            (f"{base}/relations", {}),
            ("/v1/projects", {}),
        ]
    )
    assert not any(s in listed for s in secrets_of_b)
    # B's session read through A is an unknown session of A: 404, as a ghost's is
    for session in (b_ids["session"], "ghost-session"):
        r = a.get(f"{base}/events", params={"session_id": session})
        assert r.status_code == 404 and r.json()["error"]["kind"] == "session"
        assert not any(s in r.text for s in secrets_of_b if s != session), r.text
    found = a.post(f"{base}/search", json={"query": "机密预算 B plan", "preset": "keyword"})
    hits = json.dumps(found.json()["results"], ensure_ascii=False)
    assert found.json()["results"] and not any(s in hits for s in secrets_of_b)
    real_b = a.get(f"/v1/projects/{other_pid}/sessions")
    ghost = a.get("/v1/projects/ghost-project/sessions")
    assert real_b.status_code == ghost.status_code == 404
    assert real_b.json()["error"]["message"].replace(other_pid, "X") == ghost.json()["error"][
        "message"
    ].replace("ghost-project", "X")
    # writes into B are refused the same way and change nothing there
    r = a.post(
        f"/v1/projects/{other_pid}/events",
        json={"type": "user_message", "session_id": "x", "text": "in"},
    )
    assert r.status_code == 404
    r = a.post(
        "/v1/context/assemble",
        json={"project_id": other_pid, "agent_role": "qa", "user_intent": "预算"},
    )
    assert r.status_code == 404
    b = live.client(live.key(other_pid, role="read"))
    assert b.get(f"/v1/projects/{other_pid}/sessions/x").status_code == 404
    assert b.get(f"/v1/projects/{other_pid}/events/{b_ids['event']}").status_code == 200


def test_a_key_for_several_projects_and_the_wildcard(live: Live, pid: str, other_pid: str) -> None:
    live.make_project(pid)
    live.make_project(other_pid)
    both = live.client(live.key(pid, other_pid, role="read"))
    every = live.client(live.key("*", role="read"))
    for c in (both, every):
        assert c.get(f"/v1/projects/{pid}/sessions").status_code == 200
        assert c.get(f"/v1/projects/{other_pid}/sessions").status_code == 200
    r = both.get("/v1/projects/third/sessions")
    assert r.status_code == 404 and "not visible to this key" in r.json()["error"]["message"]
    # the wildcard sees it: a project with no data is a typo, unless said to be new
    r = every.get("/v1/projects/third/sessions")
    assert r.status_code == 404 and "project 'third' not found" in r.json()["error"]["message"]
    assert every.get("/v1/projects/third/sessions?new_project=true").status_code == 200


def test_body_and_batch_limits(tmp_path: Path, pid: str) -> None:
    server = start(tmp_path, max_body_bytes=4096, max_batch=3)
    try:
        live = Live(server.url, server.settings.db, server)
        c = live.client(live.key(pid, role="write"))
        r = c.post(
            f"/v1/projects/{pid}/events",
            json={"type": "user_message", "session_id": "s", "text": "x" * 10_000},
        )
        assert r.status_code == 413 and _code(r) == "too_large"
        # a chunked body (no Content-Length) is counted as it arrives
        chunks = (b"x" * 1024 for _ in range(10))
        r = c.post(f"/v1/projects/{pid}/events", content=chunks)
        assert r.status_code == 413
        events = [{"type": "user_message", "session_id": "s", "text": f"m{i}"} for i in range(4)]
        r = c.post(f"/v1/projects/{pid}/events/batch", json={"events": events})
        assert r.status_code == 413 and r.json()["error"]["field"] == "events"
        r = c.post(f"/v1/projects/{pid}/events/batch", json={"events": events[:3]})
        assert r.status_code == 201
    finally:
        server.stop()


def test_rate_limit_per_key(tmp_path: Path, pid: str) -> None:
    server = start(tmp_path, rate_limit_per_s=2.0, rate_limit_burst=5)
    try:
        live = Live(server.url, server.settings.db, server)
        one, two = live.client(live.key(pid, role="read")), live.client(live.key(pid))
        codes = [one.get(f"/v1/projects/{pid}/sessions").status_code for _ in range(8)]
        assert codes[:5] == [200] * 5 and 429 in codes[5:]
        r = one.get(f"/v1/projects/{pid}/sessions")
        assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1
        assert _code(r) == "rate_limited"
        assert two.get(f"/v1/projects/{pid}/sessions").status_code == 200  # per key
        assert "ctxbase_rate_limited_total" in one.get("/metrics").text
    finally:
        server.stop()


def test_no_auth_mode_is_loopback_only(tmp_path: Path, pid: str) -> None:
    with pytest.raises(ValidationError) as err:
        BackgroundServer(ServerSettings(db=str(tmp_path / "x.db"), host="0.0.0.0", no_auth=True))
    assert err.value.field == "host" and "127.0.0.1" in str(err.value)
    server = start(tmp_path, no_auth=True)
    try:
        assert server.url.startswith("http://127.0.0.1:")
        r = httpx.put(f"{server.url}/v1/projects/{pid}/sessions/s", json={})
        assert r.status_code == 200
    finally:
        server.stop()


def test_concurrent_keys_do_not_leak(live: Live, pid: str, other_pid: str) -> None:
    """Two keys hammering at once: each only ever sees its own project's data."""
    ids = {p: _seed(live, p, p) for p in (pid, other_pid)}
    keys = {p: live.key(p, role="read") for p in (pid, other_pid)}
    errors: list[str] = []

    def probe(mine: str, theirs: str) -> None:
        c = live.client(keys[mine])
        for _ in range(40):
            ok = c.get(f"/v1/projects/{mine}/events/{ids[mine]['event']}")
            bad = c.get(f"/v1/projects/{theirs}/events/{ids[theirs]['event']}")
            if ok.status_code != 200 or bad.status_code != 404:
                errors.append(f"{mine}: {ok.status_code} {bad.status_code}")

    threads = [
        threading.Thread(target=probe, args=(pid, other_pid)),
        threading.Thread(target=probe, args=(other_pid, pid)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_connect_uses_the_keys_own_project(live: Live, pid: str, other_pid: str) -> None:
    import ctxbase

    solo = ctxbase.connect(live.url, api_key=live.key(pid))
    try:
        assert solo.project == pid
        solo.record("user_message", session_id="s", text="written without naming a project")
        assert [e.text for e in solo.last_events("s")] == ["written without naming a project"]
    finally:
        solo.close()
    both = ctxbase.connect(live.url, api_key=live.key(pid, other_pid))
    try:
        assert both.project == "default"  # two projects: the caller must say which
    finally:
        both.close()
    who = live.client(live.key(pid, role="read")).get("/v1/whoami").json()
    assert who["role"] == "read" and who["projects"] == [pid]
