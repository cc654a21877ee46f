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
from ..retrieve.relevance import Evidence, search_evidence
from ..retrieve.search import SearchResponse

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
    evidence, floor = search_evidence(
        query, resp.results, resp.considered, embedder_name, policy_floor
    )
    gate = SearchGate(evidence, floor)
    if evidence is None and resp.results:
        gate.notes.append(f"{strategy}: nothing about the intent (relevance floor {floor})")
    elif evidence is not None and "stands out" in evidence.reason:
        # the trace says why a floor-low hit counted
        gate.notes.append(f"{strategy}: on topic: {evidence.reason}")
    return gate
