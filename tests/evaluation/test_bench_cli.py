"""`ctxbase bench locomo` and `ctxbase bench memory` end to end on small files of their own."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctxbase.cli import main


def _locomo_file(tmp_path: Path) -> Path:
    turns_1 = [
        ("Ash", "I adopted a puppy named Biscuit last week."),
        ("Bay", "That's lovely! What breed is Biscuit?"),
        ("Ash", "A golden retriever, very playful."),
        ("Bay", "I started pottery classes on Tuesdays."),
    ]
    turns_2 = [
        ("Ash", "We went hiking at the lake with Biscuit."),
        ("Bay", "Did the puppy like the water?"),
        ("Ash", "Yes, he swam the whole afternoon."),
        ("Bay", "My pottery teacher says my bowls are improving."),
    ]

    def session(n: int, turns: list[tuple[str, str]]) -> list[dict[str, Any]]:
        return [
            {"speaker": who, "dia_id": f"D{n}:{i}", "text": text}
            for i, (who, text) in enumerate(turns, start=1)
        ]

    sample = {
        "sample_id": "conv-x",
        "conversation": {
            "speaker_a": "Ash",
            "speaker_b": "Bay",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": session(1, turns_1),
            "session_2_date_time": "2:00 pm on 20 May, 2023",
            "session_2": session(2, turns_2),
        },
        "qa": [
            {
                "question": "What breed is Ash's puppy?",
                "answer": "golden retriever",
                "evidence": ["D1:3"],
                "category": 4,
            },
            {
                "question": "When does Bay go to pottery classes?",
                "answer": "Tuesdays",
                "evidence": ["D1:4"],
                "category": 2,
            },
            {
                "question": "Where did Ash go hiking and did the puppy swim?",
                "answer": "lake",
                "evidence": ["D2:1", "D2:3"],
                "category": 1,
            },
        ],
    }
    path = tmp_path / "mini-locomo.json"
    path.write_text(json.dumps([sample]), encoding="utf-8")
    return path


def test_bench_locomo_writes_the_documented_json(tmp_path: Path, capsys: Any) -> None:
    data = _locomo_file(tmp_path)
    out = tmp_path / "figures.json"
    code = main(
        [
            "--embedder",
            "hash",
            "--db",
            str(tmp_path / "b.db"),
            "bench",
            "locomo",
            "--data",
            str(data),
            "--k",
            "1,3",
            "--budget",
            "200",
            "--json",
            str(out),
        ]
    )
    assert code == 0
    figures = json.loads(out.read_text(encoding="utf-8"))
    assert set(figures["recall"]) == {"1", "3"}
    assert set(figures["baselines"]) == {"bm25", "dense"}
    assert {"p50", "p95"} <= set(figures["latency_ms"])
    assert "single-hop" in figures["by_category"]
    # The pottery question names its evidence's words: keyword search must find it at k=3.
    assert figures["baselines"]["bm25"]["recall"]["3"] > 0
    assert 0 < figures["budget"]["avg_tokens_injected"] <= 200
    table = capsys.readouterr().out
    assert "bm25" in table and "ctxbase" in table and "R@3" in table


def test_bench_memory_runs_the_shipped_chinese_set(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    out = tmp_path / "memory.json"
    code = main(
        [
            "--embedder",
            "hash",
            "bench",
            "memory",
            "--data",
            str(root / "bench" / "data" / "zh_memory.json"),
            "--json",
            str(out),
        ]
    )
    assert code == 0
    figures = json.loads(out.read_text(encoding="utf-8"))
    zh = next(iter(figures.values()))
    # Segmented Chinese keyword search must do far better than whitespace tokens (~0.06).
    assert zh["baselines"]["bm25"]["recall"]["10"] >= 0.4


@pytest.mark.parametrize("bad", ["0,5", "x"])
def test_bench_rejects_bad_k(tmp_path: Path, bad: str, capsys: Any) -> None:
    code = main(
        [
            "--embedder",
            "hash",
            "bench",
            "locomo",
            "--data",
            str(_locomo_file(tmp_path)),
            "--k",
            bad,
        ]
    )
    assert code == 2  # bad input, with one error line naming the option
    assert capsys.readouterr().err.startswith("error: k: ")
