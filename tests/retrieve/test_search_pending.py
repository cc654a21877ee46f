"""Units written a moment ago, whose vectors are still pending, rank by what the search
could compare: a strong keyword hit with no vector yet is not taken for one the semantic
search rejected. Real stores (the `cb` fixture runs on every backend), the hash embedder,
background embedding off so the backlog stays until drained."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from ctxbase import ContextBase
from ctxbase.store.base import SearchItem
from ctxbase.store.sqlite import SQLiteStore

# Units that match the query a little both ways (by keyword and by vector).
OLDER = [
    "订单服务的队列监控面板已经上线",
    "订单查询接口增加了分页",
    "消息队列的消费者数量调到了八个",
    "订单状态同步改成异步队列处理",
    "队列长度告警阈值设为一千",
    "订单导出任务走后台队列",
    "退款订单需要人工审核",
    "队列重试次数改为三次",
    "新订单通知推送到企业微信",
    "订单队列的死信需要每天检查",
    "支付回调写入订单队列",
    "队列消费延迟超过五秒时报警",
]
NEW = "订单队列积压 blorptang，今晚扩容"
QUERY = "订单队列 blorptang"


def _written(cb: ContextBase) -> str:
    for n, text in enumerate(OLDER):
        cb.record("user_message", session_id=f"s{n % 3}", text=text)
    cb.wait_for_embeddings()
    return cb.record("user_message", session_id="s9", text=NEW).id


@pytest.mark.parametrize("fusion", ["rrf", "weighted"])
def test_a_strong_keyword_hit_without_a_vector_yet_ranks_first(
    cb: ContextBase, fusion: str
) -> None:
    new = _written(cb)
    response = cb.search(QUERY, preset="hybrid", top_k=10, fusion=fusion)
    first = response.results[0]
    assert first.item.owner_id == new
    assert first.keyword_rank == 1 and first.semantic_rank is None
    assert response.pending_vectors >= 1
    cb.wait_for_embeddings()
    after = cb.search(QUERY, preset="hybrid", top_k=10, fusion=fusion)
    assert after.pending_vectors == 0
    placed = next(c for c in after.results if c.item.owner_id == new)
    assert placed.semantic_rank is not None  # compared now: ranked by both lists


class _VectorsLandMidSearch(SQLiteStore):
    """A store whose vectors for the backlog are written by another worker while a search
    runs: right after the search's vector search, when it reads its best units back."""

    land: ContextBase | None = None

    def get_items(self, project_id: str, ids: Sequence[str]) -> list[SearchItem]:
        base, self.land = self.land, None
        if base is not None:
            base.wait_for_embeddings()
        return super().get_items(project_id, ids)


def test_pending_vectors_counts_the_units_the_vector_search_could_not_see(
    tmp_path: Path, project_id: str
) -> None:
    store = _VectorsLandMidSearch(str(tmp_path / "race.db"))
    cb = ContextBase(store, project=project_id, embedder="hash", background_embedding=False)
    try:
        new = _written(cb)
        store.land = cb
        response = cb.search(QUERY, preset="hybrid", top_k=10)
        assert cb.embedder is not None and store.land is None
        assert store.count_pending_embeddings(cb.embedder.name, 10, project_id) == 0
        first = response.results[0]
        assert first.item.owner_id == new and first.semantic_rank is None
        # the vector came after the search compared vectors: the unit counts as pending
        assert response.pending_vectors >= 1
    finally:
        cb.close()
