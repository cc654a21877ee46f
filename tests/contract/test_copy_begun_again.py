"""A re-run of migrate-data after the source forgot something and then wrote it again: the
new life reaches the backup, the forgotten one does not (on every pair of backends).

The backup holds the source's tombstones from the copy after the forget, so a session id,
an entity id (the same code unit ingested again) or the project itself, begun again in the
source, is tombstoned there and not held: the copy tells the new life from the forgotten
one by the time of the forget, as for a life begun again in the destination."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from contract_helpers import COPY_PAIRS, add_entity, make_event, store_pair, write

from ctxbase.store.base import Store
from ctxbase.store.schema import TABLES
from ctxbase.store.transfer import copy_project


@pytest.fixture(params=COPY_PAIRS)
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Store, Store]]:
    yield from store_pair(request, tmp_path)


def _all_text(store: Store, pid: str) -> str:
    return json.dumps(
        [
            {k: v for k, v in r.items() if k != "vec"}
            for table in TABLES
            for batch in store.export_rows(pid, table)
            for r in batch
        ],
        default=str,
        ensure_ascii=False,
    )


def test_a_session_and_an_entity_begun_again_in_the_source_reach_the_backup(
    stores: tuple[Store, Store], project_id: str
) -> None:
    src, bak = stores
    pid = project_id
    write(src, make_event(pid, "s1", "first life zqxold"), make_event(pid, "s2", "kept"))
    unit = add_entity(src, pid, "code", "pay.pay", "def pay(): zqxoldcode")
    copy_project(src, bak, pid)
    src.forget(pid, session_id="s1", entity_ids=[unit.id])
    copy_project(src, bak, pid)  # the backup forgets them too, and holds their tombstones
    write(src, make_event(pid, "s1", "second life zqxnew"))
    again = add_entity(src, pid, "code", "pay.pay", "def pay(): zqxnewcode")
    assert again.id == unit.id  # the same id, tombstoned in the backup

    counts = copy_project(src, bak, pid)

    assert all(c.matches for c in counts.values()), counts
    assert counts["events"].written == 1 and counts["entities"].written == 1
    assert {e.text for e in bak.list_events(pid, "s1")} == {"second life zqxnew"}
    assert [e.text for e in bak.get_entities(pid, [unit.id])] == ["def pay(): zqxnewcode"]
    text = _all_text(bak, pid)
    assert "zqxold" not in text and "zqxoldcode" not in text
    assert sum(c.written for c in copy_project(src, bak, pid).values()) == 0  # nothing more

    # the other way round stays refused: a backup from before the forget into the source
    old = copy_project(bak, src, pid)
    assert all(c.matches for c in old.values()), old
    assert "zqxold" not in _all_text(src, pid)


def test_a_project_begun_again_in_the_source_reaches_the_backup(
    stores: tuple[Store, Store], project_id: str
) -> None:
    src, bak = stores
    pid = project_id
    write(src, make_event(pid, "s1", "first life zqxold"))
    copy_project(src, bak, pid)
    src.forget(pid, whole_project=True)
    gone = copy_project(src, bak, pid)
    assert all(c.matches for c in gone.values()), gone
    assert pid not in bak.list_projects()  # as in the source: nothing of it is left there
    write(src, make_event(pid, "s1", "second life zqxnew"), make_event(pid, "s9", "more"))

    counts = copy_project(src, bak, pid)

    assert all(c.matches for c in counts.values()), counts
    assert pid in bak.list_projects()
    texts = {e.text for e in bak.list_events(pid, include_inactive=True)}
    assert texts == {"second life zqxnew", "more"}
    assert "zqxold" not in _all_text(bak, pid)
