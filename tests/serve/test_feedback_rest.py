"""The feedback settings over REST: accepted as search options, bad values a 422 naming the
field (never a 500)."""

from __future__ import annotations

from conftest import Live


def test_feedback_options_are_checked_by_name(live: Live, pid: str) -> None:
    with live.client(live.key(pid, role="read")) as c:
        url = f"/v1/projects/{pid}/search"
        options = {"feedback_weight": 1.0, "feedback_seeds": 3, "feedback_terms": 4}
        ok = c.post(url, json={"query": "cache", "preset": "hybrid_graph", "options": options})
        assert ok.status_code == 200, ok.text
        for name, value in (("feedback_weight", -1), ("feedback_seeds", 1), ("feedback_terms", 0)):
            r = c.post(url, json={"query": "cache", "options": {name: value}})
            assert r.status_code == 422, (name, r.text)
            assert r.json()["error"]["field"] == f"options.{name}"
