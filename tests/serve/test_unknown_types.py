"""A search filtered by a type no item can have (a typo) is refused, naming the known
types, embedded, over REST and through the SDK and the agent tool alike: never an empty
answer that looks like "nothing of that type"."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from live_server import Live

import ctxbase
from ctxbase.errors import ValidationError
from ctxbase.integrations.tools import ToolScope, handle_tool_call


def _written(live: Live) -> tuple[str, str]:
    pid = f"types-{uuid.uuid4().hex[:8]}"
    key = live.key(pid, role="write")
    c = live.client(key)
    event = {"type": "user_message", "session_id": "s", "text": "orders are cached 300 s"}
    assert c.post(f"/v1/projects/{pid}/events", json=event).status_code == 201
    assert c.post(f"/v1/projects/{pid}/flush").status_code == 204
    return pid, key


def test_rest_refuses_an_unknown_type_naming_the_known_ones(live: Live) -> None:
    pid, key = _written(live)
    c = live.client(key)
    body = {"query": "orders cached", "filters": {"types": ["user_mesage", "user_message"]}}
    r = c.post(f"/v1/projects/{pid}/search", json=body)
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["field"] == "filters.types"
    assert "unknown type 'user_mesage'" in error["message"]
    assert "known types:" in error["message"] and "user_message" in error["message"]
    assert "'user_message'" not in error["message"].split(";")[0]  # the good one is not named
    # known types still filter: the event is found, and a known type nothing has is empty
    body["filters"]["types"] = ["user_message"]
    found = c.post(f"/v1/projects/{pid}/search", json=body).json()["results"]
    assert [h["item"]["type"] for h in found] == ["user_message"]
    body["filters"]["types"] = ["tool_result"]
    r = c.post(f"/v1/projects/{pid}/search", json=body)
    assert r.status_code == 200 and r.json()["results"] == []


def test_the_sdk_and_the_library_raise_the_same_validation_error(
    live: Live, tmp_path: Path
) -> None:
    pid, key = _written(live)
    embedded = ctxbase.open(str(tmp_path / "e.db"), project=pid, embedder="hash")
    embedded.record("user_message", session_id="s", text="orders are cached 300 s")
    embedded.flush()
    messages = []
    with ctxbase.connect(live.url, api_key=key, project=pid) as remote:
        for api in (embedded, remote):
            with pytest.raises(ValidationError) as err:
                api.search("orders", filters={"types": ["bogus", "nope"]})
            assert err.value.field == "filters.types"
            messages.append(err.value.message)
            assert api.search("orders", filters={"types": ["user_message"]}).results
    embedded.close()
    assert messages[0] == messages[1]
    assert messages[0].startswith("unknown types 'bogus', 'nope'; known types: ")


def test_an_entity_type_of_the_project_is_known(tmp_path: Path) -> None:
    from ctxbase.anchor.entities import register_entity_type

    register_entity_type("api_route_x", "a route")
    with ctxbase.open(str(tmp_path / "e.db"), project="p", embedder="hash") as cb:
        cb.upsert_entity("api_route_x", "GET /orders", "lists orders by user")
        cb.flush()
        hits = cb.search("orders", filters={"types": ["api_route_x"]}).results
        assert [h.item.type for h in hits] == ["api_route_x"]


def test_the_agent_tool_refuses_it_and_still_takes_fact(tmp_path: Path) -> None:
    with ctxbase.open(str(tmp_path / "e.db"), project="p", embedder="hash") as cb:
        cb.record("user_message", session_id="s", text="orders are cached 300 s")
        cb.set_fact("cache_ttl", 300, scope_id="s", scope="session")
        cb.flush()
        scope = ToolScope(cb, role="write")
        bad = json.loads(
            handle_tool_call(scope, "search_memory", {"query": "orders", "types": ["x"]})
        )
        assert "unknown type 'x'" in json.dumps(bad), bad
        facts = json.loads(
            handle_tool_call(scope, "search_memory", {"query": "cache ttl", "types": ["fact"]})
        )
        assert facts["results"] == [], facts
        both = json.loads(
            handle_tool_call(
                scope, "search_memory", {"query": "orders", "types": ["fact", "user_message"]}
            )
        )
        assert [h["type"] for h in both["results"]] == ["user_message"], both
