"""REST answers that match the library's: refusals naming the rule, 404 for what is not
there, 422 for a bad parameter, and the same search explanation as the embedded base."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from live_server import Live

import ctxbase
from ctxbase import NotFoundError, ValidationError
from ctxbase.model import Event


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


def test_implausible_times_are_422_and_no_session_takes_them(live: Live, pid: str) -> None:
    c = live.client(live.key(pid, role="write"))
    base = f"/v1/projects/{pid}"
    msg = {"type": "user_message", "session_id": "s", "text": "hi"}
    millis = time.time() * 1000
    cases: list[tuple[str, dict[str, Any], str, str]] = [
        ("/events", {**msg, "ts": 1e300}, "ts", "from 1970-01-01 to 2200-01-01"),
        ("/events", {**msg, "ts": -1e300}, "ts", "from 1970-01-01 to 2200-01-01"),
        ("/events", {**msg, "ts": millis}, "ts", "looks like milliseconds"),
        ("/events/queue", {**msg, "timestamp": millis}, "timestamp", "milliseconds"),
        ("/events/batch", {"events": [msg, {**msg, "ts": 1e300}]}, "events[1].ts", "2200"),
    ]
    for path, body, field, words in cases:
        r = c.post(base + path, json=body)
        assert r.status_code == 422, (body, r.text)
        err = r.json()["error"]
        assert err["field"] == field and words in err["message"], r.text
    assert c.get(f"{base}/sessions").json() == []
    # the SDK refuses it before sending, with the same words
    with ctxbase.connect(live.url, api_key=live.key(pid), project=pid) as sdk:
        with pytest.raises(ValidationError) as refused:
            sdk.capture("user_message", session_id="s", text="hi", ts=millis)
        assert refused.value.field == "ts" and "milliseconds" in refused.value.message
        hand_built = Event(project_id=pid, session_id="s", type="user_message", text="x", ts=-5)
        with pytest.raises(ValidationError) as refused:
            sdk.record_events([hand_built])
        assert refused.value.field == "events[0].ts"
        assert sdk.record("user_message", session_id="s", text="ok").seq == 1


def test_search_lists_what_it_considered_as_the_library_does(
    live: Live, pid: str, tmp_path: Path
) -> None:
    def scenario(api: Any) -> list[tuple[str | None, str | None, str | None]]:
        wrong = api.record(
            "assistant_message", session_id="s", text="billing uses MongoDB for orders"
        )
        api.record("assistant_message", session_id="s", text="billing uses PostgreSQL 18")
        api.feedback(wrong.id, "wrong", note="we use PostgreSQL")
        res = api.search("which database for billing", preset="keyword", top_k=5)
        assert [c.item.text for c in res.results] == ["billing uses PostgreSQL 18"]
        return sorted((c.item.text, c.dropped, c.confidence_source) for c in res.considered)

    embedded = ctxbase.open(str(tmp_path / "e.db"), project="p", embedder=None)
    try:
        local = scenario(embedded)
    finally:
        embedded.close()
    with ctxbase.connect(live.url, api_key=live.key(pid), project=pid) as sdk:
        remote = scenario(sdk)
    assert local == remote
    assert ("billing uses MongoDB for orders", local[0][1], "feedback:wrong") in local
    assert "min_confidence" in str(local[0][1])
    # over REST it is asked for: it is several times the results' size
    c = live.client(live.key(pid))
    body = {"query": "billing", "preset": "keyword"}
    assert c.post(f"/v1/projects/{pid}/search", json=body).json()["considered"] == []
    asked = c.post(f"/v1/projects/{pid}/search", json={**body, "include_considered": True})
    considered = asked.json()["considered"]
    assert {h["confidence_source"] for h in considered} == {None, "feedback:wrong"}


def test_misplaced_filters_and_objects_say_what_to_send(live: Live, pid: str) -> None:
    c = live.client(live.key(pid))
    r = c.post(f"/v1/projects/{pid}/search", json={"query": "x", "session_id": "s1"})
    assert r.status_code == 422
    assert r.json()["error"]["field"] == "session_id"
    assert "send it as filters.session_ids" in r.json()["error"]["message"]
    with ctxbase.connect(live.url, api_key=live.key(pid), project=pid) as sdk:
        event = sdk.record("user_message", session_id="s1", text="we use MongoDB")
        # the SDK takes session_id= as a shorthand for the filter, as the library does;
        # the same filter given both ways with other values is refused
        hits = sdk.search("MongoDB", session_id="s1").results
        assert [h.item.owner_id for h in hits] == [event.id]
        with pytest.raises(ValidationError) as err:
            sdk.search("hello", session_id="s1", filters={"session_ids": ["s2"]})
        assert err.value.field == "session_id"
        assert "disagree" in err.value.message
        with pytest.raises(ValidationError) as err:
            sdk.feedback(event, "wrong")  # type: ignore[arg-type]
        assert "pass the Event's id (.id)" in err.value.message
        # a confidence without a label is refused, as the library refuses it
        no_label = c.post(
            f"/v1/projects/{pid}/feedback", json={"node_id": event.id, "confidence": 0.7}
        )
        assert no_label.status_code == 422
        assert no_label.json()["error"]["message"] == "label: is missing"
        assert sdk.feedback(event.id, "disliked", confidence=0.1).confidence == 0.1


def test_unknown_nodes_and_sessions_are_404_and_bad_hops_422(live: Live, pid: str) -> None:
    c = live.client(live.key(pid))
    base = f"/v1/projects/{pid}"
    first = c.post(f"{base}/events", json={"type": "user_message", "session_id": "s", "text": "a"})
    node = first.json()["id"]
    c.post(f"{base}/events", json={"type": "user_message", "session_id": "s", "text": "b"})
    hood = f"{base}/neighbourhood"
    assert c.get(hood, params={"node_id": node}).status_code == 200
    assert len(c.get(hood, params={"node_id": node, "depth": 2}).json()) == 1  # NEXT
    missing = c.get(hood, params={"node_id": "nope"})
    assert missing.status_code == 404, missing.text
    assert missing.json()["error"]["kind"] == "node"
    for params, field in (
        ({"node_id": node, "depth": -1}, "depth"),
        ({"node_id": node, "depth": 100000}, "depth"),
        ({"node_id": node, "k": 6}, "k"),
        ({"node_id": node, "k": 1, "depth": 2}, "depth"),
    ):
        r = c.get(hood, params=params)
        assert r.status_code == 422, (params, r.text)
        assert r.json()["error"]["field"] == field
    # an unknown session is 404 for its events as for its timeline; a known one lists
    events = c.get(f"{base}/events", params={"session_id": "nosuch"})
    assert events.status_code == 404 and events.json()["error"]["kind"] == "session"
    assert c.get(f"{base}/timeline", params={"session_id": "nosuch"}).status_code == 404
    assert len(c.get(f"{base}/events", params={"session_id": "s"}).json()) == 2
    # the SDK says the same as the embedded base
    with ctxbase.connect(live.url, api_key=live.key(pid), project=pid) as sdk:
        with pytest.raises(NotFoundError):
            sdk.neighbourhood("nope")
        with pytest.raises(NotFoundError):
            sdk.last_events("nosuch")
        with pytest.raises(ValidationError):
            sdk.neighbourhood(node, 9)


def test_a_body_nested_past_the_parser_says_so(live: Live, pid: str) -> None:
    c = live.client(live.key(pid, role="write"))
    deep = '{"type":"user_message","session_id":"s","data":' + "[" * 100_000 + "]" * 100_000 + "}"
    r = c.post(
        f"/v1/projects/{pid}/events",
        content=deep,
        headers={"content-type": "application/json"},
    )
    assert r.status_code == 422, r.text
    assert r.json()["error"] == {
        "code": "invalid",
        "message": "body: is nested too deep to read (at most 64 levels)",
        "field": "body",
        "type": "ValidationError",  # as every error body says its class
        "details": {},
    }


def test_a_remote_hit_says_where_recency_put_it_as_embedded(live: Live, pid: str) -> None:
    with ctxbase.connect(live.url, api_key=live.key(pid), project=pid) as sdk:
        old = sdk.record(
            "assistant_message", session_id="a", text="SELECT id FROM orders WHERE total > 10",
            ts=time.time() - 3 * 86400,
        )  # fmt: skip
        new = sdk.record(
            "assistant_message", session_id="b", text="SELECT id FROM orders JOIN payments",
            ts=time.time() - 86400,
        )  # fmt: skip
        sdk.flush()
        hits = sdk.search("the orders SQL from last time", preset="keyword").results
        placed = {c.item.owner_id: c.recency for c in hits}
    assert placed[new.id] is not None and placed[new.id].startswith("sql")
    assert placed[old.id] is not None
    assert [c.item.owner_id for c in hits].index(new.id) < [c.item.owner_id for c in hits].index(
        old.id
    )
