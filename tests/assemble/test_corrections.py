"""A memory rated wrong with a note: the assembled prompt carries the note in its place
(assemble/corrections.py), within the budget, with a trace entry naming the rated node; a
rating without a note changes nothing; search reports the note with the withheld match; a
hard forget of the rated message takes the correction out of later prompts and out of the
stored traces of earlier ones. Every backend, the "hash" embedder."""

from __future__ import annotations

import json
import time

from ctxbase import ContextBase
from ctxbase.assemble.corrections import MAX_CORRECTIONS
from ctxbase.assemble.trace import AssembledContext
from ctxbase.integrations.tools import ToolScope, run_tool

SAID = "The orders API timeout is 30 s for every client."
NOTE = "it is 20 s, not 30 s"
ASK = "what is the orders API timeout?"


def _prompt(ctx: AssembledContext) -> str:
    return "\n".join(str(m["content"]) for m in ctx.messages)


def _setup(cb: ContextBase) -> str:
    wrong = cb.record("user_message", session_id="s1", text=SAID)
    cb.record("assistant_message", session_id="s1", text="Billing exports run nightly to CSV.")
    cb.flush()
    return wrong.id


def test_a_wrong_memory_with_a_note_is_replaced_by_its_correction(cb: ContextBase) -> None:
    wrong = _setup(cb)
    before = _prompt(cb.assemble_context(agent_role="coder", user_intent=ASK, session_id="s2"))
    assert SAID in before and "Correction" not in before

    cb.feedback(wrong, "wrong", note=NOTE)
    ctx = cb.assemble_context(agent_role="coder", user_intent=ASK, session_id="s2", max_tokens=400)
    body = _prompt(ctx)
    day = time.strftime("%Y-%m-%d", time.gmtime())
    line = f'Correction (rated wrong on {day}): {NOTE} -- replaces: "{SAID}"'
    assert f"[correction of {wrong}, {day}]\n{line}" in body  # dated as rated
    assert body.count("30 s for every client") == 1  # only as the quote of what is wrong
    assert ctx.total_tokens <= 400
    # the trace says why it is there: which node, rated how
    trace = cb.get_trace(ctx.context_id)
    cand = next(c for c in trace["candidates"] if c["kind"] == "correction")
    assert cand["id"] == f"{wrong}#correction" and cand["included"] is True
    assert cand["explain"]["replaces"] == [wrong]
    assert cand["explain"]["rated"] == "feedback:wrong"
    assert wrong in cand["reasons"][0] and "with a note" in cand["reasons"][0]
    # and why it is on topic: the rated memory's own words share the intent's
    on_topic = "a search hit that shares 'orders', 'API', 'timeout' with the intent"
    assert cand["explain"]["on_topic"] == on_topic
    assert cand["reasons"][0].endswith(f"; on topic: {on_topic}")
    assert (wrong, "rated false") in {(d["id"], d["reason"]) for d in trace["dropped"]}
    # the correction is not a use of a memory (time decay spares used ones)
    assert cb.searcher.usage.pending(cb.project, [f"{wrong}#correction"]) == {}

    # a question the wrong memory would not have answered gets no correction
    other = cb.assemble_context(
        agent_role="coder", user_intent="how do billing exports run?", session_id="s3"
    )
    assert "Correction" not in _prompt(other)

    # the session's own history: the rated message leaves it, the correction comes in
    own = _prompt(cb.assemble_context(agent_role="coder", user_intent=ASK, session_id="s1"))
    assert line in own and own.count("30 s for every client") == 1

    cb.feedback(wrong, "neutral")  # undone: the memory is back and no correction
    back = _prompt(cb.assemble_context(agent_role="coder", user_intent=ASK, session_id="s2"))
    assert SAID in back and "Correction" not in back


def test_with_no_calibrated_floor_only_a_keyword_makes_a_correction_on_topic(
    cb: ContextBase,
) -> None:
    """The "hash" embedder has no calibrated floor: every hit is found by meaning, so that
    cannot tell. A correction came first in unrelated prompts; it now needs the intent's
    keyword in the rated memory's own words, as memory does."""
    asked = cb.record("user_message", session_id="a1", text="What is the payment gateway timeout?")
    wrong = cb.record(
        "assistant_message",
        session_id="a1",
        text="The payment gateway timeout is 30 seconds.",
        parent_event_ids=[asked.id],
    )
    notes = [
        "The metrics exporter listens on port 9464.",
        "Nightly backups are kept for 30 days.",
        "The invoicing module has two open bugs.",
        "The CI pipeline runs on every push to main.",
    ]
    for n, text in enumerate(notes):
        cb.record("user_message", session_id=f"f{n}", text=text)
    cb.flush()
    cb.wait_for_embeddings()  # every message is then found by meaning, at some similarity
    cb.feedback(wrong.id, "wrong", note="it is 20 s, not 30 s")
    for intent in (
        "What else is open for the invoicing module?",
        "Which port does the metrics exporter listen on?",
        "Where are the nightly backups stored?",
    ):
        ctx = cb.assemble_context(agent_role="coder", user_intent=intent, session_id="z")
        assert "Correction" not in _prompt(ctx), intent
        assert not [c for c in ctx.trace["candidates"] if c["kind"] == "correction"]
    ctx = cb.assemble_context(
        agent_role="coder", user_intent="How long is the gateway timeout?", session_id="z"
    )
    assert "it is 20 s, not 30 s" in _prompt(ctx)
    (cand,) = [c for c in ctx.trace["candidates"] if c["kind"] == "correction"]
    assert (
        cand["explain"]["on_topic"]
        == "a search hit that shares 'gateway', 'timeout' with the intent"
    )


def test_a_rating_without_a_note_changes_nothing(cb: ContextBase) -> None:
    wrong = _setup(cb)
    cb.feedback(wrong, "wrong")
    ctx = cb.assemble_context(agent_role="coder", user_intent=ASK, session_id="s2")
    body = _prompt(ctx)
    assert "30 s" not in body and "Correction" not in body
    assert not [c for c in ctx.trace["candidates"] if c["kind"] == "correction"]


def test_search_reports_the_note_with_the_withheld_match(cb: ContextBase) -> None:
    wrong = _setup(cb)
    cb.record("user_message", session_id="s1", text="the orders API timeout alerts page on-call")
    cb.flush()
    cb.feedback(wrong, "wrong", note=NOTE)
    found = cb.search(ASK, preset="keyword")
    held = next(c for c in found.considered if c.item.owner_id == wrong)
    assert held.correction == NOTE and held.explain()["correction"] == NOTE
    hits = run_tool(ToolScope(cb), "search_memory", {"query": ASK, "mode": "keyword"})
    assert wrong not in {h["id"] for h in hits["results"]}
    assert f"correction (rated wrong): {NOTE}" in hits["note"]


def test_a_message_and_its_statement_give_one_correction(cb: ContextBase) -> None:
    """Rating a message rates the statement anchoring cut from it: one correction names
    both, and there are never more than MAX_CORRECTIONS."""
    said = cb.record(
        "user_message", session_id="s1", text="Decision: the orders API timeout is 30 s."
    )
    cb.flush()
    given = cb.feedback(said.id, "wrong", note=NOTE)
    assert given.same_statement  # the decision entity, rated with it
    ctx = cb.assemble_context(agent_role="coder", user_intent=ASK, session_id="s2")
    corrections = [c for c in ctx.trace["candidates"] if c["kind"] == "correction"]
    assert len(corrections) == 1
    assert set(corrections[0]["explain"]["replaces"]) <= {said.id, *given.same_statement}
    assert _prompt(ctx).count(NOTE) == 1
    for n in range(MAX_CORRECTIONS + 1):
        extra = cb.record("user_message", session_id="s4", text=f"orders API timeout case {n}")
        cb.flush()
        cb.feedback(extra.id, "wrong", note=f"case {n} was measured wrong")
    many = cb.assemble_context(agent_role="coder", user_intent=ASK, session_id="s2")
    assert len([c for c in many.trace["candidates"] if c["kind"] == "correction"]) == (
        MAX_CORRECTIONS
    )


def test_forgetting_the_rated_message_takes_its_correction_everywhere(cb: ContextBase) -> None:
    said = cb.record(
        "user_message", session_id="s1", text="Decision: the orders API timeout is 30 s."
    )
    cb.flush()
    cb.feedback(said.id, "wrong", note=NOTE)
    earlier = cb.assemble_context(agent_role="coder", user_intent=ASK, session_id="s2")
    assert NOTE in _prompt(earlier)
    assert NOTE in json.dumps(cb.get_trace(earlier.context_id), ensure_ascii=False)

    cb.forget(event_ids=[said.id])
    later = cb.assemble_context(agent_role="coder", user_intent=ASK, session_id="s2")
    assert NOTE not in _prompt(later) and "30 s" not in _prompt(later)
    # the stored trace of the earlier prompt keeps neither the note nor the quote
    stored = json.dumps(cb.get_trace(earlier.context_id), ensure_ascii=False)
    assert NOTE not in stored and "timeout is 30 s" not in stored
