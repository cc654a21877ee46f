"""What a caller just captured is there: a wait for vectors covers the captures still
queued, an id a capture returned works at once, and event reads mark retracted messages.

The writer is made to linger 30 s (BusConfig.linger_s), so without a flush the captures
below stay queued for the whole test: each call has to write them itself. A HIGH event
(a user message) ends the linger, as it is handled at once, so these tests capture user
messages at NORMAL priority: otherwise the writer races the reads they check."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from core_helpers import count

from ctxbase import ContextBase, NotFoundError
from ctxbase.capture.bus import BusConfig
from ctxbase.model import Priority, event_priority, register_event_type

Opener = Callable[..., ContextBase]
LINGER = BusConfig(linger_s=30.0, batch_size=10_000)


@pytest.fixture(autouse=True)
def user_messages_wait_in_the_queue() -> Iterator[None]:
    """User messages at NORMAL priority for the test, so the linger keeps them queued."""
    before = event_priority("user_message")
    register_event_type("user_message", Priority.NORMAL)
    try:
        yield
    finally:
        register_event_type("user_message", before)


MESSAGES = [
    {"role": "user", "content": "Project B: the invoice PDF export must use A4 paper."},
    {"role": "assistant", "content": "Understood, A4 for invoice PDFs."},
    {"role": "user", "content": "And the footer shows the VAT number."},
]


def test_a_wait_for_vectors_covers_the_messages_captured_just_before(
    db_path: Path, open_base: Opener
) -> None:
    cb = open_base(embedder="hash", bus_config=LINGER)
    ids = cb.capture_messages(MESSAGES, session_id="b1")
    assert count(db_path, "events") == 0  # still queued: the writer lingers
    started = time.monotonic()
    assert cb.wait_for_embeddings(30) is True
    assert time.monotonic() - started < 10  # the wait wrote them, not the linger
    assert count(db_path, "events") == 3
    assert cb.embedder is not None
    assert cb.store.count_pending_embeddings(cb.embedder.name, 100, "p") == 0
    found = cb.search("invoice paper size", top_k=3)
    assert found.pending_vectors == 0
    assert ids[0] in {c.item.owner_id for c in found.results}


def test_a_wait_for_one_project_leaves_another_projects_queue_alone(
    db_path: Path, open_base: Opener
) -> None:
    cb = open_base(embedder="hash", bus_config=LINGER)
    cb.capture_messages(MESSAGES[:1], session_id="a1", project="a")
    started = time.monotonic()
    assert cb.wait_for_embeddings(30, project="b") is True
    assert time.monotonic() - started < 10
    assert count(db_path, "events") == 0  # project a's capture is still queued
    assert cb.wait_for_embeddings(30, project="a") is True
    assert count(db_path, "events") == 1


def test_ids_a_capture_returned_work_at_once(db_path: Path, open_base: Opener) -> None:
    cb = open_base(bus_config=LINGER)
    ids = cb.capture_messages(MESSAGES, session_id="q1")
    assert count(db_path, "events") == 0
    cb.expire_message("q1", ids[0])  # was: session 'q1' not found
    assert cb.last_events("q1")[0].marks == ["retracted"]

    more = cb.capture_messages([{"role": "user", "content": "the TTL is 60 s"}], session_id="q2")
    assert count(db_path, "events") == 3
    assert cb.feedback(more[0], "wrong").label == "wrong"  # was: node ... not found

    said = cb.capture("user_message", session_id="q3", text="first")
    reply = cb.capture("assistant_message", session_id="q3", text="reply", parent_event_ids=[said])
    assert said is not None and reply is not None
    assert [e.id for e in cb.causal_chain(reply)] == [said]
    later = cb.capture("user_message", session_id="q3", text="later")
    assert later is not None
    assert cb.get_event(later).text == "later"

    asked = cb.capture("user_message", session_id="q4", text="which table?")
    assert asked is not None
    assert cb.get_session("q4").session_id == "q4"
    table = cb.upsert_entity("sql_table", "orders")
    assert cb.upsert_relationship(asked, "MENTIONS", table.id).from_id == asked


def test_an_unknown_id_is_not_found_without_writing_the_queue(
    db_path: Path, open_base: Opener
) -> None:
    cb = open_base(bus_config=LINGER)
    cb.capture_messages(MESSAGES, session_id="q1")
    with pytest.raises(NotFoundError, match="ev_nope"):
        cb.get_event("ev_nope")
    with pytest.raises(NotFoundError, match="'nope'"):
        cb.expire_message("nope", "ev_nope")
    with pytest.raises(NotFoundError, match="ev_nope"):
        cb.feedback("ev_nope", "wrong")
    assert count(db_path, "events") == 0  # a miss the queue does not explain waits for nothing


def test_event_reads_mark_retracted_and_wrong_rated_messages(open_base: Opener) -> None:
    cb = open_base()
    ids = cb.capture_messages(MESSAGES, session_id="m1")
    cb.expire_message("m1", ids[0])
    cb.feedback(ids[1], "wrong")
    listed = cb.last_events("m1")
    assert [e.marks for e in listed] == [["retracted"], ["wrong"], []]
    assert all(e.active for e in listed)  # `active` is about soft deletion, not retraction
    assert cb.get_event(ids[0]).marks == ["retracted"]
    assert cb.get_event(ids[2]).marks == []
    cb.feedback(ids[1], "neutral")  # the rating undone: no mark left
    assert cb.get_event(ids[1]).marks == []
