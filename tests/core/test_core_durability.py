"""Durability: captured events reach the disk when the process is told to stop.

Real processes, real signals: a plain script that captures without flushing and is sent
SIGTERM or SIGINT, and `ctxbase serve` taking queued REST batches before SIGTERM.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import httpx
import pytest

import ctxbase
from ctxbase.serve.server import free_port

SRC = str(Path(ctxbase.__file__).resolve().parents[1])  # the ctxbase under test
N = 2000


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = SRC + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _count(db: Path) -> int:
    conn = sqlite3.connect(db)
    try:
        return int(conn.execute("SELECT count(*) FROM events").fetchone()[0])
    finally:
        conn.close()


SCRIPT = textwrap.dedent(
    """
    import sys, time
    import ctxbase
    cb = ctxbase.open(sys.argv[1], project="p", embedder="none")
    for i in range(int(sys.argv[2])):
        cb.capture("user_message", session_id="s", text=f"event number {i}")
    print("captured", flush=True)
    time.sleep(120)
    """
)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_script_keeps_unflushed_events_on_signal(tmp_path: Path, signum: int) -> None:
    db = tmp_path / "lib.db"
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(db), str(N)],
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "captured"
        proc.send_signal(signum)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    # SIGTERM exits with the shell's status for it (128 + 15); SIGINT as Ctrl-C does
    assert proc.returncode in (128 + signum, -signum, 1), proc.stderr.read() if proc.stderr else ""
    assert _count(db) == N


THREADED = textwrap.dedent(
    """
    import sys, threading, time
    import ctxbase
    from ctxbase import exit_hooks
    exit_hooks.EXIT_GRACE_S = 1.0
    cb = ctxbase.open(sys.argv[1], project="p", embedder="none")
    threading.Thread(target=time.sleep, args=(600,)).start()  # not a daemon: exit waits
    for i in range(int(sys.argv[2])):
        cb.capture("user_message", session_id="s", text=f"event number {i}")
    print("captured", flush=True)
    time.sleep(120)
    """
)


def test_sigterm_ends_a_process_that_waits_for_its_threads(tmp_path: Path) -> None:
    """The interpreter's exit would wait for the non-daemon thread: after the grace period
    the bases are closed anyway and the process ends with SIGTERM's status."""
    db = tmp_path / "threads.db"
    proc = subprocess.Popen(
        [sys.executable, "-c", THREADED, str(db), str(N)],
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "captured"
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM
    assert _count(db) == N


def test_serve_keeps_queued_batches_on_sigterm(tmp_path: Path) -> None:
    db = tmp_path / "serve.db"
    port = free_port()
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "ctxbase", "--db", str(db), "--embedder", "none"),
            *("serve", "--port", str(port), "--no-auth", "--rate-limit", "0"),
        ],
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None, "the server exited during startup"
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.1)
        with httpx.Client(base_url=url, timeout=30) as c:
            for start in range(0, N, 500):
                events = [
                    {"type": "user_message", "session_id": "s", "text": f"event number {i}"}
                    for i in range(start, start + 500)
                ]
                r = c.post("/v1/projects/p/events/batch", json={"events": events, "wait": False})
                assert r.status_code == 202 and r.json()["durable"] is False
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert _count(db) == N


def test_batch_default_is_durable(tmp_path: Path) -> None:
    """No `wait`: stored when the 201 comes, readable by another connection at once."""
    from ctxbase.serve.server import BackgroundServer
    from ctxbase.serve.settings import ServerSettings

    settings = ServerSettings(db=str(tmp_path / "b.db"), port=0, embedder=None, no_auth=True)
    with BackgroundServer(settings) as server, httpx.Client(base_url=server.url) as c:
        events = [{"type": "user_message", "session_id": "s", "text": f"e{i}"} for i in range(50)]
        r = c.post("/v1/projects/p/events/batch", json={"events": events})
        assert r.status_code == 201
        assert r.json()["durable"] is True
        assert _count(tmp_path / "b.db") == 50


def test_cli_capture_is_on_disk_when_it_exits(tmp_path: Path) -> None:
    db = tmp_path / "cli.db"
    cli = [sys.executable, "-m", "ctxbase", "--db", str(db), "--embedder", "none", "capture"]
    done = subprocess.run([*cli, "--session", "s", "--text", "hi"], env=_env(), timeout=120)
    assert done.returncode == 0 and _count(db) == 1
    blank = subprocess.run(
        [*cli, "--session", "s", "--text", " "], env=_env(), timeout=120, capture_output=True
    )
    assert blank.returncode == 2 and b"text" in blank.stderr
    assert _count(db) == 1
