"""Which hits of one search inside assembly may enter the memory layer.

The relevance floor (retrieve/relevance.py) decides per search: a search with no hit about
the intent brings nothing, one with such a hit brings its other hits too (a floor per hit
lost evidence as fast as it kept noise out: docs/benchmark-log.md, "relevance floor").
`gate_search` applies it to a search's response; `is_the_intent` names the hit that can
never be memory: the intent's own message, captured before the assembly (the question is
already the prompt's latest input; as a recalled item it only took a top_k place from an
answer).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..model import Event
from ..retrieve.relevance import (
    CALIBRATED_STANDOUT,
    Evidence,
    first_evidence,
    relevance_floor,
)
from ..retrieve.search import SearchResponse
from ..retrieve.tokenize import index_terms

__all__ = ["SearchGate", "gate_search", "is_the_intent"]


@dataclass
class SearchGate:
    """The gate's verdict on one search: its evidence (None: nothing about the intent)."""

    evidence: Evidence | None
    floor: float | None
    notes: list[str] = field(default_factory=list)


def _plain(text: str) -> str:
    return " ".join(text.split()).casefold()


def is_the_intent(node: object, intent: str) -> bool:
    """Whether `node` is the user's message that says exactly the intent (the question
    captured before it is assembled for): it adds nothing the latest input does not."""
    return (
        isinstance(node, Event)
        and node.type == "user_message"
        and bool(node.text)
        and _plain(node.text or "") == _plain(intent)
    )


def gate_search(
    resp: SearchResponse,
    query: str,
    embedder_name: str | None,
    policy_floor: float | None,
    strategy: str,
) -> SearchGate:
    """Whether the search found a hit about `query` (relevance.first_evidence)."""
    floor = relevance_floor(embedder_name, policy_floor)
    # a keyword hit is evidence when its own text shares a word with the intent: with
    # the characters of Chinese words indexed as terms, "薛定谔方程" matched "定为" by 定
    words = set(index_terms(query))
    hits = [
        (
            c.item.item_id,
            c.keyword_rank if words.intersection(c.item.terms.split()) else None,
            c.similarity,
        )
        for c in resp.results
    ]
    # a policy's own floor is the policy's decision: the calibrated standout goes with
    # the calibrated floor only
    standout = (
        None
        if policy_floor is not None or embedder_name is None
        else CALIBRATED_STANDOUT.get(embedder_name)
    )
    sims = [
        (c.item.item_id, c.similarity, c.item.text)
        for c in resp.considered
        if c.similarity is not None
    ]
    evidence = first_evidence(hits, floor, query=query, similarities=sims, standout=standout)
    gate = SearchGate(evidence, floor)
    if evidence is None and resp.results:
        gate.notes.append(f"{strategy}: nothing about the intent (relevance floor {floor})")
    elif evidence is not None and "stands out" in evidence.reason:
        # the trace says why a floor-low hit counted
        gate.notes.append(f"{strategy}: on topic: {evidence.reason}")
    return gate
