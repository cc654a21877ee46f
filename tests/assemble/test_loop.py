"""The closed loop: the answer becomes an event, produced code becomes linked entities."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import ctxbase
from ctxbase import ContextBase
from ctxbase.assemble.assembler import Assembler
from ctxbase.assemble.loop import Produced, record_outcome
from ctxbase.assemble.manager import ContextManager
from ctxbase.assemble.trace import get_trace
from ctxbase.errors import ValidationError


@pytest.fixture
def cb(tmp_path: Path) -> Iterator[ContextBase]:
    base = ctxbase.open(str(tmp_path / "x.db"), project="p", embedder="hash")
    yield base
    base.close()


def test_record_outcome_links_produced_entities_to_the_context(cb: ContextBase) -> None:
    cm = ContextManager(cb)
    sid = cm.create_session(session_id="s")
    cb.upsert_entity("requirement", "订单分页", "订单查询支持分页", id="req_1")
    cb.upsert_entity("code", "list_orders", "def list_orders(): ...", id="code_1")
    cb.wait_for_embeddings()
    ctx = Assembler(cb).assemble(session_id=sid, agent_role="planner", user_intent="订单分页")
    assert {"req_1", "code_1"} <= set(ctx.included_ids)

    out = record_outcome(
        cb,
        ctx.context_id,
        "修改了 list_orders 并补了测试",
        produced=[
            Produced(type="code", name="list_orders", text="def list_orders(page): ..."),
            {"type": "test_case", "name": "test_list_orders", "text": "assert ..."},
        ],
    )
    new_code, test = out.entities
    assert new_code.id == "code_1.v2" and new_code.version == 2
    kinds = {(r.from_id, r.type, r.to_id) for r in out.relations}
    assert (new_code.id, "MODIFIES", "code_1") in kinds
    assert ("req_1", "GENERATES", new_code.id) in kinds
    assert ("code_1", "VALIDATES", test.id) in kinds and ("req_1", "GENERATES", test.id) in kinds
    assert all(r.source == "auto:record_outcome" for r in out.relations)
    old = cb.store.get_entities("p", ["code_1"])[0]
    assert old.latest is False  # searches now find the new version
    answer = cb.get_event(out.event_id)
    assert answer.type == "assistant_message" and answer.metadata["context_id"] == ctx.context_id
    assert {new_code.id, test.id, "req_1"} <= set(answer.refers_to)
    assert get_trace(cb, ctx.context_id)["outcome"]["event_id"] == out.event_id


def test_bad_produced_items_name_their_position(cb: ContextBase) -> None:
    cm = ContextManager(cb)
    sid = cm.create_session(session_id="s")
    ctx = Assembler(cb).assemble(session_id=sid, agent_role="coder", user_intent="hi")
    with pytest.raises(ValidationError, match=r"produced\[0\]"):
        record_outcome(cb, ctx.context_id, "ok", produced=[{"type": "code"}])
    sessionless = Assembler(cb).assemble(agent_role="coder", user_intent="hi")
    with pytest.raises(ValidationError, match="session_id"):
        record_outcome(cb, sessionless.context_id, "ok")
