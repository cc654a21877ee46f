"""copy_project (migrate-data) reads the source as of one moment and writes the destination
in one transaction: a base writing the source meanwhile leaves no half-copied rows (items
without their events) nor counts from later; an interrupted copy leaves the destination as
it was; a re-run into a destination written to since keeps its rows and says so."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from contract_helpers import make_event, open_store, write

from ctxbase.model import SessionInfo
from ctxbase.store.base import Store
from ctxbase.store.schema import TABLES
from ctxbase.store.transfer import copy_project


@pytest.fixture(params=["sqlite->sqlite", "sqlite->postgres", "postgres->sqlite"])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Store, Store, Store]]:
    """(source, another store object on the source's database, destination)."""
    src_kind, dst_kind = request.param.split("->")
    url = request.getfixturevalue("pg_url") if "postgres" in request.param else None
    src = open_store(src_kind, tmp_path / "src.db", url)
    writer = open_store(src_kind, tmp_path / "src.db", url)
    dst = open_store(dst_kind, tmp_path / "dst.db", url)
    yield src, writer, dst
    for store in (src, writer, dst):
        store.close()


def _populate(store: Store, pid: str, n: int = 3) -> None:
    store.upsert_session(SessionInfo(project_id=pid, session_id="s1", title="one"))
    write(store, *[make_event(pid, "s1", f"the walrus code is {i}", ts=float(i)) for i in range(n)])


def _item_owners_missing(store: Store, pid: str) -> list[str]:
    """Items of events whose event the store does not hold."""
    events = {r["event_id"] for rows in store.export_rows(pid, "events") for r in rows}
    return [
        r["owner_id"]
        for rows in store.export_rows(pid, "items")
        for r in rows
        if r["kind"] == "event" and r["owner_id"] not in events
    ]


def test_a_source_written_during_the_copy_is_copied_as_of_its_start(
    stores: tuple[Store, Store, Store], project_id: str
) -> None:
    src, writer, dst = stores
    _populate(src, project_id)
    wrote: list[str] = []

    def meanwhile(table: str, rows: int) -> None:
        # another base writes the source after the events were read, before their items
        if table == "events" and not wrote:
            later = [
                make_event(project_id, "s1", f"written later {i}", ts=10.0 + i) for i in range(4)
            ]
            wrote.extend(e.id for e in write(writer, *later))

    counts = copy_project(src, dst, project_id, batch=1, progress=meanwhile)
    assert len(wrote) == 4 and src.count_rows(project_id, "events") == 7  # they are stored
    assert all(c.matches for c in counts.values()), counts
    assert counts["events"].source == counts["events"].written == 3
    assert _item_owners_missing(dst, project_id) == []
    assert not dst.existing_ids(project_id, wrote)
    # the next copy brings them, whole
    again = copy_project(src, dst, project_id)
    assert again["events"].written == 4 and all(c.matches for c in again.values()), again
    assert _item_owners_missing(dst, project_id) == []


def test_an_interrupted_copy_leaves_the_destination_as_it_was(
    stores: tuple[Store, Store, Store], project_id: str
) -> None:
    src, _writer, dst = stores
    _populate(src, project_id)

    def stop(table: str, rows: int) -> None:
        if table == TABLES[-1] or table == "items":
            raise KeyboardInterrupt  # Ctrl-C half way

    with pytest.raises(KeyboardInterrupt):
        copy_project(src, dst, project_id, batch=1, progress=stop)
    assert {t: dst.count_rows(project_id, t) for t in TABLES if dst.count_rows(project_id, t)} == {}
    counts = copy_project(src, dst, project_id)
    assert all(c.matches and c.already == 0 for c in counts.values()), counts
    assert counts["events"].written == 3


def test_a_rerun_into_a_destination_written_to_since_keeps_its_rows_and_says_so(
    stores: tuple[Store, Store, Store], project_id: str
) -> None:
    src, _writer, dst = stores
    _populate(src, project_id)
    assert all(c.matches for c in copy_project(src, dst, project_id).values())
    write(dst, make_event(project_id, "s1", "said to the destination", ts=20.0))
    write(src, make_event(project_id, "s1", "said to the source", ts=21.0))
    again = copy_project(src, dst, project_id)
    assert all(c.matches for c in again.values()), again
    events = again["events"]
    assert (events.written, events.already, events.extra) == (1, 3, 1)
    assert events.destination == 5 and events.held == 4


def test_what_the_source_forgot_since_an_earlier_copy_is_forgotten_there_too(
    stores: tuple[Store, Store, Store], project_id: str
) -> None:
    src, _writer, dst = stores
    src.upsert_session(SessionInfo(project_id=project_id, session_id="a", title="a"))
    src.upsert_session(SessionInfo(project_id=project_id, session_id="b", title="b"))
    secret = write(src, make_event(project_id, "a", "the vaultkey is 1234", ts=1.0))
    kept = write(src, make_event(project_id, "b", "keep this one", ts=2.0))
    loose = write(src, make_event(project_id, "b", "and vaultkey 99 here", ts=3.0))
    assert all(c.matches for c in copy_project(src, dst, project_id).values())
    src.forget(project_id, session_id="a")
    src.forget(project_id, event_ids=[loose[0].id])
    counts = copy_project(src, dst, project_id)
    assert all(c.matches for c in counts.values()), counts
    assert counts["events"].removed == 2 and counts["sessions"].removed == 1
    held = {r["event_id"] for rows in dst.export_rows(project_id, "events") for r in rows}
    assert held == {kept[0].id}
    texts = [r["text"] for rows in dst.export_rows(project_id, "items") for r in rows]
    assert not any("vaultkey" in str(t) for t in texts), texts
    assert [s.session_id for s in dst.list_sessions(project_id)] == ["b"]
    assert dst.forgotten_ids(project_id, [secret[0].id, loose[0].id]) == {
        secret[0].id,
        loose[0].id,
    }
    again = copy_project(src, dst, project_id)  # nothing new: nothing to do
    assert all(c.matches and not c.written and not c.removed for c in again.values()), again


def test_a_session_written_to_in_the_destination_keeps_its_own_events(
    stores: tuple[Store, Store, Store], project_id: str
) -> None:
    src, _writer, dst = stores
    src.upsert_session(SessionInfo(project_id=project_id, session_id="a", title="a"))
    secret = write(src, make_event(project_id, "a", "the vaultkey is 1234", ts=1.0))
    assert all(c.matches for c in copy_project(src, dst, project_id).values())
    mine = write(dst, make_event(project_id, "a", "said to the destination", ts=5.0))
    src.forget(project_id, session_id="a")
    counts = copy_project(src, dst, project_id)
    assert all(c.matches for c in counts.values()), counts
    held = {r["event_id"] for rows in dst.export_rows(project_id, "events") for r in rows}
    assert held == {mine[0].id} and secret[0].id not in held
    assert [s.session_id for s in dst.list_sessions(project_id)] == ["a"]
