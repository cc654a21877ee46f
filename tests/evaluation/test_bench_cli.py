"""`ctxbase bench locomo` and `ctxbase bench memory` end to end on small files of their own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
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


def _memory_file(tmp_path: Path, name: str, conv_id: str, texts: list[str]) -> Path:
    events = [
        {
            "id": f"{conv_id}-{i}",
            "session": 1 + i // 2,
            "speaker": "user",
            "text": text,
            "date": f"2025-03-{1 + i // 2:02d} 09:{i:02d}",
        }
        for i, text in enumerate(texts)
    ]
    queries = [
        {
            "id": f"{conv_id}-q1",
            "query": texts[0],
            "evidence": [events[0]["id"]],
            "category": "single-hop",
        },
        {
            "id": f"{conv_id}-q2",
            "query": texts[1] + texts[3],
            "evidence": [events[1]["id"], events[3]["id"]],
            "category": "multi-hop",
        },
        {
            "id": f"{conv_id}-q3",
            "query": texts[2],
            "evidence": [events[2]["id"]],
            "category": "temporal",
        },
    ]
    data = {
        "name": name,
        "language": "zh",
        "description": "",
        "conversations": [{"id": conv_id, "title": "", "events": events, "queries": queries}],
    }
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return path


def test_bench_memory_reports_recall_at_1_3_5_10_per_category(tmp_path: Path, capsys: Any) -> None:
    part_a = _memory_file(
        tmp_path,
        "part_a",
        "a1",
        ["周主任约在6月10日", "搬家公司报价1650元", "宽带6月23日装", "押金7600元"],
    )
    part_b = _memory_file(
        tmp_path, "part_b", "b1", ["面粉每袋158元", "黄油涨到71元", "烤箱1月8日坏了", "房租16000元"]
    )
    out = tmp_path / "memory.json"
    args = ["--embedder", "hash", "--db", str(tmp_path / "m.db"), "bench", "memory"]
    code = main(
        [*args, "--data", str(part_a), "--data", str(part_b), "--merge", "--json", str(out)]
    )
    assert code == 0
    figures = json.loads(out.read_text(encoding="utf-8"))
    assert list(figures) == ["part_a+part_b"]  # --merge: both files scored as one set
    merged = figures["part_a+part_b"]
    assert merged["conversations"] == 2 and merged["events"] == 8 and merged["questions"] == 6
    assert merged["ks"] == [1, 3, 5, 10]  # the default k values of `bench memory`
    assert merged["questions_by_category"] == {"multi-hop": 2, "temporal": 2, "single-hop": 2}
    for retriever in (merged, merged["baselines"]["bm25"], merged["baselines"]["dense"]):
        assert set(retriever["recall"]) == {"1", "3", "5", "10"}
        for recall in retriever["by_category"].values():
            assert set(recall) == {"1", "3", "5", "10"}
    # Each query repeats its evidence's words: keyword search ranks it first.
    assert merged["baselines"]["bm25"]["by_category"]["single-hop"]["1"] == 1.0
    printed = capsys.readouterr().out
    assert "bm25 R@1/3/5/10" in printed and "ctxbase R@1/3/5/10" in printed
    assert "multi-hop (2)" in printed

    code = main([*args, "--data", str(part_a), "--data", str(part_b), "--json", str(out)])
    assert code == 0
    assert list(json.loads(out.read_text(encoding="utf-8"))) == ["part_a", "part_b"]


def test_bench_memory_puts_sets_side_by_side(tmp_path: Path, capsys: Any) -> None:
    part_a = _memory_file(tmp_path, "zh_a", "a1", ["周主任约6月10日", "押金7600元", "宽带", "面粉"])
    part_b = _memory_file(tmp_path, "zh_b", "b1", ["黄油涨到71元", "烤箱坏了", "房租", "合同"])
    english = _memory_file(tmp_path, "en", "e1", ["the oven broke", "rent is due", "tea", "cake"])
    out = tmp_path / "memory.json"
    args = ["--embedder", "hash", "--db", str(tmp_path / "m.db"), "bench", "memory"]
    both = f"{part_a},{part_b}"  # the parts of one set: scored together
    assert main([*args, "--data", both, "--data", str(english), "--json", str(out)]) == 0
    figures = json.loads(out.read_text(encoding="utf-8"))
    assert list(figures) == ["zh_a+zh_b", "en"]
    assert figures["zh_a+zh_b"]["questions"] == 6 and figures["en"]["questions"] == 3
    printed = capsys.readouterr().out
    table = printed[printed.index("== side by side") :].splitlines()
    assert "ctxbase R@1/3/5/10" in table[1]
    zh_row = next(line for line in table if line.startswith("zh_a+zh_b (zh, 6 q)"))
    recalls = figures["zh_a+zh_b"]["recall"]
    assert zh_row.endswith(" / ".join(f"{recalls[k]:.3f}" for k in ("1", "3", "5", "10")))
    assert any(line.startswith("en (zh, 3 q)") for line in table)  # the file's language


def test_bench_memory_rejects_malformed_or_clashing_files(tmp_path: Path, capsys: Any) -> None:
    part = _memory_file(tmp_path, "part", "c1", ["一", "二", "三", "四"])
    broken = tmp_path / "broken.json"
    data = json.loads(part.read_text(encoding="utf-8"))
    data["conversations"][0]["queries"][0]["evidence"] = ["nowhere"]
    broken.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    args = ["--embedder", "hash", "--db", str(tmp_path / "m.db"), "bench", "memory"]
    assert main([*args, "--data", str(broken)]) == 2
    assert "nowhere" in capsys.readouterr().err
    assert main([*args, "--data", str(part), "--data", str(part), "--merge"]) == 2
    assert "distinct conversation ids" in capsys.readouterr().err


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


def _bench_process(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    src = str(Path(__file__).resolve().parents[2] / "src")
    env = {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}
    argv = ["--embedder", "hash", "--db", str(tmp_path / "p.db"), *extra]
    data = str(_locomo_file(tmp_path))
    return subprocess.run(
        [sys.executable, "-m", "ctxbase", *argv, "bench", "locomo", "--data", data, "--k", "1,3"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_bench_shows_one_line_per_phase_in_a_pipe_and_none_when_quiet(tmp_path: Path) -> None:
    done = _bench_process(tmp_path)
    assert done.returncode == 0, done.stderr
    assert "\r" not in done.stderr  # stderr is a pipe: plain lines, no bar redraws
    lines = done.stderr.strip().splitlines()
    for phase in ("bm25", "dense", "ctxbase"):
        assert sum(line.startswith(f"{phase}: 1/1 conversations, done in ") for line in lines) == 1
    assert any(line.startswith("indexed conv-x: 8 turns") for line in lines)
    assert "R@3" in done.stdout

    quiet = _bench_process(tmp_path, "--quiet")
    assert quiet.returncode == 0 and quiet.stderr == "" and "R@3" in quiet.stdout


def test_bench_memory_folds_scores_each_conversation_with_a_model_that_never_saw_it(
    tmp_path: Path, capsys: Any
) -> None:
    """The bundled English set was part of the shipped model's training: with --folds each
    of its conversations is also scored re-ordered by a model trained on everything else
    the shipped model saw (the other bundled sets here), beside the shipped model's
    fitted figures."""
    english = Path(__file__).parents[2] / "bench" / "data" / "en_memory.json"
    out = tmp_path / "memory.json"
    args = ["--embedder", "hash", "--db", str(tmp_path / "m.db"), "-q", "bench", "memory"]
    assert main([*args, "--data", str(english), "--folds", "--json", str(out)]) == 0
    figures = json.loads(out.read_text(encoding="utf-8"))["en_memory"]
    held = figures["baselines"]["held-out"]
    assert set(held["recall"]) == {"1", "3", "5", "10"}
    assert figures["questions"] == 30 and set(held["by_category"]) == set(figures["by_category"])
    printed = capsys.readouterr().out
    conversations = figures["conversations"]
    line = next(x for x in printed.splitlines() if x.startswith("held out, re-ordered by: "))
    assert line.startswith(f"held out, re-ordered by: {conversations}x trained on the other ")
    assert "held-out R@1/3/5/10" in printed

    locomo = _locomo_file(tmp_path)
    assert main([*args, "--data", str(english), "--train-with-locomo", str(locomo)]) == 2
    assert "--train-with-locomo trains per fold: it needs --folds" in capsys.readouterr().err
    missing = str(tmp_path / "nope.json")
    assert main([*args, "--data", str(english), "--folds", "--train-with-locomo", missing]) == 3
