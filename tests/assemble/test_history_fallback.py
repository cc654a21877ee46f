"""The history under budget pressure (seed 003's rolling window, history_fallback.py): taken
from the back without gaps, a tool call with its result, thoughts first to go, and the
pool's room to the state's facts before memory. Pure: allocate_budget and the helpers."""

from __future__ import annotations

from test_budget import COUNTER, words

from ctxbase.assemble.budget import BudgetItem, allocate_budget
from ctxbase.assemble.history_fallback import (
    Packable,
    pair_groups,
    rolling_take,
    window_turns,
)
from ctxbase.model import Event


def _ids(allocation: object, layer: str) -> list[str]:
    return [i.item.id for i in allocation.layers[layer].included]  # type: ignore[attr-defined]


def test_the_window_is_taken_from_the_back_without_a_gap() -> None:
    # newest first by score; the middle turn is too long: nothing older comes after it
    items = {
        "history": [
            BudgetItem("old", words(5, "o"), score=0.1),
            BudgetItem("mid", words(40, "m"), score=0.5),
            BudgetItem("new", words(5, "n"), score=0.9),
        ]
    }
    allocation = allocate_budget(20, {"history": 1.0}, COUNTER, items, min_truncated_tokens=100)
    assert _ids(allocation, "history") == ["new"]
    assert {d.item.id for d in allocation.dropped} == {"mid", "old"}
    # with room for a cut, the turn it stopped at is cut, still nothing older
    allocation = allocate_budget(20, {"history": 1.0}, COUNTER, items, min_truncated_tokens=4)
    assert _ids(allocation, "history") == ["mid", "new"]
    assert allocation.layers["history"].included[0].truncated


def test_a_call_and_its_result_go_together_and_are_never_cut() -> None:
    items = {
        "history": [
            BudgetItem("ask", words(3, "q"), score=0.1),
            BudgetItem("call", words(12, "c"), score=0.2, group="call"),
            BudgetItem("result", words(4, "r"), score=0.3, group="call"),
            BudgetItem("answer", words(4, "a"), score=0.9),
        ]
    }
    # room for the answer and the result, not for the call: both stay out, and the ask
    # before them too (no gap), though it would fit
    allocation = allocate_budget(12, {"history": 1.0}, COUNTER, items, min_truncated_tokens=2)
    assert _ids(allocation, "history") == ["answer"]
    assert not any(i.truncated for i in allocation.layers["history"].included)
    allocation = allocate_budget(20, {"history": 1.0}, COUNTER, items, min_truncated_tokens=2)
    assert _ids(allocation, "history") == ["call", "result", "answer"]


def test_thoughts_go_before_any_other_turn() -> None:
    items = {
        "history": [
            BudgetItem("q", words(4, "q"), score=0.2),
            BudgetItem("think", words(6, "t"), score=0.6, aside=True),
            BudgetItem("a", words(4, "a"), score=0.9),
        ]
    }
    # the thought is newer than the question, yet the question keeps its place
    allocation = allocate_budget(10, {"history": 1.0}, COUNTER, items, min_truncated_tokens=100)
    assert _ids(allocation, "history") == ["q", "a"]
    allocation = allocate_budget(14, {"history": 1.0}, COUNTER, items, min_truncated_tokens=100)
    assert _ids(allocation, "history") == ["q", "think", "a"]


def test_the_pool_goes_to_the_facts_first_then_memory() -> None:
    shares = {"system": 0.1, "state": 0.1, "task": 0.1, "memory": 0.1, "history": 0.1}
    items = {
        "state": [BudgetItem(f"f{i}", words(10, f"f{i}_"), score=1.0) for i in range(3)],
        "memory": [BudgetItem(f"m{i}", words(10, f"m{i}_"), score=1.0) for i in range(3)],
    }
    # 50 tokens: each layer's quota (5) holds no item; the pool of 50 goes to the facts
    # first (all three), then memory (two of three)
    allocation = allocate_budget(50, shares, COUNTER, items, min_truncated_tokens=100)
    assert _ids(allocation, "state") == ["f0", "f1", "f2"]
    assert _ids(allocation, "memory") == ["m0", "m1"]


def test_rolling_take_says_where_it_stopped() -> None:
    items = [Packable(0, 5), Packable(1, 9, "g"), Packable(2, 2, "g"), Packable(3, 1)]
    assert rolling_take(items, 100) == ([0, 1, 2, 3], None)
    assert rolling_take(items, 10) == ([0], None)  # stopped at a group: nothing to cut
    assert rolling_take([Packable(0, 5), Packable(1, 9), Packable(2, 1)], 10) == ([0], 1)
    assert rolling_take([Packable(0, 5, aside=True), Packable(1, 4)], 6) == ([1], None)


def _event(eid: str, type_: str, parents: tuple[str, ...] = (), seq: int = 0) -> Event:
    return Event(
        id=eid,
        project_id="p",
        session_id="s",
        type=type_,
        text=eid,
        parent_event_ids=list(parents),
        seq=seq,
    )


def test_window_turns_count_no_thought_and_pair_groups_hold_calls() -> None:
    ask = _event("ask", "user_message")
    said = _event("said", "assistant_message")
    call = _event("call", "tool_invocation", ("said",))
    think = _event("think", "internal_thought")
    result = _event("result", "tool_result", ("call",))
    lone = _event("lone", "tool_invocation")
    lone_result = _event("lone_result", "tool_result", ("lone",))
    answer = _event("answer", "assistant_message")
    turns = [ask, said, think, result, lone, lone_result, answer]  # the call is folded in
    events = [ask, said, call, think, result, lone, lone_result, answer]
    window, older = window_turns(turns, 3)
    assert [e.id for e in window] == ["lone", "lone_result", "answer"]
    window, older = window_turns(turns, 4)
    assert [e.id for e in window] == ["result", "lone", "lone_result", "answer"]
    assert [e.id for e in older] == ["ask", "said", "think"]
    assert window_turns(turns, 50)[1] == []
    groups, orphans = pair_groups(window, events)
    assert groups == {"lone": "lone", "lone_result": "lone"}
    assert orphans == ["result"]  # its call's message is older than the window
    groups, orphans = pair_groups(turns, events)
    assert groups["result"] == groups["said"] == "said" and orphans == []
