"""Hybrid search: structured filter -> keyword + vector candidates -> fusion -> graph
expansion (retrieve/expansion.py) -> boosts, decay, importance (retrieve/score_adjust.py)
-> the named kind newest first when the query points back in time (retrieve/recency.py)
-> de-duplication -> top-k.

Every candidate keeps the scores that placed it, so assembly can explain its choices.
A query never waits for vectors: items not embedded yet are found by keyword and graph only
(`pending_vectors` counts them; fusion ranks them as if semantic search agreed with keyword
search, not as rejected by it), and an embedder that fails leaves the semantic part out
and says why (`embedder_error`), as does one whose query embedding does not come back in
time (`query_timeout_s`; the first, which may start the model, `model_start_timeout_s`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from ..errors import EmbedderUnavailableError, ValidationError
from ..store.base import ItemFilter, SearchItem, Store
from .candidate import Candidate
from .config import SearchConfig
from .coverage import complemented
from .dense_feedback import dense_feedback_hits
from .embed.base import Embedder, FloatVector
from .embedder_health import EmbedderHealth
from .expansion import expand
from .expiry import KnownExpiries, mark_expired
from .feedback import feedback_hits
from .filter_scope import FilterScope, first_admitted, restricts
from .fusion import dedupe_near_identical, dynamic_top_k, rrf_fuse, weighted_fuse
from .graph import RelationFilter
from .kb_view import ViewCache
from .keyword_index import KeywordIndex
from .part_search import part_rankings
from .pending import PendingUnits
from .period_search import period_rankings
from .query_actors import actor_free_query, actor_names, favoured_actors, named_actors
from .query_adapter import adapter_for
from .query_decomp import query_conjuncts
from .query_parts import query_clauses
from .query_rewrite import QueryRewriter, rewrite_rankings
from .query_vectors import (
    MAX_OVERDUE_QUERIES,
    MODEL_START_TIMEOUT_S,
    QUERY_TIMEOUT_S,
    QueryVectors,
)
from .recency import of_kinds, order_by_recency, produced_at, recent_kinds
from .relative_time import anchored_period
from .relevance import off_topic_reason, search_evidence
from .rerank import ensemble_from_file, reranked
from .retracted import KnownStatuses, mark_retracted
from .score_adjust import adjust_expanded, boost_standout
from .session_keys import SessionKeys
from .signals import KnownSignals, UsageRecorder, read_signals
from .similarity_floor import apply_similarity_floor
from .synced import one_generation
from .term_bridge import bridged_weights, load_term_bridge
from .tokenize import fts_match_expression, query_terms
from .vector_index import VectorIndex

__all__ = [
    "MAX_OVERDUE_QUERIES",
    "MODEL_START_TIMEOUT_S",
    "PENDING_COUNT_CAP",
    "QUERY_TIMEOUT_S",
    "Candidate",
    "FilterScope",
    "SearchResponse",
    "Searcher",
    "actor_free_query",
    "actor_names",
    "favoured_actors",
    "named_actor",
    "named_actors",
]

# Items without a vector are counted up to this many per search (the count stays cheap).
PENDING_COUNT_CAP = 10_000


@dataclass
class SearchResponse:
    query: str
    results: list[Candidate]
    considered: list[Candidate] = field(default_factory=list)
    timings_ms: dict[str, float] = field(default_factory=dict)
    # require_signature: entities (a signature or a served unit that does not match) and
    # relations (a signature that does not match) left out
    tampered: list[str] = field(default_factory=list)
    # require_signature: how many unsigned entities among the ranked candidates were left
    # out (a base ingested without a key answers an empty list, and this says why)
    unsigned: int = 0
    # semantic searches: items of the project with no vector yet (found by keyword and
    # graph only), counted up to PENDING_COUNT_CAP
    pending_vectors: int = 0
    # why the semantic part was left out (the embedder failed), else None
    embedder_error: str | None = None
    # with `relevance_gate`: why nothing was returned (no hit is about the query), else None
    off_topic: str | None = None
    # with a rewriting model (query_rewrite.py): the alternatives searched too, and why
    # there are none when the model failed (the search went on without them)
    rewrites: list[str] = field(default_factory=list)
    rewrite_error: str | None = None


_VECTOR_LISTS = frozenset({"semantic", "semantic_topic"})


def _without_evidence(
    cands: dict[str, Candidate], rankings: dict[str, list[str]]
) -> frozenset[str]:
    """Candidates whose only claim is a place in a vector list at similarity 0 or below (an
    embedder that finds nothing in common, as the hash embedder does for unrelated text):
    ranked there only because the list is ranked."""
    listed: set[str] = set()
    for name, ranking in rankings.items():
        if name not in _VECTOR_LISTS:
            listed.update(ranking)
    return frozenset(
        k
        for k, c in cands.items()
        if c.similarity is not None and c.similarity <= 0.0 and k not in listed
    )


class Searcher(QueryVectors):
    """Runs searches over one store with one embedder (or none: keyword only)."""

    def __init__(
        self,
        store: Store,
        embedder: Embedder | None,
        query_cache_size: int = 4096,
        health: EmbedderHealth | None = None,
        batch_queries: bool = False,
        query_timeout_s: float = QUERY_TIMEOUT_S,
        model_start_timeout_s: float = MODEL_START_TIMEOUT_S,
        rewriter: QueryRewriter | None = None,
    ) -> None:
        super().__init__(
            embedder, query_cache_size, health, batch_queries, query_timeout_s,
            model_start_timeout_s,
        )  # fmt: skip
        self.store = store
        self.rewriter = rewriter  # an LLM's alternative wordings of a query; None: off
        self.vectors = VectorIndex(store)
        self.keywords = KeywordIndex(store)
        self.session_keys = SessionKeys(self.keywords)  # what each session is about
        self.kb_views = ViewCache(store)  # the pinned knowledge-base version (kb_view.py)
        # memories that assembled contexts placed, written in batches (retrieve/signals.py)
        self.usage = UsageRecorder(store)
        self.known_signals = KnownSignals()  # confidence read by earlier searches
        self.known_statuses = KnownStatuses()  # retracted messages, by session
        self.known_expiries = KnownExpiries()  # entities' expiry times (expiry.py)

    def forget_cached(self, project_id: str) -> dict[str, int]:
        """Drop what this searcher holds in memory after a hard forget: every cached query
        vector (a query may quote forgotten text), the project's vectors and keyword
        postings. Entries dropped, per cache."""
        queries = self.drop_query_vectors()
        # The keyword index could mark the forgotten rows dead in place (as it does for
        # hides and for removals other processes make), but its vocabulary and postings
        # would still hold the forgotten words in memory until a reload: a hard forget
        # drops them now, and the next search reads the project again.
        return {
            "query_vectors": queries,
            "vector_index": self.vectors.drop(project_id),
            "keyword_index": self.keywords.drop(project_id),
            "session_keys": self.session_keys.drop(project_id),
            "memory_signals": self.known_signals.drop(project_id),
            "message_statuses": self.known_statuses.drop(project_id),
            "entity_expiries": self.known_expiries.drop(project_id),
            "query_rewrites": 0 if self.rewriter is None else self.rewriter.forget(),
        }

    @one_generation()  # the indexes it consults share one reading of the generation
    def search(
        self,
        project_id: str,
        query: str,
        config: SearchConfig,
        flt: ItemFilter | None = None,
        *,
        now: float | None = None,
        relation_filter: RelationFilter | None = None,
    ) -> SearchResponse:
        """Ranked units for `query`; `relation_filter` keeps the relations graph expansion
        and the session window may follow (require_signature: the verified ones)."""
        timings: dict[str, float] = {}
        t0 = time.perf_counter()
        if config.latest_only and (flt is None or not flt.latest_only):
            flt = _with_latest(flt)
        view = self.kb_views.view(project_id, config.kb_version)
        if view is not None:  # a pinned knowledge-base version (retrieve/kb_view.py)
            flt = replace(flt or ItemFilter(), view=view)
        shown = frozenset(view.shown_owner_ids) if view is not None else frozenset()
        allowed: FilterScope | None = None
        if flt is not None and restricts(flt):
            allowed = self.filter_scope(project_id, flt, config)
        timings["filter"] = _ms(t0)

        rankings: dict[str, list[str]] = {}
        raw_scores: dict[str, dict[str, float]] = {}
        cands: dict[str, Candidate] = {}
        items: dict[str, SearchItem] = {}
        weights = {
            "keyword": config.keyword_weight,
            "semantic": config.semantic_weight,
            "semantic_topic": config.semantic_weight,
        }
        semantic = config.semantic and self.embedder is not None
        embedder_error: str | None = None
        under_floor: list[tuple[str, float]] = []  # vector hits below min_similarity

        if semantic and config.keyword:
            self.prefetch_query(query)  # embedded while the keyword search runs
        if config.keyword:
            t = time.perf_counter()
            hits_k = self._keyword_hits(project_id, query, flt, config, allowed)
            rankings["keyword"] = [i for i, _ in hits_k]
            raw_scores["keyword"] = dict(hits_k)
            timings["keyword"] = _ms(t)
        pending: set[str] = set()  # found units with no vector yet (fusion: not rejected)
        unembedded: PendingUnits | None = None
        if config.semantic and self.embedder is not None:
            # before the vector search: a vector stored later is not taken for one compared
            unembedded = PendingUnits(self.store, project_id, self.embedder.name, PENDING_COUNT_CAP)
            unembedded.note(rankings.get("keyword", ()))
            pending = unembedded.ids
        if semantic:
            t = time.perf_counter()
            try:
                self.query_vector(query)
            except EmbedderUnavailableError as exc:
                semantic, embedder_error = False, str(exc)
            timings["embed_query"] = _ms(t)
        if semantic:
            t = time.perf_counter()
            hits_v = self._semantic_hits(project_id, query, allowed, config, under=under_floor)
            rankings["semantic"] = [i for i, _ in hits_v]
            raw_scores["semantic"] = dict(hits_v)
            timings["vector"] = _ms(t)
        pool = self._pool(project_id, rankings, raw_scores, weights, config, items, pending)

        topic = query
        if config.actor_free_query:
            # The names a query mentions say whose events it is about (actor_boost favours
            # them); the rest says what those events must be about, and is matched on its own.
            t = time.perf_counter()
            named = named_actors(query, items.values(), config.role_names)
            topic = actor_free_query(
                query, [n for a in named for n in actor_names(a, config.role_names)]
            )
            if topic != query and query_terms(topic):
                if semantic:
                    self.prefetch_query(topic)  # embedded while the keyword search runs
                # keyword: only the topic's terms (a hit on a name alone only says who is
                # involved, not that the event is about what was asked)
                if config.keyword:
                    hits_k = self._keyword_hits(project_id, topic, flt, config, allowed)
                    rankings["keyword"] = [i for i, _ in hits_k]
                    raw_scores["keyword"] = dict(hits_k)
                    if unembedded is not None:
                        unembedded.note(rankings["keyword"])
                # semantic: the topic as a second query, next to the whole one
                if semantic:
                    try:
                        hits_v = self._semantic_hits(project_id, topic, allowed, config)
                    except EmbedderUnavailableError as exc:
                        hits_v, embedder_error = [], str(exc)
                    rankings["semantic_topic"] = [i for i, _ in hits_v]
                    raw_scores["semantic_topic"] = dict(hits_v)
                pool = self._pool(project_id, rankings, raw_scores, weights, config, items, pending)
            timings["topic"] = _ms(t)

        if config.clause_weight > 0 and (clauses := query_clauses(topic)):
            # A query asking two things: each clause's best match ranks as its own list.
            t = time.perf_counter()
            if semantic and config.clause_semantic:
                for clause in clauses:  # side by side, one per core, while keywords run
                    self.prefetch_query(clause)
            for n, clause in enumerate(clauses):
                parts: list[tuple[str, float, list[tuple[str, float]]]] = []
                if config.keyword:
                    hits = self._keyword_hits(project_id, clause, flt, config, allowed)
                    if unembedded is not None:
                        unembedded.note(i for i, _ in hits)
                    parts.append((f"clause{n}", config.keyword_weight, hits))
                if semantic and config.clause_semantic:
                    try:
                        hits = self._semantic_hits(project_id, clause, allowed, config)
                    except EmbedderUnavailableError as exc:
                        hits, embedder_error = [], str(exc)
                    parts.append((f"clause{n}_semantic", config.semantic_weight, hits))
                for name, weight, found in parts:
                    rankings[name] = [i for i, _ in found]
                    raw_scores[name] = dict(found)
                    weights[name] = config.clause_weight * weight
            pool = self._pool(project_id, rankings, raw_scores, weights, config, items, pending)
            timings["clauses"] = _ms(t)

        if config.decomp_weight > 0 and (conjuncts := query_conjuncts(query)):
            t = time.perf_counter()  # a query coordinating things: each part searched too
            scope = (flt, allowed, config, items, semantic)
            for name, weight, found in part_rankings(
                self, project_id, query, topic, conjuncts, *scope
            ):
                rankings[name], raw_scores[name] = [i for i, _ in found], dict(found)
                weights[name] = weight
                if unembedded is not None:
                    unembedded.note(rankings[name])
            pool = self._pool(project_id, rankings, raw_scores, weights, config, items, pending)
            timings["parts"] = _ms(t)

        if config.period_weight > 0:
            t = time.perf_counter()  # a dated period named: the query among its items too
            found_period, error = period_rankings(
                self, project_id, query, topic, flt, config, semantic
            )
            embedder_error = embedder_error or error
            for name, weight, found in found_period:
                rankings[name], raw_scores[name] = [i for i, _ in found], dict(found)
                weights[name] = weight
                if unembedded is not None:
                    unembedded.note(rankings[name])
            if found_period:
                pool = self._pool(project_id, rankings, raw_scores, weights, config, items, pending)
            timings["period"] = _ms(t)

        rewrite = None
        searchable = config.keyword or (semantic and config.rewrite_semantic)
        if self.rewriter is not None and config.rewrite_weight > 0 and searchable:
            t = time.perf_counter()  # a model's other wordings of the query, searched too
            rewrite = self.rewriter.rewrite(query)
            for name, weight, found in rewrite_rankings(
                self, project_id, rewrite.queries, flt, allowed, config, semantic
            ):
                rankings[name], raw_scores[name] = [i for i, _ in found], dict(found)
                weights[name] = weight
                if unembedded is not None:
                    unembedded.note(rankings[name])
            pool = self._pool(project_id, rankings, raw_scores, weights, config, items, pending)
            timings["rewrite"] = _ms(t)

        if config.feedback_weight > 0 and config.keyword and config.keyword_index:
            t = time.perf_counter()  # a second keyword pass seeded by the first hits' terms
            seeds = [items[k] for k in list(pool)[: config.feedback_seeds] if k in items]
            found = feedback_hits(self.keywords, project_id, topic, seeds, config, flt, allowed)
            if found:
                rankings["feedback"], raw_scores["feedback"] = [i for i, _ in found], dict(found)
                if unembedded is not None:
                    unembedded.note(rankings["feedback"])
                weights["feedback"] = config.feedback_weight * config.keyword_weight
                pool = self._pool(project_id, rankings, raw_scores, weights, config, items, pending)
            timings["feedback"] = _ms(t)

        if config.dense_feedback_weight > 0 and semantic:
            t = time.perf_counter()  # the first hits' vectors lead to the sessions not reached
            found = dense_feedback_hits(self, project_id, topic, pool, items, allowed, config)
            if found:
                rankings["dense_feedback"], raw_scores["dense_feedback"] = [i for i, _ in found], {}
                weights["dense_feedback"] = config.dense_feedback_weight * config.semantic_weight
                pool = self._pool(project_id, rankings, raw_scores, weights, config, items, pending)
            timings["dense_feedback"] = _ms(t)

        if config.session_key_weight > 0:
            t = time.perf_counter()  # the candidates of the sessions whose keys match
            found_ids = self.session_keys.ranking(
                project_id, query_terms(topic), rankings, weights, config.session_keys, config.rrf_k
            )
            if found_ids:
                rankings["session_keys"] = found_ids
                raw_scores["session_keys"] = {i: -float(n) for n, i in enumerate(found_ids)}
                weights["session_keys"] = config.session_key_weight
                pool = self._pool(project_id, rankings, raw_scores, weights, config, items, pending)
            timings["session_keys"] = _ms(t)

        kw_rank = {k: n for n, k in enumerate(rankings.get("keyword", []), start=1)}
        sem_rank = {k: n for n, k in enumerate(rankings.get("semantic_topic", []), start=1)}
        sem_rank.update({k: n for n, k in enumerate(rankings.get("semantic", []), start=1)})
        similarity = {**raw_scores.get("semantic_topic", {}), **raw_scores.get("semantic", {})}
        for k in pool:
            it = items.get(k)
            # Missing: forgotten or hidden since the index read. Superseded versions are
            # dropped here for the vector side, which has no filter of its own.
            if it is None or (config.latest_only and not it.latest and it.owner_id not in shown):
                continue
            cands[k] = Candidate(
                it,
                score=pool[k],
                keyword_rank=kw_rank.get(k),
                keyword_score=raw_scores.get("keyword", {}).get(k),
                semantic_rank=sem_rank.get(k),
                similarity=similarity.get(k),
            )

        # before expansion: the standout's neighbours gain with it
        boost_standout(cands, config)

        if config.graph_hops > 0 or config.session_window > 0:
            t = time.perf_counter()
            blind = _without_evidence(cands, rankings)
            expand(self, project_id, config, cands, allowed, relation_filter, blind)
            timings["graph"] = _ms(t)

        t = time.perf_counter()
        owners = {c.item.owner_id: c.item.type for c in cands.values()}
        signals = read_signals(
            self.store, project_id, owners, config, self.usage, self.known_signals
        )
        timings["signals"] = _ms(t)
        now = time.time() if now is None else now
        anchored = None
        if config.relative_date_boost > 1.0 and config.keyword:  # "the day after the trip"
            in_scope = (flt, config, allowed)
            anchored = anchored_period(
                query,
                lambda text: [i for i, _ in self._keyword_hits(project_id, text, *in_scope)],
                lambda ids: {it.item_id: it.ts for it in self.store.get_items(project_id, ids)},
            )
        adjust_expanded(cands.values(), query, config, now, signals, anchored)
        t = time.perf_counter()
        mark_retracted(self.store, project_id, cands.values(), config, self.known_statuses)
        mark_expired(self.store, project_id, cands.values(), self.known_expiries, now)
        timings["retracted"] = _ms(t)
        if config.min_similarity is not None:  # a floor on every hit (similarity_floor.py)
            embedder_error = self._similarity_floor(project_id, query, config, cands) or (
                embedder_error
            )
            self._list_under_floor(project_id, config, cands, under_floor, shown)
        if config.recency_order and (kinds := recent_kinds(query)):  # "the SQL from last time"
            live = [c for c in cands.values() if c.dropped is None]  # not the retracted
            mine = [c.item for c in live if of_kinds(c.item, kinds)]
            order_by_recency(live, kinds, produced_at(self.store, project_id, mine))

        # below the confidence floor (a memory marked wrong) or retracted: considered,
        # never returned
        excluded = [c for c in cands.values() if c.dropped is not None]
        kept_cands = [c for c in cands.values() if c.dropped is None]
        ranked = sorted(kept_cands, key=lambda c: (-c.score, c.item.ts, c.item_id))
        # each next top place to a hit that also answers what those above it leave out
        ranked = complemented(ranked, query, config.coverage_boost, config.coverage_window)
        if config.rerank_top > 1:  # learned re-ordering of the top (rerank.py)
            own = ensemble_from_file(config.rerank_model) if config.rerank_model else None
            ranked = reranked(query, ranked, config.rerank_top, own)
        pairs = [(c.item_id, c.score) for c in ranked]
        if config.dedupe_threshold is not None:
            wanted = config.dynamic_top_k[1] if config.dynamic_top_k else config.top_k
            pairs, dups = dedupe_near_identical(
                pairs, lambda i: cands[i].item.text, config.dedupe_threshold, limit=wanted
            )
            for dup, better in dups.items():
                cands[dup].dropped = f"near-duplicate of {better}"
                folded, kept_one = cands[dup].id, cands[better]
                # a chunk of the hit's own owner is no other memory
                if folded != kept_one.id and folded not in kept_one.duplicates:
                    kept_one.duplicates.append(folded)
        if config.dynamic_top_k is not None:
            lo, hi = config.dynamic_top_k
            from ..assemble.tokens import get_token_counter

            counter = get_token_counter()
            kept: list[tuple[str, float]] = dynamic_top_k(
                pairs,
                min_k=lo,
                max_k=hi,
                token_allowance=config.token_allowance,
                tokens_of=lambda i: counter.count(cands[i].item.text),
            )
        else:
            kept = pairs[: config.top_k]
        kept_ids = {i for i, _ in kept}
        for c in ranked:
            if c.item_id not in kept_ids and c.dropped is None:
                c.dropped = "below top_k"
        timings["total"] = _ms(t0)
        response = SearchResponse(
            query=query,
            results=[cands[i] for i, _ in kept],
            considered=[*ranked, *excluded],
            timings_ms=timings,
            # never fewer than the units found without a vector
            pending_vectors=0 if unembedded is None else max(unembedded.count, len(pending)),
            embedder_error=embedder_error,
            rewrites=[] if rewrite is None else list(rewrite.queries),
            rewrite_error=None if rewrite is None else rewrite.error,
        )
        return self._gated(response, config) if config.relevance_gate else response

    def _similarity_floor(
        self, project_id: str, query: str, config: SearchConfig, cands: dict[str, Candidate]
    ) -> str | None:
        """Leave out the hits below `min_similarity` (the embedder's error when the query
        could not be embedded: every hit is then left out, its similarity unknown)."""
        assert config.min_similarity is not None
        if self.embedder is None:
            raise ValidationError(
                "min_similarity",
                "needs an embedder to measure similarity; this base has none "
                "(open it with an embedder, or leave min_similarity unset)",
            )
        model = self.embedder.name
        try:
            qvec: FloatVector | None = self.query_vector(query)
        except EmbedderUnavailableError as exc:
            apply_similarity_floor(cands.values(), config.min_similarity, None, None)
            return str(exc)
        apply_similarity_floor(
            cands.values(),
            config.min_similarity,
            qvec,
            lambda ids: self.vectors.vectors_of(project_id, model, ids),
        )
        return None

    def _list_under_floor(
        self,
        project_id: str,
        config: SearchConfig,
        cands: dict[str, Candidate],
        under: list[tuple[str, float]],
        shown: frozenset[str],
    ) -> None:
        """Add to `cands` the hits the vector search found below `min_similarity` (cut from
        its ranking, so never fused or scored), dropped for their similarity as the fused
        hits below it are: `considered` shows what the floor left out in every preset."""
        assert config.min_similarity is not None
        new = [(i, s) for i, s in under if i not in cands][: _pool_width(config)]
        if not new:
            return
        items = {it.item_id: it for it in self.store.get_items(project_id, [i for i, _ in new])}
        listed: list[Candidate] = []
        for i, sim in new:
            it = items.get(i)
            if it is None or (config.latest_only and not it.latest and it.owner_id not in shown):
                continue
            listed.append(Candidate(it, similarity=sim))
            cands[i] = listed[-1]
        apply_similarity_floor(listed, config.min_similarity, None, None)

    def _gated(self, response: SearchResponse, config: SearchConfig) -> SearchResponse:
        """The response with no results when none is about the query (assembly's gate)."""
        name = None if self.embedder is None else self.embedder.name
        evidence, floor = search_evidence(
            response.query, response.results, response.considered, name, config.relevance_floor
        )
        if evidence is not None or not response.results:
            return response
        for c in response.results:
            c.dropped = "off topic"
        reason = off_topic_reason(floor, len(response.results))
        return replace(response, results=[], off_topic=reason)

    def _keyword_hits(
        self,
        project_id: str,
        query: str,
        flt: ItemFilter | None,
        config: SearchConfig,
        allowed: FilterScope | None = None,
    ) -> list[tuple[str, float]]:
        if config.keyword_index:
            terms = query_terms(query)
            weights = None
            # a plain English query over a project holding only ASCII terms has nothing to
            # meet in Chinese: the dictionary is not read for it
            if config.term_bridge > 0 and (
                not all(t.isascii() for t in terms) or self.keywords.holds_non_ascii(project_id)
            ):
                weights = bridged_weights(
                    terms,
                    load_term_bridge(),
                    lambda words: set(self.keywords.frequencies(project_id, words)[1]),
                    config.term_bridge,
                    config.term_bridge_cap,
                )
                terms = list(weights)
            return self.keywords.search(
                project_id, terms, config.candidates, flt, allowed, weights=weights
            )
        match = fts_match_expression(query_terms(query), "or")
        if not match:
            return []
        hits = self.store.keyword_search(project_id, match, flt, config.candidates)
        return [(h.item_id, h.score) for h in hits]

    def _semantic_hits(
        self,
        project_id: str,
        query: str,
        allowed: FilterScope | None,
        config: SearchConfig,
        qvec: FloatVector | None = None,
        under: list[tuple[str, float]] | None = None,
    ) -> list[tuple[str, float]]:
        """Nearest items to `query` (or to `qvec` when given) that the filter admits; those
        found below `min_similarity` are added to `under` when given (else dropped)."""
        assert self.embedder is not None
        if qvec is None:
            qvec = self.query_vector(query)
            adapter = adapter_for(config, self.embedder.name, self.embedder.dim)
            if adapter is not None:
                qvec = adapter.apply(qvec)
        model, limit = self.embedder.name, config.candidates
        if allowed is None or allowed.ids is not None:
            ids = None if allowed is None else allowed.ids
            hits = self.vectors.search(project_id, model, qvec, limit, ids)
        else:
            # A broad filter: the nearest vectors of the whole project, then the filter on
            # those few, widening until enough pass or every vector was looked at.
            want = limit * 4
            while True:
                found = self.vectors.search(project_id, model, qvec, want, None)
                screen = self._screen(project_id, [i for i, _ in found], allowed)
                kept = [h for h, ok in zip(found, screen, strict=True) if ok]
                hits = first_admitted(kept, limit, allowed.admits)
                if len(hits) >= limit or len(found) < want:
                    break
                want *= 4
        floor = 0.0 if config.min_similarity is None else config.min_similarity
        if under is not None:
            under += [(i, s) for i, s in hits if 0.0 <= s < floor]
        return [(i, s) for i, s in hits if s >= floor]

    def _pool(
        self,
        project_id: str,
        rankings: dict[str, list[str]],
        raw_scores: dict[str, dict[str, float]],
        weights: dict[str, float],
        config: SearchConfig,
        items: dict[str, SearchItem],
        pending: set[str],
    ) -> dict[str, float]:
        """Fused scores of the best ids, with their items read into `items` (only the best
        are read back in full: the tail cannot reach the top k). `pending`: units with no
        vector yet, placed in the semantic lists by their keyword ranks."""
        if config.fusion == "rrf":
            fused = rrf_fuse(rankings, weights, config.rrf_k, pending)
        else:
            fused = weighted_fuse(raw_scores, weights, pending)
        best = sorted(fused, key=lambda k: -fused[k])[: _pool_width(config)]
        missing = [k for k in best if k not in items]
        for stored in self.store.get_items(project_id, missing) if missing else []:
            items[stored.item_id] = stored
        return {k: fused[k] for k in best}

    def filter_scope(self, project_id: str, flt: ItemFilter, config: SearchConfig) -> FilterScope:
        """What `flt` admits, resolved once for every ranking of one search."""
        held = config.keyword and config.keyword_index  # loaded for this search anyway
        return FilterScope(
            self.store, project_id, flt, self.keywords.count_admitted if held else None
        )

    def _screen(self, project_id: str, ids: list[str], allowed: FilterScope) -> list[bool]:
        """Per id, False where the attributes the keyword index holds rule it out of a filter
        checked on candidates: those are never looked up in the store (a listed filter is
        checked in memory anyway)."""
        screen = None
        if allowed.ids is None:
            screen = self.keywords.screen(project_id, ids, allowed.flt)
        return [True] * len(ids) if screen is None else screen


def named_actor(
    query: str, candidates: Iterable[Candidate], other_names: bool = False
) -> str | None:
    """The one agent id or role among the candidates that the query names, if exactly one.

    "What did the tester report?" or "What does Melanie like?" are about one actor's events.
    """
    named = named_actors(query, (c.item for c in candidates), other_names)
    return named[0] if len(named) == 1 else None


def _pool_width(config: SearchConfig) -> int:
    """How many of the fused ids a search reads back and scores (the tail cannot reach the
    top k)."""
    return 4 * config.top_k + config.graph_seeds + 20


def _with_latest(flt: ItemFilter | None) -> ItemFilter:
    return ItemFilter(latest_only=True) if flt is None else replace(flt, latest_only=True)


def _ms(t: float) -> float:
    return round((time.perf_counter() - t) * 1000.0, 3)
