"""`ctxbase serve` as a user runs it: a subprocess, real HTTP, SIGTERM to stop."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from server_process import wait_until_ready

from ctxbase.serve.server import free_port


def test_ctxbase_serve_runs_with_its_options_and_stops_on_sigterm(tmp_path: Path) -> None:
    port = free_port()
    db = tmp_path / "cli.db"
    options = ["--no-auth", "--port", str(port), "--assemble-cache-ttl", "0"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "ctxbase", "--db", str(db), "--embedder", "hash", "serve", *options],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_ready(proc, url, timeout_s=60)
        event = {"type": "user_message", "session_id": "s", "text": "订单查询加缓存"}
        r = httpx.post(url + "/v1/projects/cli/events", json=event, timeout=60)
        assert r.status_code == 201, r.text  # the project exists: it can be assembled
        body = {"project_id": "cli", "agent_role": "qa", "user_intent": "缓存"}
        # a generous timeout: the first assembly loads the tokenizers, on a possibly busy machine
        ids = [
            httpx.post(url + "/v1/context/assemble", json=body, timeout=120).json()["context_id"]
            for _ in range(2)
        ]
        assert ids[0] != ids[1]  # --assemble-cache-ttl 0: every request assembles
        # the segmenter's dictionary loaded at start-up: the first Chinese request waited not
        first = httpx.get(url + f"/v1/traces/{ids[0]}", params={"project_id": "cli"}).json()
        assert "prepare" in first["timings_ms"]
        assert "segmenter_load" not in first["timings_ms"]
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(30)
    # uvicorn shuts down gracefully, then re-raises the signal it caught
    assert code in (0, -signal.SIGTERM)
    assert b"Traceback" not in (proc.stderr.read() if proc.stderr else b"")
    assert db.exists()


def test_serve_prints_its_url_once_it_answers_on_the_port_it_chose(tmp_path: Path) -> None:
    """`--port 0`: the line names the port that listens, and a request sent as soon as the
    line is read is answered (no retry)."""
    db = ["--db", str(tmp_path / "p.db"), "--embedder", "hash"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "ctxbase", *db, "serve", "--no-auth", "--port", "0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert proc.stderr is not None
    try:
        line = b""
        while b"ctxbase serving" not in line:
            line = proc.stderr.readline()
            assert line, "the server exited before printing its URL"
        match = re.search(rb"serving (http://127\.0\.0\.1:(\d+)),", line)
        assert match is not None, line
        url, port = match.group(1).decode(), int(match.group(2))
        assert port != 0
        r = httpx.get(url + "/readyz", timeout=30)  # at once: one attempt
        assert r.status_code == 200, r.text
    finally:
        proc.send_signal(signal.SIGINT)  # Ctrl-C: a clean stop, not an error
        code = proc.wait(30)
        rest = proc.stderr.read().decode()
        proc.stderr.close()
    assert code == 0, rest
    assert "error:" not in rest and "Traceback" not in rest


@pytest.mark.parametrize(
    ("option", "code", "said"),
    [
        (["--embedder", "bogus"], 2, "error: --embedder: invalid embedder spec 'bogus'"),
        (["--embedder", "hash:abc"], 2, "hash dimension must be an integer"),
        (["--db", "/nonexistent-ctxbase-dir/x.db"], 4, "for the database does not exist"),
    ],
)
def test_serve_refuses_a_bad_embedder_or_database_in_one_line(
    tmp_path: Path, option: list[str], code: int, said: str
) -> None:
    """As every other command: one `error:` line and the input's exit code, not the
    application's start-up failing with a traceback (exit 3)."""
    args = ["--db", str(tmp_path / "x.db"), "--embedder", "hash", *option]
    proc = subprocess.run(
        [sys.executable, "-m", "ctxbase", "serve", "--no-auth", "--port", "0", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == code, proc.stderr
    assert said in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
