"""Tool calls and their results in the memory layer: a result says which call it answers,
and a call sits with its results.

Retrieved memory is ranked hit by hit, so a tool result ("1532 rows, 4.2 s") could sit
right above another session's call and read as its answer. `link_calls` reads, for the
memory's candidates, the call each tool result answers (its parent `tool_invocation`) and
the calls each assistant message made:

- a result's label names its call, `[tool result ev_r of ev_c run_sql]`, wherever it is;
- a message carries its calls on the lines after its text, as in the history
  (history_calls.py); a call of it in memory too is shown there, once; another agent's
  call caused by it is an item of its own;
- `memory_units` keeps a call (or the message showing it) and its results together, call
  first, ranked as one at the better of their scores. When a recency cue ordered calls
  ("the SQL from last time", retrieve/recency.py), the units holding them are ordered by
  their calls' time, newest first, on the places they hold: the results follow their SQL.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from ..model import Event
from .history_calls import CALL_TYPE, same_agent
from .repeats import cut_from

if TYPE_CHECKING:
    from ..model import Entity
    from ..retrieve.search import Candidate
    from .gatherer import Gatherer
    from .memory_candidate import MemoryCandidate

__all__ = ["link_calls", "memory_units", "results_with_calls", "shown_in_message", "tool_name"]

_RESULT, _MESSAGE = "tool_result", "assistant_message"
_NAME = re.compile(r"\s*([A-Za-z_][\w.-]*)\(")
# calls of one message read at most (a message does not make hundreds)
_CALLS_PER_MESSAGE = 50


def tool_name(call: Event) -> str:
    """The tool a call ran: as captured (`data.tool`), else its text's `name(`."""
    data = call.data
    if isinstance(data, dict) and isinstance(data.get("tool"), str) and data["tool"]:
        return str(data["tool"])
    m = _NAME.match(call.text or "")
    return m.group(1) if m else ""


def _cued(c: MemoryCandidate) -> bool:
    return bool(c.explain and c.explain.get("recency"))


def link_calls(g: Gatherer) -> None:
    """Pair the memory's tool results with their calls and its messages with the calls they
    made (see the module doc); at most two reads."""
    cands = g.cands
    events = [c for c in cands.values() if c.kind == "event"]
    results = [c for c in events if c.type == _RESULT and c.parents]
    messages = [c for c in events if c.type == _MESSAGE]
    if not results and not messages:
        return
    for c in events:
        c.cued = c.cued or _cued(c)
    made: dict[str, list[str]] = {}  # message -> the events it caused
    if messages:
        rels = g.cb.store.list_relations(
            g.pid,
            [m.owner_id for m in messages],
            direction="in",
            types=["CAUSED_BY"],
            limit_per_node=_CALLS_PER_MESSAGE,
        )
        for rel in rels:
            made.setdefault(rel.to_id, []).append(rel.from_id)
    wanted = {p for c in results for p in c.parents} | {i for ids in made.values() for i in ids}
    read = g.cb.store.get_events(g.pid, sorted(wanted)) if wanted else []
    calls = {e.id: e for e in read if e.type == CALL_TYPE}
    shown_in: dict[str, str] = {}  # call -> the memory item that shows it
    for m in messages:
        mine = sorted(
            (
                calls[i]
                for i in made.get(m.owner_id, ())
                if i in calls and same_agent(calls[i].agent_id, m.agent_id)
            ),
            key=lambda e: (e.seq if e.seq is not None else 0, e.ts, e.id),
        )
        for call in mine:
            text = (call.text or "").strip()
            if text and not cut_from(text, m.text):
                m.call_lines.append(text)
            shown_in[call.id] = m.owner_id
            held = cands.pop(call.id, None)
            if held is not None:  # the call is in memory too: shown in its message's block
                m.score = max(m.score, held.score)
                m.cued = m.cued or held.cued
                g.drop(call.id, "duplicate", f"a call of {m.owner_id}, shown with it")
    for r in results:
        answered = next((calls[p] for p in r.parents if p in calls), None)
        if answered is None:
            continue
        name = tool_name(answered)
        r.answers = f"{answered.id} {name}" if name else answered.id
        r.call_text = answered.text or ""
        r.unit = shown_in.get(answered.id, answered.id)


def shown_in_message(
    g: Gatherer,
    node: Entity | Event | None,
    hits: Sequence[Candidate],
    owners: Mapping[str, Entity | Event],
    best: float,
    min_score: float,
) -> bool:
    """Whether a search hit, `node`, is a tool call whose assistant message is in memory (a
    candidate already, or a hit of the same search, `hits`, that clears `min_score` over
    `best` and is not left out): `link_calls` then shows the call on the message's lines,
    so it takes no top_k place of its own (Gatherer.search moves the next hit up)."""
    if not isinstance(node, Event) or node.type != CALL_TYPE:
        return False
    for parent in node.parent_event_ids:
        held = g.cands.get(parent)
        if held is not None and held.type == _MESSAGE and same_agent(node.agent_id, held.agent_id):
            return True
        for h in hits:
            msg = owners.get(parent) if h.item.owner_id == parent else None
            if (
                isinstance(msg, Event)
                and msg.type == _MESSAGE
                and same_agent(node.agent_id, msg.agent_id)
                and h.score / best >= min_score
                and parent not in g.exclude
            ):
                return True
    return False


def memory_units(cands: Mapping[str, MemoryCandidate]) -> list[tuple[float, list[str]]]:
    """The memory items in prompt order, grouped: (the unit's score, its owner ids), best
    first; a call or the message showing it first, then the results that answer it."""
    members: dict[str, list[str]] = {}
    for c in cands.values():
        head = c.unit if c.unit and c.unit in cands and c.unit != c.owner_id else c.owner_id
        members.setdefault(head, []).append(c.owner_id)
    units: dict[str, tuple[float, list[str]]] = {}
    for head, ids in members.items():
        rest = sorted((i for i in ids if i != head), key=lambda i: (cands[i].ts or 0.0, i))
        units[head] = (max(cands[i].score for i in ids), [head, *rest])
    # a recency cue ordered calls: their units take the places they hold, newest call first
    cued = [h for h, (_, ids) in units.items() if any(cands[i].cued for i in ids)]
    timed = [h for h in cued if cands[h].ts is not None]
    if len(timed) > 1:
        places = sorted((units[h][0] for h in timed), reverse=True)
        newest = sorted(timed, key=lambda h: (-(cands[h].ts or 0.0), h))
        for head, score in zip(newest, places, strict=True):
            units[head] = (score, units[head][1])
    return sorted(units.values(), key=lambda u: (-u[0], u[1][0]))


def results_with_calls(shown: Sequence[Event], events: Sequence[Event]) -> dict[str, str]:
    """The tool results of `shown` (the history), each with the text of the call it answers
    (found in `events`): what `Gatherer.drop_said` compares memory's results with."""
    calls = {e.id: e.text or "" for e in events if e.type == CALL_TYPE}
    return {
        e.id: calls[p] for e in shown if e.type == _RESULT for p in e.parent_event_ids if p in calls
    }
