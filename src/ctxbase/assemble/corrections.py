"""Corrections: what a memory rated wrong with a note says in the prompt instead of it.

`feedback(node_id, "wrong", note="it is 20 s, not 30 s")` leaves the memory out of searches
and prompts (memory_feedback.py); without more, an assembly whose question the memory
answered would show neither it nor what is right, and the agent would guess again. So when
a memory rated false carries a note and this assembly would have brought it in, the memory
layer holds the correction in its place:

    [correction of ev_1]
    Correction (rated wrong on 2026-12-03): it is 20 s, not 30 s -- replaces: "the timeout is 30 s"

"Would have brought it in": a search hit the search left out for its rating only, that is
about the intent on its own (relevance.own_evidence: its own words share a keyword with the
intent, or its similarity reaches the embedder's calibrated floor; with no calibrated floor,
as for the "hash" embedder, only a keyword tells, since any hit is found by meaning there)
and that scored at least the last result the search returned (its score is the one it had
before the rating); or a memory an edge or a reference reached (`Gatherer.drop_withdrawn`);
or a message of the history window. The trace's reason for the correction says which,
after "on topic:". A rating without a note
changes nothing. The notes come with the ratings searches read already (retrieve/signals
`Confidence.note`): no store read is added. One correction per note (a message and the
statements cut from it are rated together), at most `MAX_CORRECTIONS` per prompt, each
scored as the best memory and fitted to the budget like any other item.

The correction's id is "<node id>#correction": a hard forget of the node removes its
feedback (and so the note) and redacts stored traces that name the id, the correction's
entries with it (store/trace_redaction.py).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..retrieve.relevance import own_evidence, relevance_floor
from ..retrieve.signals import Confidence, rated_false
from .memory_candidate import MemoryCandidate

if TYPE_CHECKING:
    from ..model import Event
    from .gatherer import Gatherer

__all__ = ["CORRECTION", "MAX_CORRECTIONS", "add_corrections", "correction_text"]

CORRECTION = "correction"
MAX_CORRECTIONS = 3
_QUOTE_CHARS = 80


def _quote(text: str) -> str:
    """A short quote of the wrong statement, on one line."""
    said = " ".join(text.split())
    if len(said) > _QUOTE_CHARS:
        said = said[: _QUOTE_CHARS - 1].rstrip() + "…"
    return f'"{said}"'


def _day(at: float | None) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(at)) if at is not None else "an earlier day"


def correction_text(conf: Confidence, wrong: str) -> str:
    """The memory item's text: the note, when it was given, and what it replaces."""
    label = conf.source.removeprefix("feedback:")
    head = f"Correction (rated {label} on {_day(conf.at)})"
    return f"{head}: {conf.note} -- replaces: {_quote(wrong)}"


def add_corrections(g: Gatherer, history: Sequence[tuple[Event, Confidence]] = ()) -> int:
    """Put the corrections of this assembly's memories rated false with a note in `g`'s
    candidates (see the module doc); `history`: the history's messages rated false, with
    their ratings. Returns how many were added."""
    wrong: dict[str, tuple[Confidence | None, str]] = {}
    why: dict[str, str] = {}  # what made the rated memory count as about the intent
    embedder = g.cb.embedder
    floor = relevance_floor(embedder.name if embedder else None, g.policy.relevance_floor)
    for c, least in sorted(g.rated_hits, key=lambda cl: -cl[0].score):
        if least is not None and c.score < least:
            continue  # it would have ranked below the search's top_k
        evidence = own_evidence(g.intent, c.item.terms.split(), c.similarity, floor, c.item.text)
        if evidence is not None and c.item.owner_id not in wrong:
            wrong[c.item.owner_id] = (None, c.item.text)
            joint = "that" if evidence.startswith("shares") else "at"
            why[c.item.owner_id] = f"a search hit {joint} {evidence}"
    for owner_id, (reached, text) in g.rated.items():
        wrong.setdefault(owner_id, (reached, text))
        why.setdefault(owner_id, "an edge or a reference of this memory reached it")
    for event, rating in history:
        if rating.note:
            wrong.setdefault(event.id, (rating, event.text or ""))
            why.setdefault(event.id, "a message of the history window")
    if not wrong:
        return 0
    # a search hit's rating with its date: the ratings the search read, held while the
    # index generation stands (no store read unless it moved on since)
    unread = [i for i, (known, _) in wrong.items() if known is None]
    read = rated_false(g.cb.store, g.pid, unread, g.cb.searcher.known_signals) if unread else {}
    by_note: dict[str, MemoryCandidate] = {}
    replaced: dict[str, list[str]] = {}
    for node_id, (known, text) in wrong.items():
        conf = known or read.get(node_id)
        if conf is None or not conf.note or node_id in g.cands:
            continue  # rated again since the search read it, or brought in after all
        if _unverified(g, node_id):  # require_signature: neither its text nor the note
            g.drop(f"{node_id}#{CORRECTION}", "signature", "the memory it corrects is not verified")
            continue
        held = by_note.get(conf.note)
        if held is not None:  # the same rating: a message and a statement cut from it
            held.answers += f", {node_id}"
            held.reasons.append(f"{CORRECTION}: also replaces {node_id}")
            replaced[conf.note].append(node_id)
            continue
        if len(by_note) >= MAX_CORRECTIONS:
            g.drop(f"{node_id}#{CORRECTION}", "top_k", f"more than {MAX_CORRECTIONS} corrections")
            continue
        cand = MemoryCandidate(
            f"{node_id}#{CORRECTION}",
            CORRECTION,
            CORRECTION,
            "",
            correction_text(conf, text),
            1.0,
            [CORRECTION],
            [
                f"{CORRECTION}: {node_id} is rated {conf.source.removeprefix('feedback:')} "
                f"with a note (its feedback of {_day(conf.at)}); the note stands in its place;"
                f" on topic: {why[node_id]}"
            ],
            answers=node_id,
            said_at=conf.at,
        )
        cand.explain = {"rated": conf.source, "rated_at": conf.at, "on_topic": why[node_id]}
        by_note[conf.note] = cand
        replaced[conf.note] = [node_id]
    for note, cand in by_note.items():
        cand.explain = {"replaces": replaced[note], **(cand.explain or {})}
        g.cands[cand.owner_id] = cand
    return len(by_note)


def _unverified(g: Gatherer, node_id: str) -> bool:
    """With a signature check (require_signature): the rated memory is no verified entity
    or event, so a correction quoting it would serve its text after all."""
    if g.check is None:
        return False
    verdict = g.check.entity(node_id)
    if verdict != "not_entity":
        return verdict != "valid"
    return g.check.event(node_id) != "valid"
