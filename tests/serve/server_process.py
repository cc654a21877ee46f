"""A `ctxbase serve` started as a subprocess: wait until it answers /readyz."""

from __future__ import annotations

import subprocess
import time

import httpx

__all__ = ["wait_until_ready"]


def wait_until_ready(
    proc: subprocess.Popen[bytes], url: str, *, timeout_s: float, poll_s: float = 0.1
) -> None:
    """Return once `url`/readyz answers 200; fail with the server's stderr if it exits, or
    when `timeout_s` passes first."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if httpx.get(url + "/readyz", timeout=max(1.0, poll_s * 10)).status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(poll_s)
