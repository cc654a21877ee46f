"""`--no-auth` is enforced by the app itself, however it is started: the settings are refused
with a non-loopback host, and a server without keys answers loopback clients only (as when
`uvicorn --factory --host 0.0.0.0` runs it with settings that never named that host)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ctxbase.errors import ValidationError
from ctxbase.serve.app import create_app_from_env
from ctxbase.serve.server import free_port
from ctxbase.serve.settings import ENV_SETTINGS

SRC = str(Path(__file__).resolve().parents[2] / "src")


def test_app_factory_refuses_no_auth_on_a_public_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = {"db": str(tmp_path / "x.db"), "host": "0.0.0.0", "no_auth": True}
    monkeypatch.setenv(ENV_SETTINGS, json.dumps(settings))
    with pytest.raises(ValidationError) as err:
        create_app_from_env()
    assert err.value.field == "host" and "127.0.0.1" in str(err.value)
    monkeypatch.setenv(ENV_SETTINGS, json.dumps({**settings, "no_auth": False}))
    create_app_from_env()  # with API keys any host is allowed


def outward_address() -> str | None:
    """This machine's address on its default route, if it has one besides loopback."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # no packet is sent for a UDP connect
        except OSError:
            return None
        address = str(s.getsockname()[0])
    return None if address.startswith("127.") or address == "0.0.0.0" else address


@pytest.fixture
def factory_on_all_interfaces(tmp_path: Path) -> Iterator[int]:
    """`uvicorn --factory ctxbase.serve.app:create_app_from_env --host 0.0.0.0` with
    settings that turn keys off (and leave `host` at its default)."""
    port = free_port("0.0.0.0")
    env = {
        **os.environ,
        "PYTHONPATH": SRC,
        ENV_SETTINGS: json.dumps({"db": str(tmp_path / "f.db"), "no_auth": True, "embedder": None}),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "--factory", "ctxbase.serve.app:create_app_from_env",
         "--host", "0.0.0.0", "--port", str(port), "--log-level", "warning"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                err = proc.stderr.read().decode() if proc.stderr else ""
                pytest.fail(f"uvicorn did not start: {err[-500:]}")
            time.sleep(0.2)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_no_auth_app_serves_loopback_clients_only(factory_on_all_interfaces: int) -> None:
    port = factory_on_all_interfaces
    local = httpx.put(f"http://127.0.0.1:{port}/v1/projects/p/sessions/s", json={}, timeout=10)
    assert local.status_code == 200
    address = outward_address()
    if address is None:
        pytest.skip("this machine has no address besides loopback to connect from")
    url = f"http://{address}:{port}"
    for method, path in (("PUT", "/v1/projects/p/sessions/s"), ("GET", "/v1/projects")):
        r = httpx.request(method, url + path, json={} if method == "PUT" else None, timeout=10)
        assert r.status_code == 403, r.text
        assert r.json()["error"]["code"] == "forbidden"
        assert "loopback" in r.json()["error"]["message"]
    # an assembly cached for a loopback caller is not served to another address either
    body = {"project_id": "p", "agent_role": "coder", "user_intent": "cache"}
    local_url = f"http://127.0.0.1:{port}/v1/context/assemble"
    assert httpx.post(local_url, json=body, timeout=30).status_code == 200
    r = httpx.post(url + "/v1/context/assemble", json=body, timeout=30)
    assert r.status_code == 403, r.text
