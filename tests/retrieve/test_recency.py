"""Recency cues and named kinds (retrieve/recency.py): which queries point back in time at
a kind of thing, and how the candidates of that kind are re-ordered."""

from __future__ import annotations

import pytest

from ctxbase.retrieve.recency import (
    named_kinds,
    of_kinds,
    order_by_recency,
    recency_cue,
    recent_kinds,
)
from ctxbase.retrieve.search import Candidate
from ctxbase.store.base import SearchItem


@pytest.mark.parametrize(
    ("query", "kinds"),
    [
        ("上次那个SQL为什么慢来着？", ["sql"]),
        ("把刚才生成的查询改成分页", ["sql"]),
        ("why was the query from last time slow?", ["sql"]),
        ("show me the previous function again", ["code"]),
        ("上次那个接口的SQL", ["sql", "code"]),
        ("the latest test failed", ["test"]),
        ("刚改的那个文件", ["file"]),
        ("what did we say last time about the cache?", []),  # a cue, no kind
        ("why is the orders SQL slow?", []),  # a kind, no cue
        ("run mysqldump like last time", []),  # "sql" inside a word names nothing
        ("at last the cache works", []),  # "at last" is no cue
    ],
)
def test_recent_kinds(query: str, kinds: list[str]) -> None:
    assert [k.name for k in recent_kinds(query)] == kinds


def test_cues_and_kinds_alone() -> None:
    assert recency_cue("上次那个SQL") == "上次"
    assert recency_cue("the one I just wrote") == "just wrote"
    assert recency_cue("在上线之前跑一下") is None  # 之前 alone: "before going live"
    assert [k.name for k in named_kinds("那个SQL")] == ["sql"]  # no word break before SQL


def _cand(owner: str, kind: str, type_: str, text: str, ts: float, score: float) -> Candidate:
    item = SearchItem(owner, owner, kind, type_, text, "", ts)
    return Candidate(item, score=score)


def test_order_by_recency_hands_the_places_out_newest_first() -> None:
    old_msg = _cand("e1", "event", "assistant_message", "```sql\nSELECT 1 FROM a\n```", 1.0, 0.9)
    talk = _cand("e2", "event", "user_message", "the SQL is slow", 5.0, 0.8)
    new_msg = _cand("e3", "event", "assistant_message", "SELECT x FROM b JOIN c", 3.0, 0.7)
    entity = _cand("sql:1", "entity", "sql", "select b", 0.0, 0.5)  # anchored: time given
    faint = _cand("e4", "event", "assistant_message", "DELETE FROM d", 9.0, 0.1)
    cands = [old_msg, talk, new_msg, entity, faint]
    kinds = recent_kinds("上次那个SQL")
    assert of_kinds(entity.item, kinds) and not of_kinds(talk.item, kinds)
    newest = order_by_recency(cands, kinds, {"sql:1": 4.0})
    # the entity's message is the newest (4.0), then e3 (3.0), then e1 (1.0); e4 is far
    # below the best of the kind (0.1 < 0.3 * 0.9) and keeps its place, as does the prose
    assert [c.item.owner_id for c in newest] == ["sql:1", "e3", "e1"]
    assert (entity.score, new_msg.score, old_msg.score) == (0.9, 0.7, 0.5)
    assert talk.score == 0.8 and faint.score == 0.1 and faint.recency is None
    assert entity.recency == "sql named with a recency cue: newest 1 of 3"
