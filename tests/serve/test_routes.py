"""Every route of the REST API against a real server, with real HTTP."""

from __future__ import annotations

import re

from live_server import Live

from ctxbase.model import keyed_event_id


def test_every_route_answers_and_means_it(live: Live, pid: str) -> None:
    admin = live.key(pid, role="admin")
    c = live.client(admin)
    base = f"/v1/projects/{pid}"

    assert c.get("/healthz").json() == {"status": "ok"}
    ready = c.get("/readyz")
    assert ready.status_code == 200 and ready.json()["schema_version"] >= 1

    # sessions and tasks
    r = c.put(f"{base}/sessions/s1", json={"title": "day 1", "metadata": {"k": 1}})
    assert r.status_code == 200 and r.json()["title"] == "day 1"
    meta = c.get(f"{base}/sessions/s1").json()["metadata"]
    assert meta["k"] == 1 and [e["to"] for e in meta["status_log"]] == ["created", "active"]
    assert [s["session_id"] for s in c.get(f"{base}/sessions").json()] == ["s1"]
    r = c.put(f"{base}/tasks/t1", json={"session_id": "s1", "title": "cache orders"})
    assert r.status_code == 200 and r.json()["task_id"] == "t1"
    assert c.get(f"{base}/tasks/t1").json()["title"] == "cache orders"
    assert [t["task_id"] for t in c.get(f"{base}/tasks", params={"session_id": "s1"}).json()] == [
        "t1"
    ]

    # events: single (stored), queued, batch, messages
    text = "订单查询接口加上Redis缓存，预算控制在5万以内"
    r = c.post(
        f"{base}/events",
        json={"type": "user_message", "session_id": "s1", "text": text},
        headers={"Idempotency-Key": "first"},
    )
    assert r.status_code == 201
    e1 = r.json()
    assert e1["seq"] == 1
    assert e1["id"] == keyed_event_id(pid, "s1", "first")
    r = c.post(
        f"{base}/events/queue",
        json={
            "type": "assistant_message",
            "session_id": "s1",
            "text": "Plan: cache the slow SQL in Redis for 5 minutes",
            "parent_event_ids": [e1["id"]],
        },
    )
    assert r.status_code == 202
    e2 = r.json()["id"]
    assert c.post(f"{base}/flush").status_code == 204
    r = c.post(
        f"{base}/events/batch",
        json={
            "events": [
                {"type": "tool_invocation", "session_id": "s1", "data": {"tool": "pytest"}},
                {"type": "tool_result", "session_id": "s1", "text": "2 passed"},
            ]
        },
    )
    assert r.status_code == 201 and r.json()["durable"] is True
    batch = r.json()
    assert [e["seq"] for e in batch["events"]] == [3, 4] and batch["ids"][1] == batch["events"][1][
        "id"
    ]
    r = c.post(
        f"{base}/messages",
        json={"session_id": "s2", "messages": [{"role": "user", "content": "hello"}], "sync": True},
    )
    assert len(r.json()["ids"]) == 1
    assert c.get(f"{base}/events/{e2}").json()["parent_event_ids"] == [e1["id"]]
    last = c.get(f"{base}/events", params={"session_id": "s1", "n": 2}).json()
    assert [e["seq"] for e in last] == [3, 4]
    assert [e["id"] for e in c.get(f"{base}/events/{e2}/causes").json()] == [e1["id"]]
    assert e2 in [e["id"] for e in c.get(f"{base}/events/{e1['id']}/effects").json()]

    # entities and relations
    doc = c.post(
        f"{base}/entities",
        json={"type": "document", "name": "Redis 规范 V3.2", "text": "缓存必须设置过期时间"},
    ).json()
    code = c.post(
        f"{base}/entities",
        json={"type": "code", "name": "orders.py#list_orders", "text": "def list_orders(): ..."},
    ).json()
    assert c.get(f"{base}/entities/{doc['id']}").json()["name"] == "Redis 规范 V3.2"
    assert {e["id"] for e in c.get(f"{base}/entities", params={"type": "code"}).json()} == {
        code["id"]
    }
    rel = c.post(
        f"{base}/relations",
        json={
            "from_id": doc["id"],
            "type": "REFERENCES",
            "to_id": code["id"],
            "source": "human",
            "confidence": 0.95,
        },
    ).json()
    again = c.post(
        f"{base}/relations",
        json={"from_id": doc["id"], "type": "REFERENCES", "to_id": code["id"], "source": "human"},
    ).json()
    assert again["id"] == rel["id"]  # an upsert, never a duplicate edge
    rels = c.get(f"{base}/relations", params={"node_id": doc["id"], "direction": "out"}).json()
    assert [x["to_id"] for x in rels] == [code["id"]]
    hood = c.get(f"{base}/neighbourhood", params={"node_id": doc["id"], "k": 1}).json()
    assert code["id"] in {h["node_id"] for h in hood}

    # search, assembly, trace, outcome
    assert c.get("/v1/whoami").json()["role"] in ("write", "admin", "read")
    assert c.post("/v1/embeddings/wait", params={"timeout": 30}).json()["idle"] is True
    r = c.post(f"{base}/search", json={"query": "Redis 缓存", "preset": "keyword"})
    owners = [h["item"]["owner_id"] for h in r.json()["results"]]
    assert doc["id"] in owners and e1["id"] in owners
    r = c.post(
        "/v1/context/assemble",
        json={"project_id": pid, "agent_role": "code_gen", "user_intent": "给订单接口加缓存"},
    )
    assert r.status_code == 200
    ctx = r.json()
    assert ctx["context_id"] == r.headers["x-context-id"]
    assert ctx["messages"][-1] == {"role": "user", "content": "给订单接口加缓存"}
    # seed 000's path, without the version prefix, is the same route
    r = c.post(
        "/context/assemble",
        json={"project_id": pid, "agent_role": "code_gen", "user_intent": "给订单接口加缓存"},
    )
    assert r.status_code == 200 and r.json()["messages"] == ctx["messages"]
    trace = c.get(f"/v1/traces/{ctx['context_id']}").json()
    assert trace["context_id"] == ctx["context_id"] and trace["agent_role"] == "code_gen"
    # the web console's reads (its own tests: test_console_api.py)
    assert c.get(f"{base}/timeline", params={"session_id": "s1"}).json()["total"] >= 1
    assert c.get(f"{base}/events/{e1['id']}/chain").json()["event"]["id"] == e1["id"]
    assert doc["id"] in {n["id"] for n in c.get(f"{base}/graph").json()["nodes"]}
    listed = c.get(f"{base}/contexts").json()["contexts"]
    assert ctx["context_id"] in {x["context_id"] for x in listed}
    same = {"before_id": ctx["context_id"], "after_id": ctx["context_id"]}
    assert c.get(f"{base}/contexts/diff", params=same).json()["is_empty"] is True
    one = c.get(f"{base}/contexts/{ctx['context_id']}").json()
    assert one["context_id"] == ctx["context_id"] and "dropped" in one
    r = c.post(
        f"{base}/contexts/{ctx['context_id']}/outcome",
        json={
            "answer": "added @cache(expire=300)",
            "session_id": "s1",
            "produced": [{"type": "code", "name": "orders.py#cached", "text": "@cache"}],
        },
    )
    assert r.status_code == 200 and r.json()["entities"][0]["name"] == "orders.py#cached"
    # feedback on a memory the context placed
    r = c.post(
        f"{base}/feedback",
        json={"node_id": doc["id"], "label": "helpful", "context_id": ctx["context_id"]},
    )
    assert r.status_code == 200 and r.json()["confidence"] == 0.75
    assert c.get(f"{base}/feedback/{doc['id']}").json()["current"]["label"] == "helpful"

    # state with history and rollback
    q = {"scope": "session", "scope_id": "s1"}
    assert (
        c.put(f"{base}/state", params={**q, "key": "budget"}, json={"value": 50000}).json()[
            "version"
        ]
        == 1
    )
    c.put(f"{base}/state", params={**q, "key": "budget"}, json={"value": 80000, "cause": "user"})
    assert c.get(f"{base}/state", params=q).json()["budget"]["value"] == 80000
    hist = c.get(f"{base}/state/history", params={**q, "key": "budget"}).json()
    assert [(h["old_value"], h["new_value"]) for h in hist] == [(None, 50000), (50000, 80000)]
    back = c.post(
        f"{base}/state/rollback", params={**q, "key": "budget"}, json={"to_version": 1}
    ).json()
    assert back["fact"]["value"] == 50000 and back["fact"]["version"] == 3
    assert c.delete(f"{base}/state", params={**q, "key": "budget"}).json() == {"deleted": True}
    assert c.get(f"{base}/state", params=q).json() == {}

    # seed 003's lifecycle moves
    life = f"{base}/sessions/life"
    assert c.put(life, json={"title": "lifecycle"}).json()["status"] == "active"
    task = c.post(f"{life}/switch-task", json={"goal": "写方案"}).json()
    said = c.post(
        f"{base}/events", json={"type": "user_message", "session_id": "life", "text": "撤回"}
    ).json()
    assert c.post(f"{life}/messages/{said['id']}/expire", json={}).status_code == 204
    assert c.post(f"{life}/suspend", json={}).json()["status"] == "suspended"
    assert c.post(f"{life}/resume", json={}).json()["status"] == "active"
    assert c.post(f"{life}/expire", json={"cause": "done"}).json()["status"] == "expired"
    archived = c.post(f"{life}/archive", json={}).json()
    assert archived["metadata"]["current_task_id"] == task["task_id"]
    assert c.put(life, json={}).status_code == 409
    # the archived session compacted now: one summary, its raw turns hidden
    sweep = f"{base}/sessions/compact-archived"
    compacted = c.post(sweep, json={"older_than": 0}).json()
    assert (compacted["compacted"], compacted["events_hidden"]) == (["life"], 1)
    assert c.post(sweep, json={"older_than": 0}).json()["already_compacted"] == ["life"]
    # seed 003's ContextManager (client.context_manager())
    cm = f"{base}/manager"
    sid = c.post(f"{cm}/sessions", json={"user_id": "u_42"}).json()["session_id"]
    said_cm = {"session_id": sid, "role": "user", "content": "把预算控制在5万以内"}
    assert c.post(f"{cm}/messages", json=said_cm).json()["id"].startswith("ev_")
    got = c.get(f"{cm}/state", params={"session_id": sid, "key": "budget"}).json()
    assert got["value"]["amount"] == 50000
    put = {"session_id": sid, "key": "color", "value": "蓝色"}
    assert c.put(f"{cm}/state", json=put).json()["version"] == 1
    hist = c.get(f"{cm}/state/history", params={"session_id": sid, "key": "color"}).json()
    assert [h["new_value"] for h in hist] == ["蓝色"]
    back_cm = {"session_id": sid, "key": "color", "to_version": 1}
    assert c.post(f"{cm}/state/rollback", json=back_cm).json()["fact"]["value"] == "蓝色"
    prompt = c.post(f"{cm}/prompt", json={"session_id": sid}).json()["messages"]
    assert prompt[-1] == {"role": "user", "content": "把预算控制在5万以内"}
    assert c.get(f"{cm}/current-task", params={"session_id": sid}).json() == {"task": None}
    sid_task = c.post(f"{base}/sessions/{sid}/switch-task", json={"goal": "写方案"}).json()
    current = c.get(f"{cm}/current-task", params={"session_id": sid}).json()["task"]
    assert current["task_id"] == sid_task["task_id"]
    moved = {"task_id": current["task_id"], "status": "suspended", "cause": "on hold"}
    assert c.post(f"{cm}/task-status", json=moved).json()["status"] == "suspended"
    msg = c.post(f"{cm}/messages", json=said_cm).json()["id"]
    status = c.get(f"{cm}/message-status", params={"session_id": sid, "message_id": msg})
    assert status.json() == {"status": "active"}
    c.put(f"{base}/sessions/idle", json={})
    idle = c.post(f"{base}/sessions/expire-idle", json={"idle_timeout_s": 1e-6}).json()
    assert "idle" in idle["expired"]

    # knowledge-base versions (an entity of a repository, as an ingest writes it)
    kb_doc = {
        "type": "document",
        "name": "kb.md",
        "text": "refund window fourteen days",
        "properties": {"repo": "shop", "path": "kb.md"},
    }
    assert c.post(f"{base}/entities", json=kb_doc).status_code == 200
    assert c.post(f"{base}/kb/versions", json={"name": "v1.2"}).json()["repos"] == ["shop"]
    assert c.put(f"{base}/kb/pin", json={"tag": "v1.2"}).json()["missing"] == 0
    assert [t["pinned"] for t in c.get(f"{base}/kb/versions").json()] == [True]
    assert c.delete(f"{base}/kb/pin").json() == {"unpinned": "v1.2"}

    # close a relation, soft delete, restore, forget
    assert c.post(f"{base}/relations/{rel['id']}/close", json={}).json() == {"closed": True}
    assert c.post(f"{base}/relations/{rel['id']}/close", json={}).json() == {"closed": False}
    typo = c.post(f"{base}/relations/rel_typo/close", json={})
    assert typo.status_code == 404 and "relation 'rel_typo' not found" in typo.text
    refs = {"node_id": doc["id"], "direction": "out", "types": ["REFERENCES"]}
    assert c.get(f"{base}/relations", params=refs).json() == []
    closed = c.get(f"{base}/relations", params={**refs, "include_closed": True}).json()
    assert [x["valid_to"] is not None for x in closed] == [True]
    one = {"changed": 1, "unchanged": [], "not_found": [], "already_forgotten": []}
    one |= {"sources_hidden": [], "sources_still_visible": [], "same_text_still_visible": []}
    assert c.post(f"{base}/soft-delete", json={"ids": [code["id"]]}).json() == one
    assert c.get(f"{base}/entities/{code['id']}").status_code == 404
    assert c.post(f"{base}/restore", json={"ids": [code["id"]]}).json() == one
    assert c.get(f"{base}/entities/{code['id']}").status_code == 200
    r = c.post(f"{base}/forget", json={"event_ids": [e1["id"]]})
    assert r.json()["removed"]["events"] == 1
    assert c.get(f"{base}/events/{e1['id']}").status_code == 404

    assert pid in c.get("/v1/projects").json()["projects"]
    stats = c.get("/v1/capture/stats").json()
    assert stats["written"] >= 1 and stats["queue_depth"] == 0
    assert "ctxbase_http_request_duration_seconds_bucket" in c.get("/metrics").text

    # every operation of the OpenAPI schema has answered with a 2xx at least once
    spec = c.get("/openapi.json").json()
    metrics = c.get("/metrics").text
    answered = set(re.findall(r'method="(\w+)",route="([^"]+)",status="2\d\d"', metrics))
    operations = {(m.upper(), p) for p, ops in spec["paths"].items() for m in ops}
    normalised = {(m, re.sub(r":path}", "}", p)) for m, p in answered}
    missing = operations - normalised - {("GET", "/openapi.json")}
    assert not missing, f"routes never exercised: {sorted(missing)}"


def test_events_without_agent_id_are_the_keys(live: Live, pid: str) -> None:
    with live.client(live.key(pid, role="write")) as c:
        key_id = c.get("/v1/whoami").json()["key_id"]
        base = f"/v1/projects/{pid}"
        one = c.post(
            f"{base}/events", json={"type": "user_message", "session_id": "s", "text": "a"}
        )
        assert one.status_code == 201 and one.json()["agent_id"] == f"key:{key_id}"
        named = {"type": "user_message", "session_id": "s", "text": "b", "agent_id": "planner"}
        assert c.post(f"{base}/events", json=named).json()["agent_id"] == "planner"
        batch = c.post(
            f"{base}/events/batch",
            json={"events": [{"type": "user_message", "session_id": "s", "text": "c"}, named]},
        )
        assert [e["agent_id"] for e in batch.json()["events"]] == [f"key:{key_id}", "planner"]
        queued = c.post(
            f"{base}/events/queue", json={"type": "user_message", "session_id": "s", "text": "d"}
        )
        assert queued.status_code == 202
        assert c.post(f"{base}/flush").status_code in (200, 204)
        stored = c.get(f"{base}/events/{queued.json()['id']}")
        assert stored.json()["agent_id"] == f"key:{key_id}"


def test_a_hard_fact_delete_needs_an_admin_key_and_removes_the_history(
    live: Live, pid: str
) -> None:
    q = {"scope": "session", "scope_id": "s1", "key": "token"}
    with live.client(live.key(pid, role="write")) as writer:
        base = f"/v1/projects/{pid}"
        for value in ("tok-1111", "tok-2222"):
            assert writer.put(f"{base}/state", params=q, json={"value": value}).status_code == 200
        refused = writer.delete(f"{base}/state", params={**q, "hard": "true"})
        assert refused.status_code == 403, refused.text
        assert len(writer.get(f"{base}/state/history", params=q).json()) == 2
    with live.client(live.key(pid, role="admin")) as admin:
        gone = admin.delete(f"{base}/state", params={**q, "hard": "true"})
        assert gone.json() == {"deleted": True}
        assert admin.get(f"{base}/state/history", params=q).json() == []
        back = admin.post(f"{base}/state/rollback", params=q, json={"to_version": 1})
        assert back.status_code == 404
