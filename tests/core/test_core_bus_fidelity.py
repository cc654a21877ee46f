"""The capture bus loses nothing it aggregates, and HIGH events go ahead of the queue."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from core_helpers import count

from ctxbase import ContextBase
from ctxbase.capture.bus import BusConfig, CaptureBus, WriteResult
from ctxbase.model import Event, Priority

Opener = Callable[..., ContextBase]


def test_an_aggregated_burst_keeps_every_event_whole(db_path: Path, open_base: Opener) -> None:
    cb = open_base(bus_config=BusConfig(linger_s=0.5, aggregate_window_s=5.0))
    a = cb.capture(
        "internal_thought",
        session_id="s",
        text="步骤1：读取数据",
        metadata={"step": 1, "tokens": 120, "lang": "zh"},
        ts=1000.0,
    )
    b = cb.capture(
        "internal_thought",
        session_id="s",
        text="步骤2：计算利润率",
        metadata={"step": 2, "tokens": 80, "lang": "zh"},
        data={"rows": 3},
        importance=0.9,
        ts=1001.5,
    )
    # an event without text: its data is its content (and what search reads), so it
    # stays its own event rather than disappear into the text of the one before
    c = cb.capture("internal_thought", session_id="s", content={"plan": ["x", "y"]})
    child = cb.capture("assistant_message", session_id="s", text="done", parent_event_ids=[b])
    cb.flush()
    assert len({a, b, c}) == 3
    merged = cb.get_event(a)  # type: ignore[arg-type]
    assert merged.merged_id is None
    assert merged.text == "步骤1：读取数据\n步骤2：计算利润率"
    assert merged.ts == 1000.0
    assert merged.importance == 0.9
    # at the top: what both say alike, and the count
    assert merged.metadata == {"lang": "zh", "aggregated_count": 2}
    parts = merged.data["aggregated"]
    assert [p["text"] for p in parts] == ["步骤1：读取数据", "步骤2：计算利润率"]
    assert [p["ts"] for p in parts] == [1000.0, 1001.5]
    assert [p["metadata"]["step"] for p in parts] == [1, 2]
    assert [p["metadata"]["tokens"] for p in parts] == [120, 80]
    assert "data" not in parts[0] and parts[1]["data"] == {"rows": 3}
    assert [p["importance"] for p in parts] == [0.5, 0.9]
    assert [p["id"] for p in parts] == [a, b]  # each one's own id is kept
    # the second one's id, as capture returned it, reads the event it was merged into
    read_by_b = cb.get_event(b)  # type: ignore[arg-type]
    assert read_by_b.id == a and read_by_b.merged_id == b
    assert read_by_b.model_copy(update={"merged_id": None}) == merged
    plan = cb.get_event(c)  # type: ignore[arg-type]
    assert plan.data == {"plan": ["x", "y"]} and plan.text is None
    # a child of a merged event points at the event it was merged into
    assert cb.get_event(child).parent_event_ids == [a]  # type: ignore[arg-type]
    assert [e.id for e in cb.causal_chain(child)] == [a]  # type: ignore[arg-type]
    assert count(db_path, "events") == 3


def test_a_low_event_with_its_own_id_stays_addressable_by_it(open_base: Opener) -> None:
    cb = open_base(bus_config=BusConfig(linger_s=0.5, aggregate_window_s=5.0))

    def thought(text: str, event_id: str) -> str | None:
        return cb.capture("internal_thought", session_id="s", text=text, event_id=event_id)

    assert (thought("think one", "ev_th1"), thought("think two", "ev_th2")) == (
        "ev_th1",
        "ev_th2",
    )
    # named while still queued, and after the write: a parent link, get_event, the chain
    child = cb.capture("assistant_message", session_id="s", text="a", parent_event_ids=["ev_th2"])
    cb.flush()
    later = cb.record("assistant_message", session_id="s", text="b", parent_event_ids=["ev_th1"])
    assert cb.get_event(child).parent_event_ids == ["ev_th2"]  # type: ignore[arg-type]
    assert later.parent_event_ids == ["ev_th1"]
    assert cb.get_event("ev_th2").text == "think two"
    assert [e.id for e in cb.causal_chain(child)] == ["ev_th2"]  # type: ignore[arg-type]
    assert cb.capture_stats().aggregated == 0


def test_events_differing_in_task_role_or_references_are_not_merged(open_base: Opener) -> None:
    cb = open_base(bus_config=BusConfig(linger_s=0.5, aggregate_window_s=5.0))
    ref = cb.record("user_message", session_id="s", text="see this").id
    ids = [
        cb.capture("internal_thought", session_id="s", text="t1", task_id="a"),
        cb.capture("internal_thought", session_id="s", text="t2", task_id="b"),
        cb.capture("internal_thought", session_id="s", text="t3", task_id="b", agent_role="x"),
        cb.capture(
            "internal_thought",
            session_id="s",
            text="t4",
            task_id="b",
            agent_role="x",
            refers_to=[ref],
        ),
    ]
    cb.flush()
    assert len(set(ids)) == 4
    assert cb.capture_stats().aggregated == 0


def test_the_merged_text_stays_within_aggregate_max_chars(open_base: Opener) -> None:
    cb = open_base(
        bus_config=BusConfig(linger_s=0.5, aggregate_window_s=5.0, aggregate_max_chars=40)
    )
    a = cb.capture("internal_thought", session_id="s", text="short", metadata={"k": "v"})
    b = cb.capture("internal_thought", session_id="s", text="also short")
    # the metadata counts against the limit too: this one would carry it past 40
    c = cb.capture("internal_thought", session_id="s", text="x", metadata={"blob": "y" * 40})
    cb.flush()
    assert [cb.get_event(i).id for i in (a, b, c)] == [a, a, c]  # type: ignore[arg-type]
    assert [e.text for e in cb.last_events("s")] == ["short\nalso short", "x"]


class _GatedWriter:
    """The bus's write callback: records each batch, and holds the first until released
    (storage busy), so the queue builds up behind it."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.batches: list[list[str]] = []

    def __call__(self, events: Sequence[Event]) -> WriteResult:
        self.gate.wait(10)
        self.batches.append([e.text or "" for e in events])
        return WriteResult(len(events))

    @property
    def order(self) -> list[str]:
        return [t for batch in self.batches for t in batch]


def _event(session: str, kind: str, text: str, parents: Sequence[str] = ()) -> Event:
    return Event(
        id=f"ev_{text}",
        project_id="p",
        session_id=session,
        type=kind,
        text=text,
        parent_event_ids=list(parents),
    )


def test_high_events_go_ahead_of_other_sessions_but_never_of_their_causes() -> None:
    writer = _GatedWriter()
    bus = CaptureBus(writer, BusConfig(batch_size=1, linger_s=0.0, aggregate_window_s=0))
    try:
        bus.submit(_event("a", "assistant_message", "a0"), Priority.NORMAL)
        time.sleep(0.1)  # the writer holds a0 at the gate: the rest queue behind it
        bus.submit(_event("a", "assistant_message", "a1"), Priority.NORMAL)
        bus.submit(_event("a", "internal_thought", "a2"), Priority.LOW)
        bus.submit(_event("c", "tool_invocation", "c1"), Priority.NORMAL)
        bus.submit(_event("a", "assistant_message", "a3"), Priority.NORMAL)
        # another session's user message: ahead of everything queued
        bus.submit(_event("b", "user_message", "b1"), Priority.HIGH)
        # a later one goes behind the earlier HIGH one
        bus.submit(_event("d", "user_message", "d1"), Priority.HIGH)
        # a tool result caused by c1 (another session): ahead of a3, never of c1
        bus.submit(_event("e", "tool_result", "e1", parents=["ev_c1"]), Priority.HIGH)
        # one of session a: behind a's queued events, whatever its priority
        bus.submit(_event("a", "user_message", "a4"), Priority.HIGH)
        writer.gate.set()
        bus.flush(timeout=10)
    finally:
        writer.gate.set()
        bus.close()
    assert writer.order == ["a0", "b1", "d1", "a1", "a2", "c1", "e1", "a3", "a4"]


def test_a_high_event_cuts_the_writer_linger_short() -> None:
    writer = _GatedWriter()
    writer.gate.set()
    bus = CaptureBus(writer, BusConfig(linger_s=5.0))
    try:
        bus.submit(_event("a", "internal_thought", "slow"), Priority.LOW)
        time.sleep(0.2)
        assert writer.order == []  # a LOW event lingers for company
        bus.submit(_event("b", "user_message", "fast"), Priority.HIGH)
        deadline = time.monotonic() + 2.0
        while len(writer.order) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert writer.order == ["fast", "slow"]
    finally:
        bus.close()


def test_high_events_keep_session_order_in_the_store(db_path: Path, open_base: Opener) -> None:
    cb = open_base(bus_config=BusConfig(batch_size=2, linger_s=0.0))
    u = cb.capture("user_message", session_id="s", text="question")
    ids = [u]
    for i in range(30):
        ids.append(cb.capture("assistant_message", session_id="s", text=f"n{i}"))
        ids.append(
            cb.capture("tool_result", session_id="s", text=f"r{i}", parent_event_ids=[ids[-1]])
        )
        cb.capture("user_message", session_id=f"other{i}", text=f"x{i}")
    cb.flush()
    stored = cb.last_events("s", 100)
    assert [e.id for e in stored] == ids
    assert [e.seq for e in stored] == sorted(e.seq or 0 for e in stored)


def test_a_full_queue_never_lets_a_child_be_written_before_its_queued_parent() -> None:
    writer = _GatedWriter()
    cfg = BusConfig(max_queue=2, batch_size=10, linger_s=0.0, high_priority_wait_s=0.1)
    bus = CaptureBus(writer, cfg)
    try:
        bus.submit(_event("a", "assistant_message", "a0"), Priority.NORMAL)
        time.sleep(0.1)  # a0 held at the gate
        bus.submit(_event("a", "tool_invocation", "call"), Priority.NORMAL)
        bus.submit(_event("a", "assistant_message", "a1"), Priority.NORMAL)
        # the queue is full; the result's parent waits in it: the caller may not write the
        # result itself ahead of it, so it is queued past the limit, behind its parent
        done = threading.Event()

        def child() -> None:
            bus.submit(_event("a", "tool_result", "result", parents=["ev_call"]), Priority.HIGH)
            done.set()

        worker = threading.Thread(target=child)
        worker.start()
        assert done.wait(5)  # it waited high_priority_wait_s, then was queued
        assert bus.stats().queue_depth == 3
        writer.gate.set()
        worker.join()
        bus.flush(timeout=10)
    finally:
        writer.gate.set()
        bus.close()
    assert writer.order == ["a0", "call", "a1", "result"]
    assert bus.stats().written_by_caller == 0
