"""The keyword index's top-k pruning on a real store (both backends): the same hits, scores
and order as scoring every match through one score per item, with fewer postings read
when the query has common words; filters, a search widening past its first window and
appended postings included."""

from __future__ import annotations

import dataclasses
import random

import pytest

from ctxbase import ContextBase
from ctxbase.capture.events import build_event
from ctxbase.retrieve import keyword_index
from ctxbase.retrieve.filter_scope import FilterScope
from ctxbase.retrieve.keyword_index import KeywordIndex
from ctxbase.retrieve.tokenize import query_terms
from ctxbase.store.base import ItemFilter

COMMON = ["service", "request", "update", "config", "error"]  # in most items
MIDDLE = ["orders", "payment", "schema", "deploy", "缓存", "查询"]  # in some
RARE = ["okapi", "quokka", "tapir", "zebu"]  # in a few
QUERIES = [
    "okapi service request",
    "quokka orders update config error",
    "tapir 缓存 查询 service",
    "payment schema deploy request",
    "service request update",
    "zebu error",
    "orders",
]
FILTERS = [
    None,
    ItemFilter(session_ids=("s1",)),  # listed whole
    ItemFilter(exclude_session_ids=("s0",)),  # checked on candidates
    ItemFilter(types=("assistant_message",), latest_only=True),
    ItemFilter(kinds=("event",), path_prefix="src/"),  # left to the store
]


def _texts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    texts = []
    for _ in range(n):
        words = [w for w in COMMON if rng.random() < 0.7]
        words += [w for w in MIDDLE if rng.random() < 0.15]
        words += [w for w in RARE if rng.random() < 0.02]
        words *= rng.choice([1, 1, 2])  # repeated words: other frequencies
        words += ["filler"] * rng.choice([0, 2, 5, 11])  # other lengths
        rng.shuffle(words)
        texts.append(" ".join(words) or "nothing")
    return texts


def _fill(cb: ContextBase, n: int = 400, seed: int = 3) -> None:
    events = [
        build_event(
            project_id=cb.project,
            session_id=f"s{i % 4}",
            type="user_message" if i % 3 else "assistant_message",
            agent_id=f"a{i % 3}",
            text=text,
            ts=1_000_000.0 + i,
        )
        for i, text in enumerate(_texts(n, seed))
    ]
    cb.record_events(events)


def _answers(
    index: KeywordIndex,
    pid: str,
    query: str,
    limit: int,
    flt: ItemFilter | None,
    scope: FilterScope | None,
) -> dict[str, list[tuple[str, float]]]:
    out = {}
    for way in ("top", "exhaustive", "dense"):
        index.scoring = way  # type: ignore[assignment]
        out[way] = index.search(pid, query_terms(query), limit, flt, scope)
    index.scoring = "top"
    return out


def test_pruned_search_equals_scoring_every_match(cb: ContextBase) -> None:
    _fill(cb)
    index = KeywordIndex(cb.store)
    found = 0
    for flt in FILTERS:
        scope = FilterScope(cb.store, cb.project, flt) if flt is not None else None
        for query in QUERIES:
            for limit in (1, 5, 20):
                for with_scope in (None, scope) if scope is not None else (None,):
                    got = _answers(index, cb.project, query, limit, flt, with_scope)
                    # the same ids, floats and order (ties broken by storing order)
                    assert got["top"] == got["dense"] == got["exhaustive"], (query, flt)
                    found += len(got["top"])
    assert found > 500  # not vacuous


def test_common_words_are_not_read_whole(cb: ContextBase) -> None:
    _fill(cb)
    index = KeywordIndex(cb.store)
    read = {}
    for way in ("top", "dense"):
        index.scoring = way  # type: ignore[assignment]
        before = index.scored
        # the queries pairing a rare word with common ones, no Chinese: the characters of a
        # Chinese word are terms too, here exactly as frequent as their word (in real text
        # they are more common), which leaves little to skip (bench/keyword_scale.py)
        for query in (QUERIES[0], QUERIES[1], QUERIES[5]):
            index.search(cb.project, query_terms(query), 5)
        read[way] = index.scored - before
    # the common words' postings (~280 items each) are looked up for the few items in reach
    assert read["top"] * 2 < read["dense"]


def test_a_search_widening_past_hidden_hits_gives_the_same_answer(cb: ContextBase) -> None:
    _fill(cb)
    index = KeywordIndex(cb.store)
    query = query_terms("service request update config")
    index.scoring = "dense"
    first = index.search(cb.project, query, 40)
    assert len(first) == 40
    # the best 30 are hidden in the store, an index that missed it still ranks them first
    cb.soft_delete([i for i, _ in first[:30]])
    stale = index._cache[cb.project]
    index._cache[cb.project] = dataclasses.replace(
        stale, generation=cb.store.index_generation(cb.project)
    )
    answers = {}
    for way in ("top", "dense"):
        index.scoring = way  # type: ignore[assignment]
        answers[way] = index.search(cb.project, query, 5)
    assert answers["top"] == answers["dense"] == first[30:35]


def test_appended_postings_bound_the_terms_too(
    cb: ContextBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(keyword_index, "_TAIL_POSTINGS", 10_000)  # appended, held unsorted
    _fill(cb, 200)
    index = KeywordIndex(cb.store)
    assert index.search(cb.project, ["okapi"], 5)
    # appended items hold words more often and are shorter than any loaded one
    for i in range(30):
        text = "orders " * (3 + i % 4) + ("okapi " if i % 2 else "") + "service" * (i % 3)
        cb.record("user_message", session_id="s9", text=text)
    for query in ("okapi orders", "okapi orders service request", "service request"):
        got = _answers(index, cb.project, query, 10, None, None)
        assert got["top"] == got["dense"] == got["exhaustive"]
    loaded = index._cache[cb.project]
    assert loaded.postings.tail_docs.size  # read from the appended ones
    assert index.reloads == 1
    # each term's bound: its largest frequency and shortest item, the appended ones included
    lengths = loaded.docs.lengths
    for tid in range(len(loaded.docs.vocab)):
        docs, freqs, peak, short = loaded.postings.held(tid, lengths)
        assert (peak, short) == (float(freqs.max()), float(lengths[docs].min()))
