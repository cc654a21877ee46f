"""Graph expansion hops only from hits that share something with the query: a hit ranked
in the vector list at similarity 0 (the hash embedder finding nothing in common) is not a
seed, so unrelated turns next to each other no longer lift each other above the answer."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import ctxbase
from ctxbase import ContextBase


@pytest.fixture
def cb(tmp_path: Path) -> Iterator[ContextBase]:
    base = ctxbase.open(str(tmp_path / "g.db"), project="bee", embedder="hash")

    def say(session: str, kind: str, text: str, parents: list[str] | None = None) -> str:
        return base.record(kind, session_id=session, text=text, parent_event_ids=parents).id

    b1 = say("proj", "user_message", "A项目依赖B技术来做消息队列。")
    say("proj", "assistant_message", "记下了：A项目依赖B技术。", [b1])
    say("proj2", "user_message", "B技术存在C漏洞，可能导致数据丢失。")
    w1 = say("s3", "user_message", "明天北京天气怎么样？推荐穿什么？")
    w2 = say("s3", "tool_invocation", "get_weather(city='北京')", [w1])
    w3 = say("s3", "tool_result", "北京 明天 -5°C 小雪", [w2])
    w4 = say("s3", "tool_invocation", "recommend_clothes(temp=-5, weather='小雪')", [w3])
    w5 = say("s3", "tool_result", "羽绒服、围巾、防滑靴", [w4])
    say("s3", "assistant_message", "明天北京-5°C有小雪，建议穿羽绒服、戴围巾、穿防滑靴。", [w5, w3])
    base.flush()
    base.wait_for_embeddings()
    yield base
    base.close()


def test_no_seed_without_evidence(cb: ContextBase) -> None:
    plain = cb.search("A项目的风险", preset="hybrid", top_k=10).results
    graph = cb.search("A项目的风险", preset="hybrid_graph", top_k=10).results
    answer = next(i for i, c in enumerate(plain) if "C漏洞" in c.item.text)
    weather = [i for i, c in enumerate(plain) if c.item.session_id == "s3"]
    assert weather and answer < min(weather)  # the case: the answer by rank, the rest noise
    evidence = {
        c.item.owner_id
        for c in graph
        if c.keyword_rank is not None or (c.similarity is not None and c.similarity > 0)
    }
    for c in graph:
        if c.graph_via is not None:
            assert c.graph_via.rsplit(" from ", 1)[1] in evidence, c.graph_via
    # the noise does not climb over the answer through its own neighbours
    ranked = [c.item.owner_id for c in graph]
    assert ranked.index(plain[answer].item.owner_id) < min(
        ranked.index(plain[i].item.owner_id) for i in weather
    )
