"""The capture bus loses nothing it aggregates, and HIGH events go ahead of the queue."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from core_helpers import count

from ctxbase import ContextBase
from ctxbase.capture.bus import BusConfig

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
    assert a == b != c
    merged = cb.get_event(a)  # type: ignore[arg-type]
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
    assert parts[0]["id"] == a and parts[1]["id"] != a  # the second one's own id is kept
    plan = cb.get_event(c)  # type: ignore[arg-type]
    assert plan.data == {"plan": ["x", "y"]} and plan.text is None
    # a child of a merged event points at the event it was merged into
    assert cb.get_event(child).parent_event_ids == [a]  # type: ignore[arg-type]
    assert count(db_path, "events") == 3


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
    assert a == b != c
    assert [e.text for e in cb.last_events("s")] == ["short\nalso short", "x"]
