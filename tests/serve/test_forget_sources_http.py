"""The MCP `forget` tool given the id of a decision anchored from a message (what search
often ranks first), embedded and over the remote SDK alike, on both backends: the message
that is the decision goes with it, one that says more is named in sources_still_visible."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from live_server import Live, embedded_and_remote, serve_on_param

from ctxbase.integrations.tools import ToolScope, handle_tool_call

WHOLE = "订单服务的缓存过期时间定为300秒，由张三负责"
MORE = "We decided to use Redis for the order cache. Also the build runs on Fridays."


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Live]:
    yield from serve_on_param(request, tmp_path_factory, "forget-sources")


def _scenario(api: Any) -> dict[str, Any]:
    whole = api.record("user_message", session_id="s", text=WHOLE).id
    more = api.record("user_message", session_id="s", text=MORE).id
    api.flush()
    decisions = {e.properties["event_id"]: e.id for e in api.list_entities(type="decision")}
    scope = ToolScope(api, role="admin")

    def forget(**args: Any) -> dict[str, Any]:
        answer = json.loads(handle_tool_call(scope, "forget", args))
        named = {whole: "whole", more: "more"}
        return {
            k: [named.get(i, i) for i in answer[k]]
            for k in ("sources_hidden", "sources_forgotten", "sources_still_visible")
            if k in answer
        }

    return {
        "hide": forget(event_ids=[decisions[whole]]),
        "whole visible": [e.id for e in api.last_events("s", 10)] == [more],
        "hard": forget(event_ids=[decisions[more]], hard=True),
        "more visible": [e.text for e in api.last_events("s", 10)] == [MORE],
    }


def test_the_forget_tool_deals_with_the_source_message(
    server: Live, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    local, remote = embedded_and_remote(server, tmp_path, request, _scenario)
    assert remote == local
    assert local == {
        "hide": {"sources_hidden": ["whole"], "sources_still_visible": []},
        "whole visible": True,
        "hard": {"sources_forgotten": [], "sources_still_visible": ["more"]},
        "more visible": True,
    }
