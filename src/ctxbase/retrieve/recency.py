""" "The SQL from last time": a query that points back in time at a kind of thing it names.

"上次那个SQL为什么慢来着？", "why was the query from last time slow?", "the function I just
wrote": the query says *when* (a recency cue: 上次, 刚才, last time, previous, the latest)
and *what* (a kind: SQL, code, a test, a file). Such a query means the most recent thing of
that kind, which neither keywords nor meaning can tell from an older one that looks the
same: two orders queries match "SQL" and "slow" alike.

`order_by_recency` re-orders the candidates of the named kinds among themselves, newest
first: the places they hold (their scores) are kept, and handed out again by when each was
produced, so the newest takes the best of those places and the older ones stay, below it.
Nothing else moves, and a query without a cue or a kind is not touched. Only candidates
near enough the best of the kind take part (at least `RECENCY_WINDOW` of its score): an old
SQL about something else entirely does not rise above the one that matches.

When a thing was produced: an event's time; for an entity anchored from a message (its
`event_id` property), that message's time, since entities are written when anchoring runs,
not when they were said; else the entity's last update.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..model import Entity
from ..sql_cues import SQL_STATEMENT
from ..store.base import SearchItem, Store

if TYPE_CHECKING:
    from .search import Candidate

__all__ = [
    "KINDS",
    "RECENCY_WINDOW",
    "Kind",
    "anchored_times",
    "named_kinds",
    "of_kinds",
    "order_by_recency",
    "produced_at",
    "recency_cue",
    "recent_kinds",
]

# Candidates of a named kind scoring at least this share of the best of them are ordered by
# recency; those below keep their place. About a third: rank fusion gives a hit one method
# found about half the score of one both found, and a statement anchored from a message
# (its SQL) is often found by meaning alone, its message by both.
RECENCY_WINDOW = 0.3

# Words that say "the most recent one" ("上个月" says a month, but with a kind named it is
# still the recent one). 之前 alone also means "before <an event>": only 之前的 / 之前那.
_CUES = re.compile(
    r"上次|上回|上一次|上一个|上一版|上个|上份|刚才|刚刚|刚写|刚生成|刚改|刚加|刚做|刚跑|"
    r"最近一次|最新|最后一次|前一个|之前的|之前那|"
    r"\blast\s+(?:time|one|version|run)\b|\b(?:the|my|your|our|that|this)\s+last\b|"
    r"\bprevious(?:ly)?\b|\blatest\b|\bmost\s+recent(?:ly)?\b|\bjust\s+now\b|\bearlier\b|"
    r"\bjust\s+(?:wrote|written|made|added|changed|generated|ran|run)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Kind:
    """A kind of thing a query can name: the words that name it, the entity types that
    are one, and how an event's text carries one."""

    name: str
    words: re.Pattern[str]
    entity_types: frozenset[str]
    content: re.Pattern[str]


def _named(latin: str, cjk: str) -> re.Pattern[str]:
    """Latin words whole (not "sql" in "mysql_dump"; "那个SQL" is one: no \\b between
    Chinese and Latin letters), Chinese words anywhere."""
    return re.compile(rf"(?<![A-Za-z])(?:{latin})(?![A-Za-z])|{cjk}", re.IGNORECASE)


_CODE = re.compile(
    r"```|\bdef\s+\w+\s*\(|\bfunction\s+\w+\s*\(|\bclass\s+\w+\s*[:({]|=>\s*\{", re.IGNORECASE
)
_TEST = re.compile(r"\btest_\w+|\bdef\s+test|\b(?:it|describe|test)\(\s*['\"]")
_PATH = re.compile(
    r"(?:[\w.-]+/)+[\w.-]+\.\w{1,5}\b|\b[\w-]+\.(?:py|js|ts|tsx|jsx|go|java|rs|rb|php|sql|"
    r"ya?ml|json|toml|ini|cfg|md|sh|c|h|cc|cpp|hpp|cs|kt|swift|vue|html|css)\b"
)

KINDS: tuple[Kind, ...] = (
    Kind("sql", _named(r"sql|quer(?:y|ies)", "查询|语句"), frozenset({"sql"}), SQL_STATEMENT),
    Kind(
        "code",
        _named(
            r"code|functions?|methods?|class(?:es)?|scripts?|snippets?|apis?|endpoints?|"
            r"handlers?",
            "代码|函数|方法|脚本|接口",
        ),
        frozenset({"code", "function", "class", "method", "script"}),
        _CODE,
    ),
    Kind(
        "test",
        _named(r"tests?|test\s*cases?", "测试|用例"),
        frozenset({"test_case", "test"}),
        _TEST,
    ),
    Kind("file", _named(r"files?", "文件"), frozenset({"file"}), _PATH),
)


def recency_cue(query: str) -> str | None:
    """The words by which `query` points back in time ("上次", "last time"), or None."""
    m = _CUES.search(query)
    return m.group(0) if m else None


def named_kinds(query: str) -> tuple[Kind, ...]:
    """The kinds of thing `query` names (SQL, code, a test, a file), in KINDS order."""
    return tuple(k for k in KINDS if k.words.search(query))


def recent_kinds(query: str) -> tuple[Kind, ...]:
    """The kinds `query` asks the most recent one of: those it names, when it has a
    recency cue too; else none."""
    if recency_cue(query) is None:
        return ()
    return named_kinds(query)


def of_kinds(item: SearchItem, kinds: Collection[Kind]) -> bool:
    """Whether the unit is one of `kinds`: an entity of their types, an event whose text
    carries one (a SQL statement, a code block, a path)."""
    if item.kind == "event":
        return any(k.content.search(item.text) for k in kinds)
    return any(item.type in k.entity_types for k in kinds)


def anchored_times(store: Store, project_id: str, entities: Iterable[Entity]) -> dict[str, float]:
    """The time of the message each entity was anchored from (its `event_id`), for those
    anchored from one that is still stored."""
    source: dict[str, str] = {}
    for e in entities:
        event_id = e.properties.get("event_id")
        if isinstance(event_id, str) and event_id:
            source[e.id] = event_id
    if not source:
        return {}
    when = {ev.id: ev.ts for ev in store.get_events(project_id, sorted(set(source.values())))}
    return {owner: when[ev] for owner, ev in source.items() if ev in when}


def produced_at(store: Store, project_id: str, items: Collection[SearchItem]) -> dict[str, float]:
    """When each unit's owner was produced: an event's time, the time of the message an
    entity was anchored from, else the entity's last update (the unit's time)."""
    out = {it.owner_id: it.ts for it in items}
    entity_ids = sorted({it.owner_id for it in items if it.kind != "event"})
    if entity_ids:
        out.update(anchored_times(store, project_id, store.get_entities(project_id, entity_ids)))
    return out


def order_by_recency(
    cands: Collection[Candidate],
    kinds: Collection[Kind],
    times: Mapping[str, float],
    window: float = RECENCY_WINDOW,
) -> list[Candidate]:
    """Hand the scores of the candidates of `kinds` (those within `window` of the best of
    them) out again newest first (`times` by owner id). Returns them, newest first; each
    gets its place among them in `recency`."""
    mine = [c for c in cands if c.dropped is None and of_kinds(c.item, kinds)]
    if not mine:
        return []
    best = max(c.score for c in mine)
    mine = [c for c in mine if c.score >= window * best]
    if len(mine) < 2:
        return mine
    places = sorted((c.score for c in mine), reverse=True)
    newest = sorted(
        mine, key=lambda c: (-times.get(c.item.owner_id, c.item.ts), -c.score, c.item_id)
    )
    label = "/".join(k.name for k in kinds)
    for n, (c, score) in enumerate(zip(newest, places, strict=True), start=1):
        c.score = score
        c.recency = f"{label} named with a recency cue: newest {n} of {len(newest)}"
    return newest
