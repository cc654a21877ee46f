"""Seed 003's ContextManager on a real server: `client.context_manager()` has the embedded
manager's calls and signatures, and a message sent through it has its facts extracted into
the state layer on the server, as embedded."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import pytest
from live_server import Live

import ctxbase
from ctxbase.assemble.lifecycle import Status
from ctxbase.assemble.manager import ContextManager
from ctxbase.errors import ConflictError, NotFoundError, ValidationError
from ctxbase.serve.sdk_manager import AsyncRemoteContextManager, RemoteContextManager

# Embedded only: the in-process assembler.
EMBEDDED_ONLY = {"assembler"}


def _methods(cls: type) -> dict[str, Any]:
    return {
        n: getattr(cls, n)
        for n in dir(cls)
        if not n.startswith("_") and callable(getattr(cls, n, None))
    }


def test_the_remote_manager_has_the_embedded_calls_and_signatures() -> None:
    local, remote = _methods(ContextManager), _methods(RemoteContextManager)
    assert set(local) - set(remote) == EMBEDDED_ONLY - {"assembler"}  # a property, not callable
    assert set(remote) <= set(local)
    assert set(_methods(AsyncRemoteContextManager)) == set(remote)
    for name, fn in remote.items():
        lp = dict(inspect.signature(local[name]).parameters)
        rp = dict(inspect.signature(fn).parameters)
        assert [(p.name, p.kind, p.default) for p in lp.values()] == [
            (p.name, p.kind, p.default) for p in rp.values()
        ], name


def _text(messages: list[dict[str, str]]) -> str:
    return "\n".join(m["content"] for m in messages)


def test_seed_003_runs_remotely_with_facts_extracted(live: Live, pid: str) -> None:
    key = live.key(pid, role="write")
    with ctxbase.connect(live.url, api_key=key, project=pid) as client:
        cm = client.context_manager()
        sid = cm.create_session("u_42")
        assert isinstance(sid, str) and cm.session(sid).metadata["user_id"] == "u_42"
        tid = cm.switch_task(sid, "写活动方案")
        assert client.get_session(sid).metadata["current_task_id"] == tid
        cm.add_message(sid, "user", "把预算控制在5万以内")
        cm.add_message(sid, "assistant", "好的，预算控制在5万以内。")
        cm.add_message(sid, "user", "截止时间是月底")
        # extracted on the server, into the task's state
        assert cm.get_state(sid, "budget") == {"op": "<=", "amount": 50000, "currency": "CNY"}
        deadline = cm.get_state(sid, "deadline")
        assert deadline is not None
        later = cm.add_message(sid, "user", "截止时间改成下周五")
        assert cm.get_state(sid, "deadline") != deadline
        cm.expire_message(sid, later)  # retracted: the fact goes back
        assert cm.get_state(sid, "deadline") == deadline
        assert "retracted" in (cm.state_history(sid, "deadline")[-1].cause or "")
        assert client.get_facts(scope_id=tid)["budget"].value["amount"] == 50000

        cm.set_state(sid, "color", "蓝色", scope="session")
        assert cm.get_state(sid, "color") == "蓝色"
        first = cm.state_history(sid, "budget")[0].version
        assert cm.rollback_state(sid, "budget", first) is not None

        tool = cm.add_message(sid, "tool", "SQL result: 1532 rows", per_turn=True)
        prompt = cm.get_prompt_messages(sid, max_tokens=3000)
        assert "1532 rows" in _text(prompt)
        assert "budget <= 50000 CNY" in _text(prompt)
        cm.add_message(sid, "assistant", "共 1532 行。")
        cm.add_message(sid, "user", "那时间呢")
        assert client.get_event(tool).marks == ["expired"]
        prompt = cm.get_prompt_messages(sid)
        assert "1532 rows" not in _text(prompt) and prompt[-1] == {
            "role": "user",
            "content": "那时间呢",
        }
        cm.add_message(sid, "assistant", "月底。")
        # answered: time order, the prompt ends with the answer
        assert [m["content"] for m in cm.get_prompt_messages(sid)[-2:]] == ["那时间呢", "月底。"]

        cm.suspend_session(sid)
        assert cm.session_status(sid) == Status.SUSPENDED
        cm.resume_session(sid)
        summary = cm.archive_session(sid)
        assert "把预算控制在5万以内" in summary
        with pytest.raises(ConflictError):
            cm.add_message(sid, "user", "还在吗")


def test_a_retried_message_is_stored_and_extracted_once(live: Live, pid: str) -> None:
    key = live.key(pid, role="write")
    with ctxbase.connect(live.url, api_key=key, project=pid) as client:
        cm = client.context_manager()
        sid = cm.create_session("u", session_id="s1")
        first = cm.add_message(sid, "user", "预算5万", idempotency_key="k1")
        again = cm.add_message(sid, "user", "预算5万", idempotency_key="k1")
        assert first == again
        assert [e.id for e in client.last_events(sid)] == [first]
        assert len(cm.state_history(sid, "budget")) == 1


def test_current_task_task_status_and_message_status(live: Live, pid: str) -> None:
    """The manager's own reads and moves answer remotely as embedded."""
    with ctxbase.connect(live.url, api_key=live.key(pid, role="write"), project=pid) as client:
        cm = client.context_manager()
        sid = cm.create_session("u")
        assert cm.current_task(sid) is None  # no switch_task yet
        tid = cm.switch_task(sid, "写活动方案")
        current = cm.current_task(sid)
        assert current is not None and (current.task_id, current.status) == (tid, "active")
        said = cm.add_message(sid, "user", "预算5万")
        assert cm.message_status(sid, said) == Status.ACTIVE
        other = cm.create_session("u")
        for session, message in ((sid, "ev_nope"), (other, said)):  # a typo, another session's
            with pytest.raises(NotFoundError) as missing:
                cm.message_status(session, message)
            assert missing.value.item_id == message
        cm.expire_message(sid, said)
        assert cm.message_status(sid, said) == Status.EXPIRED
        assert cm.set_task_status(tid, "suspended", cause="on hold") is None
        moved = cm.task(tid)
        assert moved.status == "suspended"
        assert moved.metadata["status_log"][-1]["cause"] == "on hold"
        with pytest.raises(ConflictError):  # the same status again: not a move
            cm.set_task_status(tid, Status.SUSPENDED)
        with pytest.raises(ValidationError) as err:
            cm.set_task_status(tid, "paused")
        assert err.value.field == "status"
        with pytest.raises(NotFoundError):
            cm.current_task("no_such_session")
        with pytest.raises(NotFoundError):
            cm.set_task_status("t_nosuch", "expired")
    with live.client(live.key(pid, role="write")) as http:  # the routes checked on their own
        base = f"/v1/projects/{pid}/manager"
        moved = http.post(f"{base}/task-status", json={"task_id": tid, "status": "active"})
        assert moved.status_code == 200 and moved.json()["status"] == "active", moved.text
        again = http.post(f"{base}/task-status", json={"task_id": tid, "status": "active"})
        assert again.status_code == 409
        unknown = http.post(f"{base}/task-status", json={"task_id": tid, "status": "paused"})
        assert unknown.status_code == 422 and "valid: " in unknown.text
        got = http.get(f"{base}/current-task", params={"session_id": sid}).json()
        assert got["task"]["task_id"] == tid
        status = http.get(f"{base}/message-status", params={"session_id": sid, "message_id": said})
        assert status.json() == {"status": "expired"}
    with live.client(live.key(pid, role="read")) as http:  # a reader moves nothing
        refused = http.post(f"{base}/task-status", json={"task_id": tid, "status": "expired"})
        assert refused.status_code == 403


def test_options_the_server_keeps_are_named(live: Live, pid: str) -> None:
    with ctxbase.connect(live.url, api_key=live.key(pid), project=pid) as client:
        with pytest.raises(ValidationError) as err:
            client.context_manager(llm=None)
        assert err.value.field == "llm"
        quiet = client.context_manager(extract_facts=False)
        sid = quiet.create_session("u")
        quiet.add_message(sid, "user", "把预算控制在5万以内")
        assert quiet.get_state(sid, "budget") is None


def test_the_async_manager(live: Live, pid: str) -> None:
    async def run() -> Any:
        async with ctxbase.connect_async(live.url, api_key=live.key(pid), project=pid) as client:
            cm = client.context_manager()
            sid = await cm.create_session("u")
            said = await cm.add_message(sid, "user", "把预算控制在5万以内")
            budget, prompt = await cm.get_state(sid, "budget"), await cm.get_prompt_messages(sid)
            tid = await cm.switch_task(sid, "写方案")
            await cm.set_task_status(tid, "suspended")
            moves = await cm.current_task(sid), await cm.message_status(sid, said)
            return budget, prompt, *moves

    budget, prompt, current, status = asyncio.run(run())
    assert budget["amount"] == 50000 and prompt[-1]["content"] == "把预算控制在5万以内"
    assert current is not None and current.status == "suspended" and status == Status.ACTIVE


def test_rest_messages_route_extracts_facts(live: Live, pid: str) -> None:
    with live.client(live.key(pid)) as http:
        base = f"/v1/projects/{pid}/manager"
        sid = http.post(f"{base}/sessions", json={"user_id": "u"}).json()["session_id"]
        sent = http.post(
            f"{base}/messages",
            json={"session_id": sid, "role": "user", "content": "把预算控制在5万以内"},
        )
        assert sent.status_code == 200, sent.text
        got = http.get(f"{base}/state", params={"session_id": sid, "key": "budget"})
        assert got.json()["value"]["amount"] == 50000
        robot = {"session_id": sid, "role": "robot", "content": "x"}
        bad = http.post(f"{base}/messages", json=robot)
        assert bad.status_code == 422 and "role" in bad.text
        missing = http.post(f"{base}/prompt", json={"session_id": "nope"})
        assert missing.status_code == 404


def test_hiding_or_rating_wrong_a_message_withdraws_its_fact(live: Live, pid: str) -> None:
    key = live.key(pid, role="write")
    with ctxbase.connect(live.url, api_key=key, project=pid) as client:
        cm = client.context_manager()
        sid = cm.create_session("u_7")
        said = cm.add_message(sid, "user", "预算控制在7万以内")
        assert cm.get_state(sid, "budget")["amount"] == 70000
        client.soft_delete([said])
        assert cm.get_state(sid, "budget") is None
        assert "70000" not in _text(cm.get_prompt_messages(sid, user_input="那时间呢"))
        client.restore([said])
        assert cm.get_state(sid, "budget")["amount"] == 70000
        client.feedback(said, "wrong", note="预算其实是9万")
        assert cm.get_state(sid, "budget") is None
        client.feedback(said, "neutral")
        assert cm.get_state(sid, "budget")["amount"] == 70000
