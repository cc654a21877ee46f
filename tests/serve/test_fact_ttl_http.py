"""A fact's time to live through the remote SDK and REST, as embedded: `set_state(...,
ttl=)` and `set_fact(..., ttl=)` store it, the fact leaves the server-assembled prompt and
the fact reads once unwritten that long, its history says `expired`, a new set brings it
back; a bad ttl and an event's metadata `expires_at` are refused with the library's
error."""

from __future__ import annotations

import time

import pytest
from live_server import Live

import ctxbase
from ctxbase.errors import ValidationError

TTL = 1.5  # seconds: long enough for the first reads, short enough to wait out


def _text(messages: list[dict[str, str]]) -> str:
    return "\n".join(m["content"] for m in messages)


def test_a_fact_ttl_over_the_remote_manager(live: Live, pid: str) -> None:
    key = live.key(pid, role="write")
    with ctxbase.connect(live.url, api_key=key, project=pid) as client:
        cm = client.context_manager()
        sid = cm.create_session("u_1")
        tid = cm.switch_task(sid, "客服应答")
        cm.add_message(sid, "user", "验证码是多少？")
        cm.get_prompt_messages(sid)  # the first assembly's one-off costs before the clock runs
        written = cm.set_state(sid, "temp_code", "884213", ttl=TTL)
        assert written.ttl == TTL
        assert "884213" in _text(cm.get_prompt_messages(sid))
        assert client.get_facts(scope_id=tid)["temp_code"].ttl == TTL
        time.sleep(TTL + 0.2)
        assert "884213" not in _text(cm.get_prompt_messages(sid))
        assert cm.get_state(sid, "temp_code") is None
        assert "temp_code" not in client.get_facts(scope_id=tid)
        history = cm.state_history(sid, "temp_code")
        assert [(c.ttl, c.expired) for c in history] == [(TTL, True)]
        assert client.fact_history("temp_code", scope_id=tid)[-1].expired

        cm.set_state(sid, "temp_code", "884213", ttl=600)  # refreshed
        assert cm.get_state(sid, "temp_code") == "884213"
        assert "884213" in _text(cm.get_prompt_messages(sid))
        fact = client.set_fact("otp", "42", scope_id=sid, scope="session", ttl=600)
        assert fact.ttl == 600.0 and cm.get_state(sid, "otp") == "42"

        with pytest.raises(ValidationError, match="ttl"):
            cm.set_state(sid, "temp_code", "1", ttl=-1)
        with pytest.raises(ValidationError, match="ttl"):
            client.set_fact("otp", "1", scope_id=sid, scope="session", ttl=0)
        with pytest.raises(ValidationError, match="expires_at"):
            cm.add_message(sid, "user", "码是 1234", metadata={"expires_at": time.time()})
        assert cm.get_state(sid, "otp") == "42"


def test_rest_refuses_an_event_expiry_in_metadata(live: Live, pid: str) -> None:
    key = live.key(pid, role="write")
    with live.client(key) as http:
        base = f"/v1/projects/{pid}"
        body = {"type": "user_message", "session_id": "s1", "text": "码是 1234"}
        response = http.post(f"{base}/events", json={**body, "metadata": {"expires_at": 1}})
        assert response.status_code == 422, response.text
        assert "expires_at" in response.text and "ttl" in response.text
        stored = http.put(
            f"{base}/state",
            params={"key": "code", "scope_id": "s1", "scope": "session"},
            json={"value": "1234", "ttl": 1800},
        )
        assert stored.status_code == 200 and stored.json()["ttl"] == 1800.0
