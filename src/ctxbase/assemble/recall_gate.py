"""Which hits of one search inside assembly may enter the memory layer.

The relevance floor (retrieve/relevance.py) decides per search: a search with no hit about
the intent brings nothing, one with such a hit brings its other hits too (a floor per hit
lost evidence as fast as it kept noise out: docs/benchmark-log.md, "relevance floor").
`gate_search` applies it to a search's response; `is_the_intent` names the hit that can
never be memory: the intent's own message, captured before the assembly (the question is
already the prompt's latest input; as a recalled item it only took a top_k place from an
answer).

The intent's own stored copy (the latest input, or any hit whose text is the intent's)
is no evidence: it matches the intent by being it. Counted, "那时间呢" opened the gate with
its own copy (keyword rank 1, similarity 0.96) and another user's message at 0.86 rode in.
A turn the history holds still counts: passing it over too was not measured.
`hit_reason` says why each hit that enters is there: its own evidence, or the hit it
rides with.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from ..model import Event
from ..retrieve.relevance import Evidence, own_evidence, search_evidence
from ..retrieve.search import Candidate, SearchResponse

__all__ = ["SearchGate", "gate_search", "hit_reason", "is_the_intent", "says_the_intent"]


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


def says_the_intent(c: Candidate, intent: str, inputs: Collection[str] = ()) -> bool:
    """Whether a search hit is the intent's own copy, no evidence about it: its owner is
    one of `inputs` (the latest input's ids) or its text is the intent's (spaces and case
    aside)."""
    return c.item.owner_id in inputs or _plain(c.item.text) == _plain(intent)


def gate_search(
    resp: SearchResponse,
    query: str,
    embedder_name: str | None,
    policy_floor: float | None,
    strategy: str,
    inputs: Collection[str] = (),
) -> SearchGate:
    """Whether the search found a hit about `query` (relevance.first_evidence), passing
    over the intent's own copies (`says_the_intent`; `inputs`: the latest input's ids)."""
    echoes = [c for c in resp.results if says_the_intent(c, query, inputs)]
    evidence, floor = search_evidence(
        query,
        resp.results,
        resp.considered,
        embedder_name,
        policy_floor,
        not_evidence=lambda c: says_the_intent(c, query, inputs),
    )
    gate = SearchGate(evidence, floor)
    if evidence is None and resp.results:
        # a search whose only match was the intent's own copy says so
        passed = f"; {len(echoes)} passed over: the intent itself" if echoes else ""
        gate.notes.append(f"{strategy}: nothing about the intent (relevance floor {floor}{passed})")
    elif evidence is not None and "stands out" in evidence.reason:
        # the trace says why a floor-low hit counted
        gate.notes.append(f"{strategy}: on topic: {evidence.reason}")
    return gate


def hit_reason(c: Candidate, query: str, gate: SearchGate) -> str:
    """Why a hit of a search the gate let through is about `query`: its own evidence (a
    shared word, similarity at the floor), else the evidence of the search it rides with."""
    own = own_evidence(query, c.item.terms.split(), c.similarity, gate.floor, c.item.text)
    if own is not None or gate.evidence is None:
        return f"on topic: {own}" if own else "on topic"
    if gate.evidence.item_id == c.item.item_id:
        return f"on topic: {gate.evidence.reason}"
    return f"rides with {gate.evidence.item_id} ({gate.evidence.reason})"
