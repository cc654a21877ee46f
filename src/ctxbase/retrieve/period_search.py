"""The rankings of a query's dated period (retrieve/query_dates.py), fused by search.

A query that names a dated period ("in January 2022", "on 9 November, 2022") asks about what
happened then. `date_boost` favours the candidates recorded then, but only those the whole
project's rankings found: a turn of that week that shares no word with the question ("I
finally finished my first screenplay" for "What did Joanna accomplish in January 2022?") is
never a candidate. Here the query is searched again among the items recorded in the period
(or in the week after, when they are told of: `in_period`): by keyword (its topic, the
names left out), and semantically with the query's own vector (no second embedding). Each
ranking weighs `period_weight` of its method's weight.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ..errors import EmbedderUnavailableError
from ..store.base import ItemFilter
from .config import SearchConfig
from .query_dates import REPORT_LAG_S, ZONE_SLACK_S, query_period

if TYPE_CHECKING:
    from .search import Searcher

__all__ = ["period_filter", "period_rankings"]

# (ranking name, weight, hits best first)
PeriodRanking = tuple[str, float, list[tuple[str, float]]]


def period_filter(flt: ItemFilter | None, query: str) -> ItemFilter | None:
    """`flt` narrowed to the items recorded in the period `query` names (a day of slack
    before it, the week after it), None when it names no dated period. A filter with a
    time range of its own keeps the part both ranges share."""
    period = query_period(query)
    if period is None:
        return None
    base = flt or ItemFilter()
    since, until = period[0] - ZONE_SLACK_S, period[1] + REPORT_LAG_S
    if base.since is not None:
        since = max(since, base.since)
    if base.until is not None:
        until = min(until, base.until)
    return replace(base, since=since, until=until) if since < until else None


def period_rankings(
    searcher: Searcher,
    project_id: str,
    query: str,
    topic: str,
    flt: ItemFilter | None,
    config: SearchConfig,
    semantic: bool,
) -> tuple[list[PeriodRanking], str | None]:
    """The period's keyword ranking (of `topic`) and semantic one (of `query`'s vector),
    and the embedder's error when the semantic one could not run."""
    among = period_filter(flt, query)
    if among is None:
        return [], None
    scope = searcher.filter_scope(project_id, among, config)
    out: list[PeriodRanking] = []
    if config.keyword:
        hits = searcher._keyword_hits(project_id, topic, among, config, scope)
        out.append(("period", config.period_weight * config.keyword_weight, hits))
    error = None
    if semantic:
        try:
            hits = searcher._semantic_hits(project_id, query, scope, config)
        except EmbedderUnavailableError as exc:
            hits, error = [], str(exc)
        out.append(("period_semantic", config.period_weight * config.semantic_weight, hits))
    return out, error
