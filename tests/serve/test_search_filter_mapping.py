"""`search(filters=<mapping>)` over the SDK: the mapping is an ItemFilter's fields, as
embedded and as REST's JSON takes them."""

from __future__ import annotations

import pytest
from live_server import Live

import ctxbase
from ctxbase.errors import ValidationError
from ctxbase.store.base import ItemFilter


def test_the_sdk_takes_filters_as_a_mapping(live: Live, pid: str) -> None:
    with ctxbase.open(live.db, project=pid, embedder="hash", background_embedding=False) as cb:
        for session in ("c1", "c2"):
            cb.record("user_message", session_id=session, text=f"the orders cache in {session}")
        cb.wait_for_embeddings()
    with ctxbase.connect(live.url, api_key=live.key(pid), project=pid) as client:

        def ids(**kw: object) -> list[str]:
            found = client.search("orders cache", preset="keyword", **kw).results  # type: ignore[arg-type]
            return [c.item_id for c in found]

        by_filter = ids(filters=ItemFilter(session_ids=("c2",)))
        assert by_filter and len(by_filter) < len(ids())
        assert ids(filters={"session_ids": ["c2"]}) == by_filter
        assert ids(session_id="c2", filters={"session_ids": ["c2"]}) == by_filter
        with pytest.raises(ValidationError) as err:
            client.search("orders", session_id="c1", filters={"session_ids": ["c2"]})
        assert err.value.field == "session_id"
        with pytest.raises(ValidationError) as err:
            client.search("orders", filters={"view": None, "session": "c1"})
        assert err.value.field == "filters" and "'session_ids'" in err.value.message
