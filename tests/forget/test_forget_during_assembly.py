"""A forget that commits while an assembly runs (it read the memory, then the forget, then
it stores its trace) leaves no forgotten text in that trace: the trace is checked against
the tombstones once written, and written again redacted (on SQLite and PostgreSQL)."""

from __future__ import annotations

import json
import threading

from ctxbase import ContextBase
from ctxbase.assemble.loop import record_outcome
from ctxbase.assemble.trace import store_trace

SECRET = "the vault password is hunter2-orange"


def test_a_trace_stored_after_the_forget_is_redacted(cb: ContextBase) -> None:
    doomed = cb.record("user_message", session_id="doomed", text=SECRET)
    cb.record("user_message", session_id="kept", text="the vault opens at nine")
    cb.wait_for_embeddings()
    ctx = cb.assemble_context(
        agent_role="coder", user_intent="what is the vault password?", session_id="asker"
    )
    assert doomed.id in ctx.included_ids  # what the assembly read before the forget
    before = json.loads(json.dumps(ctx.trace))
    cb.forget(session_id="doomed")
    # the assembly's write comes after the forget's commit: the forget found nothing
    store_trace(cb.store, cb.project, ctx.context_id, before)
    stored = json.dumps(cb.store.get_trace(cb.project, ctx.context_id), ensure_ascii=False)
    assert "hunter2" not in stored and doomed.id not in stored
    assert "[forgotten]" in stored and "the vault opens at nine" in stored
    # an outcome recorded on a trace read before the forget writes it back redacted too
    record_outcome(cb, ctx.context_id, "I cannot tell you that.")
    stored = json.dumps(cb.store.get_trace(cb.project, ctx.context_id), ensure_ascii=False)
    assert "hunter2" not in stored and doomed.id not in stored


def test_assemblies_racing_forgets_keep_no_forgotten_text(cb: ContextBase) -> None:
    stop = threading.Event()
    errors: list[BaseException] = []

    def assemble() -> None:
        try:
            while not stop.is_set():
                cb.assemble_context(
                    agent_role="coder", user_intent="orders redis password", session_id="asm"
                )
        except BaseException as exc:  # reported by the test
            errors.append(exc)

    worker = threading.Thread(target=assemble)
    worker.start()
    try:
        for k in range(6):
            for i in range(3):
                cb.record(
                    "user_message",
                    session_id=f"doomed{k}",
                    text=f"SECRETRACE{k}x{i} password hunter2 orders redis",
                )
            cb.wait_for_embeddings()
            cb.forget(session_id=f"doomed{k}")
    finally:
        stop.set()
        worker.join(60)
    assert not errors
    traces = cb.store.list_traces(cb.project, limit=1000)
    assert traces
    for t in traces:
        held = cb.store.get_trace(cb.project, t.context_id)
        assert "SECRETRACE" not in json.dumps(held, ensure_ascii=False)
