"""Loading, normalisation and scoring of LoCoMo-shaped data (synthetic, built here)."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from ctxbase.evaluation.locomo import (
    CATEGORY_NAMES,
    category_name,
    load_locomo,
    normalise_evidence,
    parse_locomo_datetime,
    percentile,
    recall_at_k,
)


def synthetic_sample() -> dict[str, Any]:
    return {
        "sample_id": "conv-test",
        "conversation": {
            "speaker_a": "Ash",
            "speaker_b": "Bay",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ash", "dia_id": "D1:1", "text": "I adopted a puppy."},
                {
                    "speaker": "Bay",
                    "dia_id": "D1:2",
                    "text": "Look at this.",
                    "img_url": ["http://example.invalid/a.jpg"],
                    "blip_caption": "a photo of a lake",
                },
            ],
            "session_2_date_time": "12:09 am on 13 September, 2023",
            "session_2": [
                {"speaker": "Ash", "dia_id": "D2:1", "text": "Back from the trip."},
                {"speaker": "Bay", "dia_id": "D2:5", "text": "Welcome back."},
            ],
            # A date without turns, as in the real data: not a session.
            "session_3_date_time": "9:00 am on 1 October, 2023",
        },
        "qa": [
            {"question": "q1", "answer": 2022, "evidence": ["D1:1"], "category": 2},
            {"question": "q2", "answer": "x", "evidence": ["D1:2; D2:1"], "category": 1},
            {"question": "q3", "answer": "y", "evidence": ["D:2:5", "D02:01"], "category": 4},
            {"question": "q4", "answer": "z", "evidence": ["D9:9", "D"], "category": 3},
            {
                "question": "q5",
                "answer": "No",
                "adversarial_answer": "Yes",
                "evidence": ["D1:1"],
                "category": 5,
            },
        ],
    }


def test_parse_locomo_datetime_reads_twelve_hour_clock() -> None:
    assert parse_locomo_datetime("1:56 pm on 8 May, 2023") == datetime(2023, 5, 8, 13, 56)
    assert parse_locomo_datetime("12:09 am on 13 September, 2023") == datetime(2023, 9, 13, 0, 9)
    assert parse_locomo_datetime("12:30 pm on 1 January, 2024") == datetime(2024, 1, 1, 12, 30)
    assert parse_locomo_datetime("yesterday") is None
    assert parse_locomo_datetime("1:56 pm on 31 February, 2023") is None


def test_normalise_evidence_repairs_and_drops() -> None:
    valid = {"D11:26", "D30:5", "D8:6", "D9:17"}
    kept, dropped = normalise_evidence(["D:11:26", "D30:05", "D8:6; D9:17", "D", "D1:1"], valid)
    assert kept == ("D11:26", "D30:5", "D8:6", "D9:17")
    assert dropped == 2
    kept, dropped = normalise_evidence(["D8:6 D8:6", "D8:06"], valid)
    assert kept == ("D8:6",)
    assert dropped == 0


def test_load_locomo_builds_conversation(tmp_path: Path) -> None:
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps([synthetic_sample()]), encoding="utf-8")
    [conv] = load_locomo(path)
    assert conv.conv_id == "conv-test"
    assert conv.speakers == ("Ash", "Bay")
    assert [session.index for session in conv.sessions] == [1, 2]
    assert conv.sessions[1].started_at == datetime(2023, 9, 13, 0, 9)
    assert [turn.dia_id for turn in conv.turns] == ["D1:1", "D1:2", "D2:1", "D2:5"]
    photo = conv.turns[1]
    assert photo.blip_caption == "a photo of a lake"
    assert conv.turns[0].blip_caption is None
    assert (photo.session_index, photo.turn_index) == (1, 2)
    assert conv.turns[3].timestamp == datetime(2023, 9, 13, 0, 9)
    evidence = [question.evidence for question in conv.questions]
    assert evidence == [("D1:1",), ("D1:2", "D2:1"), ("D2:5", "D2:1"), (), ("D1:1",)]
    assert conv.dropped_evidence == 2
    assert conv.questions[0].answer == "2022"
    assert conv.questions[4].answer == "Yes"
    assert conv.questions[4].category_name == "adversarial"


def test_load_locomo_rejects_non_list(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text("{}", encoding="utf-8")
    with pytest.raises(ValueError):
        load_locomo(path)


def test_category_names() -> None:
    assert [CATEGORY_NAMES[n] for n in (1, 2, 3, 4, 5)] == [
        "multi-hop",
        "temporal",
        "open-domain",
        "single-hop",
        "adversarial",
    ]
    assert category_name(42) == "category-42"


def test_recall_at_k_counts_distinct_evidence_in_top_k() -> None:
    retrieved = ["D1:1", "D2:2", "D3:3", "D4:4"]
    assert recall_at_k(retrieved, ["D2:2", "D4:4"], 2) == 0.5
    assert recall_at_k(retrieved, ["D2:2", "D4:4"], 4) == 1.0
    assert recall_at_k(retrieved, ["D2:2", "D2:2"], 2) == 1.0
    assert recall_at_k(retrieved, ["D9:9"], 25) == 0.0
    assert recall_at_k([], ["D1:1"], 5) == 0.0
    with pytest.raises(ValueError):
        recall_at_k(retrieved, [], 5)
    with pytest.raises(ValueError):
        recall_at_k(retrieved, ["D1:1"], 0)


def test_percentile_interpolates() -> None:
    assert percentile([], 0.5) == 0.0
    assert percentile([3.0, 1.0, 2.0], 0.5) == 2.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5
    assert percentile([float(n) for n in range(1, 101)], 0.95) == pytest.approx(95.05)
