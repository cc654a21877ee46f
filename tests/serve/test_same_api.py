"""The same calls on the embedded ContextBase and on the remote SDK give the same results."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from live_server import Live, embedded_or_remote

import ctxbase
from ctxbase.errors import NotFoundError, ValidationError
from ctxbase.model import TaskInfo, keyed_event_id
from ctxbase.serve.sdk import AsyncClient, Client

SAME_PROJECT = f"same-{uuid.uuid4().hex[:8]}"
VOLATILE = {"created_at", "updated_at", "ts", "valid_from", "valid_to", "context_id", "said_at"}


def _plain(value: Any) -> Any:
    """Comparable form: models and dataclasses as dicts, minus timestamps and random ids."""
    if hasattr(value, "model_dump"):
        value = value.model_dump(mode="json")
    elif hasattr(value, "__dataclass_fields__"):
        value = {k: getattr(value, k) for k in value.__dataclass_fields__}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


@pytest.fixture(params=["embedded", "remote"])
def api(request: pytest.FixtureRequest, live: Live, tmp_path: Path) -> Iterator[Any]:
    # one project id: the embedded and the remote run give the same ids
    yield from embedded_or_remote(request.param, live, tmp_path / "embedded.db", SAME_PROJECT)


def scenario(cb: Any) -> dict[str, Any]:
    """Seed 000's day 1-2 with every kind of call; returns what each call gave."""
    out: dict[str, Any] = {}
    out["session"] = cb.create_session("day1", title="requirements")
    out["task"] = cb.upsert_task(
        TaskInfo(project_id=cb.project, task_id="t1", session_id="day1", title="cache orders")
    )
    u = cb.record(
        "user_message",
        session_id="day1",
        text="订单查询接口支持按用户 ID 分页，缓存 5 分钟，符合公司 Redis 规范。",
        agent_role="user",
        ts=1000.0,
        idempotency_key="day1-user",  # keyed, so both runs give the same ids
    )
    out["user"] = u
    out["id_is_keyed"] = u.id == keyed_event_id(cb.project, "day1", "day1-user")
    plan_id = cb.capture(
        "assistant_message",
        session_id="day1",
        text="Plan: paginate by user id, cache 5 minutes in Redis.",
        parent_event_ids=[u.id],
        ts=1001.0,
        idempotency_key="day1-plan",
    )
    cb.flush()
    out["plan"] = cb.get_event(plan_id)
    out["last"] = cb.last_events("day1", 5)
    out["chain"] = cb.causal_chain(plan_id)
    out["effects"] = cb.effects(u.id)
    doc = cb.upsert_entity(
        "document", "Redis 规范 V3.2", "缓存必须设置过期时间，键名带业务前缀。", properties={"v": 3}
    )
    req = cb.upsert_entity("requirement", "requirement_201", "订单查询接口分页 + 缓存 5 分钟")
    out["doc"], out["req"] = doc, req
    out["doc_again"] = cb.get_entity(doc.id)
    out["docs"] = cb.list_entities(type="document")
    out["follows"] = cb.upsert_relationship(
        doc.id, "FOLLOWS", req.id, source="human", confidence=0.9
    )
    out["edge"] = cb.create_edge(u.id, "REFERS_TO", req.id, source="auto:test")
    out["rels"] = cb.relationships(doc.id)
    out["hood"] = cb.neighbourhood(doc.id, 2)
    out["search"] = [
        (c.item.owner_id, round(c.score, 6), c.keyword_rank)
        for c in cb.search("Redis 缓存 分页", preset="keyword", top_k=5).results
    ]
    cb.wait_for_embeddings(30)
    ctx = cb.assemble_context(
        agent_role="code_gen", user_intent="生成分页版订单查询接口，用 FastAPI", session_id="day1"
    )
    out["ctx"] = {
        "messages": ctx.messages,
        "documents": ctx.documents,
        "code_snippets": ctx.code_snippets,
        "relationships": ctx.relationships,
        "tokens": ctx.tokens_by_layer,
        "policy": ctx.policy,
        "strategies": ctx.strategies,
    }
    trace = cb.get_trace(ctx.context_id)
    out["trace_role"] = (trace["agent_role"], trace["policy"], len(trace["candidates"]))
    outcome = cb.record_outcome(
        ctx.context_id,
        "@cache(expire=300) on list_orders",
        [
            {
                "type": "code",
                "name": "orders.py#list_orders",
                "text": "@cache(expire=300)",
                "relations": [{"type": "MUST_CACHE", "from": doc.id, "confidence": 0.95}],
            }
        ],
    )
    out["outcome"] = (outcome.entities, sorted((r.type, r.to_id) for r in outcome.relations))
    assert any(r.type == "MUST_CACHE" and r.from_id == doc.id for r in outcome.relations)
    out["closed"] = cb.close_relationship(out["follows"].id)
    out["closed_twice"] = cb.close_relationship(out["follows"].id)
    with pytest.raises(NotFoundError) as unknown:
        cb.close_relationship("rel_typo")
    out["close_unknown_error"] = str(unknown.value)
    out["hidden"] = cb.soft_delete([req.id])
    with pytest.raises(NotFoundError) as missing:
        cb.get_entity(req.id)
    out["hidden_error"] = str(missing.value)
    out["restored"] = cb.restore([req.id])
    out["sessions"] = cb.list_sessions()
    out["task_again"] = cb.get_task("t1")
    out["tasks"] = cb.list_tasks("day1")
    out["fact_v1"] = cb.set_fact("cache_ttl", 300, scope_id="t1", cause="day 1")
    out["fact_v2"] = cb.set_fact("cache_ttl", 600, scope_id="t1")
    out["facts"] = cb.get_facts(scope_id="t1")
    out["rolled_back"] = cb.rollback_fact("cache_ttl", 1, scope_id="t1")
    out["fact_history"] = cb.fact_history("cache_ttl", scope_id="t1")
    out["fact_deleted"] = (
        cb.delete_fact("cache_ttl", scope_id="t1"),
        cb.delete_fact("cache_ttl", scope_id="t1"),
    )
    out["facts_after"] = cb.get_facts(scope_id="t1")
    cb.set_fact("cache_ttl", 900, scope_id="t1")
    out["fact_hard"] = (
        cb.delete_fact("cache_ttl", scope_id="t1", hard=True),
        cb.fact_history("cache_ttl", scope_id="t1"),
    )
    out["projects"] = cb.project in cb.list_projects()
    out["health"] = cb.health()["status"]
    for bad in (
        lambda: cb.record("user_message", session_id="bad id!", text="x"),
        lambda: cb.record("no_such_type", session_id="day1", text="x"),
        lambda: cb.upsert_relationship(doc.id, "lowercase", req.id, source="human"),
        lambda: cb.upsert_relationship(doc.id, "REFERENCES", "ghost", source="human"),
        lambda: cb.search("   "),
        lambda: cb.forget(),
    ):
        with pytest.raises(ValidationError) as err:
            bad()
        out.setdefault("validation", []).append((err.value.field, err.value.message))
    for missing_call in (
        lambda: cb.get_event("ev_nope"),
        lambda: cb.get_session("nope"),
        lambda: cb.get_trace("ctx_nope"),
        lambda: cb.get_task("task_nope"),
    ):
        with pytest.raises(NotFoundError) as nf:
            missing_call()
        out.setdefault("not_found", []).append(str(nf.value))
    report = cb.forget(event_ids=[plan_id])
    out["forget"] = (report.removed.get("events"), report.total > 0)
    with pytest.raises(NotFoundError):
        cb.get_event(plan_id)
    return out


_results: dict[str, dict[str, Any]] = {}


def test_same_calls_same_results(api: Any) -> None:
    kind = "remote" if isinstance(api, Client) else "embedded"
    got = scenario(api)
    assert got["id_is_keyed"] is True
    assert [e.seq for e in got["last"]] == [1, 2]
    assert got["search"] and got["search"][0][0] in (got["doc"].id, got["req"].id, got["user"].id)
    assert got["ctx"]["messages"][-1]["content"] == "生成分页版订单查询接口，用 FastAPI"
    assert got["closed"] is True and got["closed_twice"] is False
    assert (got["hidden"], got["restored"]) == (1, 1)
    assert got["forget"][0] == 1
    assert len(got["validation"]) == 6 and len(got["not_found"]) == 4
    assert got["rolled_back"].value == 300 and got["rolled_back"].version == 3
    assert got["fact_deleted"] == (True, False) and got["facts_after"] == {}
    assert got["fact_hard"] == (True, [])  # the hard delete took the history with it
    assert [t.task_id for t in got["tasks"]] == ["t1"]
    assert got["projects"] is True and got["health"] == "ready"
    _results[kind] = _plain(got)
    if len(_results) == 2:  # the second run compares with the first, key by key
        for key, value in _results["embedded"].items():
            assert _results["remote"][key] == value, key


def test_async_client_has_the_same_answers(live: Live) -> None:
    project = f"async-{uuid.uuid4().hex[:8]}"
    key = live.key(project, role="write")

    async def run() -> tuple[Any, ...]:
        async with ctxbase.connect_async(live.url, api_key=key, project=project) as ac:
            assert isinstance(ac, AsyncClient)
            ev = await ac.record("user_message", session_id="s", text="hello async")
            ent = await ac.upsert_entity("document", "guide", "缓存规范")
            rel = await ac.create_edge(ev.id, "REFERENCES", ent.id, source="human")
            results = await asyncio.gather(*(ac.get_event(ev.id) for _ in range(10)))
            ctx = await ac.assemble_context(agent_role="qa", user_intent="缓存规范是什么")
            trace = await ac.get_trace(ctx.context_id)
            with pytest.raises(NotFoundError):
                await ac.get_entity("nope")
            return ev, ent, rel, results, ctx, trace

    ev, ent, rel, results, ctx, trace = asyncio.run(run())
    assert all(r == ev for r in results)
    assert (rel.from_id, rel.to_id) == (ev.id, ent.id)
    assert trace["context_id"] == ctx.context_id and ctx.trace["context_id"] == ctx.context_id
    with ctxbase.connect(live.url, api_key=key, project=project) as sync:
        assert sync.get_event(ev.id) == ev and sync.get_entity(ent.id) == ent


def test_a_token_budget_that_is_not_a_positive_int_is_refused_alike(api: Any) -> None:
    api.record("user_message", session_id="s1", text="the orders table has a status column")
    for bad in ("100", 0, -5, True, 12.5):
        with pytest.raises(ValidationError) as info:
            api.assemble_context(agent_role="coder", user_intent="orders", max_tokens=bad)
        assert info.value.field == "max_tokens", bad
        assert f"must be a positive integer (got {bad!r})" in str(info.value), bad
    ctx = api.assemble_context(agent_role="coder", user_intent="orders", max_tokens=300)
    assert ctx.max_tokens == 300 and ctx.total_tokens <= 300
