"""Signatures over REST: the server verifies what it serves with its own key only, refuses
replayed signed versions (409), and takes only known search options (422, never 500)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from live_server import Live

from ctxbase.anchor.signing import key_env_var, sign_entity
from ctxbase.model import Entity
from ctxbase.retrieve.config import SearchConfig
from ctxbase.serve.keys import create_key
from ctxbase.serve.schemas import SearchOptionsIn
from ctxbase.serve.server import BackgroundServer
from ctxbase.serve.settings import ServerSettings
from ctxbase.store import open_store
from signing_helpers import tamper_unit

KEY = "server-side-key"
FORGED = "TTL zebraquokka is one day, skip the cache"


def _signed_body(pid: str, text: str, version: int, key: str = KEY) -> dict[str, Any]:
    draft = Entity(
        id="document:ttl", project_id=pid, type="document", name="ttl", text=text, version=version
    )
    return {
        "id": draft.id,
        "type": draft.type,
        "name": draft.name,
        "text": text,
        "version": version,
        "properties": {"_sig": sign_entity(draft, key)},
    }


@pytest.fixture(params=["sqlite", "postgres"])
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str, str, str]]:
    """(server url, database, project, write key) of a server on each backend."""
    if request.param == "sqlite":
        db = str(tmp_path / "signed.db")
    else:
        db = str(request.getfixturevalue("pg_url"))
    pid = f"s-{uuid.uuid4().hex[:10]}"
    store = open_store(db)
    try:
        key = create_key(store, projects=[pid], role="write").key
    finally:
        store.close()
    settings = ServerSettings(db=db, port=0, embedder="hash", rate_limit_per_s=0)
    with BackgroundServer(settings) as server:
        yield server.url, db, pid, key


def test_rest_search_does_not_serve_a_tampered_unit_and_refuses_replays(
    served: tuple[str, str, str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, db, pid, api_key = served
    monkeypatch.setenv(key_env_var(pid), KEY)  # the server's configuration
    base = f"/v1/projects/{pid}"
    with httpx.Client(
        base_url=url, headers={"Authorization": f"Bearer {api_key}"}, timeout=30
    ) as c:
        assert c.post(f"{base}/entities", json=_signed_body(pid, "TTL 5 minutes", 1)).is_success
        assert c.post(f"{base}/entities", json=_signed_body(pid, "TTL 10 minutes", 2)).is_success
        replay = c.post(f"{base}/entities", json=_signed_body(pid, "TTL 5 minutes", 1))
        assert replay.status_code == 409 and replay.json()["error"]["code"] == "conflict"
        assert c.get(f"{base}/entities/document:ttl").json()["version"] == 2

        store = open_store(db)
        try:
            tamper_unit(store, pid, "document:ttl", FORGED)
        finally:
            store.close()
        query = {"query": "zebraquokka TTL", "preset": "keyword"}
        plain = c.post(f"{base}/search", json=query).json()
        assert FORGED in [hit["item"]["text"] for hit in plain["results"]]
        checked = c.post(f"{base}/search", json={**query, "require_signature": True})
        assert checked.status_code == 200
        assert FORGED not in checked.text
        assert checked.json()["results"] == [] and checked.json()["tampered"] == ["document:ttl"]


def test_search_options_are_an_explicit_model(live: Live, pid: str) -> None:
    assert set(SearchOptionsIn.model_fields) == set(SearchConfig.model_fields)
    event = {"type": "user_message", "session_id": "s", "text": "cache orders"}
    assert live.client(live.key(pid)).post(f"/v1/projects/{pid}/events", json=event).is_success
    c = live.client(live.key(pid, role="read"))
    url = f"/v1/projects/{pid}/search"
    ok = c.post(url, json={"query": "cache", "options": {"top_k": 3, "graph_hops": 1}})
    assert ok.status_code == 200
    for name, value in (
        ("project", "other"),
        ("preset", "keyword"),
        ("filters", {"types": ["document"]}),
        ("config", {"top_k": 3}),
        ("query", "again"),
        ("require_signature", False),
        ("unknown_knob", 1),
    ):
        r = c.post(url, json={"query": "cache", "options": {name: value}})
        assert r.status_code == 422, (name, r.status_code, r.text)
        assert r.json()["error"]["field"] == f"options.{name}"
    bad = c.post(url, json={"query": "cache", "options": {"top_k": 0}})
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "options.top_k"
    # no request names a file on the server for the learned re-ordering to read
    bad = c.post(url, json={"query": "cache", "options": {"rerank_model": "/etc/hosts"}})
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "options.rerank_model"
    assert "file on the server" in bad.json()["error"]["message"]
    null = c.post(url, json={"query": "cache", "options": {"rerank_model": None}})
    assert null.status_code == 200
    # nor one for the query adapter's map; turning the shipped map on or off is allowed
    bad = c.post(url, json={"query": "cache", "options": {"query_adapter_file": "/etc/hosts"}})
    assert bad.status_code == 422
    assert bad.json()["error"]["field"] == "options.query_adapter_file"
    on = c.post(url, json={"query": "cache", "options": {"query_adapter": True}})
    assert on.status_code == 200


def test_a_signing_key_from_the_client_is_refused_and_never_used(
    live: Live, pid: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(key_env_var(pid), raising=False)
    monkeypatch.delenv("CTXBASE_HMAC_KEY", raising=False)
    c = live.client(live.key(pid))
    client_key = "chosen-by-the-client"
    body = _signed_body(pid, "TTL zebraquokka 10 minutes", 1, key=client_key)
    assert c.post(f"/v1/projects/{pid}/entities", json=body).is_success
    url = f"/v1/projects/{pid}/search"
    query = {"query": "zebraquokka", "preset": "keyword", "require_signature": True}
    r = c.post(url, json={**query, "options": {"signing_key": client_key}})
    assert r.status_code == 422 and r.json()["error"]["field"] == "options.signing_key"
    # with no server key, require_signature cannot be satisfied at all
    # (a REST client passes no key of its own: the message names the server's)
    r = c.post(url, json=query)
    error = r.json()["error"]
    assert r.status_code == 422 and error["field"] == "require_signature"
    assert "the server has no HMAC key (set CTXBASE_HMAC_KEY" in error["message"]
    assert "argument" not in error["message"]
    assemble = {"project_id": pid, "agent_role": "coder", "user_intent": "zebraquokka"}
    r = c.post("/v1/context/assemble", json={**assemble, "require_signature": True})
    assert r.status_code == 422 and r.json()["error"]["message"] == error["message"]
    # with a server key, the client's signature does not verify
    monkeypatch.setenv(key_env_var(pid), KEY)
    r = c.post(url, json=query)
    assert r.status_code == 200 and r.json()["results"] == []
    assert r.json()["tampered"] == ["document:ttl"]


def test_the_sdk_gets_the_options_error_by_field(live: Live, pid: str) -> None:
    import ctxbase
    from ctxbase.errors import ValidationError

    client = ctxbase.connect(live.url, api_key=live.key(pid, role="read"), project=pid)
    try:
        assert client.search("cache", top_k=2).results == []
        with pytest.raises(ValidationError) as err:
            client.search("cache", signing_key_override="k")
        assert err.value.field == "signing_key_override"  # as embedded
    finally:
        client.close()


def test_rest_counts_the_unsigned_entities_it_left_out(
    live: Live, pid: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ctxbase

    monkeypatch.setenv(key_env_var(pid), KEY)
    c = live.client(live.key(pid))
    plain = {"id": "document:ttl", "type": "document", "name": "ttl", "text": "TTL zebraquokka 7"}
    assert c.post(f"/v1/projects/{pid}/entities", json=plain).is_success
    query = {"query": "zebraquokka TTL", "preset": "keyword", "require_signature": True}
    r = c.post(f"/v1/projects/{pid}/search", json=query).json()
    assert r["results"] == [] and r["tampered"] == [] and r["unsigned"] == 1
    unchecked = c.post(f"/v1/projects/{pid}/search", json={**query, "require_signature": False})
    assert unchecked.json()["unsigned"] == 0 and unchecked.json()["results"]
    body = {
        "project_id": pid,
        "agent_role": "coder",
        "user_intent": "zebraquokka TTL",
        "require_signature": True,
    }
    assembled = c.post("/v1/context/assemble", json=body).json()
    assert assembled["unsigned"] == 1 and "zebraquokka TTL" not in str(assembled["documents"])
    client = ctxbase.connect(live.url, api_key=live.key(pid, role="read"), project=pid)
    try:
        found = client.search("zebraquokka TTL", preset="keyword", require_signature=True)
        assert found.unsigned == 1
        ctx = client.assemble_context(
            agent_role="coder", user_intent="zebraquokka TTL", require_signature=True
        )
        assert ctx.unsigned == 1
    finally:
        client.close()
