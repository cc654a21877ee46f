"""Ids may hold "/" (`model.ID_RULE`): an event or relation named so is read, walked and
closed over HTTP as embedded, on both backends; an id that is not there is a 404 naming it,
not "no such route"."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from live_server import Live, embedded_and_remote, serve_on_param

from ctxbase.errors import NotFoundError


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Live]:
    yield from serve_on_param(request, tmp_path_factory, "slash-ids")


def _missing(call: Any) -> str:
    with pytest.raises(NotFoundError) as caught:
        call()
    return str(caught.value)


def _scenario(api: Any) -> dict[str, Any]:
    cause = api.record("user_message", session_id="ops/s1", text="deploy", event_id="ev_ops/ask-1")
    done = api.record(
        "assistant_message",
        session_id="ops/s1",
        text="deployed",
        event_id="ev_ops/done-1",
        parent_event_ids=[cause.id],
    )
    a = api.upsert_entity("code", "svc/a.py").id
    b = api.upsert_entity("code", "svc/b.py").id
    rel = api.upsert_relationship(a, "CALLS", b, source="human")
    return {
        "ids": (cause.id, done.id),
        "get": api.get_event("ev_ops/done-1").text,
        "causes": [e.id for e in api.causal_chain("ev_ops/done-1")],
        "effects": [e.id for e in api.effects("ev_ops/ask-1")],
        "missing": _missing(lambda: api.get_event("../etc")),
        "missing_causes": _missing(lambda: api.causal_chain("ops/nothing")),
        "relation_has_slash": "/" in rel.id,
        "closed": (api.close_relationship(rel.id), api.close_relationship(rel.id)),
        "close_missing": _missing(lambda: api.close_relationship("rel/nothing")),
    }


def test_ids_with_a_slash_work_over_http_as_embedded(
    server: Live, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    local, remote = embedded_and_remote(server, tmp_path, request, _scenario)
    assert remote == local
    assert local["ids"] == ("ev_ops/ask-1", "ev_ops/done-1")
    assert local["get"] == "deployed"
    assert local["causes"] == ["ev_ops/ask-1"] and local["effects"] == ["ev_ops/done-1"]
    assert local["missing"] == "event '../etc' not found"
    assert local["missing_causes"].startswith("event 'ops/nothing' not found")
    assert local["closed"] == (True, False)
    assert local["close_missing"] == "relation 'rel/nothing' not found"


def test_the_console_chain_and_the_event_read_both_answer_for_a_slash_id(
    server: Live, pid: str
) -> None:
    base = f"/v1/projects/{pid}"
    with server.client(server.key(pid)) as c:
        body = {"type": "user_message", "session_id": "s1", "text": "x", "event_id": "ev_a/b"}
        assert c.post(f"{base}/events", json=body).status_code == 201
        quoted = quote("ev_a/b", safe="")
        assert c.get(f"{base}/events/{quoted}").json()["id"] == "ev_a/b"
        chain = c.get(f"{base}/events/{quoted}/chain")
        assert chain.status_code == 200 and chain.json()["event"]["id"] == "ev_a/b"
        assert c.get(f"{base}/events/{quoted}/causes").json() == []
