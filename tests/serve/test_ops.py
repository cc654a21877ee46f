"""Operations: health, readiness, Prometheus metrics, JSON logs, graceful shutdown."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import pytest
from live_server import Live, start
from prometheus_client.parser import text_string_to_metric_families

from ctxbase.serve.logs import LOGGER_NAME, JsonFormatter
from ctxbase.store import open_store


def test_metrics_expose_latency_queue_and_backlog(live: Live, pid: str) -> None:
    c = live.client(live.key(pid))
    for _ in range(3):
        c.get(f"/v1/projects/{pid}/sessions")
    c.post("/v1/context/assemble", json={"project_id": pid, "agent_role": "qa", "user_intent": "x"})
    text = c.get("/metrics").text
    sessions = 'method="GET",route="/v1/projects/{project_id}/sessions",status="200"'
    count = [
        line
        for line in text.splitlines()
        if line.startswith(f"ctxbase_http_request_duration_seconds_count{{{sessions}}}")
    ]
    assert count and float(count[0].split()[-1]) >= 3
    # the same series as a parser reads it (label order and "3" vs "3.0" are not fixed)
    families = {f.name: f for f in text_string_to_metric_families(text)}
    route = "/v1/projects/{project_id}/sessions"
    assert any(
        s.name == "ctxbase_http_request_duration_seconds_bucket"
        and s.labels == {"method": "GET", "route": route, "status": "200", "le": "+Inf"}
        and s.value >= 3
        for s in families["ctxbase_http_request_duration_seconds"].samples
    )
    for gauge in (
        "ctxbase_capture_queue_depth",
        "ctxbase_capture_dropped_low_priority",
        "ctxbase_embed_backlog",
        "ctxbase_assemble_total",
    ):
        assert f"\n{gauge} " in text, gauge
    # ids never become label values: one series per route template
    assert pid not in text


def test_metrics_count_seed_002s_monitoring_points(live: Live, pid: str) -> None:
    c = live.client(live.key(pid))

    def counter(name: str) -> float:
        for line in c.get("/metrics").text.splitlines():
            if line.startswith(f"{name} "):
                return float(line.split()[-1])
        return 0.0

    before = {
        n: counter(n)
        for n in (
            "ctxbase_assemble_memory_hits_total",
            "ctxbase_assemble_fallbacks_total",
            "ctxbase_assemble_prompt_tokens_total",
            "ctxbase_assemble_memory_tokens_total",
        )
    }
    c.post(
        f"/v1/projects/{pid}/events",
        json={"type": "user_message", "session_id": "s", "text": "订单查询加 Redis 缓存"},
    )
    body = {"project_id": pid, "agent_role": "coder", "include_trace": True}
    hit = c.post("/v1/context/assemble", json={**body, "user_intent": "订单缓存怎么加"}).json()
    assert hit["trace"]["monitoring"]["memory_hit"] is True
    assert (
        counter("ctxbase_assemble_memory_hits_total")
        == before["ctxbase_assemble_memory_hits_total"] + 1
    )
    assert (
        counter("ctxbase_assemble_memory_tokens_total")
        > before["ctxbase_assemble_memory_tokens_total"]
    )
    assert (
        counter("ctxbase_assemble_prompt_tokens_total")
        >= before["ctxbase_assemble_prompt_tokens_total"]
        + hit["trace"]["monitoring"]["prompt_tokens"]
    )
    empty = f"{pid}-empty"
    live.make_project(empty)  # a project with nothing in it: no memory to hit
    c2 = live.client(live.key(empty))
    c2.post("/v1/context/assemble", json={**body, "project_id": empty, "user_intent": "hi"})
    assert (
        counter("ctxbase_assemble_fallbacks_total")
        == before["ctxbase_assemble_fallbacks_total"] + 1
    )
    assert "# HELP ctxbase_assemble_fallbacks_total" in c.get("/metrics").text


def test_readyz_reports_the_store(live: Live) -> None:
    c = live.client(None)
    assert c.get("/healthz").status_code == 200
    r = c.get("/readyz")
    assert r.status_code == 200 and r.json()["status"] == "ready"


def test_json_logs_carry_request_and_context_ids(
    live: Live, pid: str, caplog: pytest.LogCaptureFixture
) -> None:
    live.make_project(pid)
    c = live.client(live.key(pid))
    with caplog.at_level(logging.INFO, logger=LOGGER_NAME):
        r = c.post(
            "/v1/context/assemble",
            json={"project_id": pid, "agent_role": "qa", "user_intent": "hello"},
            headers={"X-Request-ID": "req-abc-123"},
        )
        assert r.headers["x-request-id"] == "req-abc-123"
        # the line is written once the response has gone out: give it a moment
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            records = [r for r in caplog.records if getattr(r, "request_id", "") == "req-abc-123"]
            if records:
                break
            time.sleep(0.01)
    assert len(records) == 1
    line = json.loads(JsonFormatter().format(records[0]))
    assert line["context_id"] == r.json()["context_id"]
    assert line["status"] == 200 and line["path"] == "/v1/context/assemble"
    assert line["key_id"] and line["duration_ms"] > 0
    other = c.get("/healthz")
    assert len(other.headers["x-request-id"]) == 32  # generated when not sent


def test_shutdown_flushes_the_capture_queue(tmp_path: Path, pid: str) -> None:
    server = start(tmp_path)
    live = Live(server.url, server.settings.db, server)
    c = live.client(live.key(pid))
    ids = []
    for i in range(200):
        r = c.post(
            f"/v1/projects/{pid}/events/queue",
            json={"type": "user_message", "session_id": "s", "text": f"queued {i}"},
        )
        assert r.status_code == 202
        ids.append(r.json()["id"])
    server.stop()
    store = open_store(live.db)
    try:
        stored = store.get_events(pid, ids)
    finally:
        store.close()
    assert len(stored) == 200
