from __future__ import annotations

import copy
from typing import Any

import pytest

from ctxbase.assemble.diff import (
    TraceFormatError,
    diff_messages,
    diff_traces,
    render_diff,
    render_prompt,
)

BEFORE: dict[str, Any] = {
    "context_id": "ctx_1",
    "policy": "coder",
    "strategies": ["referenced_code_first", "recent_window"],
    "layers": {
        "system": {
            "tokens": 10,
            "items": [{"id": "sys", "source": "policy", "score": 1.0, "text": "You are a coder."}],
        },
        "memory": {
            "tokens": 120,
            "items": [
                {"id": "doc_1", "source": "document", "score": 0.9, "text": "Redis rules V3.2"},
                {"id": "sql_2", "source": "code", "score": 0.8, "text": "SELECT * FROM orders"},
            ],
        },
        "history": {
            "tokens": 40,
            "items": [{"id": "msg_5", "source": "message", "score": 0.5, "text": "add cache"}],
        },
    },
    "dropped": [{"id": "doc_9", "reason": "budget"}],
}


def _after() -> dict[str, Any]:
    after = copy.deepcopy(BEFORE)
    after["context_id"] = "ctx_2"
    after["strategies"] = ["referenced_code_first", "error_driven_repair"]
    memory = after["layers"]["memory"]
    memory["items"][0]["score"] = 0.7  # doc_1 score drops
    moved = memory["items"].pop(1)  # sql_2 goes to history
    after["layers"]["history"]["items"].append(moved)
    memory["items"].append(
        {"id": "test_4", "source": "test_case", "score": 0.95, "text": "test cache expiry"}
    )
    memory["tokens"] = 90
    after["layers"]["history"]["tokens"] = 70
    after["layers"]["system"]["items"][0]["text"] = "You are a careful coder."
    after["dropped"] = [{"id": "msg_1", "reason": "duplicate"}]
    return after


def test_identical_traces_have_no_differences() -> None:
    diff = diff_traces(BEFORE, copy.deepcopy(BEFORE))
    assert diff.is_empty
    assert diff.prompt_diff == ()
    assert "no differences" in render_diff(diff)


def test_trace_diff_finds_every_kind_of_change() -> None:
    diff = diff_traces(BEFORE, _after())
    assert diff.before_id == "ctx_1" and diff.after_id == "ctx_2"
    assert diff.strategies_added == ("error_driven_repair",)
    assert diff.strategies_removed == ("recent_window",)
    assert [r.id for r in diff.added] == ["test_4"]
    assert diff.added[0].layer == "memory"
    assert diff.removed == ()
    assert [(m.id, m.from_layer, m.to_layer) for m in diff.moved] == [
        ("sql_2", "memory", "history")
    ]
    (change,) = diff.score_changes
    assert change.id == "doc_1" and change.delta == pytest.approx(-0.2)
    assert diff.text_changed == ("sys",)
    deltas = {t.layer: t.delta for t in diff.tokens}
    assert deltas == {"system": 0, "memory": -30, "history": 30}
    assert diff.total_token_delta == 0
    assert diff.newly_dropped == (("msg_1", "duplicate"),)
    assert diff.no_longer_dropped == ("doc_9",)
    assert not diff.is_empty


def test_prompt_diff_is_a_unified_diff() -> None:
    diff = diff_traces(BEFORE, _after())
    assert diff.prompt_diff[0] == "--- ctx_1"
    assert diff.prompt_diff[1] == "+++ ctx_2"
    assert "-You are a coder." in diff.prompt_diff
    assert "+You are a careful coder." in diff.prompt_diff
    assert "+test cache expiry" in diff.prompt_diff


def test_render_diff_report() -> None:
    report = render_diff(diff_traces(BEFORE, _after()))
    assert "strategies: +error_driven_repair, -recent_window" in report
    assert "+ test_4 [memory] score 0.950: test cache expiry" in report
    assert "~ sql_2 moved memory -> history" in report
    assert "~ doc_1 score 0.900 -> 0.700 (-0.200)" in report
    assert "memory        120 ->     90 (-30)" in report
    assert "! msg_1 now dropped (duplicate)" in report
    assert "prompt:" in report
    assert "prompt:" not in render_diff(diff_traces(BEFORE, _after()), include_prompt=False)


def test_removed_item_and_new_layer() -> None:
    after = copy.deepcopy(BEFORE)
    del after["layers"]["history"]
    after["layers"]["state"] = {"tokens": 5, "items": [{"id": "budget", "text": "预算<=5万"}]}
    diff = diff_traces(BEFORE, after)
    assert [r.id for r in diff.removed] == ["msg_5"]
    assert [r.id for r in diff.added] == ["budget"]
    assert diff.added[0].score is None
    assert {t.layer: (t.before, t.after) for t in diff.tokens}["state"] == (0, 5)
    assert {t.layer: (t.before, t.after) for t in diff.tokens}["history"] == (40, 0)


def test_render_prompt_orders_layers() -> None:
    prompt = render_prompt(BEFORE)
    assert prompt.index("## system") < prompt.index("## memory") < prompt.index("## history")
    assert "SELECT * FROM orders" in prompt


def test_bad_trace_names_the_path() -> None:
    bad = copy.deepcopy(BEFORE)
    bad["layers"]["memory"]["items"][1] = {"text": "no id"}
    with pytest.raises(TraceFormatError, match=r"before\.layers\.memory\.items\[1\]: missing 'id'"):
        diff_traces(bad, BEFORE)
    with pytest.raises(TraceFormatError, match=r"after\.layers: expected a mapping"):
        diff_traces(BEFORE, {"layers": ["system"]})
    bad_score = copy.deepcopy(BEFORE)
    bad_score["layers"]["system"]["items"][0]["score"] = "high"
    with pytest.raises(TraceFormatError, match="score must be a number"):
        diff_traces(BEFORE, bad_score)


def test_message_list_diff() -> None:
    before = [
        {"role": "system", "content": "You are an assistant."},
        {"role": "system", "content": "Known: budget=50000"},
        {"role": "user", "content": "那时间呢"},
    ]
    after = [
        {"role": "system", "content": "You are an assistant."},
        {"role": "system", "content": "Known: budget=50000; deadline=unknown"},
        {"role": "user", "content": "那时间呢"},
    ]
    diff = diff_messages(before, after)
    assert diff.unchanged == 2
    assert [i for i, _ in diff.removed] == [1]
    assert [i for i, _ in diff.added] == [1]
    assert "+Known: budget=50000; deadline=unknown" in diff.prompt_diff
    report = render_diff(diff)
    assert report.startswith("message diff: 1 added, 1 removed, 2 unchanged")
    assert "- #1 [system] Known: budget=50000" in report
    assert diff_messages(before, list(before)).is_empty
