"""Seed 003's own fact examples become state facts, with relative dates resolved against the
time of the message that states them."""

from __future__ import annotations

from datetime import date, datetime

import pytest

from ctxbase import ContextBase
from ctxbase.assemble.facts import RuleFactExtractor, asks_to_remember, extract_facts
from ctxbase.assemble.manager import ContextManager

WED = date(2025, 6, 4)  # a Wednesday


@pytest.mark.parametrize(
    ("text", "key", "value"),
    [
        (
            "记一下截止日期是月底",
            "deadline",
            {"op": "<=", "expression": "月底", "date": "2025-06-30"},
        ),
        (
            "项目截止时间是月底",
            "deadline",
            {"op": "<=", "expression": "月底", "date": "2025-06-30"},
        ),
        (
            "截止日期是下周三",
            "deadline",
            {"op": "<=", "expression": "下周三", "date": "2025-06-11"},
        ),
        (
            "the deadline is end of next month",
            "deadline",
            {"op": "<=", "expression": "end of next month", "date": "2025-07-31"},
        ),
        (
            "deadline: next Wednesday",
            "deadline",
            {"op": "<=", "expression": "next Wednesday", "date": "2025-06-11"},
        ),
        ("把预算控制在5万以内", "budget", {"op": "<=", "amount": 50000, "currency": "CNY"}),
        ("用户预算5万", "budget", {"op": "=", "amount": 50000, "currency": "CNY"}),
        ("我喜欢蓝色", "preference:蓝色", {"polarity": "like", "item": "蓝色"}),
        ("用户偏好蓝色配色", "preference:蓝色配色", {"polarity": "like", "item": "蓝色配色"}),
    ],
)
def test_the_articles_examples(text: str, key: str, value: dict[str, object]) -> None:
    facts = {f.key: f.value for f in extract_facts(text, today=WED)}
    assert facts == {key: value}


def test_remember_requests_are_recognised() -> None:
    assert asks_to_remember("记一下截止日期是月底") and asks_to_remember("Remember that I use Go")
    assert not asks_to_remember("截止日期是月底")


def test_relative_dates_count_from_the_message_time(cb: ContextBase) -> None:
    at = datetime(2025, 6, 4, 10, 0).timestamp()
    cm = ContextManager(cb, extractor=RuleFactExtractor(), clock=lambda: at)
    sid = cm.create_session("alice")
    mid = cm.add_message(sid, "user", "记一下截止日期是月底")
    assert cm.get_state(sid, "deadline")["date"] == "2025-06-30"
    assert cb.get_event(mid).metadata.get("important") is True
    cm.add_message(sid, "user", "截止日期改到下周三")
    assert cm.get_state(sid, "deadline")["date"] == "2025-06-11"
    cm.add_message(sid, "user", "actually, the deadline is end of next month")
    assert cm.get_state(sid, "deadline")["date"] == "2025-07-31"
    prompt = "\n".join(m["content"] for m in cm.get_prompt_messages(sid, 1500, user_input="好"))
    assert "deadline <= 2025-07-31" in prompt


def test_a_retracted_message_takes_its_facts_with_it(cb: ContextBase) -> None:
    # seed 003, 4.1: "撤回消息仍生效" -> expire_message, and the model no longer uses it
    cm = ContextManager(cb, extractor=RuleFactExtractor())
    sid = cm.create_session("alice")
    first = cm.add_message(sid, "user", "用户预算5万")
    wrong = cm.add_message(sid, "user", "把预算控制在3万以内")
    assert cm.get_state(sid, "budget")["amount"] == 30000
    cm.expire_message(sid, wrong)
    assert cm.get_state(sid, "budget") == {"op": "=", "amount": 50000, "currency": "CNY"}
    prompt = "\n".join(m["content"] for m in cm.get_prompt_messages(sid, user_input="那时间呢"))
    assert "30000" not in prompt and "budget = 50000" in prompt
    assert wrong in (cm.state_history(sid, "budget")[-1].cause or "")
    # with the earlier statement retracted too, nothing is left of the budget
    cm.expire_message(sid, first)
    assert cm.get_state(sid, "budget") is None
    # the user's own preference goes with the message that stated it
    liked = cm.add_message(sid, "user", "我喜欢蓝色")
    assert cm.get_state(sid, "preference:蓝色") is not None
    cm.expire_message(sid, liked)
    assert cm.get_state(sid, "preference:蓝色") is None
    # a fact a later message changed keeps that later value
    said = cm.add_message(sid, "user", "截止日期是月底")
    cm.add_message(sid, "user", "截止日期改到下周三")
    cm.expire_message(sid, said)
    assert cm.get_state(sid, "deadline")["expression"] == "下周三"
