"""`ctxbase serve --workers 2`: /metrics, whichever worker answers it, counts the requests
of both (prometheus_client's multi-process mode, in a directory the server owns)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from server_process import wait_until_ready

from ctxbase.serve.server import free_port

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _value(text: str, sample: str, **labels: str) -> float:
    found = [
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items())
    ]
    return sum(found)


@pytest.fixture
def two_workers(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A real `ctxbase serve --workers 2` (keys on, no key made); its temp dir is tmp_path."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env["TMPDIR"] = str(tmp_path)  # where the server makes its metrics directory
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    argv = ["--db", str(tmp_path / "w.db"), "--embedder", "none", "serve", "--port", str(port)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "ctxbase", *argv, "--workers", "2", "--rate-limit", "0"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_ready(proc, url, timeout_s=120, poll_s=0.2)
        yield url, tmp_path
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        if proc.stderr is not None:
            proc.stderr.close()
    # the server removed the metrics directory it made
    assert list(tmp_path.glob("ctxbase-metrics-*")) == []


def test_metrics_sum_the_requests_of_every_worker(two_workers: tuple[str, Path]) -> None:
    url, tmp = two_workers
    (metrics_dir,) = tmp.glob("ctxbase-metrics-*")

    def worker_files() -> set[str]:
        return {p.name for p in metrics_dir.glob("histogram_*.db")}

    sent = {"health": 0, "refused": 0}

    def one(i: int) -> int:
        # a new connection each time, so the kernel hands them to either worker
        if i % 3 == 0:
            return httpx.get(url + "/v1/projects", timeout=30).status_code  # no key: 401
        return httpx.get(url + "/healthz", timeout=30).status_code

    with ThreadPoolExecutor(8) as pool:
        for _ in range(10):  # bounded: until both workers have answered some
            codes = list(pool.map(one, range(60)))
            sent["refused"] += codes.count(401)
            sent["health"] += codes.count(200)
            assert set(codes) == {200, 401}
            if len(worker_files()) >= 2:
                break
    assert len(worker_files()) == 2, "the requests all went to one worker"

    for _ in range(6):  # whichever worker answers the scrape, it counts every request
        text = httpx.get(url + "/metrics", timeout=30).text
        health = _value(
            text,
            "ctxbase_http_request_duration_seconds_count",
            method="GET",
            route="/healthz",
            status="200",
        )
        assert health == sent["health"]
        assert _value(text, "ctxbase_auth_failures_total") == sent["refused"]
        assert "# HELP ctxbase_auth_failures_total Requests refused" in text
        assert "\nctxbase_embed_backlog " in text  # the scrape-time gauges are there too
