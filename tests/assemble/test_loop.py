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
        "按订单分页的需求修改了 list_orders 并补了测试",
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


def test_only_what_the_output_used_is_linked_and_custom_relations_are_kept(
    cb: ContextBase,
) -> None:
    cm = ContextManager(cb)
    sid = cm.create_session(session_id="s")
    cb.upsert_entity("requirement", "订单分页", "订单查询支持按用户分页，缓存五分钟", id="req_1")
    cb.upsert_entity("document", "Redis 规范", "缓存键带版本号，订单 TTL 五分钟", id="doc_redis")
    cb.upsert_entity("document", "日志规范", "日志统一用 JSON 格式输出", id="doc_log")
    cb.upsert_entity("code", "list_orders", "def list_orders(user_id): ...", id="code_1")
    cb.upsert_entity("code", "send_mail", "def send_mail(to): ...", id="code_mail")
    cb.wait_for_embeddings()
    ctx = Assembler(cb).assemble(
        session_id=sid, agent_role="planner", user_intent="订单 分页 缓存 日志 邮件 list_orders"
    )
    in_context = set(ctx.included_ids)
    assert {"req_1", "doc_redis", "code_1"} <= in_context
    out = record_outcome(
        cb,
        ctx.context_id,
        "按需求给订单查询加了分页",
        produced=[
            {
                "type": "code",
                "name": "list_orders_paged",
                "text": "@cache(expire=300)\ndef list_orders_paged(user_id, page): ...",
                "relations": [{"type": "MUST_CACHE", "from": "doc_redis", "confidence": 0.95}],
            }
        ],
    )
    new = out.entities[0]
    edges = {(r.from_id, r.type, r.to_id): r for r in out.relations}
    assert ("req_1", "GENERATES", new.id) in edges  # shares 订单, 分页 with the answer
    assert ("code_1", "GENERATES", new.id) in edges  # shares the symbol user_id
    must = edges[("doc_redis", "MUST_CACHE", new.id)]
    assert must.confidence == 0.95 and must.properties["evidence"] == "named by the caller"
    linked_from = {f for f, _, t in edges if t == new.id}
    # in the context, but the output shows no use of them
    assert not {"doc_log", "code_mail"} & linked_from
    assert "evidence" in edges[("req_1", "GENERATES", new.id)].properties


def test_bad_produced_items_name_their_position(cb: ContextBase) -> None:
    cm = ContextManager(cb)
    sid = cm.create_session(session_id="s")
    ctx = Assembler(cb).assemble(session_id=sid, agent_role="coder", user_intent="hi")
    with pytest.raises(ValidationError, match=r"produced\[0\]"):
        record_outcome(cb, ctx.context_id, "ok", produced=[{"type": "code"}])
    sessionless = Assembler(cb).assemble(agent_role="coder", user_intent="hi")
    with pytest.raises(ValidationError, match="session_id"):
        record_outcome(cb, sessionless.context_id, "ok")
