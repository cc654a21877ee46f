"""Approximate nearest-neighbour indexes for large projects, one module per library over a
shared interface (base.AnnIndex). usearch is preferred when installed (compact scalars),
hnswlib is the fallback; without either, search stays exact at every size.

The environment variable CTXBASE_ANN chooses: ``auto`` (the default), ``hnswlib``,
``usearch`` or ``usearch:<scalar>`` with a scalar of f16, i8 or f32, each optionally followed
by graph settings ``:m=<connectivity>`` and ``:ea=<expansion_add>`` (``usearch:f16:m=12``,
``hnswlib:m=12:ea=100``, ``auto:m=12``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from importlib.util import find_spec

from pydantic import ValidationError as PydanticValidationError

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
# graph settings by their short name in CTXBASE_ANN
_GRAPH = {"m": "connectivity", "ea": "expansion_add"}


def settings_from_env(env: Mapping[str, str] | None = None) -> AnnSettings:
    """The ANN settings CTXBASE_ANN names (unset: auto, usearch at its default scalar)."""
    raw = ((os.environ if env is None else env).get(ENV_ANN) or "auto").strip().lower()
    library, *parts = raw.split(":")
    scalar = parts.pop(0) if parts and "=" not in parts[0] else ""
    if library not in ("auto", "usearch", "hnswlib") or (scalar and library != "usearch"):
        raise ValidationError(
            ENV_ANN,
            f"{raw!r}: use auto, hnswlib, usearch or usearch:<f16|i8|f32>, then :m=N or :ea=N",
        )
    if scalar and scalar not in _SCALARS:
        raise ValidationError(ENV_ANN, f"unknown scalar {scalar!r}: use f16, i8 or f32")
    fields: dict[str, object] = {"library": library, **({"scalar": scalar} if scalar else {})}
    for part in parts:
        name, eq, value = part.partition("=")
        if not eq or name not in _GRAPH:
            raise ValidationError(ENV_ANN, f"unknown setting {part!r}: use m=<int> or ea=<int>")
        if not value.isdigit():
            raise ValidationError(ENV_ANN, f"{name}={value!r}: not an integer ({_GRAPH[name]})")
        fields[_GRAPH[name]] = int(value)
    try:
        settings = AnnSettings.model_validate(fields)
    except PydanticValidationError as exc:  # a value out of range: name it as it was set
        error = exc.errors()[0]
        field = str(error["loc"][0])
        short = next((k for k, v in _GRAPH.items() if v == field), field)
        raise ValidationError(ENV_ANN, f"{short}={fields[field]}: {error['msg'].lower()}") from None
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
