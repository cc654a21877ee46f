"""Memory items that say what another says: the pure choice, and an assembly that shows a
message's test once (a test_case entity anchored from it, not the message beside it)."""

from __future__ import annotations

from pathlib import Path

import ctxbase
from ctxbase.assemble.repeats import contained_repeats

TEST = (
    "def test_orders_page_size():\n    rows = query_orders(uid=1, off=0)\n"
    "    assert len(rows) <= 50"
)


def test_an_entity_saying_what_its_message_says_stays_and_the_message_goes() -> None:
    message = f"```python\n{TEST}\n```"
    assert contained_repeats({"ev_1": (message, False), "test_case:a": (TEST, True)}) == {
        "ev_1": "test_case:a"
    }


def test_a_part_of_a_longer_text_is_no_repeat() -> None:
    requirement = "订单查询接口必须按照《订单API规范》分页，每页最多50条。"
    message = requirement + "Orders API must return at most 50 rows per page."
    assert contained_repeats({"ev_1": (message, False), "requirement:a": (requirement, True)}) == {}


def test_short_texts_equal_texts_and_events_alone() -> None:
    # a name is a mention, not a repeat
    assert contained_repeats({"ev_1": ("orders", False), "table:orders": ("orders", True)}) == {}
    same = "the nightly report job runs at 02:30 UTC"
    # two events: the first given stays; whitespace and case do not matter
    assert contained_repeats({"ev_1": (same, False), "ev_2": (same.upper() + " ", False)}) == {
        "ev_2": "ev_1"
    }
    # nearly all of a longer event: the longer one stays; a third more is another statement
    assert contained_repeats({"ev_1": (same, False), "ev_2": (same + ", daily", False)}) == {
        "ev_1": "ev_2"
    }
    longer = same + " and mails finance@shop"
    assert contained_repeats({"ev_1": (same, False), "ev_2": (longer, False)}) == {}
    assert contained_repeats({}) == {}


def test_an_assembly_shows_the_test_once(tmp_path: Path) -> None:
    cb = ctxbase.open(str(tmp_path / "r.db"), project="shop", embedder="hash")
    try:
        code = cb.record(
            "assistant_message",
            session_id="day1",
            agent_id="test_gen",
            text=f"```python\n{TEST}\n```",
        )
        cb.flush()
        cb.wait_for_embeddings()
        ctx = cb.assemble_context(agent_role="test_gen", user_intent="test_orders_page_size 测试")
        body = "\n".join(str(m["content"]) for m in ctx.messages)
        assert body.count("assert len(rows) <= 50") == 1
        assert [s["name"] for s in ctx.code_snippets if s["type"] == "test_case"] == [
            "test_orders_page_size"
        ]
        dropped = {d["id"]: d for d in ctx.trace["dropped"]}
        assert dropped[code.id]["reason"] == "duplicate"
        assert "says what" in dropped[code.id]["detail"]
    finally:
        cb.close()
