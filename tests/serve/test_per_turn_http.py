"""A per-turn tool result sent over REST (`POST .../events`, the queue, the SDK) expires at
the next user message as through the ContextManager: marked, out of searches and of
other sessions' assemblies."""

from __future__ import annotations

from live_server import Live

import ctxbase

WEATHER = "上海：小雨，18度，建议带伞"


def test_per_turn_result_posted_over_rest_expires_at_the_next_turn(live: Live, pid: str) -> None:
    key = live.key(pid, role="write")
    with live.client(key) as http:
        base = f"/v1/projects/{pid}"

        def post(path: str, body: dict[str, object]) -> str:
            response = http.post(f"{base}{path}", json=body)
            assert response.status_code in (200, 201, 202), response.text
            return str(response.json()["id"])

        post("/events", {"type": "user_message", "session_id": "s1", "text": "查一下上海天气"})
        tool = post(
            "/events",
            {
                "type": "tool_result",
                "session_id": "s1",
                "text": WEATHER,
                "metadata": {"per_turn": True},
            },
        )
        assert http.get(f"{base}/events/{tool}").json()["marks"] == []
        post("/events/queue", {"type": "user_message", "session_id": "s1", "text": "写个方案"})
        assert http.post(f"{base}/flush").status_code == 204
        assert http.get(f"{base}/events/{tool}").json()["marks"] == ["expired"]
        hits = http.post(f"{base}/search", json={"query": "上海 小雨 带伞"}).json()
        assert tool not in [h["item"]["owner_id"] for h in hits["results"]]
        ctx = http.post(
            "/v1/context/assemble",
            json={
                "project_id": pid,
                "session_id": "other",
                "agent_role": "assistant",
                "user_intent": "上海天气怎么样，要带伞吗",
            },
        ).json()
        assert "建议带伞" not in "\n".join(m["content"] for m in ctx["messages"])

    with ctxbase.connect(live.url, api_key=key, project=pid) as sdk:
        sdk.record("user_message", session_id="s2", text="查库存")
        stock = sdk.record(
            "tool_result", session_id="s2", text="SKU-42 库存 17 件", metadata={"per_turn": True}
        )
        sdk.record("user_message", session_id="s2", text="帮我写首诗")
        assert sdk.get_event(stock.id).marks == ["expired"]
