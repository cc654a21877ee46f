"""A per-turn tool result expires when the next user message is stored, whichever call
stores it: the manager, `record`, `capture` (queued) or `record_events`. Expired, it is
marked, left out of searches and out of other sessions' assemblies."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import ctxbase
from ctxbase import ContextBase
from ctxbase.assemble.lifecycle import Status
from ctxbase.assemble.manager import ContextManager
from ctxbase.assemble.per_turn import PER_TURN_CAUSE
from ctxbase.assemble.state import MESSAGE_SCOPE
from ctxbase.capture.events import build_event

WEATHER = "上海：小雨，18度，建议带伞"


@pytest.fixture
def cb(tmp_path: Path) -> Iterator[ContextBase]:
    base = ctxbase.open(str(tmp_path / "x.db"), project="p", embedder="hash")
    yield base
    base.close()


def _by_record(cb: ContextBase, sid: str) -> str:
    cb.record("user_message", session_id=sid, text="查一下上海天气")
    tool = cb.record("tool_result", session_id=sid, text=WEATHER, metadata={"per_turn": True})
    cb.record("assistant_message", session_id=sid, text="好的")
    cb.record("user_message", session_id=sid, text="帮我写个活动方案")
    return tool.id


def _by_capture(cb: ContextBase, sid: str) -> str:
    cb.capture("user_message", session_id=sid, text="查一下上海天气")
    tool = cb.capture("tool_result", session_id=sid, text=WEATHER, metadata={"per_turn": True})
    cb.capture("assistant_message", session_id=sid, text="好的")
    cb.capture("user_message", session_id=sid, text="帮我写个活动方案")
    cb.flush()
    return tool


def _by_record_events(cb: ContextBase, sid: str) -> str:
    # one batch: the result and the next turn's user message stored together
    fields: list[dict[str, object]] = [
        {"type": "user_message", "text": "查一下上海天气"},
        {"type": "tool_result", "text": WEATHER, "metadata": {"per_turn": True}},
        {"type": "user_message", "text": "帮我写个活动方案"},
    ]
    stored = cb.record_events(
        [build_event(project_id="p", session_id=sid, **f) for f in fields]  # type: ignore[arg-type]
    )
    return stored[1].id


def _by_manager(cb: ContextBase, sid: str) -> str:
    cm = ContextManager(cb)
    cm.create_session(session_id=sid)
    cm.add_message(sid, "user", "查一下上海天气")
    tool = cm.add_message(sid, "tool", WEATHER, per_turn=True)
    cm.add_message(sid, "assistant", "好的")
    cm.add_message(sid, "user", "帮我写个活动方案")
    return tool


@pytest.mark.parametrize(
    "write", [_by_record, _by_capture, _by_record_events, _by_manager], ids=lambda f: f.__name__
)
def test_every_path_expires_a_per_turn_result_at_the_next_turn(
    cb: ContextBase, write: Callable[[ContextBase, str], str]
) -> None:
    tool = write(cb, "s1")
    cb.wait_for_embeddings()
    assert cb.get_event(tool).marks == ["expired"]
    assert ContextManager(cb).message_status("s1", tool) == Status.EXPIRED
    history = cb.store.state_history("p", MESSAGE_SCOPE, "s1", tool)
    assert history[-1].cause == PER_TURN_CAUSE
    response = cb.search("上海 小雨 带伞")
    assert tool not in [h.item.owner_id for h in response.results]
    assert tool in [c.item.owner_id for c in response.considered if c.dropped]
    ctx = cb.assemble_context(
        session_id="other", agent_role="assistant", user_intent="上海天气怎么样，要带伞吗"
    )
    assert "建议带伞" not in "\n".join(m["content"] for m in ctx.messages)


def test_a_result_of_the_current_turn_stays(cb: ContextBase) -> None:
    cb.record("user_message", session_id="s1", text="查一下上海天气")
    tool = cb.record("tool_result", session_id="s1", text=WEATHER, metadata={"per_turn": True})
    cb.record("assistant_message", session_id="s1", text="上海小雨，记得带伞")
    assert cb.get_event(tool.id).marks == []
    ctx = cb.assemble_context(session_id="s1", agent_role="assistant", user_intent="要带伞吗")
    assert WEATHER in "\n".join(m["content"] for m in ctx.messages)
    # a result without per_turn outlives the turn
    kept = cb.record("tool_result", session_id="s1", text="订单 1532 条")
    cb.record("user_message", session_id="s1", text="下一个问题")
    assert cb.get_event(tool.id).marks == ["expired"] and cb.get_event(kept.id).marks == []
