"""Mistakes a client makes against a real server get errors that say what was wrong: a
URL with a path in it, a closed client, a body the API refuses (its error body shaped as
every other: code, message, field, type, details)."""

from __future__ import annotations

import uuid

import pytest
from live_server import Live

import ctxbase
from ctxbase.capture.bus import CaptureError
from ctxbase.errors import NotFoundError, StorageError


def test_a_url_with_a_path_names_the_route_it_asked_for(live: Live) -> None:
    pid = f"p-{uuid.uuid4().hex[:8]}"
    key = live.key(pid)
    with (
        ctxbase.connect(live.url + "/v1", api_key=key, project=pid) as wrong,
        pytest.raises(NotFoundError) as err,
    ):
        wrong.search("x")
    message = str(err.value)
    assert f"no such route: POST /v1/v1/projects/{pid}/search" in message
    assert "ctxbase serve" in message


def test_a_closed_client_raises_what_a_closed_base_raises(live: Live) -> None:
    pid = f"p-{uuid.uuid4().hex[:8]}"
    client = ctxbase.connect(live.url, api_key=live.key(pid), project=pid)
    client.close()
    with pytest.raises(CaptureError, match="the client is closed"):
        client.capture("user_message", session_id="s", text="x")
    with pytest.raises(CaptureError, match="the client is closed"):
        client.flush()
    with pytest.raises(StorageError, match="the client is closed"):
        client.search("x")


def test_a_refused_body_has_the_shape_of_every_error_body(live: Live) -> None:
    pid = f"p-{uuid.uuid4().hex[:8]}"
    c = live.client(live.key(pid))
    refused = c.post(f"/v1/projects/{pid}/events", json={"type": "user_message", "text": 5})
    assert refused.status_code == 422
    error = refused.json()["error"]
    assert error["type"] == "ValidationError" and error["details"] == {}
    assert error["field"] and error["message"].startswith(f"{error['field']}: ")
    gone = c.post("/v1/no-such-thing", json={})
    assert gone.status_code == 404
    assert gone.json()["error"]["type"] == "NotFoundError"
    assert "no such route: POST /v1/no-such-thing" in gone.json()["error"]["message"]


def test_a_request_field_sent_in_the_wrong_place_says_where_it_goes(live: Live) -> None:
    pid = f"p-{uuid.uuid4().hex[:8]}"
    c = live.client(live.key(pid))
    c.post(
        f"/v1/projects/{pid}/events", json={"type": "user_message", "session_id": "s", "text": "hi"}
    )
    search = {"query": "hi", "options": {"preset": "keyword"}}
    error = c.post(f"/v1/projects/{pid}/search", json=search).json()["error"]
    assert error["field"] == "options.preset"
    assert "is a field of the request, not an option: send it as preset" in error["message"]
    body = {"scope": "session", "scope_id": "s", "key": "z", "value": 3}
    refused = c.put(f"/v1/projects/{pid}/state", json=body)
    assert refused.status_code == 422
    assert "goes in the query string" in refused.json()["error"]["message"], refused.json()
    params = {"scope": "session", "scope_id": "s", "key": "z"}
    taken = c.put(f"/v1/projects/{pid}/state", params=params, json={"value": 3})
    assert taken.status_code == 200 and taken.json()["value"] == 3
