"""Entity versions over a live server: POST /entities keeps the previous version as
`<id>@v<n>` and answers a stale `version` with 409 naming the stored one; the SDK (seed 000's
spelling) raises ConflictError; `keep_history: false` overwrites in place."""

from __future__ import annotations

from urllib.parse import quote

import httpx
import pytest
from live_server import Live

import ctxbase
from ctxbase.errors import ConflictError


def _post(c: httpx.Client, pid: str, text: str, **extra: object) -> httpx.Response:
    body = {"type": "document", "name": "spec", "id": "doc:spec", "text": text, **extra}
    return c.post(f"/v1/projects/{pid}/entities", json=body)


def _get(c: httpx.Client, pid: str, eid: str) -> httpx.Response:
    return c.get(f"/v1/projects/{pid}/entities/{quote(eid)}")


def test_rest_keeps_the_previous_version_and_refuses_a_stale_one(live: Live, pid: str) -> None:
    c = live.client(live.key(pid))
    assert _post(c, pid, "timeout 30s").json()["version"] == 1
    assert _post(c, pid, "timeout 20s").json()["version"] == 2
    assert _post(c, pid, "timeout 20s").json()["version"] == 2  # unchanged: no new version
    old = _get(c, pid, "doc:spec@v1").json()
    assert (old["text"], old["latest"], old["version"]) == ("timeout 30s", False, 1)
    assert _get(c, pid, "doc:spec@v2").status_code == 404

    stale = _post(c, pid, "stale write", version=2)
    assert stale.status_code == 409, stale.text
    err = stale.json()["error"]
    assert (err["code"], err["field"]) == ("conflict", "version")  # the input it is about
    assert "at version 2" in err["message"] and "version=3" in err["message"]
    assert _get(c, pid, "doc:spec").json()["text"] == "timeout 20s"
    assert _post(c, pid, "timeout 10s", version=3).json()["version"] == 3

    flat = _post(c, pid, "overwritten", keep_history=False).json()
    assert flat["version"] == 3 and _get(c, pid, "doc:spec@v3").status_code == 404


def test_sdk_seed000_spelling_versions_and_raises_conflict(live: Live, pid: str) -> None:
    with ctxbase.connect(live.url, api_key=live.key(pid), project=pid) as client:
        for text in ("Spec v1: timeout 30s", "Spec v2: timeout 20s"):
            e = client.upsert_entity(
                entity_type="document", entity_id="doc:spec", properties={"content": text}
            )
        assert e.version == 2
        assert client.get_entity("doc:spec@v1").text == "Spec v1: timeout 30s"
        with pytest.raises(ConflictError, match="send version=3"):
            client.upsert_entity(
                entity_type="document",
                entity_id="doc:spec",
                properties={"content": "stale"},
                version=2,
            )
        assert client.get_entity("doc:spec").text == "Spec v2: timeout 20s"


def test_rest_keeps_an_edge_s_earlier_confidence(live: Live, pid: str) -> None:
    c = live.client(live.key(pid))
    _post(c, pid, "spec")
    c.post(f"/v1/projects/{pid}/entities", json={"type": "code", "name": "x", "id": "doc:x"})
    for conf in (0.9, 0.2):
        body = {"from_id": "doc:spec", "type": "REFERENCES", "to_id": "doc:x",
                "source": "human", "confidence": conf}  # fmt: skip
        assert c.post(f"/v1/projects/{pid}/relations", json=body).status_code == 200
    params = {"node_id": "doc:spec", "types": "REFERENCES"}
    open_now = c.get(f"/v1/projects/{pid}/relations", params=params).json()
    assert [r["confidence"] for r in open_now] == [0.2]
    every = c.get(f"/v1/projects/{pid}/relations", params={**params, "include_closed": True})
    closed = [r for r in every.json() if r["valid_to"] is not None]
    assert [(r["id"], r["confidence"]) for r in closed] == [(f"{open_now[0]['id']}@1", 0.9)]
