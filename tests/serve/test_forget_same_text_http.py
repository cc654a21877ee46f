"""The same thing remembered twice, embedded and over the live server alike, on both
backends: the search hit names the copy folded into it (SDK and the MCP `search_memory`),
and the MCP `forget` of the hit (hide or hard) names the copy still visible and tells the
agent to forget it too; REST's forget and hide answers carry the same list. A rating of
the hit (MCP `rate_memory`, the SDK, REST) is given on the copy too, and names it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from live_server import Live, embedded_and_remote, serve_on_param

from ctxbase.integrations.tools import ToolScope, handle_tool_call

PIN = "my card PIN is 4321, remember it"


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Live]:
    yield from serve_on_param(request, tmp_path_factory, "forget-same-text")


def _scenario(api: Any) -> dict[str, Any]:
    scope = ToolScope(api, role="admin")

    def tool(name: str, **args: Any) -> dict[str, Any]:
        answer: dict[str, Any] = json.loads(handle_tool_call(scope, name, args))
        return answer

    first = tool("remember", text=PIN, session_id="s1")["event_id"]
    copy = tool("remember", text=PIN, session_id="s2")["event_id"]
    api.flush()
    named = {first: "first", copy: "copy"}

    def names(ids: list[str]) -> list[str]:
        return [named.get(i, i) for i in ids]

    (sdk_hit,) = api.search("card PIN", top_k=3).results
    (mcp_hit,) = tool("search_memory", query="card PIN")["results"]
    hidden = tool("forget", event_ids=[mcp_hit["id"]])
    rest_hide = api.set_hidden([copy])  # the copy too: the other one is hidden already
    api.restore([first, copy])
    hard = tool("forget", event_ids=[mcp_hit["id"]], hard=True)
    left = [h.id for h in api.search("card PIN").results]
    return {
        "sdk hit": (names([sdk_hit.id]), names(sdk_hit.duplicates)),
        "mcp hit": (names([mcp_hit["id"]]), names(mcp_hit["duplicates"])),
        "hide": (hidden["hidden"], names(hidden["same_text_still_visible"])),
        "hide note": hidden["note"].replace(copy, "copy"),
        "rest hide": names(rest_hide.same_text_still_visible),
        "hard": (hard["removed"]["events"], names(hard["same_text_still_visible"])),
        "hard note": hard["note"].replace(copy, "copy"),
        "left": names(left),
        "last": tool("forget", event_ids=[copy], hard=True)["same_text_still_visible"],
    }


def test_a_copy_of_the_forgotten_hit_is_named(
    server: Live, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    local, remote = embedded_and_remote(server, tmp_path, request, _scenario)
    assert remote == local
    note = "1 other memory says the same: copy; forget it too to remove it"
    assert local == {
        "sdk hit": (["first"], ["copy"]),
        "mcp hit": (["first"], ["copy"]),
        "hide": (1, ["copy"]),
        "hide note": note,
        "rest hide": [],
        "hard": (1, ["copy"]),
        "hard note": note,
        "left": ["copy"],
        "last": [],
    }


def _rated(api: Any) -> dict[str, Any]:
    scope = ToolScope(api, role="admin")
    first = api.record("user_message", session_id="s1", text=PIN).id
    copy = api.record("user_message", session_id="s2", text=PIN).id
    api.flush()
    named = {first: "first", copy: "copy"}
    (hit,) = api.search("card PIN").results
    args = {"id": hit.id, "label": "wrong"}
    wrong = json.loads(handle_tool_call(scope, "rate_memory", args))
    after = [h.id for h in api.search("card PIN").results]
    back = api.feedback(hit.id, "neutral")
    current = api.get_feedback(copy)
    return {
        "mcp": (named[wrong["id"]], [named[i] for i in wrong["same_text"]], wrong["confidence"]),
        "after": after,
        "back": [named[i] for i in back.same_text],
        "copy": current.label,
        "hits": [named[h.id] for h in api.search("card PIN").results],
    }


def test_a_rating_of_the_hit_reaches_its_copy(
    server: Live, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    local, remote = embedded_and_remote(server, tmp_path, request, _rated)
    assert remote == local
    assert local == {
        "mcp": ("first", ["copy"], 0.0),
        "after": [],
        "back": ["copy"],
        "copy": "neutral",
        "hits": ["first"],
    }


def test_the_rest_search_hit_and_forget_answer_carry_the_lists(server: Live) -> None:
    import httpx

    key = server.key("raw", role="admin")
    headers = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=server.url, headers=headers, timeout=60) as http:
        ids = [
            http.post(
                "/v1/projects/raw/events",
                json={"type": "user_message", "session_id": s, "text": PIN},
            ).json()["id"]
            for s in ("s1", "s2")
        ]
        http.post("/v1/projects/raw/flush")
        found = http.post("/v1/projects/raw/search", json={"query": "card PIN"}).json()
        (hit,) = found["results"]
        other = [i for i in ids if i != hit["item"]["owner_id"]]
        assert hit["duplicates"] == other
        rated = http.post(
            "/v1/projects/raw/feedback",
            json={"node_id": hit["item"]["owner_id"], "label": "disliked"},
        )
        assert rated.json()["same_text"] == other
        hidden = http.post("/v1/projects/raw/soft-delete", json={"ids": [hit["item"]["owner_id"]]})
        assert hidden.json()["same_text_still_visible"] == other
