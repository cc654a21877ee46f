"""The clauses of a query that asks several things at once.

"健客通的接口调用上限后来提高到了几倍，只在什么时段有效？" or "What broke the build, and how
was it fixed?" ask two things, usually answered by two turns, often sessions apart. Searched as
one, the query's best matches are the turns that touch both halves a little, and the turn
answering one half well ranks below them. Each clause searched on its own finds the turn that
answers it: search fuses the clauses' rankings with the whole query's (`clause_weight`).
Pure functions over the query text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from .tokenize import query_terms

__all__ = ["MAX_CLAUSES", "MIN_CLAUSE_TERMS", "query_clauses"]

# A clause with fewer terms than this ("怎么样？", "and why?") says too little on its own.
MIN_CLAUSE_TERMS = 2
# A question asks two or three things; a longer run of clauses is a description (a task, a
# pasted paragraph), searched whole: each clause would cost a query embedding.
MAX_CLAUSES = 3
# Where a clause ends: Chinese and full-width commas, semicolons and sentence ends, and the
# ASCII ones when a space or the end follows ("3,000", "v1.2" and "e.g.x" stay whole).
_CLAUSE_END = re.compile(r"[，；？！。]|[,;?!](?=\s|$)|\.(?=\s+\S)")


def _pieces(query: str) -> Iterator[str]:
    """The query's non-blank pieces between clause ends, found one at a time."""
    at = 0
    for end in _CLAUSE_END.finditer(query):
        piece = query[at : end.start()].strip()
        at = end.end()
        if piece:
            yield piece
    piece = query[at:].strip()
    if piece:
        yield piece


def query_clauses(query: str, min_terms: int = MIN_CLAUSE_TERMS) -> list[str]:
    """The query's clauses, each with at least `min_terms` search terms, when there are two
    to MAX_CLAUSES of them; otherwise [] (the query asks one thing, or describes more). A
    clause too short to stand alone is joined to the one before it (or, first, to the next).

    Linear in the query's length: each piece is tokenized once (the terms of pieces joined
    by a space are the pieces' terms), and the scan stops at the clause past MAX_CLAUSES."""
    clauses: list[list[str]] = []  # each clause's pieces, joined by spaces at the end
    pending: list[str] = []  # short leading pieces, waiting for a clause to join
    pending_terms: set[str] = set()
    for piece in _pieces(query):
        if clauses:
            terms = query_terms(piece)
            if len(terms) >= min_terms:
                if len(clauses) == MAX_CLAUSES:
                    return []  # a description, not a question: no need to read on
                clauses.append([piece])
            else:
                clauses[-1].append(piece)
            continue
        pending.append(piece)
        pending_terms.update(query_terms(piece))
        if len(pending_terms) >= min_terms:
            clauses.append(pending)
            pending, pending_terms = [], set()
    return [" ".join(c) for c in clauses] if len(clauses) >= 2 else []
