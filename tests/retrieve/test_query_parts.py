"""A query's clauses: the pure function, and search finding each clause's answer (every
backend: the `cb` fixture is parametrised)."""

from __future__ import annotations

from ctxbase import ContextBase
from ctxbase.retrieve.config import get_preset
from ctxbase.retrieve.query_parts import query_clauses


def test_clauses_of_a_query_asking_two_things() -> None:
    assert query_clauses("接口调用上限提高到了几倍，只在什么时段有效？") == [
        "接口调用上限提高到了几倍",
        "只在什么时段有效",
    ]
    assert query_clauses("押金加首月房租一共多少？押金是几个月？") == [
        "押金加首月房租一共多少",
        "押金是几个月",
    ]
    assert query_clauses("Which tests failed; who fixed the flaky watcher?") == [
        "Which tests failed",
        "who fixed the flaky watcher",
    ]


def test_a_query_asking_one_thing_has_no_clauses() -> None:
    assert query_clauses("那其他课也能选位置吗？") == []
    assert query_clauses("How much did 3,000 users pay for v1.2?") == []
    # a clause too short to stand alone joins its neighbour
    assert query_clauses("What broke the build, and why?") == []
    assert query_clauses("好，测试环境什么时候能搭好？") == []
    # more clauses than a question asks: a description, searched whole
    task = "修复登录超时，更新接口文档，补充单元测试，发布新版本"
    assert query_clauses(task) == []
    assert len(query_clauses(task.rsplit("，", 1)[0])) == 3


def test_search_finds_each_clauses_answer(cb: ContextBase) -> None:
    def say(text: str) -> str:
        return cb.record("user_message", session_id="s", text=text).id

    limit = say("接口调用上限提到每分钟300次")
    for n in range(5):  # turns about the first half only crowd the whole query's ranking
        say(f"接口调用上限还要再商量，第{n}轮")
    window = say("只在凌晨1点到5点这个时段有效")
    cb.wait_for_embeddings()
    query = "接口调用上限提到了多少次，只在什么时段有效？"
    plain = [c.item.owner_id for c in cb.search(query, config=get_preset("hybrid")).results]
    assert plain[0] == limit and window not in plain[:2]
    split = get_preset("hybrid", clause_weight=0.25)
    found = [c.item.owner_id for c in cb.search(query, config=split).results]
    assert set(found[:2]) == {limit, window}


def test_a_long_run_of_clauses_is_a_description() -> None:
    # 8000 characters: short pieces that never make a clause, clauses far past the
    # limit, and one long piece with no clause end; each is read once.
    assert query_clauses("缓存，" * 2666) == []
    assert query_clauses("cache, " * 1142) == []
    assert query_clauses("what broke the build, who fixed it? " * 222) == []
    assert query_clauses("缓存 " * 2666) == []
    # the limit still lets a two-part question through, whatever precedes it
    assert query_clauses("好，" * 50 + "缓存命中率是多少，订单服务的接口慢吗？") == [
        " ".join(["好"] * 50 + ["缓存命中率是多少"]),
        "订单服务的接口慢吗",
    ]
