"""The learned re-ordering of the top hits (retrieve/rerank.py): features and tree inference
as pure functions, the shipped model, then real searches on every backend."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from ctxbase import ContextBase, ValidationError
from ctxbase.retrieve.candidate import Candidate
from ctxbase.retrieve.config import PRESETS, get_preset
from ctxbase.retrieve.rerank import (
    FEATURE_NAMES,
    TreeEnsemble,
    default_ensemble,
    rerank_features,
    reranked,
)
from ctxbase.store.records import SearchItem

COL = {name: n for n, name in enumerate(FEATURE_NAMES)}


def _cand(item_id: str, score: float, text: str, session: str = "s1", **found: Any) -> Candidate:
    item = SearchItem(
        item_id=item_id,
        owner_id=item_id,
        kind="event",
        type="user_message",
        text=text,
        terms="",
        ts=0.0,
        session_id=session,
    )
    return Candidate(item, score=score, **found)


def _stump(feature: str, threshold: float, low: float, high: float) -> dict[str, Any]:
    """One tree: a root split on `feature`, `low` at or under the threshold, else `high`."""
    return {
        "feature": [COL[feature], 0, 0],
        "threshold": [threshold, 0.0, 0.0],
        "left": [1, 0, 0],
        "right": [2, 0, 0],
        "leaf": [False, True, True],
        "value": [0.0, low, high],
    }


def _ensemble(*trees: dict[str, Any], baseline: float = 0.0) -> TreeEnsemble:
    return TreeEnsemble.from_json(
        {"features": list(FEATURE_NAMES), "baseline": baseline, "trees": list(trees)}
    )


def test_features_describe_each_candidate_against_the_pool() -> None:
    ranked = [
        _cand("a", 2.0, "We moved the launch.", keyword_rank=1, keyword_score=8.0,
              semantic_rank=2, similarity=0.80),
        _cand("b", 1.0, "When? 周三 10:30 works?", session="s2", semantic_rank=1,
              similarity=0.90),
        _cand("c", 0.5, "no vector yet", keyword_rank=2, keyword_score=2.0,
              graph_via="NEXT from a"),
    ]  # fmt: skip
    x = rerank_features("When did we move the launch?", ranked)
    assert x.shape == (3, len(FEATURE_NAMES))
    assert x[:, COL["inverse_rank"]].tolist() == [1.0, 0.5, pytest.approx(1 / 3)]
    assert x[:, COL["score_share"]].tolist() == [1.0, 0.5, 0.25]
    assert x[:, COL["keyword_found"]].tolist() == [1.0, 0.0, 1.0]
    assert x[:, COL["keyword_score_share"]].tolist() == [1.0, 0.0, 0.25]
    assert x[:, COL["semantic_inverse_rank"]].tolist() == [0.5, 1.0, 0.0]
    # the similarity gap is to the best of the pool; a hit with no vector counts a little
    # below the best rather than as unrelated
    assert x[:, COL["similarity_gap"]].tolist() == pytest.approx([-0.1, 0.0, -0.1])
    assert x[:, COL["expanded"]].tolist() == [0.0, 0.0, 1.0]
    assert x[:, COL["asks"]].tolist() == [0.0, 1.0, 0.0]
    assert x[:, COL["says_time"]].tolist() == [0.0, 1.0, 0.0]
    assert x[:, COL["has_digit"]].tolist() == [0.0, 1.0, 0.0]
    assert set(x[:, COL["query_asks_when"]]) == {1.0}
    assert x[0, COL["query_log_length"]] == pytest.approx(math.log(1 + 28))
    assert x[:, COL["first_hit_session"]].tolist() == [1.0, 0.0, 1.0]
    assert x[:, COL["top5_same_session"]].tolist() == [2.0, 1.0, 2.0]
    assert rerank_features("q", []).shape == (0, len(FEATURE_NAMES))
    # the search's rows for its top alone: the same rows, measured against the whole pool
    assert rerank_features("When did we move the launch?", ranked, 2).tolist() == x[:2].tolist()


def test_chinese_when_questions_and_times_are_read() -> None:
    ranked = [_cand("a", 1.0, "改到下周三下午三点"), _cand("b", 0.9, "好的")]
    x = rerank_features("评审会改到什么时候了？", ranked)
    assert x[0, COL["query_asks_when"]] == 1.0
    assert x[:, COL["says_time"]].tolist() == [1.0, 0.0]
    assert rerank_features("评审会改到哪里了？", ranked)[0, COL["query_asks_when"]] == 0.0


def test_trees_sum_their_leaves_over_the_baseline() -> None:
    model = _ensemble(
        _stump("says_time", 0.5, -1.0, 2.0), _stump("asks", 0.5, 0.5, -3.0), baseline=0.25
    )
    x = np.zeros((3, len(FEATURE_NAMES)))
    x[1, COL["says_time"]] = 1.0
    x[2, COL["asks"]] = 1.0
    assert model.score(x).tolist() == [-0.25, 2.75, -3.75]
    assert model.score(np.zeros((0, len(FEATURE_NAMES)))).shape == (0,)


def test_a_deeper_tree_walks_every_level() -> None:
    # root on asks; its right child splits again on says_time
    tree = {
        "feature": [COL["asks"], 0, COL["says_time"], 0, 0],
        "threshold": [0.5, 0.0, 0.5, 0.0, 0.0],
        "left": [1, 0, 3, 0, 0],
        "right": [2, 0, 4, 0, 0],
        "leaf": [False, True, False, True, True],
        "value": [0.0, 1.0, 0.0, 5.0, 7.0],
    }
    x = np.zeros((3, len(FEATURE_NAMES)))
    x[1:, COL["asks"]] = 1.0
    x[2, COL["says_time"]] = 1.0
    assert _ensemble(tree).score(x).tolist() == [1.0, 5.0, 7.0]


def test_a_model_for_other_features_is_refused() -> None:
    with pytest.raises(ValueError, match="other features"):
        TreeEnsemble.from_json({"features": ["x"], "baseline": 0, "trees": []})


def test_only_the_top_is_reordered_and_scores_stay_descending() -> None:
    ranked = [
        _cand("a", 4.0, "which day was it?"),
        _cand("b", 3.0, "no idea"),
        _cand("c", 2.0, "it was on Friday"),
        _cand("d", 1.0, "Friday at 9:00 again"),
    ]
    model = _ensemble(_stump("says_time", 0.5, 0.0, 1.0))
    out = reranked("when was it?", ranked, 3, model)
    # c states a day and moves up within the top 3; d, outside it, stays last
    assert [c.item_id for c in out] == ["c", "a", "b", "d"]
    assert [c.score for c in out] == [4.0, 3.0, 2.0, 1.0]
    # each hit that moved says from where (shown in traces and over REST)
    assert [c.reordered for c in out] == [
        "learned order: 3 -> 1",
        "learned order: 1 -> 2",
        "learned order: 2 -> 3",
        None,
    ]
    assert out[0].explain()["reordered"] == "learned order: 3 -> 1"
    assert "reordered" not in out[3].explain()
    # a tie keeps fusion's order
    tied = reranked("q", out, 4, _ensemble(_stump("asks", 0.5, 0.0, 0.0)))
    assert [c.item_id for c in tied] == ["c", "a", "b", "d"]
    # off below two places
    assert [c.item_id for c in reranked("q", ranked, 1, model)] == ["a", "b", "c", "d"]


def test_the_shipped_model_loads_and_scores() -> None:
    model = default_ensemble()
    assert model.features == FEATURE_NAMES
    assert len(model.roots) >= 50
    ranked = [_cand(f"t{n}", 1.0 / (n + 1), f"turn {n}", semantic_rank=n + 1,
                    similarity=0.9 - n / 100) for n in range(12)]  # fmt: skip
    odds = model.score(rerank_features("what happened?", ranked))
    assert odds.shape == (12,) and np.isfinite(odds).all()
    out = reranked("what happened?", ranked, 10)
    assert {c.item_id for c in out[:10]} == {c.item_id for c in ranked[:10]}
    assert [c.item_id for c in out[10:]] == ["t10", "t11"]


def test_hybrid_graph_reorders_its_top_20_and_plain_presets_do_not() -> None:
    assert PRESETS["hybrid_graph"].rerank_top == 20
    assert PRESETS["keyword"].rerank_top == 0
    assert PRESETS["hybrid"].rerank_top == 0
    with pytest.raises(ValidationError) as err:
        get_preset("hybrid_graph", rerank_top=41)
    assert err.value.field == "rerank_top"


def test_a_search_keeps_its_top_10_and_changes_only_their_order(cb: ContextBase) -> None:
    texts = [
        "The design review moved to Thursday at 15:00.",
        "When is the design review now?",
        "Lunch was noodles today.",
        "The review room is on the third floor.",
        "Design tokens are in the shared folder.",
        "We review the design every sprint.",
        "The printer is out of paper.",
        "Thursday works for the review.",
        "The design doc is linked in the channel.",
        "Review comments are due Friday.",
        "Parking is free on Sundays.",
        "I will book the room for the review.",
    ]
    for n, text in enumerate(texts):
        cb.record("user_message", session_id=f"s{n % 3}", text=text, agent_id="u")
    cb.wait_for_embeddings()
    query = "When is the design review?"
    plain = cb.search(query, config=get_preset("hybrid_graph", rerank_top=0, top_k=10))
    learned = cb.search(query, config=get_preset("hybrid_graph", rerank_top=10, top_k=10))
    assert {c.id for c in learned.results} == {c.id for c in plain.results}
    scores = [c.score for c in learned.results]
    assert scores == sorted(scores, reverse=True)
    assert sorted(scores) == sorted(c.score for c in plain.results)


def test_a_trace_says_a_hit_was_moved_by_the_learned_order() -> None:
    from ctxbase.assemble.trace import _how_found

    hit = {"owner_id": "e1", "strategy": "semantic_recall", "relative": 0.9, "keyword_rank": 2}
    moved = {**hit, "owner_id": "e2", "reordered": "learned order: 4 -> 2"}
    lines = _how_found({"search_considered": [hit, moved]})
    assert "learned order" not in lines["e1"][0]
    assert lines["e2"] == [
        "semantic_recall: keyword rank 2, learned order: 4 -> 2; relative score 0.900"
    ]
