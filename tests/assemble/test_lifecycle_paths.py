"""Every path that writes sessions and tasks obeys the lifecycle (seed 003), on both
backends: no revival of an archived session, no unknown status, no illegal move, and
sessions expire after the configured idle time."""

from __future__ import annotations

import time

import pytest

from ctxbase import ContextBase
from ctxbase.assemble.facts import RuleFactExtractor
from ctxbase.assemble.lifecycle import IllegalTransition, Status
from ctxbase.assemble.manager import ContextManager
from ctxbase.errors import ConflictError, ValidationError
from ctxbase.model import TaskInfo


def _archived(cb: ContextBase) -> tuple[ContextManager, str, str]:
    cm = ContextManager(cb, extractor=RuleFactExtractor())
    sid = cm.create_session("alice", title="活动")
    task = cm.switch_task(sid, "写一个618活动方案")
    cm.add_message(sid, "user", "把预算控制在5万以内")
    cm.archive_session(sid)
    return cm, sid, task


def test_create_session_never_revives_an_archived_session(cb: ContextBase) -> None:
    _, sid, task = _archived(cb)
    before = cb.get_session(sid)
    with pytest.raises(ConflictError, match="archived"):
        cb.create_session(sid, title="again", metadata={"x": 1})
    after = cb.get_session(sid)
    assert after.status == Status.ARCHIVED
    assert after.metadata == before.metadata  # log, task and summary all kept
    assert after.metadata["current_task_id"] == task
    assert "预算" in after.metadata["archive_summary"]
    assert [e["to"] for e in after.metadata["status_log"]][-1] == "archived"
    with pytest.raises(ConflictError):
        cb.upsert_task(TaskInfo(project_id=cb.project, task_id=task, session_id=sid, title="x"))
    assert cb.store.get_task(cb.project, task).status == Status.ARCHIVED  # type: ignore[union-attr]


def test_updating_a_live_session_keeps_its_lifecycle_metadata(cb: ContextBase) -> None:
    cm = ContextManager(cb, extractor=RuleFactExtractor())
    sid = cm.create_session("alice")
    task = cm.switch_task(sid, "查看日志")
    cm.suspend_session(sid)
    info = cb.create_session(sid, title="renamed", metadata={"channel": "web"})
    assert (info.status, info.title) == ("suspended", "renamed")
    assert info.metadata["channel"] == "web" and info.metadata["current_task_id"] == task
    assert [e["to"] for e in info.metadata["status_log"]] == [
        "created",
        "active",
        "suspended",
    ]
    assert cm.current_task(sid) is not None
    with pytest.raises(ValidationError) as err:
        cb.create_session(sid, metadata={"status_log": []})
    assert err.value.field == "metadata.status_log"


def test_upsert_task_checks_the_status(cb: ContextBase) -> None:
    cb.create_session("s1")
    with pytest.raises(ValidationError) as err:
        cb.upsert_task(
            TaskInfo(project_id=cb.project, task_id="t1", session_id="s1", status="bogus_status")
        )
    assert err.value.field == "status"
    assert cb.store.get_task(cb.project, "t1") is None
    t = cb.upsert_task(TaskInfo(project_id=cb.project, task_id="t1", session_id="s1"))
    assert t.status == "created"
    t = cb.upsert_task(
        TaskInfo(project_id=cb.project, task_id="t1", session_id="s1", status="active")
    )
    # a later update without a status keeps the task's own, and its log
    t = cb.upsert_task(TaskInfo(project_id=cb.project, task_id="t1", session_id="s1", title="y"))
    assert (t.status, t.title) == ("active", "y")
    assert [(e["from"], e["to"]) for e in t.metadata["status_log"]] == [
        ("", "created"),
        ("created", "active"),
    ]
    archived = TaskInfo(project_id=cb.project, task_id="t1", session_id="s1", status="archived")
    cb.upsert_task(archived)
    with pytest.raises(IllegalTransition, match="archived -> active"):
        cb.upsert_task(
            TaskInfo(project_id=cb.project, task_id="t1", session_id="s1", status="active")
        )


def test_sessions_expire_after_the_idle_timeout(cb: ContextBase) -> None:
    clock = [time.time()]
    cm = ContextManager(
        cb, extractor=RuleFactExtractor(), idle_timeout_s=1800, clock=lambda: clock[0]
    )
    sid = cm.create_session("alice")
    cm.add_message(sid, "user", "我们聊聊活动方案")
    clock[0] += 1700
    assert cm.session_status(sid) == Status.ACTIVE
    cm.add_message(sid, "user", "预算5万")  # activity: the idle time starts again
    clock[0] += 1700
    assert cm.session_status(sid) == Status.ACTIVE
    clock[0] += 200
    assert cm.session_status(sid) == Status.EXPIRED
    log = cm.session(sid).metadata["status_log"]
    assert log[-1]["from"] == "active" and log[-1]["cause"].startswith("idle for")
    with pytest.raises(ConflictError, match="re-activates"):
        cm.set_state(sid, "budget", "6万")  # an expired session takes no state writes
    cm.add_message(sid, "user", "还在吗")  # the user came back: the session is active again
    assert cm.session_status(sid) == Status.ACTIVE
    log = cm.session(sid).metadata["status_log"]
    assert (log[-1]["from"], log[-1]["to"], log[-1]["cause"]) == ("expired", "active", "capture")
    clock[0] += 3600
    assert cm.session_status(sid) == Status.EXPIRED
    cm.archive_session(sid)
    assert cm.session_status(sid) == Status.ARCHIVED


def test_idle_sweep_and_lazy_expiry_on_the_base(cb: ContextBase) -> None:
    cb.create_session("old")
    cb.create_session("fresh")
    now = time.time()
    cb.record("user_message", session_id="fresh", text="hi", ts=now + 3000)
    with pytest.raises(ValidationError) as err:
        cb.expire_idle_sessions()
    assert err.value.field == "idle_timeout_s"
    assert cb.expire_idle_sessions(idle_timeout_s=600, now=now + 3600) == ["old"]
    assert cb.expire_idle_sessions(idle_timeout_s=600, now=now + 3600) == []
    assert cb.get_session("old").status == Status.EXPIRED
    assert cb.get_session("fresh").status == Status.ACTIVE
    cb.session_idle_timeout_s = 1e-9  # configured on the base: reads expire lazily
    assert cb.get_session("fresh").status == Status.ACTIVE  # its last event is in the future
    cb.create_session("brief")
    assert {s.session_id: s.status for s in cb.list_sessions()}["brief"] == Status.EXPIRED


def test_an_expired_session_refuses_other_writes_but_resumes(cb: ContextBase) -> None:
    cb.create_session("s")
    cb.expire_session("s")
    with pytest.raises(ConflictError, match="re-activates"):
        cb.create_session("s", title="renamed")
    with pytest.raises(ConflictError):
        cb.switch_task("s", "new goal")
    assert cb.resume_session("s").status == Status.ACTIVE
    assert cb.create_session("s", title="renamed").title == "renamed"
