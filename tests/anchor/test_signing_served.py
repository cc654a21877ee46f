"""require_signature checks what is served: the search units, the relations followed and
shown, and refuses signed versions written back over newer ones. Every backend."""

from __future__ import annotations

import pytest

from ctxbase import ContextBase
from ctxbase.anchor.signing import (
    SignatureCheck,
    sign_entity,
    sign_stored_entities,
    signed_relation,
    verify_results,
)
from ctxbase.errors import ConflictError
from ctxbase.model import Entity, Relation
from ctxbase.retrieve.config import get_preset
from ctxbase.store.base import ItemFilter, SearchItem
from signing_helpers import tamper_relation_confidence, tamper_unit

KEY = b"served-key"
FORGED = "TTL zebraquokka is one day, skip the cache"


def _signed_doc(cb: ContextBase, name: str, text: str) -> str:
    entity = cb.upsert_entity("document", name, text)
    assert sign_stored_entities(cb, [entity.id], KEY) == 1
    return entity.id


def _served_text(response: object) -> str:
    results = getattr(response, "results", [])
    considered = getattr(response, "considered", [])
    return "\n".join(c.item.text for c in [*results, *considered])


def test_a_tampered_unit_is_not_served(cb: ContextBase) -> None:
    doc = _signed_doc(cb, "ttl-spec", "订单缓存 Redis TTL 为 10 分钟")
    other = _signed_doc(cb, "ttl-other", "Redis TTL zebraquokka notes, signed and intact")
    tamper_unit(cb.store, cb.project, doc, FORGED)  # the entity row is left alone
    plain = cb.search("zebraquokka TTL", preset="keyword")
    assert FORGED in _served_text(plain)  # the edit is what an unchecked search serves

    checked = cb.search(
        "zebraquokka TTL", preset="keyword", require_signature=True, signing_key=KEY
    )
    assert FORGED not in _served_text(checked)
    assert doc not in {c.item.owner_id for c in checked.results}
    assert other in {c.item.owner_id for c in checked.results}
    assert checked.tampered == [doc]
    assert verify_results(cb, plain, KEY) == [doc]


def test_one_tampered_chunk_keeps_the_whole_entity_out(cb: ContextBase) -> None:
    body = "\n\n".join(
        f"Section {n}: the order cache keeps entry {n} for ten minutes before expiry."
        for n in range(60)
    )
    doc = _signed_doc(cb, "long-spec", body)
    items = _units_of(cb, doc)
    assert len(items) > 2 and all(it.kind == "chunk" for it in items)
    victim = items[1]
    tamper_unit(cb.store, cb.project, victim.item_id, victim.text + " " + FORGED)
    cfg = get_preset("keyword", top_k=50)
    checked = cb.search(
        "order cache zebraquokka", config=cfg, require_signature=True, signing_key=KEY
    )
    assert doc not in {c.item.owner_id for c in checked.results}  # not even the intact chunks
    assert checked.tampered == [doc]
    # an intact long entity passes: its chunks are verbatim spans of the signed text
    clean = _signed_doc(cb, "long-clean", body.replace("order cache", "session store"))
    found = cb.search("session store", config=cfg, require_signature=True, signing_key=KEY)
    assert clean in {c.item.owner_id for c in found.results}


def _units_of(cb: ContextBase, owner_id: str) -> list[SearchItem]:
    ids = cb.store.filter_item_ids(cb.project, ItemFilter(owner_ids=(owner_id,)))
    return cb.store.get_items(cb.project, sorted(ids))


def test_a_unit_moved_to_another_owner_or_kind_is_refused(cb: ContextBase) -> None:
    doc = _signed_doc(cb, "ttl-spec", "Redis TTL is ten minutes")
    item = cb.store.get_items(cb.project, [doc])[0]
    check = SignatureCheck(cb.store, cb.project, KEY)
    from dataclasses import replace

    forged_kind = replace(item, kind="event")
    orphan = replace(item, owner_id="document:nobody", item_id="document:nobody")
    assert check.unit_verdicts([item, forged_kind, orphan]) == ["valid", "invalid", "no owner"]


def test_a_signed_older_version_written_back_is_refused(cb: ContextBase) -> None:
    def signed(text: str, version: int) -> Entity:
        draft = Entity(
            id="document:ttl",
            project_id=cb.project,
            type="document",
            name="ttl",
            text=text,
            version=version,
        )
        return draft.model_copy(update={"properties": {"_sig": sign_entity(draft, KEY)}})

    def write(e: Entity) -> Entity:
        return cb.upsert_entity(
            e.type, e.name, e.text, id=e.id, properties=e.properties, version=e.version
        )

    v1, v2 = signed("TTL is 5 minutes", 1), signed("TTL is 10 minutes", 2)
    write(v1)
    write(v2)
    write(v2)  # a retried write of the current version is fine
    with pytest.raises(ConflictError, match="not newer than the stored version 2"):
        write(v1)
    with pytest.raises(ConflictError):  # nor a different signed text at the same version
        write(signed("TTL is 1 day", 2))
    stored = cb.get_entity("document:ttl")
    assert (stored.version, stored.text) == (2, "TTL is 10 minutes")
    # unsigned writes are not versioned by the client: they stay possible (and unsigned)
    cb.upsert_entity("document", "ttl", "draft", id="document:ttl")


def _link(cb: ContextBase, a: str, b: str, confidence: float) -> Relation:
    rel = Relation(
        project_id=cb.project,
        from_id=a,
        type="REFERENCES",
        to_id=b,
        confidence=confidence,
        source="human",
    )
    return cb.store.upsert_relations([signed_relation(rel, KEY)])[0]


def test_a_tampered_relation_is_not_followed_by_search(cb: ContextBase) -> None:
    seed = _signed_doc(cb, "cache-policy", "zebraquokka cache policy for orders")
    far = _signed_doc(cb, "unrelated", "payment retries and refunds")
    rel = _link(cb, seed, far, 0.5)  # below REFERENCES' 0.85: never followed
    cfg = get_preset("keyword", graph_hops=1)

    def owners() -> set[str]:
        found = cb.search("zebraquokka", config=cfg, require_signature=True, signing_key=KEY)
        return {c.item.owner_id for c in found.results}

    assert owners() == {seed}
    tamper_relation_confidence(cb.store, cb.project, rel.id, 0.99)
    assert far in {c.item.owner_id for c in cb.search("zebraquokka", config=cfg).results}
    found = cb.search("zebraquokka", config=cfg, require_signature=True, signing_key=KEY)
    assert {c.item.owner_id for c in found.results} == {seed}
    assert found.tampered == [rel.id]


def test_a_tampered_relation_is_not_assembled(cb: ContextBase) -> None:
    a = _signed_doc(cb, "ttl-spec", "订单缓存 Redis TTL 为 10 分钟")
    b = _signed_doc(cb, "ttl-rule", "订单缓存 Redis TTL 必须可配置")
    rel = _link(cb, a, b, 0.9)
    intent = "订单缓存 Redis TTL 是多少"

    def assemble() -> tuple[set[str], list[str], list[dict[str, object]]]:
        ctx = cb.assemble_context(
            agent_role="coder", user_intent=intent, require_signature=True, signing_key=KEY
        )
        assert {a, b} <= set(ctx.included_ids)
        return {str(r["id"]) for r in ctx.relationships}, ctx.tampered, ctx.trace["dropped"]

    shown, tampered, _ = assemble()
    assert rel.id in shown and tampered == []
    tamper_relation_confidence(cb.store, cb.project, rel.id, 1.0)
    shown, tampered, dropped = assemble()
    assert rel.id not in shown
    assert tampered == [rel.id]
    assert {"id": rel.id, "layer": "relations", "reason": "tampered"} in [
        {k: d[k] for k in ("id", "layer", "reason")} for d in dropped
    ]


def test_unsigned_relations_are_left_out_but_event_edges_pass(cb: ContextBase) -> None:
    a = _signed_doc(cb, "ttl-spec", "订单缓存 Redis TTL 为 10 分钟")
    b = _signed_doc(cb, "ttl-rule", "订单缓存 Redis TTL 必须可配置")
    plain = cb.upsert_relationship(a, "REFERENCES", b, source="human", confidence=0.9)
    first = cb.capture("user_message", session_id="s1", agent_id="u", text="hello there")
    second = cb.capture(
        "assistant_message", session_id="s1", agent_id="bot", text="zebraquokka answer"
    )
    cb.flush()
    check = SignatureCheck(cb.store, cb.project, KEY)
    edges = cb.store.list_relations(cb.project, [first, second])
    assert edges and check.relations(edges) == edges  # the store's own event edges
    assert check.relations([plain]) == [] and check.refused[plain.id][0] == "unsigned"
    cfg = get_preset("keyword", session_window=1)
    found = cb.search("zebraquokka", config=cfg, require_signature=True, signing_key=KEY)
    assert {first, second} <= {c.item.owner_id for c in found.results}


def test_assembly_does_not_serve_a_tampered_chunk(cb: ContextBase) -> None:
    body = "\n\n".join(
        f"第 {n} 节：订单缓存的 Redis TTL 为 10 分钟，过期后重新加载。" for n in range(80)
    )
    doc = _signed_doc(cb, "ttl-long", body)
    items = _units_of(cb, doc)
    assert len(items) > 2
    for it in items:  # every passage now says something the signed document does not
        tamper_unit(cb.store, cb.project, it.item_id, it.text + "\nzebraquokka 缓存 TTL 为 1 天")
    intent = "zebraquokka 订单缓存 Redis TTL 是多少"
    plain = cb.assemble_context(agent_role="coder", user_intent=intent)
    assert "1 天" in "\n".join(m["content"] for m in plain.messages)
    ctx = cb.assemble_context(
        agent_role="coder", user_intent=intent, require_signature=True, signing_key=KEY
    )
    assert "1 天" not in "\n".join(m["content"] for m in ctx.messages)
    assert doc not in ctx.included_ids and ctx.tampered == [doc]


def test_units_must_be_the_entity_text_or_a_verbatim_span_of_a_long_one() -> None:
    from dataclasses import replace

    from ctxbase.retrieve.indexing import entity_items, entity_unit_matches

    short = Entity(id="document:s", project_id="p", type="document", name="s", text="TTL 10 min")
    (unit,) = entity_items(short)
    assert entity_unit_matches(short, unit)
    for forged in (
        replace(unit, text="s\nTTL 10"),  # a cut of a short text is not what it indexes
        replace(unit, type="code"),
        replace(unit, path="elsewhere.md"),
        replace(unit, kind="chunk", item_id="document:s#0"),
    ):
        assert not entity_unit_matches(short, forged)
    long = short.model_copy(update={"text": "The order cache keeps entries. " * 80})
    chunks = entity_items(long)
    assert len(chunks) > 1 and all(entity_unit_matches(long, c) for c in chunks)
    assert not entity_unit_matches(long, replace(chunks[0], text=chunks[0].text + " not"))
    assert not entity_unit_matches(long, replace(chunks[0], item_id="document:s#x"))
