"""The assemble_context tool says when its context is empty or cut for the budget (`note`,
read from the trace), and names the context with the tokens used of the budget
(`header`, as `ctxbase assemble` prints it), so an agent can tell and look the trace up."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from ctxbase import ContextBase
from ctxbase.assemble.context_note import context_note
from ctxbase.cli import main
from ctxbase.integrations.tools import ToolScope, run_tool

HEADER = re.compile(r"context_id (ctx_\w+) \((\d+)/(\d+) tokens\)")


def assemble(scope: ToolScope, **args: Any) -> dict[str, Any]:
    return run_tool(scope, "assemble_context", {"intent": "orders cache ttl", **args})


def fill(cb: ContextBase, n: int = 20) -> None:
    for i in range(n):
        text = f"orders cache decision {i}: keep the orders cache ttl at {i * 10} seconds. " * 3
        cb.record("user_message", session_id="s1", text=text)


def test_an_empty_context_says_nothing_was_recalled(cb: ContextBase) -> None:
    out = assemble(ToolScope(cb, project="brand-new", agent_role="coder"))
    assert out["note"].startswith("nothing recalled: no stored memory, fact, task or conversation")


def test_a_context_cut_for_the_budget_names_what_was_left_out(cb: ContextBase) -> None:
    fill(cb)
    out = assemble(ToolScope(cb, agent_role="coder"), max_tokens=400)
    trace = cb.get_trace(out["context_id"])
    left_out = {d["id"] for d in trace["dropped"] if d["reason"] == "budget"}
    assert left_out  # the budget did leave items out
    note = out["note"]
    assert f"{len(left_out)} item(s) left out for the token budget of 400 tokens (" in note
    assert "a larger max_tokens includes more" in note
    assert sum(i in note for i in left_out) == min(5, len(left_out))  # the first five named
    assert "nothing recalled" not in note


def test_a_whole_context_has_no_note(cb: ContextBase) -> None:
    fill(cb, 2)
    out = assemble(ToolScope(cb, agent_role="coder"))
    assert out["events"] or out["messages"]
    assert "note" not in out, out.get("note")


def test_the_header_names_the_context_and_its_tokens(cb: ContextBase) -> None:
    fill(cb, 2)
    out = assemble(ToolScope(cb, agent_role="coder"), max_tokens=1500)
    found = HEADER.fullmatch(out["header"])
    assert found is not None, out["header"]
    assert found.group(1) == out["context_id"]
    assert int(found.group(2)) == out["total_tokens"] and int(found.group(3)) == 1500
    assert out["max_tokens"] == 1500


def test_ctxbase_assemble_prints_the_header(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "h.db")
    with ContextBase(db, embedder="hash") as cb:
        fill(cb, 2)
    base = ["--db", db, "--embedder", "hash", "assemble", "orders cache ttl", "--role", "coder"]
    assert main([*base, "--max-tokens", "900"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    found = HEADER.fullmatch(first)
    assert found is not None and found.group(3) == "900", first
    with ContextBase(db, embedder=None) as cb:
        assert cb.get_trace(found.group(1))["total_tokens"] == int(found.group(2))


def test_the_note_reads_only_the_trace() -> None:
    frame = {"system": {"items": [{"id": "system"}]}, "input": {"items": [{"id": "input"}]}}
    assert context_note({"layers": frame, "dropped": []}).startswith("nothing recalled")
    cut = {**frame, "memory": {"items": [{"id": "ev_1", "truncated": True}]}}
    dropped = [
        {"id": "ev_2", "layer": "memory", "reason": "budget"},
        {"id": "ev_2", "layer": "memory", "reason": "budget"},  # said once
        {"id": "ev_3", "layer": "history", "reason": "budget"},
        {"id": "ev_4", "layer": "memory", "reason": "top_k"},  # not the budget's doing
    ]
    note = context_note({"layers": cut, "dropped": dropped, "max_tokens": 300})
    assert note == (
        "2 item(s) left out for the token budget of 300 tokens (1 memory, 1 history: "
        "ev_2, ev_3); a larger max_tokens includes more, get_trace(context_id) lists each; "
        "1 item(s) cut to fit the token budget of 300 tokens"
    )
    assert context_note({"layers": {**frame, "memory": {"items": [{"id": "ev_1"}]}}}) is None
