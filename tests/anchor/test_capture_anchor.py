"""Capture anchors what messages carry, off the caller's thread; retrieval hops over it."""

from __future__ import annotations

from ctxbase import ContextBase
from ctxbase.anchor.capture_anchor import AnchorConfig
from ctxbase.retrieve.config import get_preset


def _edges(cb: ContextBase, node: str, types: list[str]) -> set[tuple[str, str, str, str]]:
    return {(r.from_id, r.type, r.to_id, r.source) for r in cb.relationships(node, types=types)}


def test_a_captured_requirement_follows_the_named_spec(cb: ContextBase) -> None:
    doc = cb.upsert_entity("document", "Redis 缓存规范 V3.2", "key 以服务名为前缀", id="doc_redis")
    cb.upsert_entity("document", "MySQL 索引规范", "索引命名", id="doc_mysql")
    eid = cb.capture(
        "user_message",
        session_id="s1",
        text="我们需要订单查询接口支持按用户 ID 分页，缓存 5 分钟，符合公司 Redis 规范。",
    )
    assert eid is not None
    cb.flush()  # stored and anchored
    (req,) = cb.list_entities(type="requirement")
    assert req.properties["event_id"] == eid and req.properties["session_id"] == "s1"
    assert _edges(cb, req.id, ["GENERATES", "FOLLOWS"]) == {
        (eid, "GENERATES", req.id, "ctxbase:requirement"),
        (req.id, "FOLLOWS", doc.id, "ctxbase:follows_spec"),
    }


def test_every_edge_capture_anchoring_writes_has_a_ctxbase_source(cb: ContextBase) -> None:
    # The requirement's FOLLOWS came from weave_requirement as auto:cites_document, over
    # the follows_spec edge the spec phrase had found.
    doc = cb.upsert_entity(
        "document", "Payments", "refund rules", id="doc_pay", properties={"title": "Payments"}
    )
    cb.upsert_entity(
        "code",
        "refund_order",
        "def refund_order(): ...",
        id="code_refund",
        properties={"kind": "function", "symbol": "app.refunds.refund_order"},
    )
    said = cb.record("user_message", session_id="s1", text="We must follow the Payments spec.")
    named = cb.record("user_message", session_id="s1", text="We must call refund_order twice.")
    per = cb.record("user_message", session_id="s1", text="按照 Payments 规范处理退款。")
    code = "```python\ndef refund_twice(order):\n    refund_order(order)\n```"
    wrote = cb.record("assistant_message", session_id="s1", text=code)
    cb.flush()
    reqs = {r.properties["event_id"]: r for r in cb.list_entities(type="requirement")}
    assert _edges(cb, reqs[said.id].id, ["FOLLOWS"]) == {
        (reqs[said.id].id, "FOLLOWS", doc.id, "ctxbase:follows_spec")
    }
    assert _edges(cb, reqs[named.id].id, ["REFERENCES"]) == {
        (reqs[named.id].id, "REFERENCES", "code_refund", "ctxbase:mentions")
    }
    # no requirement sentence: the event REFERENCES the document, found by the spec phrase
    # as well as by the title's name; the spec phrase names the edge
    assert _edges(cb, per.id, ["REFERENCES"]) == {
        (per.id, "REFERENCES", doc.id, "ctxbase:spec_reference")
    }
    made = [e.id for e in cb.list_entities(type="code") if e.id != "code_refund"]
    assert made  # the block's module and function
    sources = {
        r.source
        for node in (said.id, named.id, per.id, wrote.id, *made, *(r.id for r in reqs.values()))
        for r in cb.relationships(node, direction="out")
        if r.type != "NEXT"  # the event graph's own edge (auto:capture)
    }
    assert "ctxbase:message_code" in sources  # the event GENERATES the block's code
    assert all(s.startswith("ctxbase:") for s in sources), sources


def test_a_requirement_naming_a_document_by_title_follows_it(cb: ContextBase) -> None:
    doc = cb.upsert_entity(
        "document", "Payments", "refund rules", id="doc_pay", properties={"title": "Payments"}
    )
    ev = cb.record(
        "user_message", session_id="s1", text="We must keep Payments refunds idempotent."
    )
    cb.flush()
    (req,) = cb.list_entities(type="requirement")
    assert req.properties["event_id"] == ev.id
    assert _edges(cb, req.id, ["FOLLOWS"]) == {
        (req.id, "FOLLOWS", doc.id, "ctxbase:cites_document")
    }


def test_decisions_and_mentions_are_anchored(cb: ContextBase) -> None:
    ev = cb.record(
        "user_message",
        session_id="s1",
        text="We decided to partition the order_refunds table. See db/migrations/0042.sql.",
    )
    cb.flush()
    (dec,) = cb.list_entities(type="decision")
    assert dec.text == "We decided to partition the order_refunds table."
    mentioned = {
        (cb.get_entity(r.to_id).name, r.source) for r in cb.relationships(ev.id, types=["MENTIONS"])
    }
    assert mentioned == {
        ("order_refunds", "ctxbase:table_name"),
        ("db/migrations/0042.sql", "ctxbase:file_path"),
    }


def test_the_switch_turns_anchoring_off(cb: ContextBase) -> None:
    off = ContextBase(cb.store, project=cb.project, embedder="hash", anchoring=False)
    off.record("user_message", session_id="s1", text="We must index the order_refunds table.")
    off.flush()
    assert off.list_entities() == []
    narrow = ContextBase(
        cb.store, project=cb.project, embedder="hash", anchoring=AnchorConfig(mentions=False)
    )
    narrow.record("user_message", session_id="s2", text="We must index the order_refunds table.")
    narrow.flush()
    assert [e.type for e in narrow.list_entities()] == ["requirement"]
    narrow._bus.close()  # the store is the fixture's: close only the bases' own threads
    off._bus.close()


def test_a_turn_sharing_no_word_with_the_question_is_found_through_a_table(
    cb: ContextBase,
) -> None:
    cb.record(
        "user_message",
        session_id="monday",
        text="Why are refunds so slow? The rfnd_ledger table has no index on created_at.",
    )
    cb.record("user_message", session_id="monday", text="Let me grab lunch first.")
    answer = cb.record(
        "assistant_message",
        session_id="friday",
        text="Added a covering index to rfnd_ledger; p95 dropped to 40 ms.",
    )
    for n in range(5):  # unrelated chatter in the other session
        cb.record("user_message", session_id="friday", text=f"Deploy number {n} went fine.")
    cb.flush()
    cb.wait_for_embeddings()
    question = "why are refunds slow"
    plain = cb.search(question, config=get_preset("hybrid", top_k=10, semantic=False))
    assert answer.id not in {c.item.owner_id for c in plain.results}  # no shared word
    hop = cb.search(question, config=get_preset("hybrid_graph", top_k=10, semantic=False))
    found = {c.item.owner_id: c for c in hop.results}
    assert answer.id in found
    assert (found[answer.id].graph_via or "").startswith("MENTIONS mention:")
    # bounded: with no fan-out allowed the hop is not taken
    off = get_preset("hybrid_graph", top_k=10, semantic=False, mention_fanout=0)
    assert answer.id not in {c.item.owner_id for c in cb.search(question, config=off).results}


def test_forgetting_an_event_forgets_what_was_anchored_from_it(cb: ContextBase) -> None:
    keep = cb.record("user_message", session_id="s1", text="We must log every refund.")
    gone = cb.record(
        "user_message",
        session_id="s2",
        text="We must store card numbers in the pay_cards table.\n"
        "```sql\nSELECT 1 FROM pay_cards;\n```",
    )
    cb.flush()
    derived = {e.id for e in cb.list_entities() if e.properties.get("event_id") == gone.id}
    assert len(derived) >= 2  # the requirement and the SQL block
    cb.forget(session_id="s2")
    left = {e.id for e in cb.list_entities()}
    assert not derived & left
    assert [e.properties["event_id"] for e in cb.list_entities(type="requirement")] == [keep.id]


def test_an_anchoring_batch_reads_no_titles_and_no_statements(cb: ContextBase) -> None:
    """A batch's reads follow the project's code and documents, not the conversation's
    length: the titles come with the symbol index (no read of their own), and the
    statements and mentions earlier messages produced are not read at all."""
    from ctxbase.anchor.capture_rules import anchor_events

    cb.upsert_entity("document", "Redis 缓存规范 V3.2", "key 以服务名为前缀", id="doc_redis")
    quiet = ContextBase(cb.store, project=cb.project, embedder="hash", anchoring=False)
    texts = [f"我们需要订单列表{n}支持分页，缓存 5 分钟，符合公司 Redis 规范。" for n in range(12)]
    first = [quiet.record("user_message", session_id="s1", text=t) for t in texts]
    second = [quiet.record("user_message", session_id="s2", text="另外，" + t) for t in texts]
    quiet._bus.close()

    store = cb.store
    asked: list[list[str]] = []
    listed: list[str] = []
    get_entities, list_entities = store.get_entities, store.list_entities

    def counting_get(project_id: str, ids: list[str], *a: object, **kw: object) -> object:
        asked.append(list(ids))
        return get_entities(project_id, ids, *a, **kw)  # type: ignore[arg-type]

    def counting_list(*a: object, **kw: object) -> object:
        found = list_entities(*a, **kw)  # type: ignore[arg-type]
        listed.extend(e.type for e in found)
        return found

    store.get_entities = counting_get  # type: ignore[method-assign]
    store.list_entities = counting_list  # type: ignore[method-assign]
    try:
        anchor_events(cb, first)
        assert not [ids for ids in asked if "doc_redis" in ids]  # not once per message
        assert len(cb.list_entities(type="requirement")) == 12
        listed.clear()
        anchor_events(cb, second)
        assert "requirement" not in listed and "decision" not in listed
    finally:
        del store.get_entities, store.list_entities
    follows = {r.from_id for r in cb.relationships("doc_redis", types=["FOLLOWS"])}
    assert len(follows) == 24  # every requirement still follows the named document


def test_a_requirement_sentence_is_served_once_not_twice(cb: ContextBase) -> None:
    # its name is the sentence (cut at 80 characters), its text the whole sentence
    short = "We must support SSO login for admins."
    long = "We must keep every invoice line " + "with its tax code and currency " * 3 + "."
    for n, text in enumerate((short, long)):
        cb.record("user_message", session_id=f"s{n}", text=text)
    cb.flush()
    reqs = {e.text: e for e in cb.list_entities(type="requirement")}
    assert set(reqs) == {short, long} and reqs[long].name.endswith("…")
    for text, req in reqs.items():
        # the unit holds the sentence once (and so is a near-duplicate of its message)
        (unit,) = [c for c in cb.search(text, top_k=10).considered if c.item.owner_id == req.id]
        assert unit.item.text == text
    ctx = cb.assemble_context(
        agent_role="coder", user_intent="SSO login for admins", session_id="s0"
    )
    (memory,) = [m["content"] for m in ctx.messages if "Retrieved context" in m["content"]]
    # the session's own turn says it in the history: the prompt holds the sentence once,
    # and the trace says why the requirement cut from it is not repeated in memory
    assert sum(m["content"].count(short) for m in ctx.messages) == 1
    assert short not in memory and f"[requirement {reqs[long].id}, " in memory
    assert any(
        d["id"] == reqs[short].id and d["reason"] == "in history" for d in ctx.trace["dropped"]
    )


def test_a_block_pasted_with_full_width_punctuation_is_anchored(cb: ContextBase) -> None:
    ev = cb.record(
        "user_message",
        session_id="s1",
        text="这段代码报错了：\n```python\n"
        "def list_orders（user_id， page）：\n    return page\n```",
    )
    cb.flush()
    (fn,) = [e for e in cb.list_entities(type="code") if e.name == "list_orders"]
    assert fn.properties["event_id"] == ev.id


def test_a_spec_named_to_change_earlier_sql_references_that_sql(cb: ContextBase) -> None:
    # seed 000, 2.2: "参考刚才的合规指南修改 SQL" -> doc_789 -(REFERENCES)-> sql_456
    guide = "2024跨境支付合规指南"
    doc = cb.upsert_entity("document", guide, "跨境支付 限额 申报义务", id="doc_789")
    cb.record("assistant_message", session_id="other", text="```sql\nSELECT * FROM refunds\n```")
    cb.record(
        "assistant_message",
        session_id="s1",
        text="```sql\nSELECT id, amount FROM transactions WHERE user_id = 7\n```",
    )
    cb.record("user_message", session_id="s1", text="参考刚才的合规指南回答这个问题。")
    ev = cb.record("user_message", session_id="s1", text="参考刚才的合规指南修改 SQL")
    cb.flush()
    out = [r for r in cb.relationships(doc.id) if r.from_id == doc.id]
    assert len(out) == 1
    (edge,) = out
    sql = cb.get_entity(edge.to_id)
    assert edge.type == "REFERENCES" and edge.source == "ctxbase:spec_applies_to"
    assert sql.type == "sql" and "transactions" in sql.text
    assert edge.properties.get("event_id") == ev.id
    (ref,) = [r for r in cb.relationships(ev.id) if r.to_id == doc.id]
    assert edge.confidence == ref.confidence  # as sure as the document was named
    # the relation is what the message said: forgetting the message forgets it
    report = cb.forget(event_ids=[ev.id])
    assert report.removed.get("relations", 0) >= 2
    assert not [r for r in cb.relationships(doc.id) if r.from_id == doc.id]
    assert cb.get_entity(sql.id).type == "sql"  # the SQL itself stays


def test_every_requirement_of_a_long_message_generates_its_sessions_code(cb: ContextBase) -> None:
    # The requirements of one message are written in one transaction and read the
    # session's code once: each still links to all of it, and to no other session's.
    cb.record(
        "assistant_message",
        session_id="s1",
        text="```python\ndef apply_coupon(order):\n    return order\n```",
    )
    cb.record(
        "assistant_message",
        session_id="s2",
        text="```python\ndef refund(order):\n    return order\n```",
    )
    cb.flush()
    code = {e.id for e in cb.list_entities(type="code") if e.properties["session_id"] == "s1"}
    other = {e.id for e in cb.list_entities(type="code") if e.properties["session_id"] == "s2"}
    assert code and other
    sentences = [f"第{i}个接口必须支持分页查询。" for i in range(30)]
    cb.record("user_message", session_id="s1", text="".join(sentences))
    cb.flush()
    requirements = cb.list_entities(type="requirement")
    assert len(requirements) == 30
    for req in requirements:
        generated = {
            r.to_id for r in cb.relationships(req.id, direction="out", types=["GENERATES"])
        }
        assert generated == code
