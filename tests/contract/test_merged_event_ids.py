"""An event the capture bus merged into an aggregated one keeps its id: the id capture
returned names the stored event everywhere an event id is read (get_event, parent links
and references, the causal chain both ways), on every backend. Hiding or forgetting one
alone is refused (it would take the rest of the burst with it); forgetting the aggregated
event removes its aliases and tombstones them, leaving nothing behind. Aliases are written
with the event, rebuilt when a copy imports it, and filled in when a database is upgraded."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from contract_helpers import fresh_database, make_event, write

from ctxbase import ContextBase, NotFoundError
from ctxbase.capture.bus import BusConfig
from ctxbase.errors import ConflictError, ValidationError
from ctxbase.model import Event
from ctxbase.store.base import SCHEMA_VERSION, Store
from ctxbase.store.sqlite import SQLiteStore
from ctxbase.store.transfer import copy_project
from residue import postgres_copies, sqlite_file_copies

BACKENDS = ("sqlite", "postgres")
# long enough that a burst captured in a row waits in the queue together
BURSTS = BusConfig(linger_s=0.5, aggregate_window_s=5.0)


@pytest.fixture
def bursts(
    backend: str, tmp_path: Path, project_id: str, request: pytest.FixtureRequest
) -> Iterator[ContextBase]:
    if backend == "postgres":
        from ctxbase.store.postgres import PostgresStore

        opened: Store = PostgresStore(request.getfixturevalue("pg_url"), max_size=4)
    else:
        opened = SQLiteStore(str(tmp_path / "bursts.db"))
    base = ContextBase(
        opened,
        project=project_id,
        embedder=None,
        bus_config=BURSTS,
    )
    yield base
    base.close()


def _aggregated(project_id: str, session_id: str, texts: list[str]) -> Event:
    """An event shaped as the capture bus stores a burst (capture/bus.py `_merge`)."""
    ids = [f"ev_{uuid.uuid4().hex}" for _ in texts]
    parts = [{"id": i, "ts": 10.0 + n, "text": t, "importance": 0.5} for n, (i, t) in
             enumerate(zip(ids, texts, strict=True))]  # fmt: skip
    return Event(
        id=ids[0],
        project_id=project_id,
        session_id=session_id,
        type="internal_thought",
        text="\n".join(texts),
        data={"aggregated": parts},
        metadata={"aggregated_count": len(parts)},
        ts=10.0,
    )


def _merged(event: Event) -> list[str]:
    return [p["id"] for p in event.data["aggregated"]][1:]


def test_the_store_keeps_the_ids_merged_into_an_event(store: Store, project_id: str) -> None:
    burst = _aggregated(project_id, "s", ["think one", "think two", "think three"])
    b, c = _merged(burst)
    # data of the caller's own that only looks like a burst names nothing
    lookalike = make_event(project_id, "s", "mine", data={"aggregated": [{"id": "ev_x"}]},
                           metadata={"aggregated_count": 1})  # fmt: skip
    plain = make_event(project_id, "s", "plain")
    write(store, burst, lookalike, plain)
    assert store.event_aliases(project_id, [b, c, burst.id, "ev_x", plain.id, ""]) == {
        b: burst.id,
        c: burst.id,
    }
    assert store.event_aliases("another-project", [b]) == {}
    # a retry of the burst writes nothing twice
    assert write(store, burst) == []
    assert store.event_aliases(project_id, [b]) == {b: burst.id}
    report = store.forget(project_id, event_ids=[burst.id])
    assert report.removed["event_aliases"] == 2 and report.removed["events"] == 1
    assert store.event_aliases(project_id, [b, c]) == {}
    # the merged ids are tombstoned with it: forgotten, not unknown
    assert store.forgotten_ids(project_id, [b, c, plain.id]) == {b, c}


def test_a_whole_project_forget_tombstones_the_merged_ids(store: Store, project_id: str) -> None:
    burst = _aggregated(project_id, "s", ["one", "two"])
    (b,) = _merged(burst)
    write(store, burst)
    report = store.forget(project_id, whole_project=True)
    assert report.removed["event_aliases"] == 1
    assert store.count_rows(project_id, "events") == 0
    assert store.event_aliases(project_id, [b]) == {}
    assert store.forgotten_ids(project_id, [burst.id, b]) == {burst.id, b}


def test_a_session_forget_removes_the_aliases_of_its_events(store: Store, project_id: str) -> None:
    gone = _aggregated(project_id, "s-gone", ["one", "two"])
    kept = _aggregated(project_id, "s-kept", ["three", "four"])
    write(store, gone, kept)
    store.forget(project_id, session_id="s-gone")
    assert store.event_aliases(project_id, [*_merged(gone), *_merged(kept)]) == {
        _merged(kept)[0]: kept.id
    }


def test_a_copy_rebuilds_the_aliases_of_the_events_it_imports(
    store: Store, project_id: str, tmp_path: Path
) -> None:
    burst = _aggregated(project_id, "s", ["one", "two"])
    write(store, burst)
    target = SQLiteStore(str(tmp_path / "copy.db"))
    try:
        copy_project(store, target, project_id)
        assert target.event_aliases(project_id, _merged(burst)) == {_merged(burst)[0]: burst.id}
    finally:
        target.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_upgrade_fills_in_the_aliases_of_the_events_stored_before(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    with fresh_database(backend, tmp_path, request) as (open_store, run):
        store = open_store()
        burst = _aggregated("p", "s", ["one", "two", "three"])
        # the caller's own data, shaped like a burst of one, or holding more than a burst
        lookalike = make_event("p", "s", "mine", data={"aggregated": [{"id": "ev_x"}]},
                               metadata={"aggregated_count": 1})  # fmt: skip
        more = _aggregated("p", "s", ["six", "seven"])
        more = more.model_copy(update={"data": {**more.data, "note": 1}})
        counted_wrong = _aggregated("p", "s", ["four", "five"]).model_copy(
            update={"metadata": {"aggregated_count": 3}}
        )
        try:
            write(store, burst, lookalike, counted_wrong, more)
        finally:
            store.close()
        run("DROP TABLE event_aliases")  # as a version 9 database has it
        run("UPDATE meta SET value='9' WHERE key='schema_version'")
        store = open_store()
        try:
            assert store.schema_version() == SCHEMA_VERSION
            others = [*_merged(counted_wrong), *_merged(more), "ev_x"]
            found = store.event_aliases("p", [*_merged(burst), *others])
            assert found == dict.fromkeys(_merged(burst), burst.id)
        finally:
            store.close()


def _copies(cb: ContextBase, needles: list[str], pg_url: str | None) -> dict[str, int]:
    if isinstance(cb.store, SQLiteStore):
        return {n: c for n, c in sqlite_file_copies(cb.store.path, needles).items() if c}
    assert pg_url is not None
    found: dict[str, int] = {}
    for _, _, needle in postgres_copies(pg_url, needles, project_id=cb.project):
        found[str(needle)] = found.get(str(needle), 0) + 1
    return found


def test_a_merged_id_names_the_event_it_went_into(
    bursts: ContextBase, backend: str, request: pytest.FixtureRequest
) -> None:
    cb = bursts
    # written at once: a queued user message would cut the writer's linger short
    u = cb.record("user_message", session_id="s", text="why is the nightly job slow?").id

    def thought(text: str) -> str:
        got = cb.capture("internal_thought", session_id="s", text=text, parent_event_ids=[u])
        assert got is not None
        return got

    a, b, c = thought("check the plan"), thought("the scan is sequential"), thought("index it")
    assert len({a, b, c}) == 3  # each capture its own id
    # read while the burst still waits in the queue: the read writes it first
    read = cb.get_event(b)
    assert (read.id, read.merged_id, read.text) == (a, b, "check the plan\nthe scan is "
                                                   "sequential\nindex it")  # fmt: skip
    assert [p["id"] for p in read.data["aggregated"]] == [a, b, c]
    assert cb.get_event(a).merged_id is None
    # a child naming a merged id links to the stored event, queued or written
    queued_child = cb.capture("assistant_message", session_id="s", text="add an index",
                              parent_event_ids=[c])  # fmt: skip
    thought("a new burst")  # keeps the one before from being the queue's last
    cb.flush()
    later = cb.record("tool_result", session_id="s", text="index built",
                      parent_event_ids=[b, c], refers_to=[c])  # fmt: skip
    assert later.parent_event_ids == [a] and later.refers_to == [a]
    assert cb.get_event(queued_child).parent_event_ids == [a]  # type: ignore[arg-type]
    # the chain, both ways, from any id of the burst
    assert [e.id for e in cb.causal_chain(b)] == [e.id for e in cb.causal_chain(a)] == [u]
    effects = {e.id for e in cb.effects(c)}
    assert {queued_child, later.id} <= effects and effects == {e.id for e in cb.effects(a)}
    assert [e.id for e in cb.causal_chain(later.id)] == [a, u]
    # feedback on a merged id rates the stored event
    assert cb.feedback(c, "helpful").node_id == a
    assert cb.get_feedback(b) == cb.get_feedback(a) and cb.get_feedback(a) is not None
    assert [f.label for f in cb.feedback_history(c)] == ["helpful"]

    # one event of a burst is not hidden or forgotten alone: the message names the burst's
    for act in (
        lambda: cb.soft_delete([b]),
        lambda: cb.restore([b]),
        lambda: cb.forget(event_ids=[c]),
    ):
        with pytest.raises(ConflictError, match=f"merged into event '{a}'"):
            act()
    assert cb.get_event(a).active
    # hidden with it: the merged id says where it went, and reads it with include_inactive
    assert cb.set_hidden([a, b], True).changed >= 1
    with pytest.raises(NotFoundError, match=f"merged into event '{a}', which is hidden"):
        cb.get_event(b)
    with pytest.raises(NotFoundError, match="hidden"):
        cb.causal_chain(b)
    assert cb.get_event(b, include_inactive=True).id == a
    cb.restore([a])
    assert cb.get_event(b).active

    # forgotten with it: aliases gone, ids tombstoned, nothing of them left anywhere
    report = cb.forget(event_ids=[a, b])
    assert report.removed["event_aliases"] == 2 and not report.not_found
    for merged in (b, c):
        with pytest.raises(NotFoundError, match="hard-forgotten"):
            cb.get_event(merged)
    assert cb.forget(event_ids=[c]).already_forgotten == [c]
    with pytest.raises(ValidationError, match="does not exist"):
        cb.capture("assistant_message", session_id="s", text="late", parent_event_ids=[b])
    pg_url = request.getfixturevalue("pg_url") if backend == "postgres" else None
    assert _copies(cb, [a, b, c, "the scan is sequential"], pg_url) == {}


def test_capture_answers_each_event_of_a_burst_with_its_own_id(bursts: ContextBase) -> None:
    cb = bursts
    ids: list[Any] = [
        cb.capture("internal_thought", session_id="s", text=f"step {n}") for n in range(5)
    ]
    stats = cb.capture_stats()
    cb.flush()
    assert len(set(ids)) == 5 and stats.aggregated == 4
    stored = [cb.get_event(i) for i in ids]
    assert {e.id for e in stored} == {ids[0]}
    assert [e.merged_id for e in stored] == [None, *ids[1:]]
    assert len(cb.last_events("s")) == 1
