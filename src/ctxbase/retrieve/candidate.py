"""A search candidate: one search unit with how it was found and scored.

`Searcher.search` (retrieve/search.py) builds them from the fused rankings, graph expansion
(retrieve/expansion.py) adds the neighbours, and the later stages mark, rescore and drop
them; assembly reads the scores to explain its choices.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..store.base import SearchItem

__all__ = ["Candidate"]


@dataclass
class Candidate:
    """One search unit with how it was found and scored."""

    item: SearchItem
    score: float = 0.0
    keyword_rank: int | None = None
    keyword_score: float | None = None
    semantic_rank: int | None = None
    similarity: float | None = None
    graph_via: str | None = None  # "<RELATION> from <node id>"
    graph_confidence: float | None = None
    dropped: str | None = None  # why it was not returned ("duplicate of ..", "top_k")
    # confidence and its source ("feedback:wrong", "tool_error") when not neutral
    confidence: float | None = None
    confidence_source: str | None = None
    # rated false with a note: the note ("it is 20 s, not 30 s"), the correction that
    # stands for it (assemble/corrections.py)
    correction: str | None = None
    # with time decay: the factor applied, and what spared the item ("used 4 times",
    # "linked by REFERS_TO") when something did
    decay: float | None = None
    decay_spared: str | None = None
    # a retracted message (or a statement cut from one, or an answer repeating one): left
    # out unless min_confidence is 0, which keeps memories rated wrong too (retracted.py)
    retracted: bool = False
    # a per-turn tool result of an earlier turn (or a statement cut from one): left out and
    # kept as a retracted message is, marked for what it is; or an entity whose expiry
    # time has passed (expiry.py): always left out
    expired: bool = False
    # with a recency cue and a kind named ("the SQL from last time"): its place among the
    # candidates of that kind, newest first (retrieve/recency.py)
    recency: str | None = None
    # moved by the learned re-ordering of the top (rerank.py): "learned order: 4 -> 2"
    reordered: str | None = None
    # the events or entities (owner ids, as `id`) whose near-identical text this hit stands
    # for: folded into it, each `dropped` as "near-duplicate of <this>" in `considered`;
    # forgetting this hit leaves them, so a caller forgets them too; feedback on it is
    # given on those saying the same text (memory_feedback.py)
    duplicates: list[str] = field(default_factory=list)

    @property
    def item_id(self) -> str:
        return self.item.item_id

    @property
    def id(self) -> str:
        """The event or entity found (what `get_event`, `feedback` and `forget` take), as
        the tools' hits name it: for a chunk, the one it was cut from (`item_id` names the
        unit itself). Read-only, as `text`."""
        return self.item.owner_id

    @property
    def text(self) -> str:
        """The text found: the unit's (`item.text`), a chunk's own part for a chunk."""
        return self.item.text

    def explain(self) -> dict[str, object]:
        return {
            "id": self.item.item_id,
            "owner_id": self.item.owner_id,
            "score": round(self.score, 6),
            "keyword_rank": self.keyword_rank,
            "similarity": None if self.similarity is None else round(self.similarity, 4),
            "graph_via": self.graph_via,
            "dropped": self.dropped,
            **self._signals(),
        }

    def _signals(self) -> dict[str, object]:
        """Confidence and decay, shown only where they apply (why it ranked where it did)."""
        out: dict[str, object] = {}
        if self.confidence is not None:
            out["confidence"] = round(self.confidence, 4)
            out["confidence_source"] = self.confidence_source
        if self.correction is not None:
            out["correction"] = self.correction
        if self.decay is not None:
            out["decay"] = round(self.decay, 4)
        if self.decay_spared is not None:
            out["decay_spared"] = self.decay_spared
        if self.retracted:
            out["retracted"] = True
        if self.expired:
            out["expired"] = True
        if self.recency is not None:
            out["recency"] = self.recency
        if self.reordered is not None:
            out["reordered"] = self.reordered
        if self.duplicates:
            out["duplicates"] = list(self.duplicates)
        return out
