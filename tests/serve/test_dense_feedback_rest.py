"""The dense feedback settings over REST: accepted as search options, bad values a 422
naming the field (never a 500)."""

from __future__ import annotations

from conftest import Live


def test_dense_feedback_options_are_checked_by_name(live: Live, pid: str) -> None:
    with live.client(live.key(pid, role="read")) as c:
        url = f"/v1/projects/{pid}/search"
        options = {"dense_feedback_weight": 0.5, "dense_feedback_seeds": 2, "dense_feedback_mix": 2}
        ok = c.post(url, json={"query": "cache", "preset": "hybrid_graph", "options": options})
        assert ok.status_code == 200, ok.text
        bad = (
            ("dense_feedback_weight", -1),
            ("dense_feedback_seeds", 0),
            ("dense_feedback_mix", 11),
        )
        for name, value in bad:
            r = c.post(url, json={"query": "cache", "options": {name: value}})
            assert r.status_code == 422, (name, r.text)
            assert r.json()["error"]["field"] == f"options.{name}"
