"""The server's /metrics count LLM extraction when the environment configures it."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from live_server import Live, start

from chat_server import TEXT, running_chat_server


def _gauge(text: str, name: str) -> float | None:
    for line in text.splitlines():
        if line.startswith(f"{name} "):
            return float(line.split()[-1])
    return None


def test_metrics_count_extraction_requests_and_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with running_chat_server() as chat:
        monkeypatch.setenv("CTXBASE_EXTRACT_BASE_URL", chat.url)
        monkeypatch.setenv("CTXBASE_EXTRACT_MODEL", "tiny-extractor")
        server = start(tmp_path)
        try:
            live = Live(server.url, server.settings.db, server)
            pid = f"p-{uuid.uuid4().hex[:10]}"
            c = live.client(live.key(pid))
            event = {"type": "user_message", "session_id": "s", "text": "[500] " + TEXT}
            assert c.post(f"/v1/projects/{pid}/events", json=event).status_code < 300
            assert c.post(f"/v1/projects/{pid}/flush").status_code == 204
            text = c.get("/metrics").text
            assert _gauge(text, "ctxbase_anchor_llm_requests") == 1
            assert _gauge(text, "ctxbase_anchor_llm_errors") == 1
            assert _gauge(text, "ctxbase_anchor_llm_timeouts") == 0
            assert len(chat.requests) == 1
        finally:
            server.stop()


def test_no_extraction_gauges_when_it_is_off(live: Live) -> None:
    text = live.client(None).get("/metrics").text
    assert "ctxbase_http_request_duration_seconds" in text
    assert "ctxbase_anchor_llm_" not in text
