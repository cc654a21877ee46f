"""Which of the actors a query names it is about.

A query that names one actor ("What does Melanie play?") is about that actor's events. One that
names several ("What did Nate give Joanna?", "What book did Melanie read from Caroline's
suggestion?") is still mostly about the one it names first, its subject: the others are whom
the events were addressed to or came from. Pure functions over the query text and the actor
names found among the candidates.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

__all__ = ["actor_free_query", "first_mention", "query_subject"]


def first_mention(query: str, name: str) -> int | None:
    """Where `name` first appears in `query` as a whole word (case-insensitive; Chinese and
    other scripts without spaces: as a substring), else None."""
    if not name:
        return None
    q, n = query.casefold(), name.casefold()
    if n.isascii():
        found = re.search(rf"(?<![\w]){re.escape(n)}(?![\w])", q)
        return None if found is None else found.start()
    at = q.find(n)
    return None if at < 0 else at


def query_subject(
    query: str,
    actors: Iterable[str],
    names_of: Callable[[str], Iterable[str]] | None = None,
) -> str | None:
    """The actor among `actors` that `query` names first; None when it names none.

    `names_of` gives every name an actor may be called by (its id when not given). A longer
    name that contains a shorter one ("Ann" in "Anna") is the one named at that place: the
    shorter one counts only where it appears on its own.
    """
    best: tuple[int, int, str] | None = None  # (position, -length, name)
    for actor in set(actors):
        found = [
            (at, -len(name))
            for name in (names_of(actor) if names_of else (actor,))
            if (at := first_mention(query, name)) is not None
        ]
        if not found:
            continue
        key = (*min(found), actor)
        if best is None or key < best:
            best = key
    return None if best is None else best[2]


def actor_free_query(query: str, names: Iterable[str]) -> str:
    """The query without the given actor names (and a possessive ending after one).

    "What has Alice painted?" -> "What has painted?": what is left is the topic of the
    events asked for. A small embedding model otherwise matches the name more than the topic
    (every event that addresses or mentions the actor), and the name is a common keyword.
    """
    out = query
    for name in sorted(set(names), key=len, reverse=True):
        if not name:
            continue
        if name.isascii():
            pattern = rf"(?<![\w]){re.escape(name)}(?:['\u2019]s?)?(?![\w])"
            out = re.sub(pattern, " ", out, flags=re.IGNORECASE)
        else:
            out = out.replace(name, " ")
    return " ".join(out.split()) if out != query else query
