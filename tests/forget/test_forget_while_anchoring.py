"""A hard forget that lands while capture anchoring still has the forgotten events queued
(another base, another process, a server): what anchoring would make of them is not
written, so their text does not come back as entities, and a second forget finds nothing.

The first tests are deterministic: the events are captured with anchoring off, forgotten
through another store object (another process's view of the database), and only then
handed to an anchoring worker, as a capturing process's queue still holds them. The last
one races a `ctxbase forget` process against a real capture's anchoring: whatever the
interleaving, nothing of the forgotten session is left once anchoring is done.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ctxbase import ContextBase
from ctxbase.anchor.capture_anchor import AnchorConfig, AnchorWorker
from ctxbase.model import Event
from ctxbase.store.base import Store
from ctxbase.store.sqlite import SQLiteStore

SECRET = "vaultkey"


def _said(n: int) -> str:
    return (
        f"We decided to keep the {SECRET}{n} in the secret_store table.\n"
        f"The service must rotate {SECRET}{n} every week.\n"
        f"```sql\nSELECT {SECRET}{n} FROM secret_store;\n```"
    )


def _capture(cb: ContextBase, session: str, n: int) -> list[Event]:
    return [cb.record("user_message", session_id=session, text=_said(i)) for i in range(n)]


def _anchor_stale(cb: ContextBase, events: list[Event]) -> None:
    worker = AnchorWorker(cb, AnchorConfig())
    worker.submit(events)
    assert worker.wait_idle(60)
    assert worker.stats().errors == 0
    worker.stop()


def _left(cb: ContextBase) -> list[str]:
    """Entities that still hold the forgotten text."""
    return [e.id for e in cb.list_entities() if SECRET in f"{e.name} {e.text}"]


def _open(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Store:
    """A store object of its own on the test's database (as another process opens it)."""
    if backend == "sqlite":
        return SQLiteStore(str(tmp_path / "shared.db"))
    from ctxbase.store.postgres import PostgresStore

    return PostgresStore(request.getfixturevalue("pg_url"), max_size=2)


def test_events_forgotten_elsewhere_are_not_anchored_afterwards(
    backend: str, tmp_path: Path, project_id: str, request: pytest.FixtureRequest
) -> None:
    cb = ContextBase(_open(backend, tmp_path, request), project=project_id, embedder="hash",
                     anchoring=False)  # fmt: skip
    try:
        kept = cb.record("user_message", session_id="keep", text=_said(99))
        events = _capture(cb, "gone", 3)
        # the forget, through another store object on the same database
        other = ContextBase(_open(backend, tmp_path, request), project=project_id,
                            embedder="hash", anchoring=False)  # fmt: skip
        try:
            assert other.forget(session_id="gone").removed["events"] == 3
        finally:
            other.close()
        _anchor_stale(cb, [*events, kept])
        # the kept event is anchored; nothing is made of the forgotten ones
        made = {e.properties.get("event_id") for e in cb.list_entities()}
        assert kept.id in made and not made & {e.id for e in events}
        assert all(f"{SECRET}99" in f"{e.name} {e.text}" for e in cb.list_entities()
                   if SECRET in f"{e.name} {e.text}")  # fmt: skip
        hits = cb.search(f"{SECRET}1 secret_store").results
        assert not [h for h in hits if f"{SECRET}1" in (h.item.text or "")]
        assert cb.forget(session_id="gone").already_forgotten == ["gone"]
    finally:
        cb.close()


def test_events_hidden_before_anchoring_leave_nothing_visible(
    backend: str, tmp_path: Path, project_id: str, request: pytest.FixtureRequest
) -> None:
    cb = ContextBase(_open(backend, tmp_path, request), project=project_id, embedder="hash",
                     anchoring=False)  # fmt: skip
    try:
        shown = _capture(cb, "s1", 2)
        hidden = _capture(cb, "s2", 2)
        assert cb.soft_delete([e.id for e in hidden]) == 2
        _anchor_stale(cb, [*shown, *hidden])
        made = {e.properties.get("event_id") for e in cb.list_entities()}
        assert made >= {e.id for e in shown} and not made & {e.id for e in hidden}
    finally:
        cb.close()


def test_a_forget_process_racing_capture_anchoring_leaves_nothing(tmp_path: Path) -> None:
    db = str(tmp_path / "race.db")
    cb = ContextBase(db, project="race", embedder="hash")
    try:
        cb.record("user_message", session_id="keep", text=_said(99))
        _capture(cb, "gone", 300)
        env = {**os.environ, "CTXBASE_PROJECT": "race"}
        done = subprocess.run(
            [sys.executable, "-m", "ctxbase", "--db", db, "--project", "race",
             "--embedder", "hash", "forget", "--session", "gone"],
            capture_output=True, text=True, timeout=300, env=env,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        cb.flush(timeout=300)  # anchoring catches up with the stale queue
        left = [i for i in _left(cb) if f"{SECRET}99" not in str(cb.get_entity(i).text)]
        assert left == []
        assert cb.forget(session_id="gone").already_forgotten == ["gone"]
    finally:
        cb.close()
