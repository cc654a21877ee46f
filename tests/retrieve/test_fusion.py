"""Pure scoring functions: fusion, decay, dynamic top-k, near-duplicates."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxbase.retrieve.fusion import (
    DUPLICATE_LOOKAHEAD,
    dedupe_near_identical,
    dynamic_top_k,
    keyword_stand_ins,
    normalise_scores,
    rrf_fuse,
    standout,
    time_decay,
    weighted_fuse,
)


def test_rrf_rewards_agreement_and_respects_weights() -> None:
    fused = rrf_fuse({"kw": ["a", "b", "c"], "sem": ["b", "a", "d"]}, {"kw": 1.0, "sem": 1.0}, 20)
    assert fused["a"] == pytest.approx(fused["b"])
    assert fused["a"] > fused["c"] > 0
    tilted = rrf_fuse({"kw": ["a", "b"], "sem": ["b", "a"]}, {"kw": 1.0, "sem": 0.5}, 20)
    assert tilted["a"] > tilted["b"]
    assert "x" not in rrf_fuse({"kw": ["x"]}, {"kw": 0.0}, 20)


def test_weighted_fuse_normalises_each_method() -> None:
    fused = weighted_fuse({"kw": {"a": 10.0, "b": 5.0}, "sem": {"a": 0.1, "b": 0.9}}, {})
    assert fused["a"] == pytest.approx(1.0) and fused["b"] == pytest.approx(1.0)
    assert normalise_scores({"x": 3.0}) == {"x": 1.0}


def test_semantic_lists_borrow_the_keyword_list_of_the_same_text() -> None:
    names = ["keyword", "semantic", "semantic_topic", "clause0", "clause0_semantic", "feedback"]
    assert keyword_stand_ins(names) == {
        "semantic": "keyword",
        "semantic_topic": "keyword",
        "clause0_semantic": "clause0",
    }
    assert keyword_stand_ins(["semantic", "clause1_semantic"]) == {}  # no keyword list ran


RANKINGS = {"keyword": ["new", "b", "c", "d"], "semantic": ["c", "b", "d", "e"]}
WEIGHTS = {"keyword": 1.0, "semantic": 0.7}


def test_rrf_places_a_pending_unit_in_the_semantic_list_at_its_keyword_rank() -> None:
    plain = rrf_fuse(RANKINGS, WEIGHTS, 60)
    fused = rrf_fuse(RANKINGS, WEIGHTS, 60, pending={"new"})
    # without: the best keyword hit loses to units both lists found weakly
    assert max(plain, key=plain.__getitem__) == "b"
    assert fused["new"] == pytest.approx(1.0 / 61 + 0.7 / 61)
    assert max(fused, key=fused.__getitem__) == "new"
    del plain["new"], fused["new"]
    assert fused == plain  # nothing else moves
    # a unit with a vector that the semantic search left out stays left out
    assert rrf_fuse(RANKINGS, WEIGHTS, 60, pending={"x"}) == rrf_fuse(RANKINGS, WEIGHTS, 60)
    # a pending unit the semantic list did place keeps its real rank
    assert rrf_fuse(RANKINGS, WEIGHTS, 60, pending={"c"}) == rrf_fuse(RANKINGS, WEIGHTS, 60)
    # a keyword list weighted 0 lends nothing
    assert "new" not in rrf_fuse(RANKINGS, {"keyword": 0.0, "semantic": 0.7}, 60, {"new"})


def test_weighted_fusion_gives_a_pending_unit_its_keyword_score_twice() -> None:
    scores = {
        "keyword": {"new": 9.0, "b": 5.0, "c": 1.0},
        "semantic": {"b": 0.8, "c": 0.6},
    }
    plain = weighted_fuse(scores, WEIGHTS)
    fused = weighted_fuse(scores, WEIGHTS, pending={"new"})
    assert plain["new"] == pytest.approx(1.0) and fused["new"] == pytest.approx(1.7)
    assert fused["b"] == plain["b"] and fused["c"] == plain["c"]


def test_time_decay_halves_per_half_life() -> None:
    assert time_decay(0, 7) == 1.0
    assert time_decay(7 * 86400, 7) == pytest.approx(0.5)
    assert time_decay(14 * 86400, 7) == pytest.approx(0.25)
    assert time_decay(10**9, None) == 1.0


def test_dynamic_top_k_stops_at_score_drop_and_token_allowance() -> None:
    scored = [("a", 1.0), ("b", 0.9), ("c", 0.8), ("d", 0.3), ("e", 0.29)]
    assert [i for i, _ in dynamic_top_k(scored, min_k=2, max_k=5)] == ["a", "b", "c"]
    assert len(dynamic_top_k(scored, min_k=4, max_k=5)) == 4
    tokens = {"a": 100, "b": 100, "c": 100, "d": 10, "e": 10}
    kept = dynamic_top_k(scored, min_k=1, max_k=5, token_allowance=250, tokens_of=tokens.get)
    assert [i for i, _ in kept] == ["a", "b"]


@given(
    st.lists(st.floats(min_value=0, max_value=1), min_size=0, max_size=30),
    st.integers(1, 5),
    st.integers(0, 10),
)
def test_dynamic_top_k_bounds(scores: list[float], lo: int, extra: int) -> None:
    scored = sorted(((str(i), s) for i, s in enumerate(scores)), key=lambda x: -x[1])
    kept = dynamic_top_k(scored, min_k=lo, max_k=lo + extra)
    assert len(kept) <= lo + extra
    assert len(kept) >= min(lo, len(scored))


def test_dedupe_drops_near_identical_text_in_english_and_chinese() -> None:
    texts = {
        "a": "the cache key for recent orders expires after ten minutes",
        "b": "the cache key for recent orders expires after ten minutes!",
        "c": "tests for the payment service are failing",
        "d": "把预算控制在5万以内",
        "e": "把预算控制在5万以内。",
    }
    ranked = [(k, 1.0 - n / 10) for n, k in enumerate(texts)]
    kept, dropped = dedupe_near_identical(ranked, texts.__getitem__, 0.8)
    assert [k for k, _ in kept] == ["a", "c", "d"]
    assert dropped == {"b": "a", "e": "d"}
    # with a limit the first result's copies just below the cut are still named; results
    # below it are not checked against each other (d and e both follow)
    limited, folded = dedupe_near_identical(ranked, texts.__getitem__, 0.8, limit=1)
    assert [k for k, _ in limited] == ["a", "c", "d", "e"]
    assert folded == {"b": "a"}


def test_dedupe_keeps_a_long_text_with_one_word_changed() -> None:
    """Bigrams alone call these copies (Jaccard >= 0.9): the one word changed is the fact."""
    filler = (
        ", and the lunch order for Friday is pizza while the office plants need water; remember"
        " to update the wiki pages about onboarding and the holiday calendar for the whole team"
        " before the release train leaves on Thursday morning with the new invoice exports"
    )
    rest = "所有客户端都一样记得同时更新接口文档值班表和发布说明并通知移动端和网页端的负责同事"
    texts = {
        "old": f"We decided to use MySQL for the billing database{filler}",
        "new": f"We decided to use PostgreSQL for the billing database{filler}",
        "zh_old": "接口超时时间定为三十秒" + rest,
        "zh_new": "接口超时时间定为二十秒" + rest,
        "copy": f"We decided to use MySQL, for the billing database {filler.upper()}!",
    }
    ranked = [(k, 1.0 - n / 10) for n, k in enumerate(texts)]
    kept, dropped = dedupe_near_identical(ranked, texts.__getitem__, 0.9)
    assert [k for k, _ in kept] == ["old", "new", "zh_old", "zh_new"]
    assert dropped == {"copy": "old"}  # case, spacing and punctuation only


def test_dedupe_with_a_limit_looks_a_bounded_way_below_the_cut() -> None:
    texts = {"hit": "my test environment PIN is 482913"}
    texts |= {f"other{n}": f"unrelated note number {n} about lunch" for n in range(30)}
    near, far = "my test environment PIN is 482913 ", "my test environment PIN is 482913  "
    order = ["hit", *(f"other{n}" for n in range(5)), "near"]
    order += [f"other{n}" for n in range(5, 5 + DUPLICATE_LOOKAHEAD)] + ["far"]
    texts |= {"near": near, "far": far}
    ranked = [(k, 1.0 - n / 100) for n, k in enumerate(order)]
    kept, folded = dedupe_near_identical(ranked, texts.__getitem__, 0.9, limit=2)
    assert folded == {"near": "hit"}  # within limit + DUPLICATE_LOOKAHEAD of the cut
    assert [k for k, _ in kept][-1] == "far"  # beyond it: follows unchecked


def test_standout_is_a_first_score_far_ahead_of_the_rest() -> None:
    # lead over the second 0.05, over the median 0.10: half of it
    scores = {"a": 0.95, "b": 0.90, "c": 0.86, "d": 0.85, "e": 0.84}
    assert standout(scores, 0.3) == "a"
    assert standout(scores, 0.6) is None
    # close to the second: no standout, however far above the median both are
    assert standout({"a": 0.95, "b": 0.949, "c": 0.5, "d": 0.4}, 0.3) is None
    # scale-free: the same shape at another scale stands out the same way
    assert standout({k: v * 10 - 3 for k, v in scores.items()}, 0.3) == "a"
    # too few scores, or all equal
    assert standout({"a": 1.0, "b": 0.1}, 0.3) is None
    assert standout(dict.fromkeys("abc", 0.5), 0.3) is None
