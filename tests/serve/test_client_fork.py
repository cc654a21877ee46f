"""A remote client made before a fork works in the child with a connection pool of its
own, against a real server: the parent's kept-alive sockets are copied into the fork, and
two processes reading one socket take each other's answers. Parent and child record at
the same time through the same client object; each gets back exactly what it sent."""

from __future__ import annotations

import multiprocessing
from typing import Any

from live_server import Live

import ctxbase

ROUNDS = 40


def _record_many(client: Any, who: str, out: Any | None = None) -> list[str]:
    wrong: list[str] = []
    for n in range(ROUNDS):
        text = f"{who} note {n}"
        try:
            got = client.record("user_message", session_id=who, text=text).text
        except Exception as exc:  # a mixed-up answer may not even parse: count it
            got = f"{type(exc).__name__}: {exc}"
        if got != text:
            wrong.append(f"sent {text!r}, got {got!r}")
    if out is not None:
        out.put(wrong)
        client.close()  # the child's own pool; the parent's stays open
    return wrong


def test_a_client_made_before_a_fork_answers_each_process_its_own(live: Live, pid: str) -> None:
    key = live.key(pid)
    with ctxbase.connect(live.url, api_key=key, project=pid) as client:
        client.record("user_message", session_id="parent", text="warm the pool")  # keep-alive
        fork = multiprocessing.get_context("fork")
        out = fork.Queue()
        child = fork.Process(target=_record_many, args=(client, "child", out))
        child.start()
        mine = _record_many(client, "parent")
        theirs = out.get(timeout=120)
        child.join(60)
        assert child.exitcode == 0
        assert (mine, theirs) == ([], [])
        assert len(client.last_events("child", 100)) == ROUNDS
        assert len(client.last_events("parent", 100)) == ROUNDS + 1
