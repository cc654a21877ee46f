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


def query_clauses(query: str, min_terms: int = MIN_CLAUSE_TERMS) -> list[str]:
    """The query's clauses, each with at least `min_terms` search terms, when there are two
    to MAX_CLAUSES of them; otherwise [] (the query asks one thing, or describes more). A
    clause too short to stand alone is joined to the one before it (or, first, to the next)."""
    pieces = [p.strip() for p in _CLAUSE_END.split(query)]
    pieces = [p for p in pieces if p]
    clauses: list[str] = []
    pending = ""  # short leading pieces, waiting for a clause to join
    for piece in pieces:
        text = f"{pending} {piece}".strip() if pending else piece
        if len(query_terms(text)) >= min_terms:
            clauses.append(text)
            pending = ""
        elif clauses:
            clauses[-1] = f"{clauses[-1]} {piece}"
        else:
            pending = text
    return clauses if 2 <= len(clauses) <= MAX_CLAUSES else []
