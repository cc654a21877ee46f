"""Score adjustments after fusion: what rank fusion cannot see about a candidate.

`Searcher.search` fuses the keyword and semantic rankings, then multiplies the candidates'
scores by these factors, in this order: the semantic standout (before graph expansion, so
the standout's neighbours gain with it), then after expansion (`adjust_expanded`) the
question weight, the number, actor and date boosts, time decay (sparing what is used or
linked), importance and confidence (retrieve/signals.py reads both signals). Each step
is a plain function over the candidates and the config, off when its setting is neutral
(a boost or weight of 1.0, no half-life, importance weight 0, no confidence); the order is
kept because floating-point products depend on it, and rankings must not move when the
code does.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING

from .answer_types import (
    asks_for_amount,
    asks_for_date,
    asks_for_number,
    states_date,
    states_number,
)
from .config import SearchConfig
from .fusion import confidence_factor, spared_age, standout, time_decay
from .query_actors import favoured_actors
from .query_dates import (
    in_period,
    in_yearless,
    names_yearless,
    query_period,
    yearless_dates,
)
from .questions import asks_only
from .relative_time import AnchoredPeriod
from .signals import Signals

if TYPE_CHECKING:
    from .search import Candidate

__all__ = [
    "adjust_expanded",
    "boost_actors",
    "boost_anchored",
    "boost_dates",
    "boost_numbers",
    "boost_standout",
    "decay_by_age",
    "weigh_confidence",
    "weigh_importance",
    "weigh_questions",
]


def boost_standout(cands: Mapping[str, Candidate], config: SearchConfig) -> None:
    """A semantic first hit far ahead of the rest (`fusion.standout` over the candidates'
    similarities) scores `standout_boost` times more: usually right, and rank fusion cannot
    see how far ahead it is."""
    if config.standout_boost == 1.0:
        return
    sims = {k: c.similarity for k, c in cands.items() if c.similarity is not None}
    if (best := standout(sims, config.standout_gap)) is not None:
        cands[best].score *= config.standout_boost


def weigh_questions(cands: Collection[Candidate], config: SearchConfig) -> None:
    """Events that only ask a question score `question_weight` of their score: the answer,
    not the question, is the memory wanted."""
    if config.question_weight == 1.0:
        return
    for c in cands:
        if c.item.kind == "event" and asks_only(c.item.text):
            c.score *= config.question_weight


def boost_numbers(cands: Collection[Candidate], query: str, config: SearchConfig) -> None:
    """A query asking for a number favours the candidates that state one (`number_boost`);
    one asking only when (not how much as well), those that say a day or a time."""
    if config.number_boost == 1.0 or not asks_for_number(query):
        return
    when_only = asks_for_date(query) and not asks_for_amount(query)
    states = states_date if when_only else states_number
    for c in cands:
        if states(c.item.text):
            c.score *= config.number_boost


def boost_actors(cands: Collection[Candidate], query: str, config: SearchConfig) -> None:
    """The candidates whose agent id or role is one the query is about (`favoured_actors`,
    chosen among the candidates' own actors) score `actor_boost` times more."""
    if config.actor_boost == 1.0:
        return
    favoured = favoured_actors(query, [c.item for c in cands], config)
    for c in cands:
        if favoured & {c.item.agent_id, c.item.agent_role}:
            c.score *= config.actor_boost


def boost_dates(cands: Collection[Candidate], query: str, config: SearchConfig) -> None:
    """A query naming a dated period favours the candidates recorded in it (`date_boost`);
    one naming a month or day without a year, those recorded in that month or on that day
    of any year (`yearless_date_boost`)."""
    if config.date_boost == 1.0:
        return
    if (period := query_period(query)) is not None:
        for c in cands:
            if in_period(c.item.ts, period):
                c.score *= config.date_boost
    elif config.yearless_date_boost != 1.0 and (dates := yearless_dates(query)):
        for c in cands:  # a month or day of no year named: that month or day of any year
            if in_yearless(c.item.ts, dates) or names_yearless(c.item.text, dates):
                c.score *= config.yearless_date_boost


def boost_anchored(
    cands: Collection[Candidate], anchored: AnchoredPeriod | None, config: SearchConfig
) -> None:
    """A query dating its event by another favours the candidates recorded in the period
    placed from the anchor's days (`relative_date_boost`)."""
    if anchored is None or config.relative_date_boost == 1.0:
        return
    for c in cands:
        if anchored.holds(c.item.ts):
            c.score *= config.relative_date_boost


def decay_by_age(
    cands: Collection[Candidate], config: SearchConfig, now: float, signals: Signals | None = None
) -> None:
    """Older candidates score less: halved every `time_decay_half_life_days` before `now`.
    With `signals`, an item explicitly linked (`decay_spare_relations`) or placed in at
    least `decay_spare_uses` assembled contexts does not decay, and one placed in fewer
    decays more slowly (`fusion.spared_age`)."""
    if not config.time_decay_half_life_days:
        return
    sig = signals or Signals()
    for c in cands:
        owner = c.item.owner_id
        age = now - c.item.ts
        uses = sig.uses.get(owner, 0)
        if (link := sig.linked.get(owner)) is not None:
            age, c.decay_spared = 0.0, f"linked by {link}"
        elif uses:
            age = spared_age(age, uses, config.decay_spare_uses)
            c.decay_spared = f"used {uses} time{'s' if uses != 1 else ''}"
        factor = time_decay(age, config.time_decay_half_life_days)
        c.decay = factor
        c.score *= factor


def weigh_importance(cands: Collection[Candidate], config: SearchConfig) -> None:
    """Scores scaled by importance: 1 - w + 2w * importance (1 at the default 0.5)."""
    if not config.importance_weight:
        return
    w = config.importance_weight
    for c in cands:
        c.score *= 1.0 - w + w * 2 * c.item.importance


def weigh_confidence(
    cands: Collection[Candidate], config: SearchConfig, signals: Signals | None
) -> None:
    """Candidates with a confidence (feedback, a failed tool result) score
    `fusion.confidence_factor` of it; those below `min_confidence` are dropped (a
    correction, not a forget: they stay stored and are listed as considered). Candidates
    without one are not touched."""
    if signals is None or not signals.confidence:
        return
    for c in cands:
        conf = signals.confidence.get(c.item.owner_id)
        if conf is None:
            continue
        c.confidence, c.confidence_source = conf.value, conf.source
        if conf.value < config.min_confidence:
            c.dropped = f"confidence {conf.value:g} below min_confidence ({conf.source})"
            c.correction = conf.note  # what the rating said instead, when it said it
        elif config.confidence_weight:
            c.score *= confidence_factor(conf.value, config.confidence_weight)


def adjust_expanded(
    cands: Collection[Candidate],
    query: str,
    config: SearchConfig,
    now: float,
    signals: Signals | None = None,
    anchored: AnchoredPeriod | None = None,
) -> None:
    """Every adjustment that follows graph expansion, in order: questions, numbers,
    actors, dates (named, then placed by another event), then age, importance and
    confidence."""
    weigh_questions(cands, config)
    boost_numbers(cands, query, config)
    boost_actors(cands, query, config)
    boost_dates(cands, query, config)
    boost_anchored(cands, anchored, config)
    decay_by_age(cands, config, now, signals)
    weigh_importance(cands, config)
    weigh_confidence(cands, config, signals)
