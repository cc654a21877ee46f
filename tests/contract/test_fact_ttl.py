"""A fact with a time to live (seed 003: "某个临时信息超过30分钟未更新" expires) on every backend:
current while written within its ttl, out of the assembled prompt and of the fact reads
once it went unwritten that long, kept in its history marked `expired`, and back with a
new write. An event's metadata `expires_at`, which no reader honours, is refused."""

from __future__ import annotations

import json
import time

import pytest

from ctxbase import ContextBase
from ctxbase.capture.events import build_event
from ctxbase.errors import ValidationError
from ctxbase.model import StateFact

HOUR = 3600.0


def _prompt(cm: object, sid: str) -> str:
    return json.dumps(cm.get_prompt_messages(sid), ensure_ascii=False)  # type: ignore[attr-defined]


def test_a_fact_not_updated_within_its_ttl_leaves_the_prompt(cb: ContextBase) -> None:
    cm = cb.context_manager()
    sid = cm.create_session("u_1")
    tid = cm.switch_task(sid, "客服应答")
    fact = cm.set_state(sid, "temp_code", "884213", ttl=1800)
    assert fact.ttl == 1800.0 and not fact.expired(time.time())
    cm.set_state(sid, "budget", "5万")  # no ttl: never expires
    cm.add_message(sid, "user", "验证码是多少？")
    assert "884213" in _prompt(cm, sid)
    assert cb.get_facts(scope_id=tid)["temp_code"].ttl == 1800.0  # the ttl round-trips

    # The same fact as last written an hour ago: past its 30 minutes.
    stale = fact.model_copy(update={"updated_at": time.time() - HOUR})
    cb.store.set_state(stale)
    prompt = _prompt(cm, sid)
    assert "884213" not in prompt and "budget: 5万" in prompt
    assert cm.get_state(sid, "temp_code") is None
    assert cm.get_state(sid, "budget") == "5万"
    assert set(cb.get_facts(scope_id=tid)) == {"budget"}
    ctx = cb.assemble_context(agent_role="executor", user_intent="验证码是多少？", session_id=sid)
    assert [d for d in cb.get_trace(ctx.context_id)["dropped"] if d["layer"] == "state"] == [
        {
            "id": f"state:task:{tid}:temp_code",
            "layer": "state",
            "reason": "expired",
            "detail": "not written within its ttl of 1800 s",
        }
    ]
    # kept in the store and in its history, the lapsed version marked
    assert [f.key for f in cb.store.get_state(cb.project, "task", tid)] == ["budget", "temp_code"]
    history = cm.state_history(sid, "temp_code")
    assert [(c.version, c.ttl, c.expired) for c in history] == [
        (1, 1800.0, False),
        (2, 1800.0, True),
    ]

    # A new set refreshes it; one without a ttl ends the expiry.
    cm.set_state(sid, "temp_code", "884213", ttl=1800)
    assert cm.get_state(sid, "temp_code") == "884213" and "884213" in _prompt(cm, sid)
    assert [c.expired for c in cm.state_history(sid, "temp_code")] == [False, True, False]
    cm.set_state(sid, "temp_code", "000111")
    assert cb.get_facts(scope_id=tid)["temp_code"].ttl is None


def test_each_version_keeps_its_ttl_and_a_rollback_restores_it(cb: ContextBase) -> None:
    written = cb.set_fact("code", "a", scope_id="s1", scope="session", ttl=60)
    cb.set_fact("code", "b", scope_id="s1", scope="session")
    history = cb.fact_history("code", scope_id="s1", scope="session")
    assert [(c.new_value, c.ttl, c.expired) for c in history] == [
        ("a", 60.0, False),
        ("b", None, False),
    ]
    back = cb.rollback_fact("code", written.version, scope_id="s1", scope="session")
    assert back is not None and back.value == "a" and back.ttl == 60.0
    # a value that lapsed before the next write is marked so, whatever came after
    cb.store.set_state(
        StateFact(
            project_id=cb.project,
            scope="session",
            scope_id="s1",
            key="otp",
            value="1",
            ttl=60,
            updated_at=time.time() - HOUR,
        )
    )
    cb.set_fact("otp", "2", scope_id="s1", scope="session", ttl=60)
    assert [c.expired for c in cb.fact_history("otp", scope_id="s1", scope="session")] == [
        True,
        False,
    ]


@pytest.mark.parametrize("ttl", [0, -5, float("nan"), float("inf"), True, "1800"])
def test_a_ttl_is_a_positive_finite_number_of_seconds(cb: ContextBase, ttl: object) -> None:
    with pytest.raises(ValidationError, match="ttl"):
        cb.set_fact("k", "v", scope_id="s1", scope="session", ttl=ttl)  # type: ignore[arg-type]
    assert cb.get_facts(scope_id="s1", scope="session") == {}


def test_an_event_expiry_in_metadata_is_refused_not_ignored(cb: ContextBase) -> None:
    cm = cb.context_manager()
    sid = cm.create_session("u_1")
    past = {"expires_at": time.time() - 1800}
    with pytest.raises(ValidationError, match=r"expires_at.*set_state"):
        cm.add_message(sid, "user", "临时验证码是 884213", metadata=past)
    with pytest.raises(ValidationError, match=r"metadata\.expires_at"):
        cb.capture("user_message", session_id=sid, text="884213", metadata=past)
    with pytest.raises(ValidationError, match=r"metadata\.expires_at"):
        cb.record("tool_result", session_id=sid, text="884213", metadata=past)
    event = build_event(project_id=cb.project, session_id=sid, type="user_message", text="x")
    hand_built = event.model_copy(update={"metadata": past})
    with pytest.raises(ValidationError, match=r"events\[0\].metadata.expires_at"):
        cb.record_events([hand_built])
    cb.flush()
    assert cb.store.list_events(cb.project, sid) == []  # nothing half-written
