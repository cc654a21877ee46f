"""Code run in child processes by the core tests (importable by multiprocessing's spawn)."""

from __future__ import annotations

from typing import Any


def capture_many(path: str, worker: int, n: int, start: Any, out: Any) -> None:
    """Wait for the start signal, capture n events through the bus, flush, close."""
    import ctxbase

    cb = ctxbase.open(path, project="p", embedder=None)
    try:
        start.wait(60)
        for i in range(n):
            cb.capture(
                "assistant_message",
                session_id="shared",
                text=f"w{worker} e{i}",
                agent_id=f"worker{worker}",
            )
            if i % 50 == 0:
                cb.capture("tool_result", session_id=f"own{worker}", text=f"w{worker} r{i}")
        cb.flush()
        out.put(worker)
    finally:
        cb.close()


def open_and_record(path: str, worker: int, start: Any, out: Any) -> None:
    """Open a (possibly brand new) file at the same moment as another process."""
    import ctxbase

    start.wait(60)
    cb = ctxbase.open(path, project="p", embedder=None)
    try:
        out.put(cb.record("user_message", session_id=f"s{worker}", text=f"hello {worker}").id)
    finally:
        cb.close()
