"""Another session's question like the intent, on every backend: one read of what followed
it decides whether memory keeps it (answered, with its answer) or leaves it out."""

from __future__ import annotations

from typing import Any

from ctxbase import ContextBase
from ctxbase.assemble.memory_candidate import label_day
from store_calls import StoreCalls

INTENT = "Which column holds the refund amount?"
ASKED = "Which column holds the refund amount again?"
ANSWER = "It is refunds.amount_cents, in cents."


def _assemble(cb: ContextBase) -> tuple[Any, StoreCalls]:
    cb.capture("assistant_message", session_id="notes", text="The refund report runs nightly.")
    cb.flush()
    cb.wait_for_embeddings()
    cb.assemble_context(agent_role="coder", user_intent=INTENT)  # warm: the indexes load
    calls = StoreCalls(cb.store)
    return cb.assemble_context(agent_role="coder", user_intent=INTENT), calls


def test_an_unanswered_question_costs_one_read_and_stays_out(cb: ContextBase) -> None:
    asked = cb.capture("user_message", session_id="other", text=ASKED)
    ctx, calls = _assemble(cb)
    assert calls.counts.get("event_page") == 1, dict(calls.counts)
    dropped = [d for d in ctx.trace["dropped"] if d["id"] == asked]
    assert [d["reason"] for d in dropped] == ["unanswered"], ctx.trace["dropped"]
    assert ASKED not in "\n".join(m["content"] for m in ctx.messages)


def test_an_answered_question_stays_with_its_answer(cb: ContextBase) -> None:
    asked = cb.capture("user_message", session_id="other", text=ASKED)
    answer = cb.capture("assistant_message", session_id="other", text=ANSWER)
    ctx, calls = _assemble(cb)
    assert calls.counts.get("event_page") == 1, dict(calls.counts)
    memory = next(m["content"] for m in ctx.messages if "Retrieved context" in m["content"])
    # after the header and the opening tag, before the closing one
    blocks = memory.split("\n", 2)[2].removesuffix("\n</quoted_data>").split("\n\n")
    i = next(n for n, b in enumerate(blocks) if b.startswith(f"[message {asked}, "))
    assert blocks[i + 1] == f"[message {answer}, {label_day(cb.get_event(answer).ts)}]\n{ANSWER}"
