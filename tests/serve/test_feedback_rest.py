"""The feedback settings (keyword and dense) over REST: accepted as search options, bad
values a 422 naming the field (never a 500)."""

from __future__ import annotations

import pytest
from live_server import Live

GOOD = {
    "keyword": {"feedback_weight": 1.0, "feedback_seeds": 3, "feedback_terms": 4},
    "dense": {"dense_feedback_weight": 0.5, "dense_feedback_seeds": 2, "dense_feedback_mix": 2},
}
BAD = {
    "keyword": (("feedback_weight", -1), ("feedback_seeds", 1), ("feedback_terms", 0)),
    "dense": (
        ("dense_feedback_weight", -1),
        ("dense_feedback_seeds", 0),
        ("dense_feedback_mix", 11),
    ),
}


@pytest.mark.parametrize("kind", sorted(GOOD))
def test_feedback_options_are_checked_by_name(live: Live, pid: str, kind: str) -> None:
    event = {"type": "user_message", "session_id": "s", "text": "cache orders"}
    assert live.client(live.key(pid)).post(f"/v1/projects/{pid}/events", json=event).is_success
    with live.client(live.key(pid, role="read")) as c:
        url = f"/v1/projects/{pid}/search"
        body = {"query": "cache", "preset": "hybrid_graph", "options": GOOD[kind]}
        ok = c.post(url, json=body)
        assert ok.status_code == 200, ok.text
        for name, value in BAD[kind]:
            r = c.post(url, json={"query": "cache", "options": {name: value}})
            assert r.status_code == 422, (name, r.text)
            assert r.json()["error"]["field"] == f"options.{name}"
