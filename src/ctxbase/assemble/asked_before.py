"""Another session's question like the intent, in the memory layer: worth a slot only with
its answer.

A user asks "上次那个SQL是什么?" in one session and nothing answers it; asked again in
another, the search finds the first one, and memory showed the bare question: the intent
again, which tells the agent nothing. `drop_unanswered` reads, for each user message of
another session that says (nearly) what the intent says (`asks_again`), the events that
followed it in its session (one read each, at most `MAX_ASKED`): when the session's next
user message or its end comes before any assistant message or tool result that carries
content (`answer_in`), the question is left out, "unanswered". A question that was
answered stays, and brings its answer, which is the useful part: the answer joins memory
right after it (in its unit, at its score) when no search found it. A question whose
following events do not settle it (a long run of calls, no answer yet read) stays.

The intent's own message is left out before this (recall_gate.is_the_intent), so is an
identical question of any session; this is for the near ones ("上次那个SQL是什么来着?").

A question nothing answered still leads the search to the message after it: each event is
indexed with the words of the one it follows (retrieve/indexing.context_terms), so "Never
mind, let's talk about the logo colours." matches the question's words and would take the
slot the question gave up. Such a follower (the first event after it, or one naming it as
its parent, up to the session's next user message) is left out with the question unless it
is about the intent on its own (relevance.own_evidence: its own words share a keyword with
the intent, or its similarity reaches the calibrated floor). The same holds after another
session's question identical to the intent (`Gatherer.asked_exactly`), one read of what
followed each, within `MAX_ASKED` reads in all.
"""

from __future__ import annotations

import difflib
import unicodedata
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..model import Event
from ..retrieve.questions import asks_only
from ..retrieve.relevance import own_evidence, relevance_floor
from ..retrieve.signals import tool_failed
from ..retrieve.tokenize import document_terms
from .memory_candidate import event_cand

if TYPE_CHECKING:
    from .gatherer import Gatherer
    from .memory_candidate import MemoryCandidate

__all__ = [
    "FOLLOWING",
    "MAX_ASKED",
    "SAME_QUESTION",
    "answer_in",
    "asks_again",
    "drop_unanswered",
    "settled",
]

# Two questions whose letters and digits (case, width, spaces and punctuation aside) match
# at least this much (difflib's ratio) ask the same ("上次那个SQL是什么" / "...是什么来着").
SAME_QUESTION = 0.8
# Questions looked up per assembly (each one read of what followed it), best first.
MAX_ASKED = 3
# Events read after a question: a call and its results may come before the answer.
FOLLOWING = 8
# Longer texts are compared exactly (a long message is no repeated question).
_LONGEST = 400
_ANSWERS = frozenset({"assistant_message", "tool_result"})


def _plain(text: str) -> str:
    return "".join(ch for ch in unicodedata.normalize("NFKC", text).casefold() if ch.isalnum())


def asks_again(text: str, intent: str) -> bool:
    """Whether a user message asks (nearly) what the intent asks, letters and digits read
    (case, width, spaces and punctuation aside): it says no more than the intent (its
    letters are at least `SAME_QUESTION` of the intent's, all within it: "上次那个SQL是什么"),
    or it only asks (retrieve/questions.asks_only) and the two match at least
    `SAME_QUESTION` (difflib's ratio: "上次那个SQL是什么来着?"). A statement that says more
    ("订单缓存方案A" for "订单缓存方案") does not."""
    x, y = _plain(text), _plain(intent)
    if not x or not y:
        return False
    if x in y and len(x) >= SAME_QUESTION * len(y):
        return True
    if max(len(x), len(y)) > _LONGEST or 2 * min(len(x), len(y)) < SAME_QUESTION * (
        len(x) + len(y)
    ):
        return False  # the ratio cannot reach the bar (or the texts are too long to ask)
    if not asks_only(text):
        return False
    return difflib.SequenceMatcher(None, x, y, autojunk=False).ratio() >= SAME_QUESTION


def _carries_content(e: Event) -> bool:
    text = e.text or ""
    if not any(ch.isalnum() for ch in text):
        return False
    return not (e.type == "tool_result" and tool_failed(e.metadata))


def answer_in(following: Sequence[Event]) -> Event | None:
    """What answered a question, from the events after it in its session (in order): the
    first assistant message or tool result that carries content (text with a letter or a
    digit; a failed tool run is none) before the session's next user message."""
    for e in following:
        if e.type == "user_message":
            return None
        if e.type in _ANSWERS and _carries_content(e):
            return e
    return None


def settled(following: Sequence[Event], complete: bool) -> bool:
    """Whether the events read after a question show its whole turn: the session's next
    user message is among them, or `complete` (they are all the session has after it)."""
    return complete or any(e.type == "user_message" for e in following)


def _bring(g: Gatherer, asked: MemoryCandidate, answer: Event) -> bool:
    """Put `answer` right after the question `asked` in memory; False when it cannot enter
    (hidden by its status: the question has no answer to show)."""
    held = g.cands.get(answer.id)
    if held is None:
        if answer.id in g.exclude:
            return True  # the prompt already shows it (a history turn)
        strategy = asked.strategies[0] if asked.strategies else "semantic_recall"
        reason = f"{strategy}: the answer to {asked.owner_id}, a question like the intent"
        if not g.add(event_cand(answer, asked.score, strategy, reason), answer):
            return False
        held = g.cands[answer.id]
    if not held.unit:
        held.unit = asked.owner_id
    return True


def _about_the_intent(g: Gatherer, cand: MemoryCandidate) -> str | None:
    """Why a candidate is about the intent by its own text (relevance.own_evidence)."""
    embedder = g.cb.embedder
    floor = relevance_floor(embedder.name if embedder else None, g.policy.relevance_floor)
    similarity = (cand.explain or {}).get("similarity")
    sim = similarity if isinstance(similarity, float) else None
    return own_evidence(g.intent, document_terms(cand.text), sim, floor, cand.text)


def _drop_followers(g: Gatherer, asked: str, following: Sequence[Event], why: str) -> None:
    """Leave out the events of memory that follow the unanswered question `asked` (indexed
    with its words as their context) and are not about the intent by their own words."""
    for n, e in enumerate(following):
        follows = e.parent_event_ids[0] == asked if e.parent_event_ids else n == 0
        cand = g.cands.get(e.id)
        if follows and cand is not None and _about_the_intent(g, cand) is None:
            del g.cands[e.id]
            g.drop(
                e.id,
                "unanswered",
                f"follows {asked}, {why}; found by that question's words, its own share "
                "none with the intent",
            )
        if e.type == "user_message":
            return


def drop_unanswered(g: Gatherer) -> None:
    """Leave out the memory's questions of other sessions like the intent that nothing
    answered there, with the messages found only by their words; bring the answers of
    those that were answered (the module doc)."""
    asked = [
        c
        for c in g.cands.values()
        if c.kind == "event"
        and c.type == "user_message"
        and c.session_id is not None
        and c.session_id != g.session_id
        and c.seq is not None
        and asks_again(c.text, g.intent)
    ]
    asked.sort(key=lambda c: (-c.score, c.owner_id))
    for c in asked[:MAX_ASKED]:
        assert c.session_id is not None  # for mypy: filtered above
        following = g.cb.store.event_page(g.pid, c.session_id, after_seq=c.seq, limit=FOLLOWING)
        answer = answer_in(following)
        if answer is not None and _bring(g, c, answer):
            continue
        if answer is None and not settled(following, complete=len(following) < FOLLOWING):
            continue  # a long run of calls read, no answer yet: not known to be unanswered
        where = repr(c.session_id)
        why = (
            f"its answer in {where}, {answer.id}, cannot enter"
            if answer
            else f"nothing answered it in {where}"
        )
        del g.cands[c.owner_id]
        g.drop(
            c.owner_id,
            "unanswered",
            f"another session's question like the intent; {why}",
        )
        if answer is None:
            said = f"a question like the intent that nothing answered in {where}"
            _drop_followers(g, c.owner_id, following, said)
    exact = [e for e in g.asked_exactly.values() if e.seq is not None]
    for e in exact[: max(0, MAX_ASKED - len(asked))]:
        following = g.cb.store.event_page(g.pid, e.session_id, after_seq=e.seq, limit=FOLLOWING)
        if answer_in(following) is None and settled(following, len(following) < FOLLOWING):
            why = f"the intent asked in {e.session_id!r}, where nothing answered it"
            _drop_followers(g, e.id, following, why)
