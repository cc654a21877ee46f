"""The text of an archived session's summary (assemble/compaction.py), extractive, bounded.

What a later reader of an old session wants first is what it set out to do and what was
settled: its tasks' goals, the requirements and decisions its turns stated (the sentences
capture anchoring writes as requirement and decision entities), then the most informative
of its other sentences (seed 001's extractive compression). Each part has a share of
`SUMMARY_TOKENS`, so a session of thousands of turns still gets a summary of a few hundred
tokens; a part that needs less leaves the rest to the key turns. Every sentence is taken
from the texts given, never written anew, so the summary says nothing its turns did not.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from ..anchor.extract import statements
from ..model import Event, SessionInfo, TaskInfo
from .budget import TokenCounterProtocol, compress_extractive, split_sentences
from .tokens import get_token_counter

__all__ = ["SUMMARY_TOKENS", "summary_text"]

SUMMARY_TOKENS = 400
# shares of the budget: goals, requirements, decisions (the key turns take what is left)
_GOALS, _REQUIREMENTS, _DECISIONS = 0.15, 0.25, 0.25
_MAX_STATEMENT_CHARS = 300  # one stated requirement or decision, cut beyond this


def summary_text(
    info: SessionInfo,
    tasks: Sequence[TaskInfo],
    sources: Sequence[Event],
    turns: int,
    *,
    max_tokens: int = SUMMARY_TOKENS,
    counter: TokenCounterProtocol | None = None,
) -> str:
    """The summary of a session whose `turns` raw turns were compacted, drawn from
    `sources` (its visible, said turns, in order) and its tasks' goals."""
    count = counter or get_token_counter()
    when = datetime.fromtimestamp(info.updated_at, UTC).strftime("%Y-%m-%d")
    title = f" ({info.title})" if info.title else ""
    lines = [
        f"Summary of archived session {info.session_id}{title}: {turns} turns, archived {when}."
    ]
    goals = [t.title.strip() for t in tasks if t.title.strip()]
    used: set[str] = set()
    lines += _section("Tasks", goals, int(max_tokens * _GOALS), count, used)
    requirements: list[str] = []
    decisions: list[str] = []
    for event in sources:
        if event.type not in ("user_message", "assistant_message"):
            continue
        for found in statements(event.text or ""):
            said = found.text.strip()[:_MAX_STATEMENT_CHARS]
            (requirements if found.kind == "requirement" else decisions).append(said)
    lines += _section("Requirements", requirements, int(max_tokens * _REQUIREMENTS), count, used)
    lines += _section("Decisions", decisions, int(max_tokens * _DECISIONS), count, used)
    room = max_tokens - count.count("\n".join(lines))
    # the sentences not listed above: the key turns do not say a decision twice
    rest = [
        " ".join(
            x for x in split_sentences(e.text or "") if x.strip()[:_MAX_STATEMENT_CHARS] not in used
        )
        for e in sources
    ]
    rest = [r for r in rest if r]
    if room > 0 and rest:
        key = compress_extractive(rest, room, count)
        if key:
            lines.append(f"Key turns: {key}")
    return "\n".join(lines)


def _section(
    name: str, items: Sequence[str], budget: int, count: TokenCounterProtocol, used: set[str]
) -> list[str]:
    """One line "name: a; b; c" of the items not said yet that fit `budget` tokens."""
    kept: list[str] = []
    for item in dict.fromkeys(i for i in items if i and i not in used):
        trial = f"{name}: " + "; ".join([*kept, item])
        if count.count(trial) > budget:
            continue
        kept.append(item)
        used.add(item)
    return [f"{name}: " + "; ".join(kept)] if kept else []
