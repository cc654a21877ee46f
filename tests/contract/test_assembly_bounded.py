"""Assembly reads bounded by what is asked, on both backends: the project baseline, graph
hops from a much-mentioned entity, followed edges per node, and filters that only exclude."""

from __future__ import annotations

from contract_helpers import add_entity, make_event, relation, write

from ctxbase import ContextBase
from ctxbase.assemble.gatherer import FOLLOW_PER_NODE, Gatherer
from ctxbase.assemble.policy_loading import load_default_policies
from ctxbase.retrieve.config import get_preset
from ctxbase.retrieve.search import FilterScope
from ctxbase.store.base import ItemFilter


def test_project_baseline_is_the_newest_documents_of_a_large_project(
    cb: ContextBase, project_id: str
) -> None:
    """More than 500 documents: the baseline is the most recently updated ones (it was the
    newest of the first 500 by name, so a document named late in the alphabet never came)."""
    store = cb.store
    for n in range(501):
        add_entity(store, project_id, "document", f"spec {n:03d}", f"spec text {n}",
                   updated_at=1000.0 + n)  # fmt: skip
    add_entity(store, project_id, "document", "zz rollout rules", "spec rollout rules",
               updated_at=5000.0)  # fmt: skip
    write(cb.store, make_event(project_id, "s1", "the rollout spec is agreed"))
    ctx = cb.assemble_context(
        agent_role="planner", user_intent="rollout spec", strategy="project_scope_fallback"
    )
    baseline = [
        c["id"]
        for c in ctx.trace["candidates"]
        if any("project document" in r for r in c["reasons"])
    ]
    newest = [e.id for e in store.list_entities(project_id, type="document", newest_first=True)]
    assert len(baseline) >= 2
    assert sorted(baseline) == sorted(newest[: len(baseline)])
    assert newest[0] in baseline  # "zz rollout rules", updated last


def test_mention_hops_skip_a_much_mentioned_entity_and_follow_a_rare_one(
    cb: ContextBase, project_id: str
) -> None:
    """The hop reads at most mention_fanout + 1 mentioners of each entity; what it finds is
    what it found reading them all."""
    fanout = get_preset("hybrid_graph").mention_fanout
    seed = make_event(project_id, "s0", "refunds are slow since the deploy")
    crowd = [make_event(project_id, f"c{n}", f"crowd note {n}") for n in range(fanout + 5)]
    rare = make_event(project_id, "r1", "the ledger job holds a lock")
    write(cb.store, seed, *crowd, rare)
    rels = [relation(project_id, seed.id, "hub", "MENTIONS", 1.0)]
    rels += [relation(project_id, e.id, "hub", "MENTIONS", 2.0 + n) for n, e in enumerate(crowd)]
    rels += [relation(project_id, seed.id, "rare", "MENTIONS", 1.0)]
    rels += [relation(project_id, rare.id, "rare", "MENTIONS", 900.0)]
    cb.store.upsert_relations(rels)
    hop = cb.search("refunds slow", config=get_preset("hybrid_graph", top_k=10, semantic=False))
    via = {c.item.owner_id: c.graph_via or "" for c in hop.results}
    assert via.get(rare.id, "").startswith("MENTIONS rare")
    assert not {e.id for e in crowd} & set(via)


def test_follow_takes_at_most_the_first_edges_per_node_and_type(
    cb: ContextBase, project_id: str
) -> None:
    store = cb.store
    doc = add_entity(store, project_id, "document", "hub spec", "the spec")
    codes = [
        add_entity(store, project_id, "code", f"f{n:03d}", f"def f{n}(): ...")
        for n in range(FOLLOW_PER_NODE + 10)
    ]
    store.upsert_relations(
        [relation(project_id, c.id, doc.id, "REFERENCES", 10.0 + n) for n, c in enumerate(codes)]
    )
    g = Gatherer(
        cb, project_id, load_default_policies().default, session_id=None, intent="x", exclude=set()
    )
    reached = g.follow({doc.id: 1.0}, ["REFERENCES"], "referenced_code_first")
    assert reached == [c.id for c in codes[:FOLLOW_PER_NODE]]  # the oldest edges first


def test_a_filter_that_only_excludes_is_checked_on_the_candidates(
    cb: ContextBase, project_id: str
) -> None:
    """Other sessions' events: never listed (a large project's most), the same hits."""
    mine = make_event(project_id, "now", "cache invalidation for orders")
    others = [make_event(project_id, f"s{n}", f"cache invalidation note {n}") for n in range(5)]
    write(cb.store, mine, *others)
    cb.upsert_entity("document", "cache spec", "cache invalidation rules")
    cb.wait_for_embeddings()
    flt = ItemFilter(kinds=("event",), exclude_session_ids=("now",))
    scope = FilterScope(cb.store, project_id, flt)
    assert scope.ids is None
    every = [mine.id, *(e.id for e in others)]
    items = {i.owner_id: i.item_id for i in cb.store.get_items(project_id, every)}
    assert scope.admits(items.values()) == {items[e.id] for e in others}
    found = cb.search("cache invalidation", config=get_preset("hybrid", top_k=10), filters=flt)
    assert {c.item.owner_id for c in found.results} == {e.id for e in others}


def test_graph_expansion_reads_at_most_max_nodes_edges_per_node_and_type(
    cb: ContextBase, project_id: str
) -> None:
    """Retrieval's expansion from an entity that many events mention: the first `max_nodes`
    of each type (the oldest), so a late edge of a rarer type still comes."""
    from ctxbase.retrieve import graph

    rels = [relation(project_id, f"ev{n:02d}", "hub", "MENTIONS", 10.0 + n) for n in range(30)]
    rels.append(relation(project_id, "code0", "hub", "REFERENCES", 500.0))
    cb.store.upsert_relations(rels)
    hits = graph.expand(cb.store, project_id, ["hub"], max_nodes=5)
    assert sorted(h.node_id for h in hits) == ["code0", "ev00", "ev01", "ev02", "ev03", "ev04"]
