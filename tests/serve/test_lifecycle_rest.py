"""Seed 003's lifecycle over REST and the SDK, on a real server on both backends: the same
rules as the library (409 for an illegal move or a write to the archive, 422 for an
unknown status), and the explicit moves as calls."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from live_server import Live, serve_on_param, start

import ctxbase
from ctxbase.errors import ConflictError, ValidationError
from ctxbase.model import TaskInfo


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Live]:
    yield from serve_on_param(request, tmp_path_factory, "lifecycle")


@pytest.fixture
def project() -> str:
    return f"life-{uuid.uuid4().hex[:10]}"


def _event(session: str) -> dict[str, str]:
    return {"type": "user_message", "session_id": session, "text": "back again"}


def test_rest_put_session_cannot_revive_an_archive(server: Live, project: str) -> None:
    c = server.client(server.key(project))
    base = f"/v1/projects/{project}"
    assert c.put(f"{base}/sessions/s1", json={"title": "day 1"}).json()["status"] == "active"
    task = c.post(f"{base}/sessions/s1/switch-task", json={"goal": "分页接口"}).json()
    assert task["status"] == "active"
    r = c.post(
        f"{base}/events", json={"type": "user_message", "session_id": "s1", "text": "缓存5分钟"}
    )
    assert r.status_code == 201
    archived = c.post(f"{base}/sessions/s1/archive", json={}).json()
    assert archived["status"] == "archived" and "缓存" in archived["metadata"]["archive_summary"]
    r = c.put(f"{base}/sessions/s1", json={"title": "again"})
    assert r.status_code == 409 and "archived" in r.json()["error"]["message"]
    now = c.get(f"{base}/sessions/s1").json()
    assert now["status"] == "archived" and now["title"] == "day 1"
    assert now["metadata"]["current_task_id"] == task["task_id"]
    assert now["metadata"]["archive_summary"] == archived["metadata"]["archive_summary"]
    r = c.post(f"{base}/sessions/s1/resume", json={})
    assert r.status_code == 409 and "archived -> active" in r.json()["error"]["message"]
    r = c.put(f"{base}/tasks/{task['task_id']}", json={"session_id": "s1", "status": "active"})
    assert r.status_code == 409


def test_rest_moves_need_no_body(server: Live, project: str) -> None:
    # Every field of a move (cause) and of the sweep (idle_timeout_s) is optional, so a
    # bare `curl -X POST .../suspend` is a move, not a 422 about a missing body.
    c = server.client(server.key(project))
    base = f"/v1/projects/{project}"
    r = c.post(f"{base}/events", json={"type": "user_message", "session_id": "s1", "text": "hi"})
    assert r.status_code == 201
    mid = r.json()["id"]
    r = c.post(f"{base}/sessions/s1/messages/{mid}/expire")
    assert r.status_code == 204, r.text
    for move, status in [("suspend", "suspended"), ("resume", "active"), ("expire", "expired")]:
        r = c.post(f"{base}/sessions/s1/{move}")
        assert r.status_code == 200, r.text
        assert r.json()["status"] == status
    # The sweep without a body falls back to the server's timeout (none here): the
    # error names that field, not a missing body.
    r = c.post(f"{base}/sessions/expire-idle")
    assert r.status_code == 422 and r.json()["error"]["field"] == "idle_timeout_s", r.text
    assert c.post(f"{base}/sessions/s1/archive").json()["status"] == "archived"
    r = c.post(f"{base}/sessions/s1/resume", json={"cause": "x", "bogus": 1})
    assert r.status_code == 422


def test_rest_tasks_refuse_unknown_statuses_and_illegal_moves(server: Live, project: str) -> None:
    c = server.client(server.key(project))
    base = f"/v1/projects/{project}"
    c.put(f"{base}/sessions/s1", json={})
    r = c.put(f"{base}/tasks/t1", json={"session_id": "s1", "status": "bogus_status"})
    assert r.status_code == 422 and r.json()["error"]["field"] == "status"
    assert c.get(f"{base}/tasks/t1").status_code == 404
    assert c.put(f"{base}/tasks/t1", json={"session_id": "s1"}).json()["status"] == "created"
    assert (
        c.put(f"{base}/tasks/t1", json={"session_id": "s1", "status": "active"}).status_code == 200
    )
    kept = c.put(f"{base}/tasks/t1", json={"session_id": "s1", "title": "renamed"}).json()
    assert (kept["status"], kept["title"]) == ("active", "renamed")
    r = c.put(f"{base}/tasks/t1", json={"session_id": "s1", "status": "created"})
    assert r.status_code == 409 and r.json()["error"]["code"] == "illegal_transition"


def test_lifecycle_calls_over_the_sdk(server: Live, project: str) -> None:
    with ctxbase.connect(server.url, api_key=server.key(project), project=project) as client:
        client.create_session("s1")
        plan = client.switch_task("s1", "写一个618活动方案")
        assert isinstance(plan, TaskInfo) and plan.status == "active"
        logs = client.switch_task("s1", "查看昨天的日志")
        assert client.get_task(plan.task_id).status == "suspended"
        assert client.get_session("s1").metadata["current_task_id"] == logs.task_id
        assert client.switch_task("s1", task_id=plan.task_id).task_id == plan.task_id
        said = client.record("user_message", session_id="s1", text="撤回这句", task_id=plan.task_id)
        client.expire_message("s1", said.id, cause="user retracted")
        ctx = client.assemble_context(agent_role="assistant", user_intent="继续", session_id="s1")
        assert said.id not in ctx.included_ids and "撤回这句" not in str(ctx.messages)
        with pytest.raises(ConflictError):
            client.expire_message("s1", said.id)  # already expired
        assert client.suspend_session("s1").status == "suspended"
        assert client.resume_session("s1").status == "active"
        assert client.archive_session("s1").status == "archived"
        with pytest.raises(ConflictError):
            client.resume_session("s1")
        with pytest.raises(ConflictError):
            client.create_session("s1", title="revive")
        with pytest.raises(ValidationError) as err:
            client.upsert_task(
                TaskInfo(project_id=project, task_id="t9", session_id="s2", status="bogus_status")
            )
        assert err.value.field == "status"
        client.create_session("idle")
        assert client.expire_idle_sessions(idle_timeout_s=1e-6) == ["idle"]
        assert client.get_session("idle").status == "expired"
        with pytest.raises(ConflictError):
            client.switch_task("idle", "too late")


def test_a_capture_reactivates_an_expired_session_over_rest_and_the_sdk(
    server: Live, project: str
) -> None:
    c = server.client(server.key(project))
    base = f"/v1/projects/{project}"
    said = {"role": "user", "content": "back again"}
    captures = {
        "one": lambda sid: c.post(f"{base}/events", json=_event(sid)),
        "queued": lambda sid: c.post(f"{base}/events/queue", json=_event(sid)),
        "batch": lambda sid: c.post(f"{base}/events/batch", json={"events": [_event(sid)]}),
        "messages": lambda sid: c.post(
            f"{base}/messages", json={"session_id": sid, "messages": [said]}
        ),
    }
    for sid in captures:
        assert c.put(f"{base}/sessions/{sid}", json={}).status_code == 200
    r = c.post(f"{base}/sessions/expire-idle", json={"idle_timeout_s": 1e-6})
    assert sorted(r.json()["expired"]) == sorted(captures)
    for sid, capture in captures.items():
        assert capture(sid).status_code in (200, 201, 202), sid
    assert c.post(f"{base}/flush").status_code == 204
    for sid in captures:
        got = c.get(f"{base}/sessions/{sid}").json()
        assert got["status"] == "active", sid
        entry = got["metadata"]["status_log"][-1]
        assert (entry["from"], entry["to"], entry["cause"]) == ("expired", "active", "capture")
    with ctxbase.connect(server.url, api_key=server.key(project), project=project) as client:
        client.create_session("sdk")
        client.expire_session("sdk")
        client.capture("user_message", session_id="sdk", text="back again")
        client.flush()
        assert client.get_session("sdk").status == "active"
        client.expire_session("sdk")
        client.record("user_message", session_id="sdk", text="and again")
        assert client.get_session("sdk").status == "active"


def test_server_setting_expires_idle_sessions(tmp_path: Path) -> None:
    bg = start(tmp_path, session_idle_timeout_s=0.001)  # every read comes later than that
    try:
        live = Live(bg.url, bg.settings.db, bg)
        c = live.client(live.key("p1"))
        assert c.put("/v1/projects/p1/sessions/s1", json={}).json()["status"] == "active"
        got = c.get("/v1/projects/p1/sessions/s1").json()
        assert got["status"] == "expired"
        assert got["metadata"]["status_log"][-1]["cause"].startswith("idle for")
        # expired is not closed: resume (or a capture) re-activates it
        r = c.post("/v1/projects/p1/sessions/s1/resume", json={})
        assert r.status_code == 200 and r.json()["status"] == "active"
    finally:
        bg.stop()
