"""Walking the graph of events and entities: causal chains, effects, neighbourhoods.

Works over any `Store` through `list_relations`, one round trip per hop.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ..model import Relation
from ..store.base import Store

__all__ = ["GraphHit", "RelationFilter", "downstream", "expand", "neighbourhood", "upstream"]

# Keeps the relations a walk may follow (e.g. only those whose signature verifies).
RelationFilter = Callable[[list[Relation]], list[Relation]]


@dataclass(frozen=True, slots=True)
class GraphHit:
    """A node reached from the seeds: how far, how confidently, and over which edge."""

    node_id: str
    hops: int
    confidence: float  # product of edge confidences along the path
    via: Relation | None
    seed_id: str


def _walk(
    store: Store,
    project_id: str,
    seeds: Sequence[str],
    *,
    direction: str,
    types: Sequence[str] | None,
    max_hops: int,
    thresholds: Mapping[str, float] | None = None,
    default_threshold: float = 0.0,
    max_nodes: int = 10_000,
    exclude_types: Sequence[str] = (),
    accept: RelationFilter | None = None,
    per_node: int | None = None,
    include_hidden: bool = False,
) -> list[GraphHit]:
    best: dict[str, GraphHit] = {s: GraphHit(s, 0, 1.0, None, s) for s in seeds}
    frontier = list(dict.fromkeys(seeds))
    for hop in range(1, max_hops + 1):
        if not frontier or len(best) >= max_nodes:
            break
        rels = store.list_relations(
            project_id,
            frontier,
            direction=direction,
            types=types,
            limit_per_node=per_node,
            exclude_types=exclude_types,
            include_hidden=include_hidden,
        )
        if accept is not None:
            rels = accept(rels)
        in_frontier = set(frontier)
        nxt: list[str] = []
        for rel in rels:
            if rel.type in exclude_types:
                continue
            limit = (thresholds or {}).get(rel.type, default_threshold)
            if rel.confidence < limit:
                continue
            pairs = []
            if direction in ("out", "both") and rel.from_id in in_frontier:
                pairs.append((rel.from_id, rel.to_id))
            if direction in ("in", "both") and rel.to_id in in_frontier:
                pairs.append((rel.to_id, rel.from_id))
            for src, dst in pairs:
                origin = best[src]
                conf = origin.confidence * rel.confidence
                known = best.get(dst)
                if known is None or (known.hops == hop and conf > known.confidence):
                    if known is None:
                        nxt.append(dst)
                    best[dst] = GraphHit(dst, hop, conf, rel, origin.seed_id)
        frontier = list(dict.fromkeys(nxt))[: max(0, max_nodes - len(best) + len(nxt))]
    return sorted(
        (h for h in best.values() if h.hops > 0), key=lambda h: (h.hops, -h.confidence, h.node_id)
    )


def upstream(
    store: Store, project_id: str, node_id: str, max_hops: int = 50, max_nodes: int = 10_000
) -> list[GraphHit]:
    """Everything that caused this node, nearest first (follows CAUSED_BY outward)."""
    return _walk(
        store,
        project_id,
        [node_id],
        direction="out",
        types=["CAUSED_BY"],
        max_hops=max_hops,
        max_nodes=max_nodes,
    )


def downstream(
    store: Store,
    project_id: str,
    node_id: str,
    max_hops: int = 50,
    max_nodes: int = 10_000,
    *,
    include_hidden: bool = False,
) -> list[GraphHit]:
    """Everything this node caused, nearest first (follows CAUSED_BY inward); with
    `include_hidden`, through the edges of soft-deleted events too (their ids among the
    hits: the caller shows them as it must, see retrieve/causes.py)."""
    return _walk(
        store,
        project_id,
        [node_id],
        direction="in",
        types=["CAUSED_BY"],
        max_hops=max_hops,
        max_nodes=max_nodes,
        include_hidden=include_hidden,
    )


def neighbourhood(
    store: Store,
    project_id: str,
    node_id: str,
    k: int = 1,
    types: Sequence[str] | None = None,
) -> list[GraphHit]:
    """Nodes within k hops over any (or the given) relation types, in either direction."""
    return _walk(store, project_id, [node_id], direction="both", types=types, max_hops=k)


def expand(
    store: Store,
    project_id: str,
    seeds: Sequence[str],
    *,
    hops: int = 1,
    types: Sequence[str] | None = None,
    thresholds: Mapping[str, float] | None = None,
    default_threshold: float = 0.0,
    max_nodes: int = 200,
    exclude_types: Sequence[str] = (),
    accept: RelationFilter | None = None,
) -> list[GraphHit]:
    """Graph expansion for retrieval: neighbours of the top hits above per-type thresholds;
    `accept` keeps the relations that may be followed. Each node's first `max_nodes` edges
    of each type are read (the oldest first): an entity thousands of events mention costs
    what can be kept, not what it has."""
    return _walk(
        store,
        project_id,
        seeds,
        direction="both",
        types=types,
        max_hops=hops,
        thresholds=thresholds,
        default_threshold=default_threshold,
        max_nodes=max_nodes,
        exclude_types=exclude_types,
        accept=accept,
        per_node=max_nodes,
    )
