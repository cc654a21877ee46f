"""Approximate nearest-neighbour indexes for large projects, one module per library over a
shared interface (base.AnnIndex). usearch is preferred when installed (compact scalars),
hnswlib is the fallback; without either, search stays exact at every size.

The environment variable CTXBASE_ANN chooses: ``auto`` (the default), ``hnswlib``,
``usearch`` or ``usearch:<scalar>`` with a scalar of f16, i8 or f32.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from importlib.util import find_spec

from ...errors import ValidationError
from .base import AnnIndex, AnnSettings, Matrix, Scalar

__all__ = [
    "ENV_ANN",
    "INSTALL_HINT",
    "AnnIndex",
    "AnnSettings",
    "Matrix",
    "Scalar",
    "ann_class",
    "settings_from_env",
]

ENV_ANN = "CTXBASE_ANN"
INSTALL_HINT = {"usearch": "pip install 'ctxbase[ann]'", "hnswlib": "pip install hnswlib"}
_SCALARS: tuple[Scalar, ...] = ("f16", "i8", "f32")


def settings_from_env(env: Mapping[str, str] | None = None) -> AnnSettings:
    """The ANN settings CTXBASE_ANN names (unset: auto, usearch at its default scalar)."""
    raw = ((os.environ if env is None else env).get(ENV_ANN) or "auto").strip().lower()
    library, _, scalar = raw.partition(":")
    if library not in ("auto", "usearch", "hnswlib") or (scalar and library != "usearch"):
        raise ValidationError(
            ENV_ANN, f"{raw!r}: use auto, hnswlib, usearch or usearch:<f16|i8|f32>"
        )
    if scalar and scalar not in _SCALARS:
        raise ValidationError(ENV_ANN, f"unknown scalar {scalar!r}: use f16, i8 or f32")
    settings = AnnSettings.model_validate(
        {"library": library, **({"scalar": scalar} if scalar else {})}
    )
    ann_class(settings)  # a library asked for by name must be installed
    return settings


def ann_class(settings: AnnSettings) -> type[AnnIndex] | None:
    """The implementation `settings` choose; None when auto finds no library installed."""
    if settings.library == "auto":
        names = [n for n in ("usearch", "hnswlib") if _installed(n)]
        if not names:
            return None
        library = names[0]
    else:
        library = settings.library
        if not _installed(library):
            raise ValidationError(ENV_ANN, f"{library} is not installed: {INSTALL_HINT[library]}")
    if library == "usearch":
        from .usearch_index import UsearchIndex

        return UsearchIndex
    from .hnsw import HnswlibIndex

    return HnswlibIndex


def _installed(name: str) -> bool:
    try:
        return find_spec(name) is not None
    except ImportError:  # a broken or blocked installation counts as none
        return False
