"""Seed 000's `strategy="referenced_code_first"` on the seed's own graph, embedded and remote.

The graph is the article's, written with its calls: `doc_101` (Redis 规范 V3.2), the day-1
requirement captured from the analyst's message (it FOLLOWS doc_101), code `sql_202` and the
edge `doc_101 -MUST_CACHE-> sql_202`. The strategy is described as "优先检索被 document 引用的
code，再加载其关联的 document/test_case", and the article's next line reads
`context_payload["documents"][0]["content"]`: the document has to come with the code.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from live_server import Live, serve_on_param

import ctxbase

PROJECT = "ecommerce_backend_v2"
INTENT = "把订单查询接口加上缓存"
SPEC = "Redis 缓存规范 V3.2: 所有查询接口的缓存必须设置过期时间，单位为秒，整数。"


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Live]:
    yield from serve_on_param(request, tmp_path_factory, "seed000strategy")


def _day1(pc_client: Any) -> None:
    """Day 1 morning: the spec and the analyst's requirement (anchored: FOLLOWS doc_101)."""
    pc_client.upsert_entity(
        entity_type="document",
        entity_id="doc_101",
        properties={"content": SPEC, "title": "Redis 规范 V3.2"},
    )
    pc_client.capture(
        "user_message",
        session_id="day1am",
        agent_id="analyst",
        text="我们需要订单查询接口支持按用户 ID 分页，缓存 5 分钟，符合公司 Redis 规范。",
    )
    pc_client.flush()


def _code_and_edge(pc_client: Any) -> None:
    pc_client.upsert_entity(
        entity_type="code",
        entity_id="sql_202",
        properties={"content": "SELECT * FROM orders WHERE user_id = %s LIMIT %s OFFSET %s"},
    )
    pc_client.create_edge(
        from_id="doc_101", to_id="sql_202", edge_type="MUST_CACHE", properties={"confidence": 0.95}
    )


def _seed_flow(pc_client: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The article's step 2 before and after the code exists; each payload as the article
    reads it, plus the trace's notes and the reasons given for each candidate."""
    out = []
    for step in (_day1, _code_and_edge):
        step(pc_client)
        context_payload = pc_client.assemble_context(
            agent_role="code_gen",
            user_intent=INTENT,
            # 策略：优先找 type=code 且被 type=document 引用的实体
            strategy="referenced_code_first",
        )
        first_doc = context_payload["documents"][0]  # the article's next line
        out.append(
            {
                "first_doc": (first_doc["id"], first_doc["content"]),
                "documents": [d["id"] for d in context_payload["documents"]],
                "code": [c["id"] for c in context_payload["code_snippets"]],
                "relations": {
                    (r["from"], r["type"], r["to"]) for r in context_payload["relationships"]
                },
                "strategies": set(context_payload.strategies),
                "notes": context_payload.trace["notes"],
                "reasons": {
                    c["id"]: " ".join(c["reasons"]) for c in context_payload.trace["candidates"]
                },
            }
        )
    return out[0], out[1]


def _check(before: dict[str, Any], after: dict[str, Any]) -> None:
    # No code yet (day 1 afternoon, "找到 requirement_201 关联的 document_101"): the spec and
    # the requirement the intent names, the spec first, and the trace says no code was found.
    assert before["first_doc"][0] == "doc_101" and "Redis 缓存规范" in before["first_doc"][1]
    assert before["code"] == []
    req = next(d for d in before["documents"] if d.startswith("requirement"))
    assert (req, "FOLLOWS", "doc_101") in before["relations"]
    assert any("no code referenced or named" in n for n in before["notes"]), before["notes"]
    # With the code: the code doc_101 references, doc_101 with it, and the MUST_CACHE edge.
    assert after["code"] == ["sql_202"]
    assert after["first_doc"] == ("doc_101", SPEC)
    assert ("doc_101", "MUST_CACHE", "sql_202") in after["relations"]
    assert (req, "FOLLOWS", "doc_101") in after["relations"]
    assert "linked to doc_101, which the intent names" in after["reasons"]["sql_202"]
    # the trace says what ran: the named strategy alone, besides the history window
    assert after["strategies"] == {"recent_window", "referenced_code_first"}
    assert not any("nothing referenced" in n for n in after["notes"])


def test_seed_000_referenced_code_first_embedded(tmp_path: Path) -> None:
    with ctxbase.open(str(tmp_path / "s.db"), project_id=PROJECT, embedder="hash") as pc_client:
        _check(*_seed_flow(pc_client))


def test_seed_000_referenced_code_first_remote(server: Live) -> None:
    project = f"{PROJECT}-{uuid.uuid4().hex[:8]}"
    key = server.key(project, role="write")
    with ctxbase.connect(server.url, api_key=key, project_id=project) as pc_client:
        _check(*_seed_flow(pc_client))
    # REST: the body names the strategy; the same documents and relation
    with server.client(key) as c:
        r = c.post(
            "/v1/context/assemble",
            json={
                "agent_role": "code_gen",
                "user_intent": INTENT,
                "project_id": project,
                "strategy": "referenced_code_first",
            },
        )
        assert r.status_code == 200, r.text
        body = r.json()
    assert body["documents"][0]["id"] == "doc_101"
    assert [c["id"] for c in body["code_snippets"]] == ["sql_202"]
    shown = {(r["from"], r["type"], r["to"]) for r in body["relationships"]}
    assert ("doc_101", "MUST_CACHE", "sql_202") in shown


def test_an_intent_naming_the_spec_brings_its_code_and_tests(tmp_path: Path) -> None:
    """ "参考Redis 规范修改订单查询的SQL" names the code itself: the spec that references it
    and the test that validates it come with it (the strategy's "再加载其关联的
    document/test_case")."""
    with ctxbase.open(str(tmp_path / "s.db"), project_id=PROJECT, embedder="hash") as pc_client:
        _day1(pc_client)
        _code_and_edge(pc_client)
        pc_client.upsert_entity(
            entity_type="test_case",
            entity_id="test_401",
            properties={"content": "def test_cache_hit_and_expiry(): ..."},
        )
        pc_client.create_edge(from_id="sql_202", to_id="test_401", edge_type="VALIDATES")
        payload = pc_client.assemble_context(
            agent_role="code_gen",
            user_intent="参考Redis 规范修改订单查询的SQL",
            strategy="referenced_code_first",
        )
        assert payload["documents"][0]["id"] == "doc_101"
        assert [c["id"] for c in payload["code_snippets"]] == ["sql_202", "test_401"]
        shown = {(r["from"], r["type"], r["to"]) for r in payload["relationships"]}
        assert {("doc_101", "MUST_CACHE", "sql_202"), ("sql_202", "VALIDATES", "test_401")} <= shown
