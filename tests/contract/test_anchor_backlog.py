"""Capture anchoring survives the process: the events it will anchor are recorded in the
project's backlog with the events, and the next base opened on the project anchors what a
process left (closed before anchoring caught up, or killed after the write); on every backend."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from contract_helpers import make_event

from ctxbase import ContextBase
from ctxbase.anchor.capture_anchor import AnchorConfig, AnchorWorker, wanted
from ctxbase.model import Event
from ctxbase.retrieve.indexing import event_items
from ctxbase.store import open_store
from ctxbase.store.base import Store
from ctxbase.store.sqlite import SQLiteStore
from ctxbase.store.transfer import copy_project
from store_calls import StoreCalls

# Each names a table and a file path: mentions capture anchoring makes (capture_rules).
TEXTS = [
    f"The export must write every refund to table refund_ledger_{i} via src/export_{i}.py."
    for i in range(40)
]


def _write(store: Store, *events: object, keep: bool = True) -> list[str]:
    evs = list(events)
    stored = store.write_events(
        evs,  # type: ignore[arg-type]
        [event_items(e) for e in evs],  # type: ignore[arg-type]
        backlog=wanted if keep else None,
    )
    return [e.id for e in stored]


def test_the_backlog_holds_what_anchoring_wants_until_dropped(store: Store) -> None:
    pid = f"p-{uuid.uuid4().hex[:8]}"
    first = make_event(pid, "s", "first requirement: it must log", ts=100.0)
    second = make_event(pid, "s", "second", ts=200.0)
    blank = make_event(pid, "s", "   ", ts=150.0)
    start = make_event(pid, "s", "started", type="session_start", ts=50.0)
    _write(store, second, first, blank, start)
    # only events anchoring takes (text, not SKIP_TYPES), oldest first
    assert store.anchor_backlog(pid) == [first.id, second.id]
    _write(store, first)  # a retry stores nothing, and records nothing again
    assert store.anchor_backlog(pid) == [first.id, second.id]
    _write(store, make_event(pid, "s", "not recorded"), keep=False)
    assert store.anchor_backlog(pid) == [first.id, second.id]
    other = f"q-{uuid.uuid4().hex[:8]}"
    _write(store, make_event(other, "s", "another project's"))
    store.drop_anchor_backlog(pid, [first.id, "no-such-id"])
    assert store.anchor_backlog(pid) == [second.id]
    assert len(store.anchor_backlog(other)) == 1
    # a capture write takes out what was anchored meanwhile, in its own transaction
    third = make_event(pid, "s", "third", ts=300.0)
    store.write_events([third], [event_items(third)], backlog=wanted, anchored=[(pid, second.id)])
    assert store.anchor_backlog(pid) == [third.id]


def test_a_forget_takes_its_events_out_of_the_backlog(store: Store) -> None:
    pid = f"p-{uuid.uuid4().hex[:8]}"
    a, b = make_event(pid, "s", "alpha text", ts=1.0), make_event(pid, "s", "beta text", ts=2.0)
    _write(store, a, b)
    store.forget(pid, event_ids=[a.id])
    assert store.anchor_backlog(pid) == [b.id]
    store.forget(pid, whole_project=True)
    assert store.anchor_backlog(pid) == []


def _anchored(cb: ContextBase) -> set[tuple[str, str]]:
    return {(e.type, e.name) for e in cb.list_entities(limit=10_000)}


def _target(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """The database both processes open: a SQLite file, or the test PostgreSQL."""
    if backend == "postgres":
        return str(request.getfixturevalue("pg_url"))
    return str(tmp_path / "anchored.db")


def _base(target: str, project: str) -> ContextBase:
    return ContextBase(target, project=project, embedder="hash", background_embedding=False)


def _control(target: str) -> set[tuple[str, str]]:
    """What anchoring the TEXTS makes when nothing interrupts it (a project of its own)."""
    with _base(target, f"c-{uuid.uuid4().hex[:8]}") as cb:
        for text in TEXTS:
            cb.capture("user_message", session_id="s", text=text)
        cb.flush()
        found = _anchored(cb)
    assert len(found) >= len(TEXTS), found  # the texts do anchor something each
    return found


def test_close_before_anchoring_catches_up_leaves_it_for_the_next_open(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest, caplog: pytest.LogCaptureFixture
) -> None:
    target = _target(backend, tmp_path, request)
    expected = _control(target)
    pid = f"p-{uuid.uuid4().hex[:8]}"
    cb = _base(target, pid)
    anchorer = cb._anchorer
    assert anchorer is not None
    stall = threading.Event()  # anchoring cannot keep up: its first batch never ends
    anchorer._anchor = lambda batch, ids: (stall.wait(), (0, None, []))[1]  # type: ignore[method-assign]
    try:
        for text in TEXTS:
            cb.capture("user_message", session_id="s", text=text)
        cb._bus.flush()
        with caplog.at_level(logging.WARNING, logger="ctxbase.anchor.capture_anchor"):
            anchorer.stop(timeout=0.05)
        assert cb.anchor_stats().left == len(TEXTS)
        assert f"{len(TEXTS)} stored events are not anchored yet" in caplog.text
        assert len(cb.store.anchor_backlog(pid)) == len(TEXTS)
    finally:
        stall.set()
        cb.close()

    with _base(target, pid) as again:
        assert again.anchor_stats().resumed == len(TEXTS)
        again.flush()
        assert _anchored(again) == expected
        assert again.store.anchor_backlog(pid) == []
        assert again.anchor_stats().anchored == len(TEXTS)


def test_no_backlog_without_anchoring(cb: ContextBase, backend: str) -> None:
    off = ContextBase(cb.store, project=cb.project, embedder="hash", anchoring=False)
    off.capture("user_message", session_id="s", text="The report must use table refunds.")
    off.flush()
    assert cb.store.anchor_backlog(cb.project) == []
    assert off.anchor_stats().left == 0


def test_an_empty_backlog_costs_one_read_at_open(cb: ContextBase) -> None:
    calls = StoreCalls(cb.store)
    ContextBase(cb.store, project=cb.project, embedder="hash", background_embedding=False)
    assert calls.counts.get("anchor_backlog") == 1
    assert "get_events" not in calls.counts  # nothing to take up


_CHILD = textwrap.dedent(
    """
    import sys, threading
    from ctxbase import ContextBase
    from ctxbase.anchor import capture_anchor

    stall = threading.Event()
    # anchoring never catches up: the kill finds every event written and none anchored
    capture_anchor.AnchorWorker._anchor = lambda self, batch, ids: (stall.wait(), (0, None, []))[1]
    cb = ContextBase(sys.argv[1], project=sys.argv[2], embedder="hash",
                     background_embedding=False)
    for text in sys.argv[3:]:
        cb.capture("user_message", session_id="s", text=text)
    cb._bus.flush()  # written: capture's durability point
    print("written", flush=True)
    stall.wait()
    """
)


def test_a_process_killed_after_the_write_is_anchored_on_the_next_open(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    target = _target(backend, tmp_path, request)
    pid = f"p-{uuid.uuid4().hex[:8]}"
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, target, pid, *TEXTS],
        stdout=subprocess.PIPE,
        env=os.environ.copy(),
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "written"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(30)
    assert child.returncode == -signal.SIGKILL

    expected = _control(target)
    with _base(target, pid) as cb:
        assert len(cb.store.list_events(pid)) == len(TEXTS)
        assert cb.anchor_stats().resumed == len(TEXTS)
        cb.flush()
        assert _anchored(cb) == expected
        assert cb.store.anchor_backlog(pid) == []


def test_a_copy_carries_the_backlog(store: Store, tmp_path: Path) -> None:
    pid = f"p-{uuid.uuid4().hex[:8]}"
    a, b = make_event(pid, "s", "alpha text", ts=1.0), make_event(pid, "s", "beta text", ts=2.0)
    _write(store, a, b)
    store.drop_anchor_backlog(pid, [a.id])
    dst = SQLiteStore(str(tmp_path / "copy.db"))
    try:
        copy_project(store, dst, pid)
        assert dst.anchor_backlog(pid) == [b.id]  # anchored when a base opens it there
    finally:
        dst.close()


def test_closing_leaves_the_backlog_taken_up_for_the_next_open(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    pid = f"p-{uuid.uuid4().hex[:8]}"
    _write(store, *[make_event(pid, "s", text, ts=float(n)) for n, text in enumerate(TEXTS)])
    slow = AnchorWorker._anchor

    def one_by_one(self: AnchorWorker, batch: list[Event], ids: list[str]) -> Any:
        time.sleep(0.2)  # 8 s for the whole backlog
        return slow(self, batch, ids)

    monkeypatch.setattr(AnchorWorker, "_anchor", one_by_one)
    cb = ContextBase(store, project=pid, embedder="hash", anchoring=AnchorConfig(batch_size=1))
    assert cb.anchor_stats().resumed == len(TEXTS)
    started = time.monotonic()
    cb.close()
    assert time.monotonic() - started < 4  # one batch at most, not the backlog
    left = cb.anchor_stats().left
    assert 0 < left <= len(TEXTS)
    reopened = open_store(store.url)  # the base closed the store it was given
    try:
        assert len(reopened.anchor_backlog(pid)) >= left
    finally:
        reopened.close()
