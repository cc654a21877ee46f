"""The per-process caches keyed by text that was indexed or searched, cleared together
after a hard forget (they only save time: a miss recomputes the same value)."""

from __future__ import annotations

from typing import Any

from . import indexing, tokenize
from .embed import hashing

__all__ = ["clear_text_caches"]


def clear_text_caches() -> int:
    """Empty the term, stem, segmentation, text-analysis and hashed-feature caches; returns
    the entries dropped."""
    caches: tuple[Any, ...] = (
        tokenize._stem,
        tokenize._cached_word_terms,
        tokenize._run_terms,
        indexing._analysed,
        hashing._bucket_and_sign,
    )
    dropped = 0
    for cache in caches:
        dropped += int(cache.cache_info().currsize)
        cache.cache_clear()
    return dropped
