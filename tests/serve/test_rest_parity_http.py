"""REST answers that match the library's: refusals naming the rule, 404 for what is not
there, 422 for a bad parameter, and the same search explanation as the embedded base."""

from __future__ import annotations

from conftest import Live


def test_a_chinese_session_id_is_422_naming_the_ascii_rule(live: Live, pid: str) -> None:
    c = live.client(live.key(pid, role="write"))
    r = c.post(
        f"/v1/projects/{pid}/events",
        json={"type": "user_message", "session_id": "第一天", "text": "hi"},
    )
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert err["field"] == "session_id"
    assert "ASCII" in err["message"] and "第一天" in err["message"]
