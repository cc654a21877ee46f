"""Leave-one-conversation-out: the pure fold arithmetic, and `bench locomo --folds` end to end
on a small synthetic LoCoMo-format file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctxbase.cli import main
from ctxbase.evaluation.folds import leave_one_conversation_out
from ctxbase.evaluation.locomo import QuestionOutcome, load_locomo


def _outcome(conv: str, question: str, category: int, r10: float) -> QuestionOutcome:
    return QuestionOutcome(conv, question, category, ("D1:1",), (), {5: r10 / 2, 10: r10}, 1.0)


def _scores(table: dict[str, list[float]]) -> list[QuestionOutcome]:
    """conv -> recall@10 of its questions (first multi-hop, the rest single-hop)."""
    return [
        _outcome(conv, f"{conv}-q{n}", 1 if n == 0 else 4, r)
        for conv, rs in table.items()
        for n, r in enumerate(rs)
    ]


def test_one_candidate_gives_per_conversation_figures_mean_and_worst() -> None:
    report = leave_one_conversation_out(
        {"base": _scores({"a": [1.0, 1.0], "b": [0.0, 1.0], "c": [0.5, 0.5, 1.0]})}, (5, 10)
    )
    per = {f.held_out: f for f in report.folds}
    assert per["a"].recall[10] == 1.0 and per["b"].recall[10] == 0.5
    assert per["c"].recall[10] == pytest.approx(2 / 3)
    mean, mean_cats = report.mean()
    worst, worst_cats = report.worst()
    # each fold counts once, however many questions it has
    assert mean[10] == pytest.approx((1.0 + 0.5 + 2 / 3) / 3)
    assert worst[10] == 0.5
    assert worst_cats["multi-hop"][10] == 0.0
    assert mean_cats["multi-hop"][10] == pytest.approx(0.5)
    figures = report.to_json()
    assert [f["held_out"] for f in figures["per_fold"]] == ["a", "b", "c"]
    assert figures["worst"]["recall"]["10"] == 0.5
    assert figures["mean"]["by_category"]["single-hop"]["10"] == pytest.approx(
        (1.0 + 1.0 + 0.75) / 3, abs=1e-4
    )


def test_the_candidate_is_chosen_without_the_held_out_conversation() -> None:
    # "fit" is best on a and b but poor on c; "plain" is steady. Holding out c, fit wins on
    # the training folds; holding out a or b, the training folds include c and plain wins.
    fit = _scores({"a": [1.0], "b": [1.0], "c": [0.0]})
    plain = _scores({"a": [0.6], "b": [0.6], "c": [0.6]})
    report = leave_one_conversation_out({"plain": plain, "fit": fit}, (5, 10))
    chosen = {f.held_out: f.chosen for f in report.folds}
    assert chosen == {"a": "plain", "b": "plain", "c": "fit"}
    # the held-out c is scored with fit, which fails on it: the worst fold shows the overfit
    assert report.worst()[0][10] == 0.0
    assert report.folds[2].train_recall == 1.0


def test_folds_refuse_mismatched_candidates_and_one_conversation() -> None:
    with pytest.raises(ValueError, match="other questions"):
        leave_one_conversation_out(
            {"x": _scores({"a": [1.0], "b": [1.0]}), "y": _scores({"a": [1.0]})}, (10,)
        )
    with pytest.raises(ValueError, match="two conversations"):
        leave_one_conversation_out({"x": _scores({"a": [1.0]})}, (10,))
    with pytest.raises(ValueError, match="select_k"):
        leave_one_conversation_out({"x": _scores({"a": [1.0], "b": [1.0]})}, (5,), select_k=10)


def _sample(conv_id: str, pet: str, hobby: str) -> dict[str, Any]:
    turns = [
        ("Ash", f"I adopted a {pet} last week."),
        ("Bay", f"Lovely! I started {hobby} classes on Tuesdays."),
        ("Ash", f"The {pet} sleeps all day."),
        ("Bay", f"My {hobby} teacher is strict."),
    ]
    return {
        "sample_id": conv_id,
        "conversation": {
            "speaker_a": "Ash",
            "speaker_b": "Bay",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": who, "dia_id": f"D1:{i}", "text": text}
                for i, (who, text) in enumerate(turns, start=1)
            ],
        },
        "qa": [
            {
                "question": f"What did Ash adopt, a {pet}?",
                "answer": pet,
                "evidence": ["D1:1"],
                "category": 4,
            },
            {
                "question": f"Which {hobby} classes and teacher?",
                "answer": hobby,
                "evidence": ["D1:2", "D1:4"],
                "category": 1,
            },
        ],
    }


@pytest.fixture
def three_conversations(tmp_path: Path) -> Path:
    path = tmp_path / "three.json"
    samples = [
        _sample("conv-a", "puppy", "pottery"),
        _sample("conv-b", "kitten", "salsa"),
        _sample("conv-c", "parrot", "chess"),
    ]
    path.write_text(json.dumps(samples), encoding="utf-8")
    return path


def test_bench_locomo_folds_writes_per_fold_mean_and_worst(
    tmp_path: Path, three_conversations: Path, capsys: Any
) -> None:
    out = tmp_path / "folds.json"
    args = ["--embedder", "hash", "--db", str(tmp_path / "f.db"), "bench", "locomo"]
    args += ["--data", str(three_conversations), "--k", "1,10", "--folds", "--budget", "300"]
    args += ["--grid", "rrf_k=5,20", "--retrain-rerank", "--json", str(out)]
    args += ["--train-with", str(Path(__file__).resolve().parents[2] / "bench/data/en_memory.json")]
    assert main(args) == 0
    folds = json.loads(out.read_text(encoding="utf-8"))["folds"]
    assert [f["held_out"] for f in folds["per_fold"]] == ["conv-a", "conv-b", "conv-c"]
    assert folds["candidates"] == ["base", "rrf_k=5"]  # rrf_k=20 is the preset itself
    assert all(f["chosen"] in folds["candidates"] for f in folds["per_fold"])
    r1 = [f["recall"]["1"] for f in folds["per_fold"]]
    assert folds["worst"]["recall"]["1"] == min(r1)
    assert folds["mean"]["recall"]["1"] == pytest.approx(sum(r1) / 3, abs=1e-4)
    assert all(f["questions"] == 2 for f in folds["per_fold"])
    assert 0.0 <= folds["worst"]["budget_evidence_recall"] <= 1.0
    assert {"p50", "p95"} <= set(folds["per_fold"][0]["budget"]["section_ms"])
    assert "multi-hop" in folds["worst"]["by_category"]
    # the learned re-ordering ranking each conversation was trained without it
    assert {f["reordered_by"] for f in folds["per_fold"]} == {
        "trained on the other conversations and 2 never scored"
    }
    printed = capsys.readouterr()
    assert "leave-one-conversation-out" in printed.out
    assert "re-ordering model without conv-a" in printed.out + printed.err


def test_bench_locomo_folds_keep_the_shipped_model_where_it_never_saw_the_conversation(
    tmp_path: Path, three_conversations: Path, capsys: Any
) -> None:
    out = tmp_path / "folds.json"
    args = ["--embedder", "hash", "--db", str(tmp_path / "f.db"), "bench", "locomo"]
    args += ["--data", str(three_conversations), "--k", "1,10", "--folds", "--json", str(out)]
    assert main(args) == 0
    folds = json.loads(out.read_text(encoding="utf-8"))["folds"]
    assert [f["reordered_by"] for f in folds["per_fold"]] == 3 * ["shipped model (never saw it)"]
    assert "re-ordering model without" not in "".join(capsys.readouterr())


def test_the_shipped_model_knows_the_conversations_it_was_trained_on() -> None:
    from dataclasses import replace

    from ctxbase.evaluation.memoryset import load_memory_set
    from ctxbase.evaluation.rerank_folds import conversation_fingerprint
    from ctxbase.retrieve.rerank import shipped_model_conversations

    seen = shipped_model_conversations()
    root = Path(__file__).resolve().parents[2] / "bench" / "data"
    for name in ("en_memory.json", "zh_memory.json", "zh_multisession_a.json"):
        for conv in load_memory_set(root / name).conversations:
            assert conversation_fingerprint(conv) in seen
    # one turn said otherwise is another conversation; the same turns under another id not
    conv = load_memory_set(root / "en_memory.json").conversations[0]
    first = replace(conv.turns[0], text=conv.turns[0].text + " (edited)")
    assert conversation_fingerprint(replace(conv, turns=(first, *conv.turns[1:]))) not in seen
    assert conversation_fingerprint(replace(conv, conv_id="renamed")) in seen


def test_bench_locomo_folds_train_with_memory_sets_never_scored(
    tmp_path: Path, three_conversations: Path, capsys: Any
) -> None:
    en = Path(__file__).resolve().parents[2] / "bench" / "data" / "en_memory.json"
    out = tmp_path / "folds.json"
    args = ["--embedder", "hash", "--db", str(tmp_path / "f.db"), "bench", "locomo"]
    args += ["--data", str(three_conversations), "--k", "1,10", "--folds", "--retrain-rerank"]
    args += ["--train-with", str(en), "--json", str(out)]
    assert main(args) == 0
    figures = json.loads(out.read_text(encoding="utf-8"))
    folds = figures["folds"]
    # scored: the three conversations only; the memory set's questions trained every fold
    assert [f["held_out"] for f in folds["per_fold"]] == ["conv-a", "conv-b", "conv-c"]
    # the ingest figures are the benchmark's own; storing the training set is apart
    turns = sum(len(conv.turns) for conv in load_locomo(str(three_conversations)))
    assert figures["ingest"]["events"] == turns
    assert folds["train_with_ingest"]["events"] > 0
    printed = "".join(capsys.readouterr())
    assert "re-ordering signals of en-coding collected" in printed
    assert "re-ordering model without conv-a" in printed
    assert "re-ordering model without en-coding" not in printed  # trains, never held out
    assert "fold models also learn from 2 conversations never scored" in printed


def test_fold_models_learn_from_the_shipped_models_sets_by_default() -> None:
    from ctxbase.evaluation.bench_cli import _shipped_sets
    from ctxbase.retrieve.rerank import shipped_model_sets

    named = shipped_model_sets()
    assert "bench/data/zh_multisession_a.json" in named
    (joined,) = _shipped_sets()  # the source tree has them all, as one --train-with value
    assert len(joined.split(",")) == len(named)
    assert all(Path(path).is_file() for path in joined.split(","))


def test_retrain_rerank_needs_folds(three_conversations: Path, capsys: Any) -> None:
    args = ["--embedder", "hash", "bench", "locomo", "--data", str(three_conversations)]
    assert main([*args, "--retrain-rerank"]) == 2
    assert capsys.readouterr().err.startswith("error: retrain_rerank:")
    assert main([*args, "--train-with", str(three_conversations)]) == 2
    assert capsys.readouterr().err.startswith("error: train_with: --train-with trains per fold")
    missing = str(three_conversations) + ".gone"
    assert main([*args, "--folds", "--train-with", missing]) == 3
    err = capsys.readouterr().err
    assert err.startswith("error: file") and missing in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--grid", "rrf_k=5"], "needs --folds"),
        (["--folds", "--grid", "no_such=1"], "not a search setting"),
        (["--folds", "--grid", "rrf_k=0"], "rrf_k"),
        (["--folds", "--grid", "rrf_k"], "field=v1"),
    ],
)
def test_bench_locomo_bad_grid_exits_2(
    three_conversations: Path, capsys: Any, extra: list[str], needle: str
) -> None:
    args = ["--embedder", "hash", "bench", "locomo", "--data", str(three_conversations)]
    assert main([*args, *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: grid:") and needle in err


def test_bench_locomo_folds_on_one_conversation_exits_2(
    three_conversations: Path, capsys: Any
) -> None:
    args = ["--embedder", "hash", "bench", "locomo", "--data", str(three_conversations)]
    assert main([*args, "--folds", "--limit", "1"]) == 2
    assert capsys.readouterr().err.startswith("error: folds: leaving one conversation out")


def test_bench_locomo_folds_learn_a_query_adapter_per_fold(
    tmp_path: Path, three_conversations: Path, capsys: Any
) -> None:
    en = Path(__file__).resolve().parents[2] / "bench" / "data" / "en_memory.json"
    out = tmp_path / "folds.json"
    args = ["--embedder", "hash", "--db", str(tmp_path / "f.db"), "bench", "locomo"]
    args += ["--data", str(three_conversations), "--k", "1,10", "--folds", "--retrain-rerank"]
    args += ["--train-with", str(en), "--grid", "query_adapter=true", "--json", str(out)]
    assert main(args) == 0
    folds = json.loads(out.read_text(encoding="utf-8"))["folds"]
    assert folds["candidates"] == ["base", "query_adapter=true"]
    printed = "".join(capsys.readouterr())
    # each scored conversation is searched with a map that never saw it, and so is each
    # conversation the re-ordering learns from (as a new conversation would be searched)
    for conv in ("conv-a", "conv-b", "conv-c", "en-coding", "en-support"):
        assert f"query adapter without {conv}: learned from 4 conversations" in printed
    adapted = [f for f in folds["per_fold"] if f["chosen"] == "query_adapter=true"]
    assert all(f["reordered_by"].endswith("; query adapter learned without it") for f in adapted)
