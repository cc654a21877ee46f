"""The project's own memory sets: format, loading and what they are meant to show."""

from __future__ import annotations

import copy
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from ctxbase.evaluation.baselines import BM25Retriever, cjk_bigram_tokenize
from ctxbase.evaluation.locomo import run_benchmark
from ctxbase.evaluation.memoryset import (
    MEMORY_SET_CATEGORIES,
    load_memory_set,
    parse_memory_set,
)

DATA = Path(__file__).resolve().parents[2] / "bench" / "data"


def minimal_set() -> dict[str, Any]:
    return {
        "name": "mini",
        "language": "zh",
        "conversations": [
            {
                "id": "c1",
                "events": [
                    {
                        "id": "e2",
                        "session": 1,
                        "agent_role": "planner",
                        "text": "最晚5月10日上线",
                        "date": "2024-03-04 09:32",
                    },
                    {
                        "id": "e1",
                        "session": 1,
                        "speaker": "user",
                        "text": "把预算控制在5万以内",
                        "date": "2024-03-04 09:30",
                    },
                    {
                        "id": "e3",
                        "session": 2,
                        "speaker": "user",
                        "text": "好的",
                        "date": "2024-03-05 10:00",
                    },
                ],
                "queries": [{"query": "那时间呢", "evidence": ["e2"], "category": "follow-up"}],
            }
        ],
    }


def test_parse_memory_set_orders_events_and_maps_categories() -> None:
    memory = parse_memory_set(minimal_set())
    [conv] = memory.conversations
    assert [turn.dia_id for turn in conv.turns] == ["e1", "e2", "e3"]
    assert [turn.speaker for turn in conv.turns] == ["user", "planner", "user"]
    assert [(t.session_index, t.turn_index) for t in conv.turns] == [(1, 1), (1, 2), (2, 1)]
    assert [session.date_time for session in conv.sessions] == [
        "2024-03-04 09:30",
        "2024-03-05 10:00",
    ]
    assert conv.speakers == ("user", "planner")
    [question] = conv.questions
    assert question.category_name == "follow-up"
    assert question.evidence == ("e2",)


@pytest.mark.parametrize(
    ("field", "value"),
    [("evidence", ["nope"]), ("evidence", []), ("category", "open-domain")],
)
def test_parse_memory_set_rejects_bad_queries(field: str, value: object) -> None:
    data = copy.deepcopy(minimal_set())
    data["conversations"][0]["queries"][0][field] = value
    with pytest.raises(ValueError):
        parse_memory_set(data)


def test_parse_memory_set_rejects_duplicate_ids() -> None:
    data = copy.deepcopy(minimal_set())
    data["conversations"][0]["events"][2]["id"] = "e1"
    with pytest.raises(ValueError):
        parse_memory_set(data)


@pytest.mark.parametrize(
    ("file_name", "events", "queries"),
    [("zh_memory.json", (280, 320), (38, 50)), ("en_memory.json", (140, 170), (28, 36))],
)
def test_bundled_sets_load_with_every_category(
    file_name: str, events: tuple[int, int], queries: tuple[int, int]
) -> None:
    memory = load_memory_set(DATA / file_name)
    assert events[0] <= memory.event_count <= events[1]
    assert queries[0] <= memory.question_count <= queries[1]
    categories = Counter(q.category for conv in memory.conversations for q in conv.questions)
    assert set(categories) == set(MEMORY_SET_CATEGORIES)
    all_ids = [turn.dia_id for conv in memory.conversations for turn in conv.turns]
    assert len(all_ids) == len(set(all_ids))
    multi_event = [
        q for conv in memory.conversations for q in conv.questions if len(q.evidence) > 1
    ]
    assert len(multi_event) >= 5


def test_zh_set_holds_the_budget_then_deadline_follow_up() -> None:
    memory = load_memory_set(DATA / "zh_memory.json")
    for conv in memory.conversations:
        texts = {turn.dia_id: turn.text for turn in conv.turns}
        budget = [dia_id for dia_id, text in texts.items() if "把预算控制在5万以内" in text]
        for question in conv.questions:
            if question.question.startswith("那时间呢") and budget:
                assert question.category_name == "follow-up"
                [deadline] = question.evidence
                ids = list(texts)
                assert ids.index(deadline) > ids.index(budget[0])
                assert "上线" in texts[deadline]
                return
    pytest.fail("the budget/deadline follow-up query is missing")


def test_naive_tokenizer_fails_on_chinese_where_bigrams_do_not() -> None:
    memory = load_memory_set(DATA / "zh_memory.json")
    retrievers = [BM25Retriever(), BM25Retriever(cjk_bigram_tokenize, name="bigram")]
    report = run_benchmark(memory.conversations, retrievers, categories=None)
    naive = report.result("bm25").recall[10]
    bigram = report.result("bigram").recall[10]
    assert naive < 0.2
    assert bigram > naive + 0.25
