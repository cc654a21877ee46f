"""copy_project (migrate-data) says what it did: the rows it wrote and those already there,
a destination that forgot the whole project gets nothing of it back (until the project is
written to there again), and a store is never copied into itself."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from contract_helpers import COPY_PAIRS, make_event, store_pair, write

from ctxbase.errors import ValidationError
from ctxbase.model import SessionInfo
from ctxbase.store.base import Store
from ctxbase.store.postgres import PostgresStore
from ctxbase.store.sqlite import SQLiteStore
from ctxbase.store.transfer import copy_project, project_forgotten


@pytest.fixture(params=COPY_PAIRS)
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Store, Store]]:
    """(backup, live) on the backends named."""
    yield from store_pair(request, tmp_path)


def _populate(store: Store, pid: str) -> None:
    store.upsert_session(SessionInfo(project_id=pid, session_id="s1", title="one"))
    write(store, make_event(pid, "s1", "the walrus code is 42", ts=1.0),
          make_event(pid, "s1", "noted the walrus code", ts=2.0))  # fmt: skip
    store.put_trace(pid, "ctx-none", {"intent": "the walrus code", "tokens": 12})


def test_a_second_copy_writes_nothing_and_says_so(
    stores: tuple[Store, Store], project_id: str
) -> None:
    bak, live = stores
    _populate(bak, project_id)
    first = copy_project(bak, live, project_id)
    assert all(c.matches and c.written == c.source and c.already == 0 for c in first.values())
    assert first["events"].written == 2 and first["traces"].written == 1
    again = copy_project(bak, live, project_id, batch=1)
    assert all(c.matches for c in again.values()), again
    assert sum(c.written for c in again.values()) == 0
    assert again["events"].already == 2 and again["projects"].already == 1
    # one new event in the backup: only it (with its search unit and NEXT edge) is written
    write(bak, make_event(project_id, "s1", "and one more", ts=3.0))
    third = copy_project(bak, live, project_id)
    assert (third["events"].written, third["events"].already) == (1, 2)
    assert third["items"].written == 1 and third["relations"].written == 1


def test_a_whole_project_forget_is_not_undone_by_a_backup(
    stores: tuple[Store, Store], project_id: str
) -> None:
    bak, live = stores
    pid = project_id
    _populate(bak, pid)
    copy_project(bak, live, pid)
    live.forget(pid, whole_project=True)
    assert live.forgotten_ids(pid, [pid, "s1"], ("project",)) == {pid}
    held = live.count_rows(pid, "tombstones")

    counts = copy_project(bak, live, pid, batch=2)
    assert project_forgotten(counts)
    assert all(c.matches and c.written == 0 for c in counts.values()), counts
    assert all(c.forgotten == c.source for c in counts.values())
    assert counts["traces"].forgotten == 1 and counts["tombstones"].own == held
    assert pid not in live.list_projects()
    assert live.get_trace(pid, "ctx-none") is None
    assert live.list_events(pid, include_inactive=True) == []
    assert live.count_rows(pid, "tombstones") == held

    # Written to again on purpose: the project is held, its tombstone stays, and a copy
    # goes on row by row: the old events stay out, what the backup holds beyond them comes.
    assert write(live, make_event(pid, "s2", "a fresh start", ts=10.0))
    assert pid in live.list_projects()
    assert live.forgotten_ids(pid, [pid], ("project",)) == {pid}
    assert write(bak, make_event(pid, "s3", "written after the backup", ts=11.0))
    counts = copy_project(bak, live, pid)
    assert not project_forgotten(counts)
    assert counts["events"].forgotten == 2 and counts["events"].written == 1
    texts = {e.text for e in live.list_events(pid, include_inactive=True)}
    assert texts == {"a fresh start", "written after the backup"}


def test_a_project_never_forgotten_whole_is_copied_into_a_store_that_forgot_another(
    tmp_path: Path, project_id: str
) -> None:
    """The project tombstone is the project's own: another project forgotten whole, or a
    project id forgotten as a session, leaves this one's copy alone."""
    bak, live = SQLiteStore(str(tmp_path / "b.db")), SQLiteStore(str(tmp_path / "l.db"))
    try:
        other = project_id + "-other"
        write(live, make_event(other, "s", "elsewhere"))
        live.forget(other, whole_project=True)
        write(live, make_event(project_id, project_id, "a session named as the project"))
        live.forget(project_id, session_id=project_id)
        _populate(bak, project_id)
        counts = copy_project(bak, live, project_id)
        assert not project_forgotten(counts)
        assert counts["events"].written == 2 and counts["traces"].written == 1
    finally:
        bak.close()
        live.close()


def test_a_store_is_never_copied_into_itself(tmp_path: Path, project_id: str) -> None:
    path = tmp_path / "one.db"
    os.symlink(path, tmp_path / "link.db")
    stores = [SQLiteStore(str(p)) for p in (path, tmp_path / "link.db", tmp_path / "two.db")]
    one, link, two = stores
    try:
        _populate(one, project_id)
        assert one.same_database(link) and link.same_database(one) and one.same_database(one)
        assert not one.same_database(two)
        relative = SQLiteStore(os.path.relpath(path))
        stores.append(relative)
        assert relative.same_database(one)
        for dst in (one, link, relative):
            with pytest.raises(ValidationError, match="cannot be copied into itself"):
                copy_project(one, dst, project_id)
        assert one.count_rows(project_id, "events") == 2
        memory = SQLiteStore(":memory:")
        stores.append(memory)
        assert memory.same_database(memory) and not memory.same_database(one)
    finally:
        for store in stores:
            store.close()


def test_the_same_postgresql_database_by_another_url(
    pg_url: str, tmp_path: Path, project_id: str
) -> None:
    other_url = pg_url + ("&" if "?" in pg_url else "?") + "application_name=another"
    first, second = PostgresStore(pg_url, max_size=2), PostgresStore(other_url, max_size=2)
    lite = SQLiteStore(str(tmp_path / "l.db"))
    try:
        assert first.same_database(second) and second.same_database(first)
        assert not first.same_database(lite) and not lite.same_database(first)
        _populate(first, project_id)
        with pytest.raises(ValidationError, match="cannot be copied into itself"):
            copy_project(first, second, project_id)
        assert first.count_rows(project_id, "events") == 2
    finally:
        first.close()
        second.close()
        lite.close()
