"""The optional LLM query rewrite (retrieve/query_rewrite.py): a model's other wordings of
a query searched too, on SQLite and PostgreSQL, against a real local OpenAI-compatible
server (tests/chat_server.py); a model that fails, is slow or trickles its answer never
holds a search up."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from chat_server import REWRITES, ChatServer, running_chat_server
from ctxbase import ContextBase
from ctxbase.errors import ValidationError
from ctxbase.retrieve.query_rewrite import QueryRewriteConfig, parse_rewrites, resolve_rewrite
from ctxbase.store.base import Store

QUERY = "上次那个慢查询后来怎么解决的"
TURNS = [
    ("user_message", "订单列表页打开要十几秒"),
    ("assistant_message", "给 orders 表的 user_id 加了索引，现在 80 毫秒"),  # the answer
    ("user_message", "查询天气的接口又超时了"),
    ("assistant_message", "登录页面的样式问题解决了"),
    ("user_message", "上次的会议纪要放在共享盘"),
    ("assistant_message", "那个周报模板后来改成新的格式"),
]


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    with running_chat_server() as server:
        yield server


def _base(store: Store, chat: ChatServer) -> tuple[ContextBase, list[str]]:
    config = {"base_url": chat.url, "model": "tiny-rewriter", "timeout_s": 1.0}
    cb = ContextBase(
        store,
        project="p",
        embedder="hash",
        background_embedding=False,
        query_rewrite=QueryRewriteConfig.model_validate(config),
    )
    ids = [cb.record(type_, session_id="s1", text=text).id for type_, text in TURNS]
    cb.flush()
    return cb, ids


def test_the_models_wordings_find_the_answer_the_question_shares_no_word_with(
    store: Store, chat: ChatServer
) -> None:
    cb, ids = _base(store, chat)
    answer = ids[1]
    try:
        plain = cb.search(QUERY, preset="hybrid", top_k=3, rewrite_weight=0)
        # the words the question shares are the wrong turns' (查询, 解决, 上次, 那个, 后来)
        assert answer not in [h.id for h in plain.considered] and plain.rewrites == []
        assert chat.requests == []  # weight 0: the model is not asked
        found = cb.search(QUERY, preset="hybrid", top_k=3)
        assert answer in [h.id for h in found.results]
        assert found.rewrites == REWRITES[QUERY] and found.rewrite_error is None
        assert "rewrite" in found.timings_ms
        (sent,) = chat.requests  # only the query goes out, never stored memory
        assert sent["model"] == "tiny-rewriter"
        assert sent["messages"][-1] == {"role": "user", "content": QUERY}
        assert not any("索引" in m["content"] for m in sent["messages"])
        # the same question again is answered from the cache
        assert answer in [h.id for h in cb.search(QUERY, preset="hybrid", top_k=3).results]
        assert len(chat.requests) == 1
        # an assembly's trace says what the model added
        ctx = cb.assemble_context(agent_role="coder", user_intent=QUERY)
        assert any(n.startswith("query rewritten for ") for n in ctx.trace["notes"])
        # a hard forget empties the cache: the next search asks again
        report = cb.forget(event_ids=[ids[4]])
        assert report.caches["query_rewrites"] >= 1
        cb.search(QUERY, preset="hybrid", top_k=3)
        assert len(chat.requests) == 2
    finally:
        cb.close()


def test_a_failing_model_leaves_the_search_as_it_was_and_is_left_alone_a_while(
    store: Store, chat: ChatServer
) -> None:
    cb, _ = _base(store, chat)
    try:
        broken = cb.search("[500] 慢查询", preset="hybrid", top_k=3)
        assert broken.results  # keyword and semantic answered as without a model
        assert broken.rewrites == []
        assert broken.rewrite_error is not None and "HTTP 500" in broken.rewrite_error
        asked = len(chat.requests)
        again = cb.search(QUERY, preset="hybrid", top_k=3)  # within retry_after_s
        assert len(chat.requests) == asked and again.rewrites == []
        assert again.rewrite_error is not None and "not asked again" in again.rewrite_error
    finally:
        cb.close()


@pytest.mark.parametrize("query", ["[slow] 慢查询", "[drip] how was the slow query fixed"])
def test_a_slow_or_trickling_model_never_holds_a_search_past_its_timeout(
    query: str, tmp_path: Path, chat: ChatServer
) -> None:
    # "[drip]" sends a whole answer a byte every 0.2 s: no single read waits past the
    # timeout, so only a bound on the whole call stops it (about 20 s of bytes)
    cb = ContextBase(
        str(tmp_path / "t.db"),
        embedder="hash",
        background_embedding=False,
        query_rewrite={"base_url": chat.url, "model": "m", "timeout_s": 0.5},
    )
    try:
        cb.record("user_message", session_id="s1", text="慢查询 fixed: index on orders.user_id")
        t = time.monotonic()
        response = cb.search(query, preset="hybrid")
        assert time.monotonic() - t < 5.0
        assert response.rewrite_error == "query rewrite failed: no answer within 0.5 s"
        assert response.results  # answered without the model
    finally:
        cb.close()


def test_wordings_are_read_from_json_fenced_json_or_lines() -> None:
    q = "how was it fixed"
    assert parse_rewrites(
        '{"queries": ["index added", " index  added ", "How was it fixed"]}', q, 3
    ) == ("index added",)
    assert parse_rewrites('```json\n["a", "b", "c", "d"]\n```', q, 2) == ("a", "b")
    assert parse_rewrites("1. added an index\n- slow query\n\n", q, 3) == (
        "added an index",
        "slow query",
    )
    assert parse_rewrites('{"queries": []}', q, 3) == ()
    for bad in ('{"entities": []}', '"just text"', ""):
        with pytest.raises(ValueError):
            parse_rewrites(bad, q, 3)


def test_the_option_is_off_unless_configured_and_bad_settings_name_their_field(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CTXBASE_REWRITE_BASE_URL", raising=False)
    monkeypatch.delenv("CTXBASE_REWRITE_MODEL", raising=False)
    assert resolve_rewrite(None) is None and resolve_rewrite(False) is None
    with pytest.raises(ValidationError) as err:
        resolve_rewrite(True)
    assert err.value.field == "query_rewrite" and "CTXBASE_REWRITE_BASE_URL" in str(err.value)
    monkeypatch.setenv("CTXBASE_REWRITE_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("CTXBASE_REWRITE_MODEL", "m")
    found = resolve_rewrite(None)
    assert found is not None and (found.base_url, found.model) == ("http://127.0.0.1:9/v1", "m")
    with pytest.raises(ValidationError) as err:
        resolve_rewrite({"base_url": "http://x/v1", "model": "m", "timeout_s": 0})
    assert err.value.field == "query_rewrite.timeout_s"
    with pytest.raises(ValidationError) as err:
        resolve_rewrite("http://x/v1")
    assert err.value.field == "query_rewrite"
