"""A server whose environment names a query-rewriting model (CTXBASE_REWRITE_*) searches
each query's other wordings too, and says so over REST and through the SDK."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from live_server import Live, start

import ctxbase
from chat_server import REWRITES, running_chat_server

QUERY = "上次那个慢查询后来怎么解决的"


def test_rest_and_the_sdk_name_the_wordings_searched_and_a_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with running_chat_server() as chat:
        monkeypatch.setenv("CTXBASE_REWRITE_BASE_URL", chat.url)
        monkeypatch.setenv("CTXBASE_REWRITE_MODEL", "tiny-rewriter")
        server = start(tmp_path)
        try:
            live = Live(server.url, server.settings.db, server)
            pid = f"p-{uuid.uuid4().hex[:10]}"
            key = live.key(pid)
            c = live.client(key)
            event = {
                "type": "assistant_message",
                "session_id": "s",
                "text": "给 orders 表的 user_id 加了索引",
            }
            assert c.post(f"/v1/projects/{pid}/events", json=event).status_code < 300
            assert c.post(f"/v1/projects/{pid}/flush").status_code == 204
            body = c.post(f"/v1/projects/{pid}/search", json={"query": QUERY}).json()
            assert body["rewrites"] == REWRITES[QUERY] and body["rewrite_error"] is None
            assert "索引" in body["results"][0]["item"]["text"]
            with ctxbase.connect(server.url, api_key=key, project=pid) as remote:
                found = remote.search(QUERY)
                assert found.rewrites == REWRITES[QUERY]  # from the server's cache
                broken = remote.search("[500] 索引")
                assert broken.rewrites == [] and "HTTP 500" in (broken.rewrite_error or "")
                assert broken.results  # the search went on without the model
            assert len(chat.requests) == 2
        finally:
            server.stop()
