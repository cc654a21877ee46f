"""The per-process caches keyed by text that was indexed or searched, cleared together
after a hard forget (they only save time: a miss recomputes the same value)."""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["clear_text_caches"]

# module -> its caches; a module this process never loaded has nothing cached (and is not
# loaded here: the hashing embedder brings numpy)
_CACHES = {
    "ctxbase.retrieve.tokenize": ("_stem", "_cached_word_terms", "_run_terms"),
    "ctxbase.retrieve.indexing": ("_analysed",),
    "ctxbase.retrieve.embed.hashing": ("_bucket_and_sign",),
}


def clear_text_caches() -> int:
    """Empty the term, stem, segmentation, text-analysis and hashed-feature caches; returns
    the entries dropped."""
    dropped = 0
    for module_name, names in _CACHES.items():
        module = sys.modules.get(module_name)
        for name in names if module is not None else ():
            cache: Any = getattr(module, name)
            dropped += int(cache.cache_info().currsize)
            cache.cache_clear()
    return dropped
