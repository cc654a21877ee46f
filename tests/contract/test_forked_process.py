"""A context base opened before a fork is refused in the child at once, on SQLite and
PostgreSQL: a capture there returned an id and was never stored (the writer thread stays
with the parent). The child's calls say to open a base of its own, its `close` returns at
once without touching the parent's connections, a base it opens works, and the parent
goes on as before."""

from __future__ import annotations

import multiprocessing
from typing import Any

import pytest

from ctxbase import ContextBase


def _in_child(cb: ContextBase, out: Any) -> None:
    said: list[str] = []
    for call in (
        lambda: cb.capture("user_message", session_id="c", text="FORKED-capture"),
        lambda: cb.record("user_message", session_id="c", text="FORKED-record"),
        lambda: cb.search("parent"),
        lambda: cb.flush(),
    ):
        try:
            call()
            said.append("no error")
        except Exception as exc:  # what the child is told, sent to the parent to check
            said.append(f"{type(exc).__name__}: {exc}")
    cb.close()
    out.put(said)


def test_a_base_opened_before_a_fork_is_refused_in_the_child(cb: ContextBase) -> None:
    cb.record("user_message", session_id="p", text="parent first")
    cb.search("parent")
    fork = multiprocessing.get_context("fork")
    out = fork.Queue()
    child = fork.Process(target=_in_child, args=(cb, out))
    child.start()
    said = out.get(timeout=60)
    child.join(60)
    assert child.exitcode == 0
    assert len(said) == 4
    assert all(s.startswith(("CaptureError: ", "StorageError: ")) for s in said), said
    assert all("before a fork" in s and "ctxbase.open(...) in the child" in s for s in said), said
    # the parent goes on; nothing the child tried was stored
    cb.record("user_message", session_id="p", text="parent after")
    cb.flush()
    texts = [e.text for e in cb.last_events("p")]
    assert texts == ["parent first", "parent after"]
    with pytest.raises(Exception, match="not found"):
        cb.last_events("c")
