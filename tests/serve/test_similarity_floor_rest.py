"""`min_similarity` over REST (`options.min_similarity`) floors every hit, as embedded."""

from __future__ import annotations

from live_server import Live

import ctxbase

TEXTS = (
    "The orders cache TTL is 300 seconds",
    "orders shipped late on Monday",
    "cache TTL for sessions is 60 seconds",
)


def test_min_similarity_floors_each_hit_over_rest(live: Live, pid: str) -> None:
    with ctxbase.open(live.db, project=pid, embedder="hash", background_embedding=False) as cb:
        for text in TEXTS:
            cb.record("user_message", session_id="s", text=text)
        cb.wait_for_embeddings()
        embedded = cb.search("orders cache TTL", preset="keyword", min_similarity=0.5).results
    with ctxbase.connect(live.url, api_key=live.key(pid), project=pid) as client:
        every = client.search("orders cache TTL", preset="keyword").results
        floored = client.search("orders cache TTL", preset="keyword", min_similarity=0.5).results
    assert floored and len(floored) < len(every)
    assert all(c.similarity is not None and c.similarity >= 0.5 for c in floored)
    assert [c.item_id for c in floored] == [c.item_id for c in embedded]
