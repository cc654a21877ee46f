"""Questions that ask for a number and turns that state one: the pure functions, and search
favouring the turn with the amount (every backend: the `cb` fixture is parametrised)."""

from __future__ import annotations

from ctxbase import ContextBase
from ctxbase.retrieve.answer_types import asks_for_number, states_number
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
