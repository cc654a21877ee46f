"""A soft-deleted event or entity reads as hidden in stored traces, and comes back with it."""

from __future__ import annotations

import json

from ctxbase import ContextBase
from ctxbase.assemble.diff import render_diff
from ctxbase.assemble.trace import HIDDEN, diff_contexts


def test_a_trace_shows_a_soft_deleted_event_as_hidden_until_it_is_restored(
    cb: ContextBase,
) -> None:
    secret = cb.record(
        "user_message", session_id="s1", text="生产数据库密码是 Walrus-Tango-5150，别外传"
    )
    cb.record("user_message", session_id="s1", text="订单表的索引已经加上了")
    doc = cb.upsert_entity("document", "zqxkeys.md", "zqxkeys rotate the Walrus key monthly")
    assert cb.wait_for_embeddings(timeout=30)
    ctx = cb.assemble_context(agent_role="coder", user_intent="生产数据库密码和 Walrus key")
    before = json.dumps(cb.get_trace(ctx.context_id), ensure_ascii=False)
    assert "Walrus-Tango-5150" in before and secret.id in before and doc.id in before

    cb.soft_delete([secret.id, doc.id])
    hidden = json.dumps(cb.get_trace(ctx.context_id), ensure_ascii=False)
    for gone in ("Walrus-Tango-5150", "rotate the Walrus key", secret.id, doc.id):
        assert gone not in hidden
    assert HIDDEN in hidden
    assert "订单表的索引已经加上了" in hidden  # what is not hidden reads as before
    shown = render_diff(diff_contexts(cb, ctx.context_id, ctx.context_id))
    assert "Walrus-Tango-5150" not in shown

    cb.restore([secret.id, doc.id])
    assert json.dumps(cb.get_trace(ctx.context_id), ensure_ascii=False) == before
