"""Hard forget over REST: the report (removed, redacted, caches), traces read back through
GET /v1/traces redacted or gone, the retention purge, and the server's retention setting."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import httpx
from live_server import Live, start

from ctxbase.store.trace_redaction import REDACTED


def _post_event(c: httpx.Client, pid: str, session: str, text: str) -> str:
    r = c.post(f"/v1/projects/{pid}/events", json={"type": "user_message", "session_id": session,
                                                   "text": text})  # fmt: skip
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def _assemble(c: httpx.Client, pid: str, session: str, intent: str) -> str:
    body = {"project_id": pid, "agent_role": "coder", "user_intent": intent, "session_id": session}
    r = c.post("/v1/context/assemble", json=body)
    assert r.status_code == 200, r.text
    return str(r.json()["context_id"])


def test_forget_a_session_over_rest_redacts_and_reports(live: Live, pid: str) -> None:
    marker = f"zqx{uuid.uuid4().hex[:10]}"
    c = live.client(live.key(pid, role="admin"))
    gone = _post_event(c, pid, "s-gone", f"the vault code is {marker} 火烈鸟协议 budget")
    _post_event(c, pid, "s-keep", "which vault budget did we agree on")
    assert c.post("/v1/embeddings/wait", params={"timeout": 30}).json()["idle"] is True
    own = _assemble(c, pid, "s-gone", "vault budget")
    other = _assemble(c, pid, "s-keep", "vault budget 火烈鸟协议")
    assert gone in c.get(f"/v1/traces/{other}").text
    _assemble(c, pid, "s-keep", "vault budget 火烈鸟协议")  # now cached

    r = c.post(f"/v1/projects/{pid}/forget", json={"session_id": "s-gone"})

    assert r.status_code == 200, r.text
    report = r.json()
    assert report["removed"]["events"] == 1 and report["removed"]["traces"] == 1
    assert report["redacted"] == {"traces": 1}
    assert report["caches"]["assemble_cache"] >= 1
    assert report["total"] == sum(report["removed"].values())
    assert c.get(f"/v1/traces/{own}").status_code == 404
    kept = c.get(f"/v1/traces/{other}").json()
    text = json.dumps(kept, ensure_ascii=False)
    assert gone not in text and marker not in text and REDACTED in text
    # a new assembly no longer sees it either
    again = c.get(f"/v1/traces/{_assemble(c, pid, 's-keep', 'vault budget 火烈鸟协议')}").text
    assert gone not in again and marker not in again


def test_purge_soft_deleted_over_rest_and_the_sdk(live: Live, pid: str) -> None:
    import ctxbase

    c = live.client(live.key(pid, role="admin"))
    client = ctxbase.connect(live.url, api_key=live.key(pid, role="admin"), project=pid)
    try:
        old = _post_event(c, pid, "s1", "an old secret note")
        new = _post_event(c, pid, "s1", "a newer secret note")
        assert c.post(f"/v1/projects/{pid}/soft-delete", json={"ids": [old]}).status_code == 200
        time.sleep(1.0)
        assert c.post(f"/v1/projects/{pid}/soft-delete", json={"ids": [new]}).status_code == 200
        report = client.purge_soft_deleted(0.6)
        assert report.removed["events"] == 1
    finally:
        client.close()
    inactive = {"include_inactive": True}
    assert c.get(f"/v1/projects/{pid}/events/{old}", params=inactive).status_code == 404
    assert c.get(f"/v1/projects/{pid}/events/{new}", params=inactive).status_code == 200
    bad = c.post(f"/v1/projects/{pid}/forget", json={"soft_deleted_older_than_s": -1})
    assert bad.status_code == 422 and "soft_deleted_older_than_s" in bad.text


def test_the_server_purges_soft_deleted_rows_after_its_retention(tmp_path: Path) -> None:
    server = start(
        tmp_path, no_auth=True, soft_delete_retention_s=0.2, soft_delete_purge_interval_s=0.1
    )
    try:
        c = httpx.Client(base_url=server.url, timeout=30)
        pid = "retained"
        kept = _post_event(c, pid, "s1", "stays")
        hidden = _post_event(c, pid, "s1", "hidden, then purged")
        assert c.post(f"/v1/projects/{pid}/soft-delete", json={"ids": [hidden]}).status_code == 200
        inactive = {"include_inactive": True}
        url = f"/v1/projects/{pid}/events/{hidden}"
        assert c.get(url, params=inactive).status_code == 200
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and c.get(url, params=inactive).status_code == 200:
            time.sleep(0.1)
        assert c.get(url, params=inactive).status_code == 404
        assert c.get(f"/v1/projects/{pid}/events/{kept}").status_code == 200
    finally:
        server.stop()


def test_the_causes_of_an_event_show_a_hidden_one_by_id(live: Live, pid: str) -> None:
    c = live.client(live.key(pid, role="admin"))
    url = f"/v1/projects/{pid}/events"

    def post(kind: str, text: str, parents: list[str]) -> str:
        body = {"type": kind, "session_id": "s", "text": text, "parent_event_ids": parents}
        r = c.post(url, json=body)
        assert r.status_code == 201, r.text
        return str(r.json()["id"])

    ask = post("user_message", "why is checkout slow", [])
    result = post("tool_result", "zqxsecret rows", [ask])
    answer = post("assistant_message", "add an index", [result])
    assert c.post(f"/v1/projects/{pid}/soft-delete", json={"ids": [result]}).status_code == 200
    r = c.get(f"{url}/{answer}/causes")
    assert r.status_code == 200
    causes = r.json()
    assert [(e["id"], e["marks"], e["text"]) for e in causes] == [
        (result, ["hidden"], None),
        (ask, [], "why is checkout slow"),
    ]
    assert "zqxsecret" not in r.text
    r = c.get(f"{url}/{result}/causes")
    assert r.status_code == 404 and "is hidden (restore brings it back)" in r.text
    r = c.get(f"{url}/{result}")  # the event itself says the same
    assert r.status_code == 404 and "is hidden (restore brings it back)" in r.text
    assert c.get(f"{url}/{result}", params={"include_inactive": "true"}).status_code == 200
    # and the effects of the request: the hidden result by id, the answer beyond it
    r = c.get(f"{url}/{ask}/effects")
    assert r.status_code == 200
    assert [(e["id"], e["marks"], e["text"]) for e in r.json()] == [
        (result, ["hidden"], None),
        (answer, [], "add an index"),
    ]
    assert "zqxsecret" not in r.text


def test_whole_project_is_strictly_boolean_and_never_combined(live: Live, pid: str) -> None:
    c = live.client(live.key(pid, role="admin"))
    _post_event(c, pid, "s1", "the first session")
    kept = _post_event(c, pid, "s2", "the second session")
    for body in (
        {"whole_project": "yes"},
        {"whole_project": 1},
        {"session_id": "s1", "whole_project": True},
    ):
        r = c.post(f"/v1/projects/{pid}/forget", json=body)
        assert r.status_code == 422, (body, r.text)
        assert r.json()["error"]["field"] in ("whole_project", "body.whole_project"), r.text
    # nothing was forgotten
    assert c.get(f"/v1/projects/{pid}/events/{kept}").status_code == 200
    events = c.get(f"/v1/projects/{pid}/events", params={"session_id": "s1"})
    assert events.status_code == 200 and len(events.json()) == 1
