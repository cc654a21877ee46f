"""Code run in child processes by the PostgreSQL concurrency test (importable by spawn)."""

from __future__ import annotations

import contextlib
import time
from typing import Any


def pg_writer(url: str, project: str, worker: int, n: int, start: Any, out: Any) -> None:
    """Capture n events (one shared session and one of its own), flush, report the ids."""
    import ctxbase

    cb = ctxbase.open(url, project=project, embedder=None)
    try:
        start.wait(60)
        acked: list[str] = []
        for i in range(n):
            session = "shared" if i % 2 else f"own{worker}"
            # ASCII text keeps jieba's dictionary (about 2 s of CPU) out of 16 processes.
            text = f"writer {worker} event {i} cache query latency"
            eid = cb.capture("user_message", session_id=session, text=text)
            assert eid is not None  # user messages are never dropped
            acked.append(eid)
        cb.flush()
        out.put(("writer", worker, acked))
    finally:
        cb.close()


def pg_reader(url: str, project: str, worker: int, stop: Any, start: Any, out: Any) -> None:
    """Search and list while the writers run; report how many reads succeeded."""
    import ctxbase
    from ctxbase.errors import NotFoundError

    cb = ctxbase.open(url, project=project, embedder=None)
    reads = 0
    try:
        start.wait(60)
        while not stop.is_set() or reads < 5:
            cb.search("cache latency", preset="keyword", top_k=5)
            with contextlib.suppress(NotFoundError):  # no writer stored the shared session yet
                cb.last_events("shared", 10)
            cb.store.list_events(project, last_n=20)
            reads += 1
            time.sleep(0.05)  # 16 processes share the machine: leave the writers CPU
        out.put(("reader", worker, reads))
    finally:
        cb.close()
