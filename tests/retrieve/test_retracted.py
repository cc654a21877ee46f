"""A retracted message (`expire_message`) goes where a memory rated wrong goes: out of
searches (the library, the MCP tool, the CLI), with the statement anchoring cut from it;
`min_confidence` 0 keeps both and marks them. Listings mark retracted and wrong-rated
events, an assembly trace names those drops for what they are, and hiding a statement cut
from a message leaves the message's text whole in traces. SQLite, the "hash" embedder."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ctxbase import ContextBase
from ctxbase.assemble.trace import HIDDEN
from ctxbase.cli import main
from ctxbase.integrations.tools import ToolScope, run_tool
from ctxbase.store.sqlite import SQLiteStore

DECIDED = "Decision: we will use MongoDB for billing. I checked the benchmarks yesterday."
QUERY = "database for billing MongoDB"


@pytest.fixture
def cb(tmp_path: Path) -> Iterator[ContextBase]:
    base = ContextBase(
        SQLiteStore(str(tmp_path / "r.db")),
        project="p",
        embedder="hash",
        background_embedding=False,
    )
    yield base
    base.close()


def _said(cb: ContextBase) -> tuple[str, str, str]:
    """(the message with a decision, the decision anchoring cut from it, another message)."""
    said = cb.record("assistant_message", session_id="s1", agent_id="coder", text=DECIDED)
    other = cb.record(
        "assistant_message", session_id="s1", agent_id="coder", text="billing runs nightly"
    )
    cb.flush()
    made = cb.store.list_relations(cb.project, [said.id], direction="out", types=["GENERATES"])
    decision = next(r.to_id for r in made if r.to_id.startswith("decision:"))
    return said.id, decision, other.id


def _found(cb: ContextBase, **overrides: Any) -> dict[str, Any]:
    return {c.item.owner_id: c for c in cb.search(QUERY, **overrides).results}


def test_search_leaves_a_retracted_message_out_with_what_was_cut_from_it(
    cb: ContextBase,
) -> None:
    said, decision, other = _said(cb)
    before = _found(cb)  # read before the retraction: what searches hold must not linger
    assert {said, decision, other} <= set(before)
    assert not any(c.retracted for c in before.values())

    cb.expire_message("s1", said)
    response = cb.search(QUERY)
    found = {c.item.owner_id for c in response.results}
    assert said not in found and decision not in found and other in found
    why = {c.item.owner_id: c.dropped for c in response.considered if c.retracted}
    assert why[said] == "retracted"
    assert why[decision] == f"retracted: cut from {said}"

    # min_confidence 0 keeps what is rated wrong; retracted ones too, marked
    cb.feedback(other, "wrong")
    kept = _found(cb, min_confidence=0.0)
    assert kept[said].retracted and kept[decision].retracted and not kept[other].retracted
    assert kept[other].confidence_source == "feedback:wrong"
    assert kept[said].explain()["retracted"] is True
    assert "retracted" not in kept[other].explain()
    assert not _found(cb)  # by default neither is a result


def test_the_memory_tool_and_the_cli_leave_a_retracted_message_out(
    cb: ContextBase, tmp_path: Path, capsys: Any
) -> None:
    said, decision, other = _said(cb)
    cb.expire_message("s1", said)
    hits = run_tool(ToolScope(cb), "search_memory", {"query": QUERY, "mode": "keyword"})
    ids = {h["id"] for h in hits["results"]}
    assert other in ids and said not in ids and decision not in ids
    # the agent is told that something was withheld, and why
    assert "2 match(es) left out (" in hits["note"]
    assert said in hits["note"] and decision in hits["note"]
    assert "2 retracted, 0 rated wrong" in hits["note"]
    # not on a query the withheld ones would not have answered
    unrelated = run_tool(ToolScope(cb), "search_memory", {"query": "nightly", "mode": "keyword"})
    assert "left out" not in unrelated.get("note", "")
    cb.close()

    base = ["--db", str(tmp_path / "r.db"), "--project", "p", "--embedder", "hash"]
    assert main([*base, "search", QUERY, "--preset", "keyword"]) == 0
    out, err = capsys.readouterr()
    assert other in out and said not in out and decision not in out
    assert "left out, retracted" in err and said in err


def test_events_mark_retracted_and_wrong_rated_messages(
    cb: ContextBase, tmp_path: Path, capsys: Any
) -> None:
    said, _, other = _said(cb)
    plain = cb.record("user_message", session_id="s1", text="thanks")
    cb.expire_message("s1", said)
    cb.feedback(other, "wrong")
    cb.close()

    base = ["--db", str(tmp_path / "r.db"), "--project", "p"]
    assert main([*base, "events", "s1"]) == 0
    lines = {ln.split()[1]: ln for ln in capsys.readouterr().out.splitlines()}
    assert "[retracted] Decision: we will use MongoDB" in lines[said]
    assert "[wrong] billing runs nightly" in lines[other]
    assert "[" not in lines[plain.id]
    assert main([*base, "events", "s1", "--json"]) == 0
    marks = {e["id"]: e.get("marks") for e in json.loads(capsys.readouterr().out)}
    assert marks == {
        said: ["retracted"],
        other: ["wrong"],
        plain.id: [],
    }  # [] when none, as the library says


def _dropped(cb: ContextBase, context_id: str) -> dict[str, str]:
    return {d["id"]: d["reason"] for d in cb.get_trace(context_id)["dropped"]}


def test_a_trace_names_a_wrong_rated_or_retracted_drop_for_what_it_is(cb: ContextBase) -> None:
    said, decision, other = _said(cb)
    intent = "which database do we use for billing?"
    cb.feedback(other, "wrong")
    ctx = cb.assemble_context(agent_role="planner", user_intent=intent, session_id="s2")
    reasons = _dropped(cb, ctx.context_id)
    assert reasons[other] == "rated false"

    cb.expire_message("s1", said)
    ctx = cb.assemble_context(agent_role="planner", user_intent=intent, session_id="s2")
    reasons = _dropped(cb, ctx.context_id)
    assert reasons[said] == "retracted" and reasons[decision] == "retracted"
    assert "duplicate" not in {reasons[said], reasons[decision], reasons[other]}


def test_hiding_a_statement_cut_from_a_message_leaves_the_message_whole_in_traces(
    cb: ContextBase,
) -> None:
    said, decision, _ = _said(cb)
    intent = "which database do we use for billing?"
    ctx = cb.assemble_context(agent_role="planner", user_intent=intent, session_id="s2")
    items = {i["id"]: i["text"] for i in cb.get_trace(ctx.context_id)["layers"]["memory"]["items"]}
    assert said in items  # the message is placed (memory does not repeat what it says)

    report = cb.set_hidden([decision])
    assert report.sources_still_visible == [said]  # the message says more: it stays
    trace = cb.get_trace(ctx.context_id)
    shown = {i["id"]: i["text"] for i in trace["layers"]["memory"]["items"]}
    assert shown[said] == items[said] and DECIDED in shown[said]  # whole, not "[hidden] I…"
    assert shown.get(HIDDEN, HIDDEN) == HIDDEN  # the statement's own entry, if any, is masked
    assert decision not in json.dumps(trace)
    assert said in {c["id"] for c in trace["candidates"]}  # the message by its id

    cb.restore([decision])
    again = {i["id"]: i["text"] for i in cb.get_trace(ctx.context_id)["layers"]["memory"]["items"]}
    assert again == items


def test_a_per_turn_tool_result_of_an_earlier_turn_is_marked_expired_not_retracted(
    cb: ContextBase, tmp_path: Path, capsys: Any
) -> None:
    """Left out of searches as a retracted message is, but marked for what it is, as
    `ctxbase events` marks it: "expired" in the hit, its `dropped`, explain(), the memory
    tool's note, the CLI and an assembly trace; a retracted message keeps "retracted"."""
    from ctxbase.assemble.manager import ContextManager

    cm = ContextManager(cb)
    sid = cm.create_session()
    cm.add_message(sid, "user", "how many SKU-42 in the warehouse?")
    stock = cm.add_message(sid, "tool", "SKU-42 warehouse stock 17 units", per_turn=True)
    said = cm.add_message(sid, "assistant", "SKU-42 warehouse stock: 17 units left.")
    cm.add_message(sid, "user", "write me a poem")  # the next turn: the result expires
    cb.expire_message(sid, said)  # and the answer is retracted
    query = "SKU-42 warehouse stock"

    response = cb.search(query)
    found = {c.item.owner_id for c in response.results}
    assert stock not in found and said not in found
    why = {c.item.owner_id: c for c in response.considered}
    assert why[stock].expired and not why[stock].retracted
    assert why[stock].dropped == "expired"
    assert why[said].retracted and not why[said].expired and why[said].dropped == "retracted"
    kept = {c.item.owner_id: c for c in cb.search(query, min_confidence=0.0).results}
    assert kept[stock].expired and kept[stock].explain()["expired"] is True
    assert "retracted" not in kept[stock].explain()
    assert "expired" not in kept[said].explain()

    hits = run_tool(ToolScope(cb), "search_memory", {"query": query, "mode": "keyword"})
    assert stock not in {h["id"] for h in hits["results"]}
    assert (
        "1 retracted, 1 expired (per-turn tool results of earlier turns, or past expires_at), "
        "0 rated" in (hits["note"])
    )

    ctx = cb.assemble_context(agent_role="planner", user_intent=query, session_id="other")
    reasons = _dropped(cb, ctx.context_id)
    assert reasons.get(stock) == "expired" and reasons.get(said) == "retracted"
    cb.close()

    base = ["--db", str(tmp_path / "r.db"), "--project", "p", "--embedder", "hash"]
    assert main([*base, "search", query, "--preset", "keyword"]) == 0
    out, err = capsys.readouterr()
    assert stock not in out
    assert "left out, expired (a per-turn tool result" in err and stock in err
    assert "left out, retracted" in err and said in err
    assert main([*base, "events", sid]) == 0
    lines = {ln.split()[1]: ln for ln in capsys.readouterr().out.splitlines()}
    assert "[expired]" in lines[stock] and "[retracted]" in lines[said]


def test_an_answer_repeating_a_retracted_message_is_withheld_and_marked(
    cb: ContextBase, tmp_path: Path, capsys: Any
) -> None:
    """The echo assembly leaves out of memory (assemble/echoes.py) is left out of searches,
    the memory tool and the CLI too, and the event reads mark it; an unrelated reply stays."""
    said = cb.record(
        "user_message",
        session_id="b1",
        text="The release deadline for the invoicing module is Friday the 11th.",
    )
    echo = cb.record(
        "assistant_message",
        session_id="b1",
        text="OK, invoicing module release deadline Friday the 11th noted.",
        parent_event_ids=[said.id],
    )
    cb.record("user_message", session_id="b1", text="Who owns the invoicing module?")
    owner = cb.record(
        "assistant_message", session_id="b1", text="Li owns the invoicing module release."
    )
    cb.flush()
    query = "invoicing module release deadline"
    assert echo.id in {c.item.owner_id for c in cb.search(query).results}

    cb.expire_message("b1", said.id)
    response = cb.search(query)
    found = {c.item.owner_id for c in response.results}
    assert echo.id not in found and said.id not in found and owner.id in found
    why = {c.item.owner_id: c.dropped for c in response.considered}
    assert why[echo.id] == f"retracted: answers {said.id}"
    kept = _found_for(cb, query, min_confidence=0.0)
    assert kept[echo.id].retracted and not kept[owner.id].retracted

    hits = run_tool(ToolScope(cb), "search_memory", {"query": query, "mode": "keyword"})
    assert echo.id not in {h["id"] for h in hits["results"]}
    assert echo.id in hits["note"] and "2 retracted" in hits["note"]

    assert cb.get_event(echo.id).marks == ["answers retracted"]
    marks = {e.id: e.marks for e in cb.last_events("b1")}
    assert marks.pop(said.id) == ["retracted"] and marks.pop(echo.id) == ["answers retracted"]
    assert list(marks.values()) == [[], []]  # the later question and the unrelated reply
    cb.close()

    base = ["--db", str(tmp_path / "r.db"), "--project", "p", "--embedder", "hash"]
    assert main([*base, "search", query, "--preset", "keyword"]) == 0
    out, err = capsys.readouterr()
    assert echo.id not in out and owner.id in out
    assert "answer repeating one" in err and echo.id in err
    assert main([*base, "events", "b1"]) == 0
    lines = {ln.split()[1]: ln for ln in capsys.readouterr().out.splitlines()}
    assert "[answers retracted] OK, invoicing module" in lines[echo.id]


def _found_for(cb: ContextBase, query: str, **overrides: Any) -> dict[str, Any]:
    return {c.item.owner_id: c for c in cb.search(query, **overrides).results}
