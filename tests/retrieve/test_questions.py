"""Which turns only ask (retrieve/questions.py): pure function, no store."""

from __future__ import annotations

import pytest

from ctxbase.retrieve.questions import asks_only


@pytest.mark.parametrize(
    "text",
    [
        "第二次约在什么时候？",
        "assistant: 阿姨换药后血压怎么样？",
        "Really? When did you go?",
        "你吃了吗？😊",
        "“真的吗？”",
        "v1.2 还能用吗?",
        "健客通有开放接口吗？会员数据每天同步几次？",
    ],
)
def test_questions_without_a_statement_only_ask(text: str) -> None:
    assert asks_only(text)


@pytest.mark.parametrize(
    "text",
    [
        "收到。候补怎么处理？",
        "I went hiking last weekend. Have you been?",
        "Great news! Want to come?",
        "候补队列最多排10个人。",
        "Is it 3.5 or 4? It is 4.",
        "?",
        "？？",
        "",
        "约在6月17日晚上7点",
    ],
)
def test_statements_and_bare_marks_do_not(text: str) -> None:
    assert not asks_only(text)
