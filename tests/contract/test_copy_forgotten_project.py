"""copy_project into a store that forgot the whole project and was written to again since.

A backup taken before that forget brings back nothing of the project's first life (its
project row, sessions, events, facts of any scope, traces) and the destination's rows of the
new life count as its own, so the row-count check passes, on every pair of backends."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from contract_helpers import COPY_PAIRS, make_event, store_pair, write

from ctxbase.model import SessionInfo, StateFact, TaskInfo
from ctxbase.store.base import Store
from ctxbase.store.schema import TABLES
from ctxbase.store.sqlite import SQLiteStore
from ctxbase.store.transfer import copy_project, project_forgotten, project_reborn

OLD = "first life zqxpay ledger"


def _snapshot(store: Store, pid: str) -> dict[str, list[str]]:
    """Every table's rows as sorted JSON texts (the projects' write counter left out)."""
    return {
        table: sorted(
            json.dumps(
                {k: v.tolist() if k == "vec" else v for k, v in r.items() if k != "generation"},
                sort_keys=True,
            )
            for batch in store.export_rows(pid, table)
            for r in batch
        )
        for table in TABLES
    }


@pytest.fixture(params=COPY_PAIRS)
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Store, Store]]:
    yield from store_pair(request, tmp_path)


def _populate(store: Store, pid: str) -> None:
    """The first life: two sessions, a task, events with vectors, facts of the project's
    own scope (caused by nothing forgotten) and a trace of no session."""
    store.upsert_session(SessionInfo(project_id=pid, session_id="s1", title="one"))
    store.upsert_task(TaskInfo(project_id=pid, task_id="t1", session_id="s1"))
    write(
        store,
        make_event(pid, "s1", OLD, ts=10.0, task_id="t1"),
        make_event(pid, "s2", "the cache is Redis", ts=11.0),
    )
    for scope, scope_id, key in (("project", pid, "ledger"), ("session", "s1", "mood")):
        store.set_state(StateFact(project_id=pid, scope=scope, scope_id=scope_id, key=key,
                                  value=OLD))  # fmt: skip
    store.put_trace(pid, "ctx-none", {"intent": OLD})
    items = [r["item_id"] for batch in store.export_rows(pid, "items") for r in batch]
    store.put_vectors("m", [(pid, i, np.ones(4, dtype=np.float32)) for i in items])


def test_a_project_written_to_again_gets_nothing_of_its_first_life_back(
    stores: tuple[Store, Store], project_id: str
) -> None:
    bak, live = stores
    pid = project_id
    _populate(bak, pid)
    copy_project(bak, live, pid)
    live.forget(pid, whole_project=True)
    # the new life: a new session and a session id used before, a project fact, a trace
    write(live, make_event(pid, "s9", "new life", ts=30.0))
    write(live, make_event(pid, "s1", "s1 again", ts=31.0))
    live.set_state(StateFact(project_id=pid, scope="project", scope_id=pid, key="ledger",
                             value="new"))  # fmt: skip
    live.put_trace(pid, "ctx-new", {"intent": "new"})
    again = _snapshot(live, pid)

    counts = copy_project(bak, live, pid, batch=2)

    assert all(c.matches for c in counts.values()), counts
    assert _snapshot(live, pid) == again  # nothing of the first life written back
    assert project_reborn(counts) and not project_forgotten(counts)
    assert all(c.written == 0 for c in counts.values()), counts
    assert counts["projects"].forgotten == 1 and counts["projects"].own == 1
    assert counts["events"].forgotten == 2 and counts["events"].own == 2
    # s1's first row too, though s1 is held again: the held row is its new life's
    assert counts["sessions"].forgotten == 2 and counts["sessions"].own == 2
    assert counts["tasks"].forgotten == 1
    # the project's fact of the first life (record and version) and s1's mood
    assert counts["state"].forgotten == 2 and counts["state_history"].forgotten == 2
    assert counts["state"].own == 1 and counts["state_history"].own == 1
    assert counts["traces"].forgotten == 1 and counts["traces"].own == 1
    assert [f.value for f in live.get_state(pid, "project", pid, "ledger")] == ["new"]
    assert live.get_trace(pid, "ctx-none") is None
    assert {e.text for e in live.list_events(pid, include_inactive=True)} == {
        "new life",
        "s1 again",
    }
    # a second copy finds the same
    assert all(c.matches for c in copy_project(bak, live, pid).values())
    assert _snapshot(live, pid) == again


def test_what_the_backup_wrote_after_the_forget_is_copied(tmp_path: Path, project_id: str) -> None:
    """A source row newer than the destination's whole-project forget is no part of the
    forgotten life: it is copied, and counted as written."""
    pid = project_id
    bak, live = SQLiteStore(str(tmp_path / "b.db")), SQLiteStore(str(tmp_path / "l.db"))
    try:
        _populate(bak, pid)
        copy_project(bak, live, pid)
        live.forget(pid, whole_project=True)
        write(live, make_event(pid, "s9", "new life", ts=30.0))
        write(bak, make_event(pid, "s3", "written after the forget", ts=40.0))
        bak.set_state(StateFact(project_id=pid, scope="project", scope_id=pid, key="later",
                                value=1))  # fmt: skip
        counts = copy_project(bak, live, pid)
        assert all(c.matches for c in counts.values()), counts
        assert counts["events"].written == 1 and counts["state"].written == 1
        assert counts["events"].own == 1  # "new life"
        texts = {e.text for e in live.list_events(pid, include_inactive=True)}
        assert texts == {"new life", "written after the forget"}
        assert live.get_state(pid, "project", pid, "ledger") == []
    finally:
        bak.close()
        live.close()


def test_a_re_run_into_a_backup_forgets_there_the_project_the_source_forgot(
    stores: tuple[Store, Store], project_id: str
) -> None:
    """The other way round: the source forgets the whole project after a backup was made,
    and a re-run copies it into the backup again. Its events and sessions go by their
    tombstones; its facts and traces of no session, which have none, go because they are
    older than the forget and the source does not hold them. What the backup wrote after
    the forget, and what the source wrote after it, stay."""
    src, bak = stores
    pid = project_id
    _populate(src, pid)
    copy_project(src, bak, pid)
    src.forget(pid, whole_project=True)
    write(src, make_event(pid, "s7", "the source's new life", ts=50.0))
    src.set_state(StateFact(project_id=pid, scope="project", scope_id=pid, key="after",
                            value="kept"))  # fmt: skip
    bak.set_state(StateFact(project_id=pid, scope="user", scope_id="u1", key="own",
                            value="the backup's own"))  # fmt: skip

    counts = copy_project(src, bak, pid, batch=2)

    assert all(c.matches for c in counts.values()), counts
    snapshot = json.dumps(_snapshot(bak, pid))
    assert OLD not in snapshot and "the cache is Redis" not in snapshot
    assert bak.get_trace(pid, "ctx-none") is None
    assert counts["traces"].removed == 1
    assert counts["state"].removed == 2 and counts["state_history"].removed == 2
    assert bak.get_state(pid, "project", pid, "ledger") == []
    assert [f.value for f in bak.get_state(pid, "project", pid, "after")] == ["kept"]
    assert [f.value for f in bak.get_state(pid, "user", "u1", "own")] == ["the backup's own"]
    assert {e.text for e in bak.list_events(pid, include_inactive=True)} == {
        "the source's new life"
    }
    again = copy_project(src, bak, pid)  # a further re-run finds nothing more to forget
    assert all(c.matches for c in again.values()) and sum(c.removed for c in again.values()) == 0
