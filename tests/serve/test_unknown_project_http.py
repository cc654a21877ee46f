"""A project that does not exist, over a real server: an assembly or a search of it is a 404
naming the projects the key sees (as `ctxbase --project typo assemble` exits 3), never an empty 200
whose stored trace creates the project; no read creates one."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from live_server import Live

import ctxbase
from ctxbase.errors import NotFoundError, UnknownProjectError


def _write(live: Live, key: str, project: str) -> None:
    c = live.client(key)
    event = {"type": "user_message", "session_id": "s", "text": "orders are cached 300 s"}
    assert c.post(f"/v1/projects/{project}/events", json=event).status_code == 201


def _projects(live: Live) -> list[str]:
    return list(live.client(live.key("*", role="read")).get("/v1/projects").json()["projects"])


@pytest.mark.parametrize("path", ["/v1/context/assemble", "/context/assemble"])
def test_assembling_an_unknown_project_is_404_naming_the_known_ones(
    live: Live, pid: str, path: str
) -> None:
    key = live.key("*", role="write")
    _write(live, key, pid)
    typo = f"{pid}-typo"
    c = live.client(key)
    body = {"agent_role": "code_gen", "user_intent": "add_pagination", "project_id": typo}
    for _ in range(2):  # the second ask is not answered from a cache either
        r = c.post(path, json=body)
        assert r.status_code == 404, r.text
        error = r.json()["error"]
        assert error["code"] == "not_found" and error["kind"] == "project"
        assert error["id"] == typo
        assert f"project {typo!r} not found" in error["message"]
        assert pid in error["message"]
    assert typo not in _projects(live)
    # the project that exists still assembles
    r = c.post(path, json={**body, "project_id": pid})
    assert r.status_code == 200 and r.json()["context_id"]


def test_the_404_names_only_the_projects_the_key_sees(live: Live, pid: str, other_pid: str) -> None:
    _write(live, live.key(pid), pid)
    _write(live, live.key(other_pid), other_pid)
    ghost = f"g-{uuid.uuid4().hex[:10]}"
    c = live.client(live.key(pid, ghost, role="read"))
    r = c.post(
        "/v1/context/assemble",
        json={"agent_role": "a", "user_intent": "b", "project_id": ghost},
    )
    assert r.status_code == 404
    message = r.json()["error"]["message"]
    assert f"projects with data: {pid}" in message
    assert other_pid not in message
    assert "; pass new_project to answer for a project with no data yet" in message  # the way on


def test_the_sdk_raises_not_found_and_creates_nothing(live: Live, pid: str) -> None:
    key = live.key("*", role="write")
    _write(live, key, pid)
    typo = f"{pid}x"
    with ctxbase.connect(live.url, api_key=key, project=pid) as client:
        assert client.assemble_context(agent_role="a", user_intent="cache").context_id
        with pytest.raises(NotFoundError, match=f"project '{typo}' not found .*{pid}"):
            client.assemble_context(agent_role="a", user_intent="cache", project_id=typo)
    assert typo not in _projects(live)


def test_the_sdk_assembles_its_own_new_project_as_an_embedded_base_does(
    live: Live, pid: str
) -> None:
    """An agent's first turn on a new project: the client's own project assembles before
    anything was captured into it (an empty context), as an embedded base's own does; the
    raw REST call without `new_project` is still a 404."""
    key = live.key("*", role="write")
    _write(live, key, pid)
    fresh = f"{pid}-new"
    body = {"agent_role": "a", "user_intent": "cache", "project_id": fresh}
    assert live.client(key).post("/v1/context/assemble", json=body).status_code == 404
    with ctxbase.connect(live.url, api_key=key, project=fresh) as client:
        ctx = client.assemble_context(agent_role="a", user_intent="cache")
        assert ctx.context_id and ctx["documents"] == []
    assert fresh in _projects(live)  # its trace is stored, as embedded


def test_no_read_creates_a_project(live: Live, pid: str) -> None:
    """Every GET under /v1/projects/{project_id} (with its required query parameters), a
    search and an assembly, on a project that does not exist: it still does not exist."""
    key = live.key("*", role="admin")
    _write(live, key, pid)
    ghost = f"ghost-{uuid.uuid4().hex[:10]}"
    c = live.client(key)
    paths = c.get("/openapi.json").json()["paths"]
    asked = 0
    for path, ops in paths.items():
        if not path.startswith("/v1/projects/{project_id}/") or "get" not in ops:
            continue
        url = path.replace("{project_id}", ghost)
        for name in ("session_id", "task_id", "event_id", "entity_id", "node_id", "context_id"):
            url = url.replace("{" + name + "}", "x1")
        params = {
            p["name"]: "x1"
            for p in ops["get"].get("parameters", [])
            if p["in"] == "query" and p.get("required")
        }
        r = c.get(url, params=params)
        assert r.status_code in (200, 404), (path, r.status_code, r.text)
        asked += 1
    assert asked >= 15  # the routes were walked, not skipped
    assert c.post(f"/v1/projects/{ghost}/search", json={"query": "orders"}).status_code == 404
    r = c.post(
        "/v1/context/assemble", json={"agent_role": "a", "user_intent": "b", "project_id": ghost}
    )
    assert r.status_code == 404
    assert ghost not in _projects(live)
    assert pid in _projects(live)


def test_embedded_refuses_another_unknown_project_but_assembles_its_own(tmp_path: Path) -> None:
    """The library agrees with REST for a named project; the base's own project assembles
    before anything was captured (an empty context), as it always has."""
    db = str(tmp_path / "e.db")
    with ctxbase.open(db, project="fresh", embedder="hash") as cb:
        ctx = cb.assemble_context(agent_role="a", user_intent="anything yet?")
        assert ctx.context_id and ctx["documents"] == []
        cb.record("user_message", text="orders are cached 300 s", session_id="s")
        before = cb.store.list_projects()
        with pytest.raises(UnknownProjectError, match=r"project 'frsh' not found .*fresh"):
            cb.assemble_context(agent_role="a", user_intent="cache", project_id="frsh")
        assert cb.store.list_projects() == before
        assert cb.assemble_context(agent_role="a", user_intent="cache", project_id="fresh")


def test_a_project_the_key_cannot_see_reads_as_not_found_with_a_hint(
    live: Live, pid: str, other_pid: str
) -> None:
    """The same answer whether the project exists or not, saying where the key's own are."""
    _write(live, live.key(other_pid), other_pid)  # it exists
    key = live.key(pid, role="write")
    answers = []
    for project in (other_pid, f"{other_pid}-never"):
        client = ctxbase.connect(live.url, api_key=key, project=project)
        try:
            with pytest.raises(NotFoundError) as caught:
                client.search("anything")
        finally:
            client.close()
        answers.append(str(caught.value).replace(project, "P"))
    assert answers[0] == answers[1], answers  # nothing tells the two apart
    assert "or not visible to this key; GET /v1/whoami" in answers[0], answers


def test_searching_an_unknown_project_is_404_naming_the_ones_the_key_sees(
    live: Live, pid: str, other_pid: str
) -> None:
    """A typo in a search is not an empty answer: REST, the SDK and the library agree."""
    _write(live, live.key(pid), pid)
    _write(live, live.key(other_pid), other_pid)
    typo = f"{pid}-typo"
    key = live.key(pid, typo, role="read")
    r = live.client(key).post(f"/v1/projects/{typo}/search", json={"query": "orders"})
    assert r.status_code == 404, r.text
    error = r.json()["error"]
    assert error["kind"] == "project" and error["id"] == typo
    assert f"projects with data: {pid}" in error["message"]
    assert other_pid not in error["message"]
    # `new_project`: the raw call answers empty instead
    body = {"query": "orders", "new_project": True}
    r = live.client(key).post(f"/v1/projects/{typo}/search", json=body)
    assert r.status_code == 200 and r.json()["results"] == []
    with ctxbase.connect(live.url, api_key=key, project=pid) as client:
        assert client.search("orders cached").results  # the project with data answers
        with pytest.raises(NotFoundError, match=f"project '{typo}' not found .*{pid}"):
            client.search("orders", project=typo)
    # the SDK's own project answers empty before anything was captured, as embedded
    with ctxbase.connect(live.url, api_key=key, project=typo) as client:
        assert client.search("orders").results == []
    assert typo not in _projects(live)


def test_embedded_search_refuses_another_unknown_project_but_answers_its_own(
    tmp_path: Path,
) -> None:
    db = str(tmp_path / "s.db")
    with ctxbase.open(db, project="fresh", embedder="hash") as cb:
        assert cb.search("anything").results == []  # its own project, empty yet
        cb.record("user_message", text="orders are cached 300 s", session_id="s")
        with pytest.raises(UnknownProjectError, match=r"project 'frsh' not found .*fresh"):
            cb.search("orders", project="frsh")
        assert cb.search("orders", project="frsh", new_project=True).results == []
        assert cb.search("orders cached", project="fresh").results


def test_a_key_made_for_one_new_project_assembles_and_searches_it_empty(
    live: Live, pid: str, other_pid: str
) -> None:
    """Seed 000's first call: the admin made a key for the project, nothing is stored yet.
    That project is the key's own, as an embedded base's is: an empty answer, not a 404.
    A key of several projects none of which has data says so truly when others have data."""
    _write(live, live.key(other_pid), other_pid)  # another project has data
    fresh = f"{pid}-first"
    c = live.client(live.key(fresh, role="write"))
    body = {"agent_role": "code_gen", "user_intent": "add_pagination", "project_id": fresh}
    r = c.post("/context/assemble", json=body)
    assert r.status_code == 200, r.text
    assert r.json()["documents"] == []
    r = c.post(f"/v1/projects/{fresh}/search", json={"query": "pagination"})
    assert r.status_code == 200 and r.json()["results"] == []
    both = live.client(live.key(f"{pid}-a", f"{pid}-b", role="read"))
    r = both.post(f"/v1/projects/{pid}-a/search", json={"query": "pagination"})
    assert r.status_code == 404
    message = r.json()["error"]["message"]
    assert "no project this key sees has data yet" in message and other_pid not in message
