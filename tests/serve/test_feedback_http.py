"""Feedback on memories over HTTP on both backends: POST /feedback and GET
/feedback/{node_id}, the remote SDK answering as the embedded API (the confidence a search
then shows included), 404 for an unknown node or context, 422 for a bad label, and a
feedback whose body names no `by` is the API key's."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from live_server import Live, embedded_and_remote, serve_on_param

import ctxbase
from ctxbase.errors import ValidationError


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Live]:
    yield from serve_on_param(request, tmp_path_factory, "feedback")


def _scenario(api: Any) -> dict[str, Any]:
    texts = ["the orders cache ttl is 60 seconds", "orders cache ttl was raised to 300 seconds"]
    ids = [api.record("assistant_message", session_id="s1", text=t).id for t in texts]
    query = "orders cache ttl seconds"
    before = api.search(query, preset="keyword")
    top = before.results[0].item.owner_id
    with pytest.raises(ValidationError) as no_label:  # a confidence alone is no feedback
        api.feedback(top, confidence=0.7)
    given = api.feedback(top, "disliked", note="outdated", by="user:li")
    after = api.search(query, preset="keyword")
    rated = {c.item.owner_id: (c.confidence, c.confidence_source) for c in after.results}
    api.feedback(top, "wrong")
    hidden = [c.item.owner_id for c in api.search(query, preset="keyword").results]
    api.feedback(top, "neutral")
    current = api.get_feedback(top)
    history = api.feedback_history(top)
    return {
        "given": (given.node_id == top, given.label, given.confidence, given.note, given.by),
        "rated": [rated[i] for i in ids if i == top],
        "unrated": [rated[i] for i in ids if i != top],
        "hidden": top not in hidden and len(hidden) == 1,
        "current": (current.label, current.confidence, current.version),
        "history": [(h.label, h.confidence) for h in history],
        "none": api.get_feedback(ids[1] if top == ids[0] else ids[0]),
        "no_label": str(no_label.value).split(" (")[0],
    }


def test_the_remote_sdk_answers_as_the_embedded_api(
    server: Live, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    local, remote = embedded_and_remote(server, tmp_path, request, _scenario)
    assert remote == local
    assert local == {
        "given": (True, "disliked", 0.25, "outdated", "user:li"),
        "rated": [(0.25, "feedback:disliked")],
        "unrated": [(None, None)],
        "hidden": True,
        "current": ("neutral", 0.5, 3),
        "history": [("disliked", 0.25), ("wrong", 0.0), ("neutral", 0.5)],
        "none": None,
        "no_label": "label: is missing",
    }


def test_rest_feedback_errors_and_default_author(server: Live, pid: str) -> None:
    base = f"/v1/projects/{pid}"
    key = server.key(pid, role="write")
    key_id = key.split("_")[1]
    with server.client(key) as c:
        made = c.post(
            f"{base}/events", json={"type": "user_message", "session_id": "s", "text": "hi"}
        )
        assert made.status_code == 201, made.text
        ev = made.json()["id"]
        ok = c.post(f"{base}/feedback", json={"node_id": ev, "label": "liked"})
        assert ok.status_code == 200, ok.text
        assert (ok.json()["confidence"], ok.json()["by"]) == (0.75, f"key:{key_id}")
        bad = c.post(f"{base}/feedback", json={"node_id": ev, "label": "great"})
        assert bad.status_code == 422
        out_of_range = c.post(
            f"{base}/feedback", json={"node_id": ev, "label": "wrong", "confidence": 2}
        )
        assert out_of_range.status_code == 422
        missing = c.post(f"{base}/feedback", json={"node_id": "ev_nosuch", "label": "wrong"})
        assert missing.status_code == 404
        no_ctx = c.post(
            f"{base}/feedback", json={"node_id": ev, "label": "wrong", "context_id": "ctx_x"}
        )
        assert no_ctx.status_code == 404
        shown = c.get(f"{base}/feedback/{ev}")
        assert shown.status_code == 200
        assert shown.json()["current"]["label"] == "liked"
        assert [h["label"] for h in shown.json()["history"]] == ["liked"]
        assert c.get(f"{base}/feedback/ev_nosuch").status_code == 404
    with server.client(server.key(pid, role="read")) as c:
        denied = c.post(f"{base}/feedback", json={"node_id": ev, "label": "wrong"})
        assert denied.status_code == 403


def test_the_async_client_gives_feedback(server: Live, pid: str) -> None:
    async def run() -> tuple[str, float]:
        key = server.key(pid, role="write")
        async with ctxbase.connect_async(server.url, api_key=key, project=pid) as ac:
            ev = await ac.record("user_message", session_id="s", text="x")
            await ac.feedback(ev.id, "disliked")
            got = await ac.get_feedback(ev.id)
            assert got is not None
            return got.label, got.confidence

    assert asyncio.run(run()) == ("disliked", 0.25)
