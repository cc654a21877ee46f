"""A re-run of migrate-data after the source changed rows in place (on every pair of
backends): what the source changed later than the destination's copy replaces it (an
entity and its search units rewritten, a fact written again or deleted); a row the
destination changed later, or one the source changed with no time to tell (an event
hidden), is kept and counted as differing, and `source_wins` takes the source's."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from contract_helpers import COPY_PAIRS, add_entity, make_event, match, store_pair, write

from ctxbase.model import StateFact
from ctxbase.store.base import Store
from ctxbase.store.transfer import TableCopy, copy_project


@pytest.fixture(params=COPY_PAIRS)
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Store, Store]]:
    yield from store_pair(request, tmp_path)


def _fact(pid: str, key: str, value: str) -> StateFact:
    return StateFact(project_id=pid, scope="project", scope_id=pid, key=key, value=value)


def _value(store: Store, pid: str, key: str) -> object:
    facts = store.get_state(pid, "project", pid, key)
    return facts[0].value if facts else None


def _found(store: Store, pid: str, word: str) -> set[str]:
    return {h.item_id for h in store.keyword_search(pid, match(word), None, 10)}


def _changed(counts: dict[str, TableCopy], figure: str) -> dict[str, int]:
    return {t: getattr(c, figure) for t, c in counts.items() if getattr(c, figure)}


def test_rows_the_source_changed_in_place_replace_the_destinations(
    stores: tuple[Store, Store], project_id: str
) -> None:
    src, dst = stores
    pid = project_id
    unit = add_entity(src, pid, "section", "doc.md#ops", "The zqxskua runbook.")
    src.set_state(_fact(pid, "owner", "ops"))
    src.set_state(_fact(pid, "pin", "v1"))
    first = copy_project(src, dst, pid)
    assert all(c.matches for c in first.values()), first
    time.sleep(0.01)  # the source's changes are later than the copy's rows
    again = add_entity(src, pid, "section", "doc.md#ops", "The zqxtern runbook.")
    assert again.id == unit.id  # rewritten under its id, as an ingest of new text does
    src.set_state(_fact(pid, "owner", "platform"))
    assert src.delete_state(pid, "project", pid, "pin", "unpin")
    assert _found(dst, pid, "zqxskua")

    counts = copy_project(src, dst, pid)

    assert all(c.matches for c in counts.values()), counts
    assert not _changed(counts, "differ"), counts
    assert counts["entities"].replaced == 1 and counts["items"].replaced >= 1
    assert counts["state"].replaced == 1 and counts["state"].dropped == 1
    assert [e.text for e in dst.get_entities(pid, [unit.id])] == ["The zqxtern runbook."]
    assert _found(dst, pid, "zqxtern") == _found(src, pid, "zqxtern") != set()
    assert not _found(dst, pid, "zqxskua")  # the old text left the keyword index
    assert _value(dst, pid, "owner") == "platform"
    assert _value(dst, pid, "pin") is None  # deleted there as in the source
    assert len(dst.state_history(pid, "project", pid, "pin")) == len(
        src.state_history(pid, "project", pid, "pin")
    )
    for table in ("entities", "items", "state", "state_history"):
        assert dst.count_rows(pid, table) == src.count_rows(pid, table), table

    last = copy_project(src, dst, pid)  # nothing more to do
    assert all(c.matches for c in last.values()), last
    assert not any(_changed(last, f) for f in ("written", "replaced", "dropped", "differ"))


def test_rows_the_destination_changed_later_are_kept_and_counted(
    stores: tuple[Store, Store], project_id: str
) -> None:
    src, dst = stores
    pid = project_id
    src.set_state(_fact(pid, "owner", "ops"))
    copy_project(src, dst, pid)
    src.set_state(_fact(pid, "owner", "from the source"))
    time.sleep(0.01)
    dst.set_state(_fact(pid, "owner", "from the destination"))  # later

    counts = copy_project(src, dst, pid)

    assert all(c.matches for c in counts.values()), counts
    assert counts["state"].differ == 1 and counts["state"].replaced == 0
    assert counts["state_history"].differ == 1  # its version 2, written on each side
    assert _value(dst, pid, "owner") == "from the destination"

    taken = copy_project(src, dst, pid, source_wins=True)
    assert all(c.matches for c in taken.values()), taken
    assert not _changed(taken, "differ")
    assert _changed(taken, "replaced") == {"state": 1, "state_history": 1}
    assert _value(dst, pid, "owner") == "from the source"


def test_a_change_with_no_time_is_counted_and_taken_with_source_wins(
    stores: tuple[Store, Store], project_id: str
) -> None:
    src, dst = stores
    pid = project_id
    event = write(src, make_event(pid, "s1", "the zqxwalrus code is 42"))[0]
    copy_project(src, dst, pid)
    assert src.set_active(pid, [event.id], False)  # hidden in the source

    counts = copy_project(src, dst, pid)

    assert all(c.matches for c in counts.values()), counts
    assert _changed(counts, "differ") == {"events": 1, "items": 1}
    assert [e.id for e in dst.list_events(pid, "s1")] == [event.id]  # kept as it was

    taken = copy_project(src, dst, pid, source_wins=True)
    assert all(c.matches for c in taken.values()), taken
    assert not _changed(taken, "differ")
    assert _changed(taken, "replaced") == {"events": 1, "items": 1}
    assert dst.list_events(pid, "s1") == []  # hidden there too
    assert [e.id for e in dst.list_events(pid, "s1", include_inactive=True)] == [event.id]
    assert not _found(dst, pid, "zqxwalrus") and not _found(src, pid, "zqxwalrus")
