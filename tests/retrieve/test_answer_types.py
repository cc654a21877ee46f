"""Questions that ask for a number or a date and turns that state one: the pure functions,
and search favouring the turn with the amount or the day (every backend: the `cb` fixture is
parametrised)."""

from __future__ import annotations

from ctxbase import ContextBase
from ctxbase.retrieve.answer_types import (
    asks_for_amount,
    asks_for_date,
    asks_for_number,
    states_date,
    states_number,
)
from ctxbase.retrieve.config import get_preset


def test_questions_asking_for_a_number() -> None:
    for query in (
        "单车教室一节课最多容纳多少人？",
        "候补最多能排几个人？",
        "原来要渲染多久？",
        "How many tests failed?",
        "How long did the migration take?",
        "What percentage of users churned?",
        "开题答辩最后是哪天？",
        "When did the export break?",
    ):
        assert asks_for_number(query), query
    for query in ("会员卡数据从哪个系统同步过来？", "Who fixed the build?", "Why whenever?"):
        assert not asks_for_number(query), query
    # "how" alone, or inside a word, asks for no amount
    assert not asks_for_number("How was the bug fixed? Somehow.")


def test_turns_stating_a_number() -> None:
    for text in ("单车教室固定30个车位", "递补要等三天", "延迟降了两倍", "P95 420ms", "ｖ２"):
        assert states_number(text), text
    for text in ("容量按教室配置，后台改一下就行", "We fixed it yesterday.", "三思而后行"):
        assert not states_number(text), text


def test_questions_asking_when() -> None:
    for query in (
        "开题答辩最后是哪天？",
        "晚宴几点开席？",
        "牙冠什么时候装的？",
        "When did the export break?",
        "What date was the release?",
    ):
        assert asks_for_date(query) and asks_for_number(query), query
        assert not asks_for_amount(query), query
    for query in ("宽带是搬家后第几天装的？", "How much was refunded?", "单车教室能容纳多少人？"):
        assert asks_for_amount(query) and not asks_for_date(query), query
    # asking both: an amount is what most of its answers state
    both = "How much will the plan cost and until when is that price held?"
    assert asks_for_date(both) and asks_for_amount(both)


def test_turns_saying_a_day_or_a_time() -> None:
    for text in (
        "6月7日在田林社区打的",
        "约在17号晚上",
        "签证昨天下来了",
        "下周二完成",
        "10:30接站",
        "下午3点半",
        "2024年开始",
        "I went to the group yesterday.",
        "We met last week on Saturday.",
        "It shipped in May.",
        "at 7 pm",
    ):
        assert states_date(text), text
    for text in (
        "单车教室固定30个车位",
        "王老师提了两点意见",  # two points, not two o'clock
        "住在3号楼",
        "日常维护",
        "I may go, maybe.",
        "差了一千多块",
    ):
        assert not states_date(text), text


def test_search_favours_the_turn_stating_the_amount(cb: ContextBase) -> None:
    talk = cb.record(
        "user_message", session_id="s", text="单车教室的容量能容纳多少人，由门店在后台配置"
    )
    fact = cb.record("user_message", session_id="s", text="单车教室固定30个车位")
    cb.wait_for_embeddings()
    query = "单车教室的容量能容纳多少人？"
    plain = cb.search(query, config=get_preset("hybrid", top_k=2))
    assert [c.item.owner_id for c in plain.results] == [talk.id, fact.id]
    boosted = cb.search(query, config=get_preset("hybrid", top_k=2, number_boost=2.0))
    assert [c.item.owner_id for c in boosted.results] == [fact.id, talk.id]
    # A question that asks for no amount ranks as it does without the boost.
    other = cb.search("单车教室的容量由谁配置？", config=get_preset("hybrid", number_boost=2.0))
    unboosted = cb.search("单车教室的容量由谁配置？", config=get_preset("hybrid"))
    assert [(c.item.owner_id, c.score) for c in other.results] == [
        (c.item.owner_id, c.score) for c in unboosted.results
    ]
    assert {c.item.owner_id for c in other.results} == {talk.id, fact.id}


def test_a_question_asking_when_favours_the_turn_saying_the_day(cb: ContextBase) -> None:
    # Both state a number; only one says a day.
    amount = cb.record("user_message", session_id="s", text="牙冠选了全瓷的，2800元，装牙冠要两次")
    day = cb.record("user_message", session_id="s", text="牙冠也做完了，6月26日装的")
    cb.wait_for_embeddings()
    query = "牙冠是哪天装的？"
    config = get_preset("hybrid", top_k=2, number_boost=5.0)
    found = cb.search(query, config=config)
    assert found.results[0].item.owner_id == day.id
    plain = cb.search(query, config=get_preset("hybrid", top_k=2))
    by_id = {c.item.owner_id: c.score for c in plain.results}
    boosted = {c.item.owner_id: c.score for c in found.results}
    assert boosted[day.id] == 5.0 * by_id[day.id]
    assert boosted[amount.id] == by_id[amount.id]  # a number alone gains nothing here
