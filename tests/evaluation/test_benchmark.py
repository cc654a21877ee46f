"""The harness end to end with the in-memory BM25 retriever, on a hand-checked conversation."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxbase.evaluation.baselines import (
    BM25Retriever,
    cjk_bigram_tokenize,
    simple_tokenize,
)
from ctxbase.evaluation.locomo import (
    Conversation,
    Question,
    Retriever,
    Session,
    Turn,
    load_locomo,
    render_category_table,
    render_table,
    run_benchmark,
)

LOCOMO_PATH = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "locomo-dev.json"


def turn(dia_id: str, speaker: str, text: str) -> Turn:
    session, position = dia_id[1:].split(":")
    return Turn(dia_id, speaker, text, int(session), int(position))


def tiny_conversation() -> Conversation:
    turns = (
        turn("D1:1", "Ash", "I adopted a puppy and called him Biscuit"),
        turn("D1:2", "Bay", "We went hiking on Pine Ridge"),
        turn("D1:3", "Ash", "My sister plays violin"),
        turn("D2:1", "Ash", "Biscuit chewed her violin case"),
        turn("D2:2", "Bay", "It was rainy all weekend"),
    )
    questions = (
        # Only D1:1 mentions a puppy: recall 1 at every k.
        Question("Which puppy did Ash adopt?", "Biscuit", 4, ("D1:1",)),
        # D2:2 shares no word with the question, so at most half the evidence is found.
        Question("violin Biscuit", "", 1, ("D2:1", "D2:2")),
        # Only D1:2 has hiking, Pine or Ridge.
        Question("Hiking trip to Pine Ridge?", "", 2, ("D1:2",)),
        Question("Was it rainy?", "", 4, ("D2:2",)),
        # No valid evidence: excluded and counted.
        Question("Anything?", "", 3, ()),
        # Adversarial: not scored by default.
        Question("Did Bay adopt a puppy?", "", 5, ("D1:1",)),
    )
    return Conversation(
        conv_id="tiny",
        speakers=("Ash", "Bay"),
        sessions=(Session(1, "", None), Session(2, "", None)),
        turns=turns,
        questions=questions,
    )


def test_bm25_satisfies_protocol() -> None:
    assert isinstance(BM25Retriever(), Retriever)


def test_bm25_prefers_rare_terms_and_short_documents() -> None:
    conv = Conversation(
        conv_id="c",
        speakers=(),
        sessions=(),
        turns=(
            turn("D1:1", "", "cat dog bird fish"),
            turn("D1:2", "", "cat"),
            turn("D1:3", "", "dog"),
            turn("D1:4", "", "bird"),
        ),
        questions=(),
    )
    retriever = BM25Retriever(document=lambda item: item.text)
    retriever.index(conv)
    # Same term frequency: the shorter document wins through length normalisation.
    assert retriever.search("c", "cat", 10) == ["D1:2", "D1:1"]
    # Matching two terms beats matching one.
    assert retriever.search("c", "cat dog", 10)[0] == "D1:1"
    assert retriever.search("c", "zebra", 10) == []
    assert len(retriever.search("c", "cat dog bird", 2)) == 2


def test_run_benchmark_on_tiny_conversation() -> None:
    messages: list[str] = []
    report = run_benchmark(
        [tiny_conversation()], [BM25Retriever()], ks=(1, 2), progress=messages.append
    )
    result = report.result("bm25")
    assert result.questions == 4
    assert result.without_evidence == 1
    # (1 + 0.5 + 1 + 1) / 4 at both depths.
    assert result.recall == {1: pytest.approx(0.875), 2: pytest.approx(0.875)}
    assert result.by_category == {
        "multi-hop": {1: 0.5, 2: 0.5},
        "temporal": {1: 1.0, 2: 1.0},
        "single-hop": {1: 1.0, 2: 1.0},
    }
    assert result.questions_by_category == {"multi-hop": 1, "temporal": 1, "single-hop": 2}
    assert result.outcomes[1].retrieved[0] == "D2:1"
    assert result.latency_p95_ms >= result.latency_p50_ms >= 0.0
    assert set(result.ingest_s_by_conversation) == {"tiny"}
    assert len(messages) == 1 and "tiny" in messages[0]


def test_run_benchmark_scores_all_categories_when_asked() -> None:
    report = run_benchmark([tiny_conversation()], [BM25Retriever()], ks=(1,), categories=None)
    result = report.result("bm25")
    assert result.questions == 5
    assert result.questions_by_category["adversarial"] == 1


def test_run_benchmark_rejects_bad_arguments() -> None:
    conv = tiny_conversation()
    with pytest.raises(ValueError):
        run_benchmark([conv], [BM25Retriever(), BM25Retriever()])
    with pytest.raises(ValueError):
        run_benchmark([conv], [BM25Retriever()], ks=(0, 5))


def test_report_json_shape_puts_best_on_top() -> None:
    retrievers = [BM25Retriever(), BM25Retriever(cjk_bigram_tokenize, name="bigram")]
    report = run_benchmark([tiny_conversation()], retrievers)
    payload = report.to_json(best="bigram")
    assert set(payload) == {
        "recall",
        "by_category",
        "baselines",
        "latency_ms",
        "ingest_s",
        "questions",
        "questions_by_category",
    }
    assert sum(payload["questions_by_category"].values()) == payload["questions"]
    assert set(payload["recall"]) == {"5", "10", "25"}
    assert set(payload["by_category"]) == {"multi-hop", "temporal", "single-hop"}
    assert set(payload["baselines"]) == {"bm25"}
    baseline = payload["baselines"]["bm25"]
    assert set(baseline) == {"recall", "by_category", "latency_ms", "ingest_s"}
    assert set(baseline["latency_ms"]) == {"p50", "p95"}
    assert payload["questions"] == 4
    with pytest.raises(KeyError):
        report.to_json(best="missing")


def test_render_category_table_shows_every_k_per_category() -> None:
    retrievers = [BM25Retriever(), BM25Retriever(cjk_bigram_tokenize, name="bigram")]
    report = run_benchmark([tiny_conversation()], retrievers, ks=(1, 3))
    lines = render_category_table(report).splitlines()
    assert "bm25 R@1/3" in lines[0] and "bigram R@1/3" in lines[0]
    rows = {line.split("  ")[0].strip(): line for line in lines[2:]}
    assert set(rows) == {"multi-hop (1)", "temporal (1)", "single-hop (2)", "all"}
    bigram = report.result("bigram")
    single = bigram.by_category["single-hop"]
    expected = f"{single[1]:.3f} / {single[3]:.3f}"
    assert rows["single-hop (2)"].rstrip().endswith(expected)


def test_render_table_has_a_column_per_retriever() -> None:
    retrievers = [BM25Retriever(), BM25Retriever(cjk_bigram_tokenize, name="bigram")]
    table = render_table(run_benchmark([tiny_conversation()], retrievers))
    lines = table.splitlines()
    assert lines[0].split() == ["bm25", "bigram"]
    labels = [line.split("  ")[0].strip() for line in lines[2:]]
    assert labels[:3] == ["R@5", "R@10", "R@25"]
    assert "single-hop R@10" in labels and "p95 ms" in labels and "ingest s" in labels


def test_tokenizers() -> None:
    assert simple_tokenize("Redis缓存 TTL=10min, OK_go") == [
        "redis缓存",
        "ttl",
        "10min",
        "ok",
        "go",
    ]
    assert cjk_bigram_tokenize("把预算控制在5万以内") == [
        "把预",
        "预算",
        "算控",
        "控制",
        "制在",
        "5",
        "万以",
        "以内",
    ]
    assert cjk_bigram_tokenize("用Redis做缓存") == ["用", "redis", "做缓", "缓存"]


@pytest.mark.skipif(not LOCOMO_PATH.exists(), reason="LoCoMo data not available")
def test_bm25_on_locomo_dev_is_in_the_expected_range() -> None:
    conversations = load_locomo(LOCOMO_PATH)
    assert len(conversations) == 5
    for conv in conversations:
        ids = conv.turn_ids()
        assert all(set(question.evidence) <= ids for question in conv.questions)
    result = run_benchmark(conversations, [BM25Retriever()]).result("bm25")
    assert result.questions > 700
    assert 0.45 < result.recall[10] < 0.65
    assert result.recall[5] <= result.recall[10] <= result.recall[25]


def test_engine_reindexes_a_conversation_on_the_same_database(tmp_path: Path) -> None:
    """A rerun on the same --db forgets the conversation's project and writes it again: every
    turn is stored, repeated lines included (tombstones once swallowed the whole rerun)."""
    from dataclasses import replace

    from ctxbase.evaluation.store_retriever import SharedEngine

    base = tiny_conversation()
    repeat = turn("D2:3", "Bay", "It was rainy all weekend")  # D2:2 again, same session
    conv = replace(base, turns=(*base.turns, repeat))
    db = str(tmp_path / "bench.db")
    for run in (1, 2):
        engine = SharedEngine(db=db, embedder=None)
        engine.ensure_indexed(conv)
        stored = engine.cb.store.list_events(engine.project_of("tiny"))
        assert len(stored) == len(conv.turns), f"run {run}"
        assert sorted(engine.dia_ids("tiny").values()) == sorted(t.dia_id for t in conv.turns)
        engine.cb.close()


def test_engine_embeds_topics_and_clauses_up_front(tmp_path: Path) -> None:
    """Query latency measures the search: the actor-free topic (named by a role name too) and
    the clauses a search will embed are in the query cache before the first question."""
    from dataclasses import replace

    from ctxbase.evaluation.store_retriever import SharedEngine

    base = tiny_conversation()
    question = Question("测试报的违约金是多少，押金退了几个月？", "", 1, ("D1:1",))
    conv = replace(
        base,
        speakers=("tester", "Bay"),
        turns=tuple(replace(t, speaker="tester") if t.speaker == "Ash" else t for t in base.turns),
        questions=(question,),
    )
    engine = SharedEngine(db=str(tmp_path / "bench.db"), embedder="hash")
    try:
        engine.ensure_indexed(conv)
        cached = set(engine.cb.searcher._query_vectors)
    finally:
        engine.close()
    assert question.question in cached
    assert "报的违约金是多少，押金退了几个月？" in cached
    assert {"报的违约金是多少", "押金退了几个月"} <= cached
