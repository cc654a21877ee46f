"""Listings of a project that does not exist, over a real server: sessions, tasks,
entities and the console's graph and contexts are a 404 naming the projects the key sees,
not an empty 200 that makes a typo look like an empty project. `?new_project=true` allows
a project with no data yet; a write still creates the project; the SDK's own project and
an embedded base's own list empty before their first write, another one is
UnknownProjectError in both."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from live_server import Live

import ctxbase
from ctxbase.errors import UnknownProjectError

LISTINGS = ["sessions", "tasks", "entities", "graph", "contexts"]


def _write(live: Live, key: str, project: str) -> None:
    event = {"type": "user_message", "session_id": "s", "text": "orders are cached 300 s"}
    r = live.client(key).post(f"/v1/projects/{project}/events", json=event)
    assert r.status_code == 201, r.text


@pytest.mark.parametrize("listing", LISTINGS)
def test_a_listing_of_an_unknown_project_is_404_naming_the_known_ones(
    live: Live, pid: str, listing: str
) -> None:
    key = live.key("*", role="write")
    _write(live, key, pid)
    typo = f"{pid}-typo"
    c = live.client(live.key("*", role="read"))
    r = c.get(f"/v1/projects/{typo}/{listing}")
    assert r.status_code == 404, r.text
    error = r.json()["error"]
    assert error["code"] == "not_found" and error["kind"] == "project" and error["id"] == typo
    assert f"project {typo!r} not found" in error["message"] and pid in error["message"]
    # allowed on purpose: an empty answer, and the project is still not created
    r = c.get(f"/v1/projects/{typo}/{listing}", params={"new_project": "true"})
    assert r.status_code == 200, r.text
    assert typo not in c.get("/v1/projects").json()["projects"]
    # the project that exists lists
    assert c.get(f"/v1/projects/{pid}/{listing}").status_code == 200


def test_a_write_creates_the_project_and_it_lists_then(live: Live, pid: str) -> None:
    key = live.key("*", role="write")
    c = live.client(key)
    assert c.get(f"/v1/projects/{pid}/sessions").status_code == 404
    assert c.put(f"/v1/projects/{pid}/sessions/day1", json={"title": "t"}).status_code == 200
    r = c.get(f"/v1/projects/{pid}/sessions")
    assert r.status_code == 200 and [s["session_id"] for s in r.json()] == ["day1"]


def test_the_404_names_only_the_projects_the_key_sees(live: Live, pid: str, other_pid: str) -> None:
    _write(live, live.key(pid), pid)
    _write(live, live.key(other_pid), other_pid)
    ghost = f"g-{uuid.uuid4().hex[:10]}"
    c = live.client(live.key(pid, ghost, role="read"))
    r = c.get(f"/v1/projects/{ghost}/entities")
    assert r.status_code == 404
    message = r.json()["error"]["message"]
    assert f"projects with data: {pid}" in message and other_pid not in message
    # a key for a project it may not use gets the same answer whether it exists or not
    r = c.get(f"/v1/projects/{other_pid}/entities")
    assert r.status_code == 404 and "not visible to this key" in r.json()["error"]["message"]


def test_a_key_made_for_a_new_project_lists_it_empty(live: Live, pid: str) -> None:
    c = live.client(live.key(pid, role="read"))
    for listing in LISTINGS:
        assert c.get(f"/v1/projects/{pid}/{listing}").status_code == 200, listing


def test_sdk_and_library_list_their_own_project_and_refuse_a_typo(
    live: Live, pid: str, tmp_path: Path
) -> None:
    key = live.key("*", role="write")
    _write(live, key, pid)
    fresh = f"{pid}-new"
    embedded = ctxbase.open(str(tmp_path / "e.db"), project=fresh, embedder="hash")
    embedded.record("user_message", session_id="s", text="x", project=pid)
    with ctxbase.connect(live.url, api_key=key, project=fresh) as remote:
        for api in (embedded, remote):
            assert api.list_sessions() == [] and api.list_tasks() == []
            assert api.list_entities() == []
            for listing in (api.list_sessions, api.list_tasks, api.list_entities):
                with pytest.raises(UnknownProjectError, match=f"project 'typo' not found .*{pid}"):
                    listing(project="typo")
            assert api.list_sessions(project="typo", new_project=True) == []
            assert [s.session_id for s in api.list_sessions(project=pid)] == ["s"]
    embedded.close()
