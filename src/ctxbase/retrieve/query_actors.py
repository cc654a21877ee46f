"""Which of the actors a query names it is about.

A query that names one actor ("What does Melanie play?") is about that actor's events. One that
names several ("What did Nate give Joanna?", "What book did Melanie read from Caroline's
suggestion?") is still mostly about the one it names first, its subject: the others are whom
the events were addressed to or came from. Pure functions over the query text and the actor
names found among the candidates (their agent ids and roles, `named_actors`); the actor boost
favours the events of the actors `favoured_actors` picks.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence

from ..store.base import SearchItem
from .config import SearchConfig
from .role_names import role_names

__all__ = [
    "actor_free_query",
    "actor_names",
    "favoured_actors",
    "first_mention",
    "named_actors",
    "query_subject",
]


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


def _mentions(query: str, name: str) -> bool:
    if name.isascii():
        return re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", query) is not None
    return name in query


def _actors(items: Iterable[SearchItem]) -> set[str]:
    # ids shorter than 3 ("a", "u1") would match inside too many queries
    return {a for it in items for a in (it.agent_id, it.agent_role) if a and len(a) >= 3}


def actor_names(actor: str, other_names: bool = False) -> tuple[str, ...]:
    """What a query may call `actor`: its id, and with `other_names` what its role is called
    in the other language ("测试" for ``tester``; retrieve/role_names.py)."""
    return role_names(actor) if other_names else (actor,)


def named_actors(
    query: str, candidates: Iterable[SearchItem], other_names: bool = False
) -> list[str]:
    """The agent ids and roles of the candidates that the query names, sorted."""
    q = query.casefold()
    actors = _actors(candidates)
    return sorted(
        a for a in actors if any(_mentions(q, n.casefold()) for n in actor_names(a, other_names))
    )


def favoured_actors(query: str, items: Sequence[SearchItem], config: SearchConfig) -> set[str]:
    """The actors whose items the actor boost favours for `query`.

    Without `subject_actor`: the one actor the query names, if exactly one. With it, a query
    naming several favours the one it names first ("What did Nate give Joanna?"): in a
    conversation of two, naming both says nothing more. With `team_actors`, where three or
    more actors take part, a query naming several asks how their work relates ("测试报的问题，
    开发怎么修的？"): all of them are favoured.
    """
    other = config.role_names
    named = named_actors(query, items, other)
    if not config.subject_actor:
        return set(named) if len(named) == 1 else set()
    if len(named) >= 2 and config.team_actors and len(_actors(items)) >= 3:
        return set(named)
    subject = query_subject(query, named, lambda a: actor_names(a, other))
    return set() if subject is None else {subject}
