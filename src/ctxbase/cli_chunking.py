"""The chunking options of the commands that write (capture, ingest, serve, mcp):
``--chunking PRESET``, ``--chunk-tokens N``, ``--chunk-overlap N``.

They set how long texts (documents, tool output) are cut into search units; the library's
setting is ``ContextBase(chunking=...)`` (see ctxbase.retrieve.chunking). Nothing here is
imported until a command runs or its parser is built.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .retrieve.chunking import ChunkingConfig

__all__ = ["CHUNKING_HELP", "add_chunking_flags", "chunking_option"]

# The presets of ctxbase.retrieve.chunking, as the help shows them (a test keeps them equal).
CHUNKING_HELP = "default (256 tokens, overlap 64), fine (128, 32) or coarse (512, 128)"
_NAMES = {
    "preset": "--chunking",
    "max_tokens": "--chunk-tokens",
    "overlap_tokens": "--chunk-overlap",
}


def add_chunking_flags(p: argparse.ArgumentParser) -> None:
    """Add --chunking / --chunk-tokens / --chunk-overlap to a command's parser."""
    group = p.add_argument_group(
        "chunking",
        "how long texts (documents, tool output) are cut into search units; applies to what "
        "is written from now on, stored units keep their cut",
    )
    group.add_argument("--chunking", metavar="PRESET", help=CHUNKING_HELP)
    group.add_argument(
        "--chunk-tokens",
        type=int,
        metavar="N",
        help="at most N tokens per chunk (16 or more; default: the preset's, 256)",
    )
    group.add_argument(
        "--chunk-overlap",
        type=int,
        metavar="N",
        help="consecutive chunks share up to N tokens (0 or more, below --chunk-tokens; "
        "default: the preset's, 64)",
    )


def chunking_option(args: argparse.Namespace) -> ChunkingConfig | None:
    """The chunking the options ask for, None when none is given; a bad value raises
    ValidationError naming the option."""
    preset = getattr(args, "chunking", None)
    size = getattr(args, "chunk_tokens", None)
    overlap = getattr(args, "chunk_overlap", None)
    if preset is None and size is None and overlap is None:
        return None
    from .retrieve.chunking import resolve_chunking

    return resolve_chunking(preset, max_tokens=size, overlap_tokens=overlap, names=_NAMES)
