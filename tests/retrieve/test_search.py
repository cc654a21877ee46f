"""Hybrid search over a real store, on every backend (the `cb` fixture is parametrised)."""

from __future__ import annotations

import pytest

from ctxbase import ContextBase, ValidationError
from ctxbase.retrieve.config import PRESETS, SearchConfig, get_preset
from ctxbase.retrieve.indexing import entity_items
from ctxbase.retrieve.search import actor_free_query, named_actors
from ctxbase.store.base import ItemFilter, SearchItem


def _seed(cb: ContextBase) -> dict[str, str]:
    ids: dict[str, str] = {}

    def rec(key: str, session: str, text: str, agent: str = "user", **kw: object) -> None:
        ids[key] = cb.record("user_message", session_id=session, text=text, agent_id=agent, **kw).id  # type: ignore[arg-type]

    rec("budget", "s1", "把预算控制在5万以内，尽快上线", agent="alice")
    rec("cache", "s1", "订单查询太慢，给最近30天的订单加上Redis缓存", agent="alice")
    rec("ack", "s1", "好的，我先看一下慢SQL", agent="coder")
    rec("answer", "s1", "是的，上周已经做完了", agent="coder")
    rec("hike", "s2", "Did you go hiking at the lake last weekend?", agent="bob")
    rec("yes", "s2", "Yes, we swam the whole afternoon.", agent="carol")
    rec("pottery", "s2", "Carol started pottery classes on Tuesdays.", agent="bob")
    rec("tests", "s3", "The payment tests fail with a timeout in CI.", agent="tester")
    cb.wait_for_embeddings()
    return ids


def _owners(cb: ContextBase, query: str, **kw: object) -> list[str]:
    return [c.item.owner_id for c in cb.search(query, **kw).results]  # type: ignore[arg-type]


def test_chinese_keyword_search_finds_segmented_words(cb: ContextBase) -> None:
    ids = _seed(cb)
    assert _owners(cb, "缓存", preset="keyword")[0] == ids["cache"]
    assert _owners(cb, "预算是多少", preset="keyword")[0] == ids["budget"]


def test_an_event_is_found_by_the_words_of_the_turn_it_answers(cb: ContextBase) -> None:
    ids = _seed(cb)
    # "swam the whole afternoon" never says "hiking": its predecessor does.
    found = _owners(cb, "hiking", preset="keyword", top_k=5)
    assert ids["hike"] in found and ids["yes"] in found


def test_hiding_the_context_event_hides_its_words_from_the_next_one(cb: ContextBase) -> None:
    ids = _seed(cb)
    cb.soft_delete([ids["hike"]])
    assert ids["yes"] not in _owners(cb, "hiking", preset="keyword", top_k=5)
    assert ids["yes"] in _owners(cb, "swam afternoon", preset="keyword", top_k=5)
    cb.restore([ids["hike"]])
    assert ids["yes"] in _owners(cb, "hiking", preset="keyword", top_k=5)
    cb.forget(event_ids=[ids["hike"]])
    assert _owners(cb, "hiking", preset="keyword", top_k=5) == []


def test_a_broad_filter_checks_candidates_instead_of_listing_the_project(
    cb: ContextBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ctxbase.retrieve.search import FilterScope

    ids = _seed(cb)
    flt = ItemFilter(exclude_session_ids=("s1",))
    cfg = get_preset("hybrid", top_k=4)
    listed = _owners(cb, "Carol pottery afternoon tests", config=cfg, filters=flt)
    monkeypatch.setattr(FilterScope, "LISTED", 2)  # every filter here is now "broad"
    checked = _owners(cb, "Carol pottery afternoon tests", config=cfg, filters=flt)
    assert checked == listed
    assert ids["pottery"] in checked
    assert not {ids["budget"], ids["cache"], ids["ack"], ids["answer"]} & set(checked)


def test_filters_apply_before_ranking(cb: ContextBase) -> None:
    ids = _seed(cb)
    only_s2 = _owners(cb, "订单 lake tests", filters=ItemFilter(session_ids=("s2",)))
    assert only_s2 and all(o in (ids["hike"], ids["yes"], ids["pottery"]) for o in only_s2)
    by_agent = _owners(cb, "tests timeout", filters=ItemFilter(agent_ids=("tester",)))
    assert by_agent == [ids["tests"]]
    nothing = _owners(cb, "缓存", filters=ItemFilter(types=("tool_result",)))
    assert nothing == []


def test_semantic_search_uses_vectors(cb: ContextBase) -> None:
    ids = _seed(cb)
    resp = cb.search("Carol started pottery classes on Tuesdays.", preset="semantic", top_k=3)
    assert resp.results[0].item.owner_id == ids["pottery"]
    assert resp.results[0].similarity is not None and resp.results[0].similarity > 0.9


def test_session_window_brings_neighbours_and_explains_why(cb: ContextBase) -> None:
    ids = _seed(cb)
    cfg = get_preset("hybrid_graph", top_k=8)
    resp = cb.search("Redis 缓存", config=cfg)
    by_owner = {c.item.owner_id: c for c in resp.results}
    assert ids["cache"] in by_owner
    neighbour = by_owner.get(ids["ack"])
    assert neighbour is not None and neighbour.graph_via and "NEXT" in neighbour.graph_via


def test_graph_expansion_follows_entity_relations_above_threshold(cb: ContextBase) -> None:
    spec = cb.upsert_entity("document", "redis-cache-spec", "缓存键 orders:recent，TTL 10 分钟")
    code = cb.upsert_entity("code", "zqx_loader", "def zqx_loader(): ...")
    weak = cb.upsert_entity("document", "unrelated-note", "meeting notes about holidays")
    cb.upsert_relationship(code.id, "FOLLOWS", spec.id, source="human", confidence=0.9)
    cb.upsert_relationship(code.id, "REFERENCES", weak.id, source="auto:test", confidence=0.5)
    cb.wait_for_embeddings()
    cfg = get_preset("hybrid_graph", top_k=10, semantic=False)
    found = {c.item.owner_id: c for c in cb.search("zqx_loader", config=cfg).results}
    assert spec.id in found and "FOLLOWS" in (found[spec.id].graph_via or "")
    assert weak.id not in found  # REFERENCES needs 0.85 by default


def test_latest_only_hides_superseded_versions(cb: ContextBase) -> None:
    first = cb.upsert_entity("document", "spec", "cache TTL is 5 minutes", id="doc:spec@1")
    superseded = first.model_copy(update={"latest": False})
    cb.store.upsert_entity(superseded, entity_items(superseded))
    cb.upsert_entity("document", "spec", "cache TTL is 10 minutes", id="doc:spec@2")
    assert _owners(cb, "cache TTL minutes", preset="keyword") == ["doc:spec@2"]
    every = get_preset("keyword", latest_only=False)
    assert sorted(_owners(cb, "cache TTL minutes", config=every)) == ["doc:spec@1", "doc:spec@2"]


def test_actor_named_in_the_query_is_preferred(cb: ContextBase) -> None:
    for n in range(3):
        cb.record("user_message", session_id="s", text=f"I like painting, day {n}", agent_id="amy")
        cb.record("user_message", session_id="s", text=f"I like painting too, {n}", agent_id="ben")
    cb.wait_for_embeddings()
    top = cb.search("What does ben like?", preset="hybrid", top_k=3).results
    assert all(c.item.agent_id == "ben" for c in top)


def _item(agent: str | None, role: str | None = None) -> SearchItem:
    return SearchItem(
        item_id="i", owner_id="i", kind="event", type="user_message", text="", terms="", ts=0.0,
        agent_id=agent, agent_role=role,
    )  # fmt: skip


def test_named_actors_are_whole_words_of_the_query() -> None:
    items = [_item("alice"), _item("bruno", "tester"), _item("al"), _item(None)]
    assert named_actors("What has Alice painted?", items) == ["alice"]
    assert named_actors("Did Bruno and Alice both paint?", items) == ["alice", "bruno"]
    assert named_actors("What did the tester report?", items) == ["tester"]
    # Part of a word is no mention; names under three characters are never matched.
    assert named_actors("Did Alices testers go to Al's?", items) == []


def test_actor_free_query_keeps_the_topic() -> None:
    assert actor_free_query("What has Alice painted?", ["Alice"]) == "What has painted?"
    assert actor_free_query("What is Bruno's job?", ["bruno"]) == "What is job?"
    assert actor_free_query("Where did Bruno\u2019s dog go?", ["Bruno"]) == "Where did dog go?"
    assert (
        actor_free_query("Have Bruno and Alice both painted?", ["Bruno", "Alice"])
        == "Have and both painted?"
    )
    assert actor_free_query("Did Alices go?", ["Alice"]) == "Did Alices go?"
    assert actor_free_query("小明喜欢什么？", ["小明"]) == "喜欢什么？"
    # Nothing named: the query comes back unchanged, spacing and all.
    assert actor_free_query("What about  Bob ?", []) == "What about  Bob ?"


def test_actor_free_query_matches_the_topic_without_the_name(cb: ContextBase) -> None:
    for n in range(4):
        cb.record("user_message", session_id="s", text=f"Amy, how was day {n}?", agent_id="ben")
        cb.record("user_message", session_id="s", text=f"Day {n} was fine", agent_id="amy")
    kiln = cb.record("user_message", session_id="s", text="I fired a pottery kiln", agent_id="amy")
    cb.wait_for_embeddings()
    query = "What did Amy fire in the pottery kiln?"
    plain = cb.search(query, config=get_preset("hybrid", top_k=5))
    # On the name, every event addressed to amy is a keyword hit.
    assert any(c.keyword_rank and c.item.agent_id == "ben" for c in plain.considered)
    assert "topic" not in plain.timings_ms
    resp = cb.search(query, config=get_preset("hybrid", actor_free_query=True, top_k=5))
    assert "topic" in resp.timings_ms
    assert resp.results[0].item.owner_id == kiln.id
    assert all(c.keyword_rank is None for c in resp.considered if c.item.agent_id == "ben")
    # A query that is nothing but a name keeps it.
    only = cb.search("Amy", config=get_preset("hybrid", actor_free_query=True, top_k=5))
    assert any(c.keyword_rank for c in only.considered)


def test_presets_and_bad_queries() -> None:
    assert set(PRESETS) == {"keyword", "semantic", "hybrid", "hybrid_graph"}
    assert get_preset("hybrid", top_k=3).top_k == 3
    assert get_preset("hybrid_graph").actor_free_query
    assert get_preset("hybrid_graph").subject_actor
    assert not get_preset("hybrid").subject_actor
    assert get_preset("hybrid_graph").date_boost > 1.0 == get_preset("hybrid").date_boost
    assert not get_preset("hybrid").actor_free_query
    with pytest.raises(ValidationError):
        get_preset("nope")
    with pytest.raises(ValueError):
        SearchConfig(keyword=False, semantic=False)
    # a misspelt setting is named with what it could have meant
    with pytest.raises(ValidationError) as err:
        get_preset("hybrid", top_kk=3)
    assert err.value.field == "top_kk"
    assert "is not a search setting (did you mean top_k?)" in str(err.value)
    with pytest.raises(ValidationError, match=r"is not a search setting$"):
        get_preset("hybrid", zzzqq=1)


def test_empty_query_is_refused(cb: ContextBase) -> None:
    with pytest.raises(ValidationError) as err:
        cb.search("   ")
    assert err.value.field == "query"


def test_search_can_require_valid_signatures(cb: ContextBase) -> None:
    from ctxbase.anchor.signing import sign_stored_entities

    good = cb.upsert_entity("document", "ttl-spec", "Redis TTL for orders is 10 minutes")
    bad = cb.upsert_entity("document", "ttl-note", "Redis TTL for orders might be 5 minutes")
    unsigned = cb.upsert_entity("document", "ttl-draft", "Redis TTL draft for orders")
    event = cb.record("user_message", session_id="s", text="what is the Redis TTL for orders?")
    assert sign_stored_entities(cb, [good.id, bad.id], "k3y") == 2
    tampered = cb.get_entity(bad.id)
    # Someone edits the stored text behind the signature's back.
    cb.store.upsert_entity(
        tampered.model_copy(update={"text": "Redis TTL for orders is 1 day"}),
        entity_items(tampered.model_copy(update={"text": "Redis TTL for orders is 1 day"})),
    )
    cb.wait_for_embeddings()
    plain = {c.item.owner_id for c in cb.search("Redis TTL orders", top_k=10).results}
    assert {good.id, bad.id, unsigned.id, event.id} <= plain
    checked = cb.search("Redis TTL orders", top_k=10, require_signature=True, signing_key="k3y")
    owners = {c.item.owner_id for c in checked.results}
    assert good.id in owners and event.id in owners
    assert bad.id not in owners and unsigned.id not in owners
    assert checked.tampered == [bad.id]
    with pytest.raises(ValidationError):
        cb.search("Redis", require_signature=True)


def test_a_bad_search_override_is_bad_input_by_name(cb: ContextBase) -> None:
    # A caller's override (top_k=0, a misspelt field) is ctxbase's ValidationError naming
    # the field, as every other bad input is, not pydantic's own exception.
    for overrides, field in (({"top_k": 0}, "top_k"), ({"min_scor": 0.3}, "min_scor")):
        with pytest.raises(ValidationError) as err:
            cb.search("cache", **overrides)  # type: ignore[arg-type]
        assert err.value.field == field
    with pytest.raises(ValidationError) as err:
        get_preset("hybrid", keyword=False, semantic=False)
    assert "at least one of keyword and semantic" in err.value.message
    # a yes/no is no count (pydantic alone reads true as 1), an overflow no number
    for overrides, field, message in (
        ({"rrf_k": True}, "rrf_k", "must be a number (got true)"),
        ({"graph_hops": False}, "graph_hops", "must be a number (got false)"),
        ({"time_decay_half_life_days": float("inf")}, "time_decay_half_life_days",
         "must be a finite number (got inf)"),
    ):  # fmt: skip
        with pytest.raises(ValidationError) as err:
            get_preset("hybrid", **overrides)
        assert (err.value.field, err.value.message) == (field, message)
    assert get_preset("hybrid", keyword=False).semantic  # a yes/no setting still takes one


def test_a_turn_that_only_asks_ranks_below_the_turn_that_answers(cb: ContextBase) -> None:
    def rec(text: str, agent: str) -> str:
        return cb.record("user_message", session_id="s1", text=text, agent_id=agent).id

    rec("牙一直疼，左下面那颗，吃冷的特别难受。", "user")
    asked = rec("第二次根管约在什么时候？", "assistant")
    answer = rec("李医生说两周后，我约了5月27日晚上7点。", "user")
    rec("好的，我记下了，到时候提醒你。", "assistant")
    cb.wait_for_embeddings()
    query = "第二次根管约的是哪天？"
    # The question shares the query's words; the answer has them only as its context.
    assert _owners(cb, query, preset="hybrid", question_weight=1.0)[:2] == [asked, answer]
    demoted = _owners(cb, query, preset="hybrid")
    assert demoted[0] == answer and asked in demoted
    assert _owners(cb, query, preset="keyword")[:2] == [asked, answer]  # baselines stay plain


def test_a_semantic_first_hit_that_stands_out_comes_first(cb: ContextBase) -> None:
    said = cb.record(
        "user_message",
        session_id="s",
        text="they were reconciling the invoices with those statements when we left for the day",
    )
    short = cb.record("user_message", session_id="s", text="Invoices reconciled; statements.")
    for n in range(8):
        cb.record("user_message", session_id="s", text=f"lunch menu number {n} had soup and bread")
    cb.wait_for_embeddings()
    query = "were they reconciling the invoices with those statements when we left"
    # Rank fusion: the short keyword match first, however far ahead the other is by meaning.
    plain = cb.search(query, config=get_preset("hybrid", top_k=2)).results
    assert [c.item.owner_id for c in plain] == [short.id, said.id]
    boosted = cb.search(query, config=get_preset("hybrid", top_k=2, standout_boost=2.0)).results
    assert [c.item.owner_id for c in boosted] == [said.id, short.id]


def test_graph_expansion_does_not_bring_back_superseded_versions(cb: ContextBase) -> None:
    # seed 000: an outdated V1.0 served beside the current V2.0 through its edges
    old = "# Cache Guide V1.0\n\n## Expiry\n\nEvery cached query sets an expiry.\n\n"
    cb.anchor_document(
        old + "## Legacy store\n\nKeys live in memcached.\n", title="Cache Guide V1.0"
    )
    new = "# Cache Guide V2.0\n\n## Expiry\n\nEvery cached query sets an expiry in seconds.\n"
    cb.anchor_document(new, title="Cache Guide V2.0")
    hits = cb.search("Cache Guide expiry", preset="hybrid_graph", top_k=20).results
    assert hits and all(h.item.latest for h in hits)
    assert not any("V1.0" in h.item.text or "memcached" in h.item.text for h in hits)
    everything = cb.search("Cache Guide expiry", preset="hybrid_graph", latest_only=False, top_k=20)
    assert any("memcached" in h.item.text for h in everything.results)  # kept, when asked for
