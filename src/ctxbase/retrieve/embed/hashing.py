"""A deterministic, model-free embedder: hashed word and character n-gram features.

It is a stand-in for unit tests and a last-resort fallback: texts sharing words or
characters get similar vectors, which is lexical overlap, not meaning.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import defaultdict
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from .base import FloatMatrix, FloatVector, first_row, l2_normalise_rows

__all__ = ["HashingEmbedder", "text_features"]

# Scripts written without spaces: one "word" per character, so bigrams carry the meaning.
_CJK_RANGES = (
    "\u3040-\u30ff"  # Hiragana, Katakana
    "\u3400-\u4dbf"  # CJK extension A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\uac00-\ud7af"  # Hangul syllables
    "\uf900-\ufaff"  # CJK compatibility ideographs
)
_TOKEN_RE = re.compile(rf"[{_CJK_RANGES}]+|[^\W{_CJK_RANGES}]+")
_CJK_RE = re.compile(rf"[{_CJK_RANGES}]")

# Whole words and CJK bigrams are the strongest evidence; subword pieces only help
# inflected forms and single characters meet.
_WORD_WEIGHT = 1.0
_CHAR_TRIGRAM_WEIGHT = 0.4
_CJK_BIGRAM_WEIGHT = 1.0
_CJK_CHAR_WEIGHT = 0.4


def text_features(text: str) -> dict[str, float]:
    """Weighted lexical features of `text` (exposed so tests can see what is compared)."""
    normalised = unicodedata.normalize("NFKC", text).lower()
    features: defaultdict[str, float] = defaultdict(float)
    for token in _TOKEN_RE.findall(normalised):
        if _CJK_RE.match(token):
            for char in token:
                features["c:" + char] += _CJK_CHAR_WEIGHT
            for start in range(len(token) - 1):
                features["b:" + token[start : start + 2]] += _CJK_BIGRAM_WEIGHT
            continue
        features["w:" + token] += _WORD_WEIGHT
        padded = f"<{token}>"
        for start in range(len(padded) - 2):
            features["t:" + padded[start : start + 3]] += _CHAR_TRIGRAM_WEIGHT
    return dict(features)


@lru_cache(maxsize=1 << 16)
def _bucket_and_sign(feature: str, dim: int) -> tuple[int, float]:
    # blake2b, not hash(): Python's string hash is salted per process.
    digest = int.from_bytes(hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest())
    sign = 1.0 if digest >> 63 else -1.0  # signed hashing keeps collisions from adding up
    return digest % dim, sign


class HashingEmbedder:
    """Feature-hashing embedder; symmetric (queries and documents are encoded alike)."""

    def __init__(self, dim: int = 256) -> None:
        if dim < 8:
            raise ValueError(f"HashingEmbedder dim must be at least 8, got {dim}")
        self._dim = dim

    @property
    def name(self) -> str:
        return f"hash/ngram-{self._dim}"

    @property
    def dim(self) -> int:
        return self._dim

    def _vector(self, text: str) -> FloatVector:
        vector = np.zeros(self._dim, dtype=np.float32)
        for feature, weight in text_features(text).items():
            bucket, sign = _bucket_and_sign(feature, self._dim)
            # sqrt damps repeated terms so one word said five times does not dominate.
            vector[bucket] += sign * float(np.sqrt(weight))
        return vector

    def embed_documents(self, texts: Sequence[str]) -> FloatMatrix:
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        return l2_normalise_rows(np.stack([self._vector(text) for text in texts]))

    def embed_query(self, text: str) -> FloatVector:
        return first_row(self.embed_documents([text]))

    def embed_queries(self, texts: Sequence[str]) -> FloatMatrix:
        return self.embed_documents(texts)

    def __repr__(self) -> str:
        return f"HashingEmbedder(dim={self._dim})"
