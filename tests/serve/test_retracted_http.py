"""A retracted message over real HTTP: the REST search and the SDK leave it out as the
library does (listed as considered, marked when options.min_confidence 0 keeps it), and
the console timeline marks it, and a message rated wrong."""

from __future__ import annotations

from live_server import Live

import ctxbase

QUERY = "database for billing MongoDB"


def test_search_and_timeline_over_http_treat_a_retracted_message_as_the_library_does(
    live: Live, pid: str
) -> None:
    key = live.key(pid, role="admin")
    with ctxbase.connect(live.url, api_key=key, project=pid) as sdk:
        said = sdk.record(
            "assistant_message", session_id="s1", text="we will use MongoDB for billing"
        )
        other = sdk.record(
            "assistant_message", session_id="s1", text="billing database backups run nightly"
        )
        assert {said.id, other.id} <= {c.item.owner_id for c in sdk.search(QUERY).results}
        sdk.expire_message("s1", said.id)
        response = sdk.search(QUERY)
        assert [c.item.owner_id for c in response.results] == [other.id]
        gone = next(c for c in response.considered if c.item.owner_id == said.id)
        assert gone.retracted and gone.dropped == "retracted"
        kept = {c.item.owner_id: c for c in sdk.search(QUERY, min_confidence=0.0).results}
        assert kept[said.id].retracted and not kept[other.id].retracted
        sdk.feedback(other.id, "wrong")

    with live.client(key) as http:
        body = {"query": QUERY, "options": {"min_confidence": 0}}
        hits = http.post(f"/v1/projects/{pid}/search", json=body).json()["results"]
        assert {h["item"]["owner_id"]: h["retracted"] for h in hits} == {
            said.id: True,
            other.id: False,
        }
        page = http.get(f"/v1/projects/{pid}/timeline", params={"session_id": "s1"})
        assert page.status_code == 200, page.text
        assert page.json()["marks"] == {said.id: ["retracted"], other.id: ["wrong"]}


def test_a_per_turn_tool_result_expired_is_marked_expired_over_http(live: Live, pid: str) -> None:
    """REST and the SDK carry the search mark `expired` for a per-turn tool result out of
    use (not `retracted`), as the timeline marks it."""
    key = live.key(pid, role="admin")
    query = "SKU-42 warehouse stock"
    with ctxbase.connect(live.url, api_key=key, project=pid) as sdk:
        stock = sdk.record(
            "tool_result",
            session_id="s1",
            text="SKU-42 warehouse stock 17 units",
            metadata={"per_turn": True},
        )
        sdk.expire_message("s1", stock.id, cause="per-turn tool result: the next turn began")
        gone = next(c for c in sdk.search(query).considered if c.item.owner_id == stock.id)
        assert gone.expired and not gone.retracted and gone.dropped == "expired"
    with live.client(key) as http:
        body = {"query": query, "options": {"min_confidence": 0}}
        (hit,) = http.post(f"/v1/projects/{pid}/search", json=body).json()["results"]
        assert (hit["item"]["owner_id"], hit["expired"], hit["retracted"]) == (
            stock.id,
            True,
            False,
        )
        page = http.get(f"/v1/projects/{pid}/timeline", params={"session_id": "s1"})
        assert page.json()["marks"] == {stock.id: ["expired"]}
