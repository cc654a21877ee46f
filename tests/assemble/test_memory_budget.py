"""The memory section fills its token budget: the budget, not the search's top_k, decides
how many hits enter (on both backends)."""

from __future__ import annotations

from ctxbase import ContextBase
from ctxbase.assemble.assembler import memory_section_for
from ctxbase.retrieve.config import get_preset


def _remember(cb: ContextBase, n: int) -> None:
    for i in range(n):
        cb.capture(
            "user_message",
            text=f"cache rule {i}: entries of table t{i} expire after {i + 1} minutes",
            session_id=f"s{i % 3}",
        )
    cb.flush()
    cb.wait_for_embeddings()


def test_a_large_budget_takes_more_than_top_k_hits(cb: ContextBase) -> None:
    _remember(cb, 30)
    config = get_preset("hybrid_graph", top_k=5)
    ids, tokens = memory_section_for(cb, None, "cache rule expire minutes", 2000, config=config)
    assert len(ids) > 5  # was capped at the search's top_k
    assert len(ids) == len(set(ids)) and 0 < tokens <= 2000
    small, small_tokens = memory_section_for(
        cb, None, "cache rule expire minutes", 120, config=config
    )
    assert 0 < len(small) < len(ids) and small_tokens <= 120
    # what a small budget keeps is the head of what a large one keeps, in the same order
    assert small == ids[: len(small)]


def test_the_section_stops_when_the_search_runs_out(cb: ContextBase) -> None:
    _remember(cb, 3)
    ids, tokens = memory_section_for(cb, None, "cache rule expire minutes", 5000)
    assert 1 <= len(ids) <= 3 and tokens < 5000
