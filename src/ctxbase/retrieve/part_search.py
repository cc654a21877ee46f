"""The rankings of a query's conjunct parts (retrieve/query_decomp.py), fused by search.

A part that names one of several actors the query coordinates ("What movies have both
Joanna and Nate seen?" -> the part for Nate) asks for that actor's events about the rest of
the query: its keyword ranking is the topic's (the query without names) among that actor's
events only. The actor boost favours the subject alone (the first name); this ranking gives
the other actor's events a place too. Any other part is searched by its own words without
the names (as the whole query's topic is), semantically too with `decomp_semantic`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from ..errors import EmbedderUnavailableError
from ..store.base import ItemFilter, SearchItem
from .config import SearchConfig
from .filter_scope import FilterScope
from .query_actors import actor_free_query, actor_names, named_actors
from .tokenize import query_terms

if TYPE_CHECKING:
    from .search import Searcher


__all__ = ["PartRanking", "actor_filter", "part_rankings"]

# (ranking name, weight, hits best first)
PartRanking = tuple[str, float, list[tuple[str, float]]]


def actor_filter(flt: ItemFilter | None, actor: str, items: Mapping[str, SearchItem]) -> ItemFilter:
    """`flt` narrowed to `actor`'s events: by agent id when some candidate has it as its
    id, else by role."""
    base = flt or ItemFilter()
    if any(it.agent_id == actor for it in items.values()):
        return replace(base, agent_ids=(actor,))
    return replace(base, agent_roles=(actor,))


def part_rankings(
    searcher: Searcher,
    project_id: str,
    query: str,
    topic: str,
    parts: list[str],
    flt: ItemFilter | None,
    allowed: FilterScope | None,
    config: SearchConfig,
    items: Mapping[str, SearchItem],
    semantic: bool,
) -> list[PartRanking]:
    """One keyword ranking per part (and a semantic one with `decomp_semantic`), each
    weighing `decomp_weight` of its method's weight; a part that adds nothing to the whole
    query's topic is not searched."""
    named = named_actors(query, items.values(), config.role_names)
    names = {a: actor_names(a, config.role_names) for a in named}
    every_name = [n for ns in names.values() for n in ns]
    topic_terms = set(query_terms(topic))
    out: list[PartRanking] = []
    kw_weight = config.decomp_weight * config.keyword_weight
    for n, part in enumerate(parts):
        mine = [a for a in named_actors(part, items.values(), config.role_names) if a in names]
        part_topic = actor_free_query(part, every_name)
        terms = set(query_terms(part_topic))
        if not terms:
            continue
        if len(named) >= 2 and len(mine) == 1 and allowed is None and config.keyword:
            # one of the actors the query coordinates: the topic among that actor's events
            among = actor_filter(flt, mine[0], items)
            hits = searcher._keyword_hits(project_id, part_topic, among, config)
            out.append((f"part{n}", kw_weight, hits))
            continue
        if terms == topic_terms:
            continue  # the whole query's topic again: searched already
        if config.keyword:
            hits = searcher._keyword_hits(project_id, part_topic, flt, config, allowed)
            out.append((f"part{n}", kw_weight, hits))
        if semantic and config.decomp_semantic:
            try:
                hits = searcher._semantic_hits(project_id, part_topic, allowed, config)
            except EmbedderUnavailableError:
                semantic = False  # the whole query's search reports it; the parts go on
                continue
            out.append((f"part{n}_semantic", config.decomp_weight * config.semantic_weight, hits))
    return out
