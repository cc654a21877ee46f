from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import date
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any, ClassVar

import pytest

from ctxbase.assemble.facts import (
    ExtractedFact,
    FactExtractionError,
    FactExtractor,
    LLMFactExtractor,
    RuleFactExtractor,
    extract_facts,
    parse_llm_facts,
)

TODAY = date(2024, 6, 12)  # a Wednesday

POSITIVE: list[tuple[str, str, dict[str, Any]]] = [
    # budgets
    ("把预算控制在5万以内", "budget", {"op": "<=", "amount": 50000, "currency": "CNY"}),
    ("budget under $2k", "budget", {"op": "<=", "amount": 2000, "currency": "USD"}),
    ("预算3到5万", "budget", {"op": "between", "min": 30000, "max": 50000, "currency": "CNY"}),
    ("预算大概两千块", "budget", {"op": "~", "amount": 2000, "currency": "CNY"}),
    ("预算至少10万元", "budget", {"op": ">=", "amount": 100000, "currency": "CNY"}),
    ("Our budget is 1.5m USD", "budget", {"op": "=", "amount": 1500000, "currency": "USD"}),
    ("The budget is around €500", "budget", {"op": "~", "amount": 500, "currency": "EUR"}),
    ("不要超过5万的预算", "budget", {"op": "<=", "amount": 50000, "currency": "CNY"}),
    ("花费不超过3000元", "budget", {"op": "<=", "amount": 3000, "currency": "CNY"}),
    (
        "budget from 3k to 5k",
        "budget",
        {"op": "between", "min": 3000, "max": 5000, "currency": None},
    ),
    # deadlines
    ("下周五之前完成", "deadline", {"op": "<=", "expression": "下周五", "date": "2024-06-21"}),
    ("by Friday please", "deadline", {"op": "<=", "expression": "Friday", "date": "2024-06-14"}),
    ("3天内上线", "deadline", {"op": "<=", "expression": "3天内", "date": "2024-06-15"}),
    (
        "2024-07-01截止",
        "deadline",
        {"op": "<=", "expression": "2024-07-01", "date": "2024-07-01"},
    ),
    ("明天之前交给我", "deadline", {"op": "<=", "expression": "明天", "date": "2024-06-13"}),
    (
        "finish within 2 weeks",
        "deadline",
        {"op": "<=", "expression": "within 2 weeks", "date": "2024-06-26"},
    ),
    ("月底上线", "deadline", {"op": "<=", "expression": "月底", "date": "2024-06-30"}),
    (
        "it is due next Monday",
        "deadline",
        {"op": "<=", "expression": "next Monday", "date": "2024-06-17"},
    ),
    ("截止7月3日", "deadline", {"op": "<=", "expression": "7月3日", "date": "2024-07-03"}),
    # names
    ("我叫张三", "user_name", {"name": "张三"}),
    ("叫我小王就行", "user_name", {"name": "小王"}),
    ("my name is John Smith", "user_name", {"name": "John Smith"}),
    ("Hi, call me Bob.", "user_name", {"name": "Bob"}),
    # technology choices
    ("数据库用PostgreSQL", "tech.database", {"choice": "PostgreSQL"}),
    ("let's use Redis for the cache", "tech.cache", {"choice": "Redis"}),
    ("后端采用 fastapi", "tech.framework", {"choice": "FastAPI"}),
    # preferences
    ("我喜欢蓝色", "preference:蓝色", {"polarity": "like", "item": "蓝色"}),
    ("不要用红色", "preference:红色", {"polarity": "dislike", "item": "红色"}),
    ("I prefer dark mode", "preference:dark mode", {"polarity": "like", "item": "dark mode"}),
    ("don't use MongoDB", "preference:mongodb", {"polarity": "dislike", "item": "MongoDB"}),
    ("我不喜欢用MySQL", "preference:mysql", {"polarity": "dislike", "item": "MySQL"}),
    # locations
    ("我在上海工作", "location", {"place": "上海"}),
    ("我们公司位于杭州市", "location", {"place": "杭州市"}),
    ("I live in Berlin", "location", {"place": "Berlin"}),
]

NEGATIVE = [
    "明天天气怎么样",
    "我有3个苹果",
    "The meeting has 5 people",
    "版本号是3.5",
    "what's the budget?",
    "预算还没定",
    "I like it",
    "我在写代码",
    "我叫了外卖",
    "I'm in a meeting",
    "use the stairs",
    "我们用心做产品",
    "I live in Python",
    "see you tomorrow",
    "好的，谢谢",
]


@pytest.mark.parametrize(("text", "key", "value"), POSITIVE)
def test_rule_extraction(text: str, key: str, value: dict[str, Any]) -> None:
    facts = extract_facts(text, today=TODAY)
    by_key = {f.key: f for f in facts}
    assert key in by_key, facts
    fact = by_key[key]
    assert fact.value == value
    assert 0 < fact.confidence <= 1
    start, end = fact.span
    assert 0 <= start < end <= len(text)
    assert fact.rule


def test_at_least_thirty_cases() -> None:
    assert len(POSITIVE) + len(NEGATIVE) >= 30


@pytest.mark.parametrize("text", NEGATIVE)
def test_no_fact_where_there_is_none(text: str) -> None:
    assert extract_facts(text, today=TODAY) == []


def test_span_points_at_evidence() -> None:
    text = "好的。把预算控制在5万以内，谢谢"
    (fact,) = extract_facts(text)
    assert text[fact.span[0] : fact.span[1]] == "预算控制在5万以内"


def test_span_covers_keyword_after_amount() -> None:
    text = "不要超过5万的预算"
    (fact,) = extract_facts(text)
    assert text[fact.span[0] : fact.span[1]] == "5万的预算"


def test_without_reference_date_the_expression_is_kept() -> None:
    (fact,) = extract_facts("下周五之前完成")
    assert fact.value == {"op": "<=", "expression": "下周五", "date": None}


def test_several_facts_in_one_message() -> None:
    text = "we need it done by end of the month, budget at most 1.5m USD, use Kafka"
    keys = [f.key for f in extract_facts(text, today=TODAY)]
    assert keys == ["deadline", "budget", "tech.queue"]


def test_latest_statement_of_a_key_wins() -> None:
    facts = extract_facts("用MySQL……算了，还是用PostgreSQL吧")
    assert [(f.key, f.value) for f in facts] == [("tech.database", {"choice": "PostgreSQL"})]


def test_followup_about_time_is_not_a_budget() -> None:
    first = extract_facts("把预算控制在5万以内")
    (followup,) = extract_facts("那时间呢？", previous=first)
    assert followup.key == "followup"
    assert followup.value == {
        "topic": "deadline",
        "question": True,
        "known": False,
        "previous_topic": "budget",
    }
    (english,) = extract_facts("and what about the timeline?", previous=first)
    assert english.value["topic"] == "deadline"
    (budget_q,) = extract_facts("那预算呢", previous=first)
    assert budget_q.value["topic"] == "budget" and budget_q.value["known"] is True


def test_rule_extractor_satisfies_protocol() -> None:
    extractor: FactExtractor = RuleFactExtractor()
    assert extractor.extract("我叫李四")[0].value == {"name": "李四"}


# ---------------------------------------------------------------- LLM extractor


def _completion(content: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}],
    }


GOOD = json.dumps(
    {
        "facts": [
            {
                "key": "budget",
                "value": {"op": "<=", "amount": 50000, "currency": "CNY"},
                "confidence": 0.92,
                "evidence": "预算控制在5万以内",
            },
            {"key": "deadline", "value": "next friday", "confidence": 0.4},
            {"key": "bad key!", "value": {}, "confidence": 0.9},
            {"key": "user_name", "value": {"name": "张三"}, "confidence": 7},
        ]
    },
    ensure_ascii=False,
)


class _Handler(BaseHTTPRequestHandler):
    requests: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _Handler.requests.append(
            {"path": self.path, "auth": self.headers.get("Authorization"), "body": body}
        )
        model = body["model"]
        status, payload = 200, b""
        if model == "good":
            payload = json.dumps(_completion(GOOD)).encode()
        elif model == "fenced":
            payload = json.dumps(_completion(f"```json\n{GOOD}\n```")).encode()
        elif model == "malformed":
            payload = json.dumps(_completion('{"facts": [{"key": "budget",')).encode()
        elif model == "no_list":
            payload = json.dumps(_completion('{"result": "none"}')).encode()
        elif model == "not_completion":
            payload = b'{"error": "oops"}'
        else:
            status, payload = 500, b"internal error"
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    server = HTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/v1"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


TEXT = "好的，把预算控制在5万以内"


def test_llm_extractor_parses_and_validates(server_url: str) -> None:
    extractor = LLMFactExtractor(server_url + "/", "good", api_key="secret-token")
    facts = extractor.extract(TEXT, today=TODAY)
    assert [f.key for f in facts] == ["budget", "deadline"]  # invalid items skipped
    budget, deadline = facts
    assert budget.value == {"op": "<=", "amount": 50000, "currency": "CNY"}
    assert budget.confidence == 0.92
    assert TEXT[budget.span[0] : budget.span[1]] == "预算控制在5万以内"
    assert budget.rule == "llm:good"
    assert deadline.value == {"value": "next friday"}
    assert deadline.span == (0, len(TEXT))
    request = _Handler.requests[-1]
    assert request["path"] == "/v1/chat/completions"
    assert request["auth"] == "Bearer secret-token"
    assert request["body"]["response_format"] == {"type": "json_object"}
    assert TEXT in request["body"]["messages"][-1]["content"]
    assert "2024-06-12" in request["body"]["messages"][-1]["content"]


def test_llm_extractor_min_confidence_and_fences(server_url: str) -> None:
    extractor = LLMFactExtractor(server_url, "fenced", min_confidence=0.5, json_mode=False)
    facts = extractor.extract(TEXT, previous=extract_facts("我叫张三"))
    assert [f.key for f in facts] == ["budget"]
    body = _Handler.requests[-1]["body"]
    assert "response_format" not in body
    assert "张三" in body["messages"][-1]["content"]  # known facts are given as context
    assert _Handler.requests[-1]["auth"] is None


@pytest.mark.parametrize(
    ("model", "message"),
    [
        ("malformed", "not JSON"),
        ("no_list", "no 'facts' list"),
        ("not_completion", "did not answer a chat completion"),
        ("broken", "HTTP 500"),
    ],
)
def test_llm_extractor_errors(server_url: str, model: str, message: str) -> None:
    with pytest.raises(FactExtractionError, match=message):
        LLMFactExtractor(server_url, model).extract(TEXT)


def test_llm_extractor_unreachable() -> None:
    extractor = LLMFactExtractor("http://127.0.0.1:9/v1", "x", timeout_s=2)
    with pytest.raises(FactExtractionError, match="failed"):
        extractor.extract("hi")


def test_parse_llm_facts_bare_list() -> None:
    facts = parse_llm_facts('[{"key": "location", "value": {"place": "上海"}}]', "我在上海")
    assert facts == [ExtractedFact("location", {"place": "上海"}, 0.7, (0, 4), "llm")]


def test_a_lone_chinese_numeral_is_no_amount() -> None:
    # "改一下" ("change it a little"): the 一 read as an amount of 1 replaced 50,000 before
    budgets = [f for f in extract_facts("改一下，预算控制在7万以内") if f.key == "budget"]
    assert [f.value for f in budgets] == [{"op": "<=", "amount": 70000, "currency": "CNY"}]
    assert [f for f in extract_facts("改一下预算吧") if f.key == "budget"] == []
    # numerals with a unit or a currency are amounts still
    three = [f.value for f in extract_facts("预算三千块") if f.key == "budget"]
    assert three == [{"op": "=", "amount": 3000, "currency": "CNY"}]
