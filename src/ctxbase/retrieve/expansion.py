"""Graph expansion, a stage of `Searcher.search` (retrieve/search.py): the neighbours of
the best candidates join them, scored from their seed's score.

Three ways to a neighbour: the relation graph (`graph.expand`, `graph_hops` deep), the
events that MENTION an entity a seed event mentions (`mention_hops`, up to
`mention_fanout` mentioners an entity), and the seed's session neighbours along NEXT
(`session_neighbours`, `session_window` steps either way). A neighbour is admitted only
through the search's filter (the index's screen first, the store for the rest).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..store.base import ItemFilter, SearchItem, Store
from . import graph
from .candidate import Candidate
from .config import SearchConfig
from .filter_scope import FilterScope
from .graph import RelationFilter

if TYPE_CHECKING:
    from .search import Searcher

__all__ = ["expand", "mention_hops", "session_neighbours"]


def expand(
    searcher: Searcher,
    project_id: str,
    config: SearchConfig,
    cands: dict[str, Candidate],
    allowed: FilterScope | None,
    accept: RelationFilter | None = None,
    blind: frozenset[str] = frozenset(),
) -> None:
    """Add the neighbours of the best candidates (the seeds) to `cands`. A candidate in
    `blind` is never a seed: nothing it shares with the query vouches for its
    neighbours (noise hits next to each other would lift each other)."""
    store = searcher.store
    seeds = sorted(
        (c for c in cands.values() if c.item.item_id not in blind), key=lambda c: -c.score
    )[: config.graph_seeds]
    if not seeds:
        return
    seed_score = {c.item.owner_id: c.score for c in seeds}
    new_nodes: dict[str, tuple[float, str, float]] = {}  # owner -> (score, via, conf)
    if config.graph_hops > 0:
        hits = graph.expand(
            store,
            project_id,
            list(seed_score),
            hops=config.graph_hops,
            types=config.graph_types,
            thresholds=config.relation_thresholds,
            max_nodes=config.graph_seeds * 20,
            exclude_types=config.graph_exclude_types,
            accept=accept,
        )
        for h in hits:
            if h.via is None:
                continue
            s = config.graph_weight * seed_score.get(h.seed_id, 0.0) * h.confidence / h.hops
            prev = new_nodes.get(h.node_id)
            if prev is None or s > prev[0]:
                new_nodes[h.node_id] = (s, f"{h.via.type} from {h.seed_id}", h.confidence)
    if config.graph_hops > 0 and config.mention_fanout > 0:
        hopped = mention_hops(store, project_id, seed_score, config, accept)
        for owner, reached in hopped.items():
            prev = new_nodes.get(owner)
            if owner not in seed_score and (prev is None or reached[0] > prev[0]):
                new_nodes[owner] = reached
    if config.session_window > 0:
        neighbours = session_neighbours(
            store, project_id, list(seed_score), config.session_window, accept
        )
        for owner, found in neighbours.items():
            s0 = seed_score[owner]
            for nb, dist in found:
                s = config.graph_weight * s0 / (dist + 1)
                prev = new_nodes.get(nb)
                if prev is None or s > prev[0]:
                    new_nodes[nb] = (s, f"NEXT±{dist} from {owner}", 1.0)
    if not new_nodes:
        return
    by_owner: dict[str, list[SearchItem]] = {}
    # a superseded version is not reached through its edges either
    view = allowed.flt.view if allowed is not None else None
    reach = ItemFilter(owner_ids=tuple(new_nodes), latest_only=config.latest_only, view=view)
    owner_items = store.filter_item_ids(project_id, reach)
    for it in store.get_items(project_id, sorted(owner_items)):
        by_owner.setdefault(it.owner_id, []).append(it)
    firsts = [found[0].item_id for found in by_owner.values() if found]
    admitted = set(firsts)
    if allowed is not None:
        screen = searcher._screen(project_id, firsts, allowed)
        admitted = allowed.admits(i for i, ok in zip(firsts, screen, strict=True) if ok)
    for owner, (s, via, conf) in new_nodes.items():
        for it in by_owner.get(owner, [])[:1]:
            if it.item_id not in admitted:
                continue
            c = cands.get(it.item_id)
            if c is None:
                cands[it.item_id] = Candidate(it, score=s, graph_via=via, graph_confidence=conf)
            else:
                c.score += s
                c.graph_via = c.graph_via or via
                c.graph_confidence = conf


def mention_hops(
    store: Store,
    project_id: str,
    seed_score: dict[str, float],
    config: SearchConfig,
    accept: RelationFilter | None = None,
) -> dict[str, tuple[float, str, float]]:
    """Events that MENTION an entity a seed event mentions (two batched lookups); an
    entity mentioned by more than `mention_fanout` events says too little to follow."""
    out_rels = store.list_relations(
        project_id, list(seed_score), direction="out", types=["MENTIONS"]
    )
    if accept is not None:
        out_rels = accept(out_rels)
    floor = config.relation_thresholds.get("MENTIONS", 0.0)
    via: dict[str, list[tuple[str, float]]] = {}  # entity -> (seed, confidence)
    for rel in out_rels:
        if rel.confidence >= floor and rel.from_id in seed_score:
            via.setdefault(rel.to_id, []).append((rel.from_id, rel.confidence))
    if not via:
        return {}
    # Without a relation filter, an entity's first fanout + 1 mentioners say all there is
    # to know (more: skipped), so a much-mentioned entity costs no more than that.
    bounded = config.mention_fanout + 1 if accept is None else None
    in_rels = store.list_relations(
        project_id,
        list(via),
        direction="in",
        types=["MENTIONS"],
        min_confidence=floor if bounded else 0.0,
        limit_per_node=bounded,
    )
    if accept is not None:
        in_rels = accept(in_rels)
    by_entity: dict[str, list[tuple[str, float]]] = {}
    for rel in in_rels:
        if rel.confidence >= floor:
            by_entity.setdefault(rel.to_id, []).append((rel.from_id, rel.confidence))
    found: dict[str, tuple[float, str, float]] = {}
    for entity, mentioners in by_entity.items():
        if len(mentioners) > config.mention_fanout:
            continue
        for seed, c1 in via.get(entity, []):
            for other, c2 in mentioners:
                if other == seed:
                    continue
                conf = c1 * c2
                s = config.graph_weight * seed_score[seed] * conf / 2
                if other not in found or s > found[other][0]:
                    found[other] = (s, f"MENTIONS {entity} from {seed}", conf)
    return found


def session_neighbours(
    store: Store,
    project_id: str,
    owners: list[str],
    window: int,
    accept: RelationFilter | None = None,
) -> dict[str, list[tuple[str, int]]]:
    """For each owner, the events up to `window` steps before and after it in its session
    (one batched relation lookup per step for all owners)."""
    out: dict[str, list[tuple[str, int]]] = {o: [] for o in owners}
    left = {o: o for o in owners}
    right = {o: o for o in owners}
    for dist in range(1, window + 1):
        nodes = {n for n in (*left.values(), *right.values()) if n}
        if not nodes:
            break
        rels = store.list_relations(project_id, sorted(nodes), direction="both", types=["NEXT"])
        if accept is not None:
            rels = accept(rels)
        after = {r.from_id: r.to_id for r in rels}
        before = {r.to_id: r.from_id for r in rels}
        for o in owners:
            lo = before.get(left[o]) if left[o] else None
            hi = after.get(right[o]) if right[o] else None
            left[o] = lo or ""
            right[o] = hi or ""
            out[o] += [(n, dist) for n in (lo, hi) if n]
    return out
