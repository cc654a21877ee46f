"""The storage contract, keyword ranking: a word an item says itself counts for more than the
same word it is only indexed with as context (OWN_TERMS_WEIGHT), on every backend."""

from __future__ import annotations

from contract_helpers import make_event, match

from ctxbase.store.base import SearchItem, Store


def test_own_terms_outrank_context_terms(store: Store, project_id: str) -> None:
    prior = make_event(project_id, "s1", "lighthouse keeper", ts=1.0)
    ctx = make_event(project_id, "s1", "ferry harbour", ts=2.0)
    own = make_event(project_id, "s1", "zanzibar harbour", ts=3.0)

    def entry(item_id: str, event_id: str, terms: str, context_terms: str) -> SearchItem:
        return SearchItem(item_id=item_id, owner_id=event_id, kind="event", type="note",
                          text=terms, terms=terms, ts=1.0, session_id="s1",
                          context_terms=context_terms, context_id=prior.id)  # fmt: skip

    # Same lengths (2 own terms, 3 indexed) and one "zanzibar" each: own for one, context
    # for the other. On a tie the context-only item would come first (smaller id, stored
    # first), so only the weighting puts the other one ahead.
    items = [
        [SearchItem(item_id=prior.id, owner_id=prior.id, kind="event", type="note",
                    text=prior.text, terms="lighthouse keeper", ts=1.0, session_id="s1")],
        [entry("item-a", ctx.id, "ferry harbour", "zanzibar")],
        [entry("item-b", own.id, "zanzibar harbour", "lighthouse")],
    ]  # fmt: skip
    store.write_events([prior, ctx, own], items)

    hits = store.keyword_search(project_id, match("zanzibar"), None, 9)
    assert [h.item_id for h in hits] == ["item-b", "item-a"]
    assert hits[0].score > hits[1].score > 0
