"""Session keys: what each session is about, for questions whose evidence spans sessions.

A multi-hop question has its evidence in turns sessions apart; the turns that say it often
share few words with the question, while the sessions they are in are about what it asks.
Each session keeps a short key: its `KEY_TERMS` most distinctive terms (held by many of its
turns and by few other sessions), read from the in-memory keyword index, no model. A query's
terms are matched against the keys (BM25 over the keys, each key term once); the turns of
the `session_keys` best matching sessions among the candidates rank as one more list in the
fusion, weighing `session_key_weight`: each chosen session's best turn first, then each
one's second, and so on, so every chosen session gets its turn near the top.

Keys follow the keyword index. The rows appended since the last search count in, the rows
that left it (forgotten, hidden, replaced) count out, and only the sessions they belong to
get their key computed again; a reload of the index (a hard forget drops it) starts the
counts over, so a forgotten turn's words leave every key. A session not touched keeps the
key computed last, though other sessions' changes move how distinctive its terms are.
"""

from __future__ import annotations

import heapq
import itertools
import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from .fusion import rrf_fuse
from .keyword_index import KeywordIndex, KeywordSnapshot

__all__ = ["KEY_TERMS", "SessionKeys", "key_terms"]

# Terms in a session's key: a short text saying what the session is about.
KEY_TERMS = 16


def key_terms(
    counts: Mapping[int, int], sessions_with: Mapping[int, int], sessions: int, size: int
) -> list[int]:
    """The `size` most distinctive of a session's terms: `counts` is how many of its turns
    hold each term, `sessions_with` how many of the project's `sessions` hold it. A term
    scores its count times its BM25 idf over the sessions (a term every session holds
    says nothing about any one of them); ties go to the term indexed first."""
    scored = ((c * _idf(sessions, sessions_with.get(t, 1)), -t) for t, c in counts.items())
    return [-neg for _, neg in heapq.nlargest(size, scored)]


def _idf(n: int, df: int) -> float:
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


@dataclass
class _Keys:
    """One project's session keys, as counted from one run of keyword-index snapshots."""

    docs: object  # the index's documents these counts come from (a reload makes new ones)
    seen: KeywordSnapshot | None = None  # the snapshot counted last
    sorted_docs: npt.NDArray[np.int32] | None = None  # its sorted postings (see _refresh)
    counted: int = 0  # rows counted in (dead ones included)
    dead: npt.NDArray[np.bool_] = field(default_factory=lambda: np.zeros(0, dtype=np.bool_))
    counts: dict[int, dict[int, int]] = field(default_factory=dict)  # session -> term -> turns
    sessions_with: dict[int, int] = field(default_factory=dict)  # term -> sessions holding it
    keys: dict[int, list[int]] = field(default_factory=dict)  # session -> key term ids
    keys_with: dict[int, int] = field(default_factory=dict)  # term -> keys holding it
    dirty: set[int] = field(default_factory=set)  # sessions whose key is out of date
    # per term id, whether it is a single character (see _words)
    short: npt.NDArray[np.bool_] = field(default_factory=lambda: np.zeros(0, dtype=np.bool_))


class SessionKeys:
    """Per project session keys over one keyword index, shared by a searcher's searches."""

    def __init__(self, keywords: KeywordIndex, size: int = KEY_TERMS) -> None:
        self.keywords = keywords
        self.size = size
        self._cache: dict[str, _Keys] = {}
        self._lock = threading.Lock()

    def drop(self, project_id: str) -> int:
        """Forget the project's keys (after a hard forget); returns how many there were."""
        with self._lock:
            state = self._cache.pop(project_id, None)
        return 0 if state is None else len(state.keys)

    def key(self, project_id: str, session_id: str) -> list[str]:
        """The session's key terms, most distinctive first ([] for a session unknown)."""
        snap = self.keywords.snapshot(project_id)
        with self._lock:
            state = self._current(project_id, snap)
            code = snap.docs.attrs.columns["session_id"].vocab.get(session_id)
            ids = state.keys.get(code, []) if code is not None else []
        wanted = set(ids)
        names = {tid: term for term, tid in snap.docs.vocab.items() if tid in wanted}
        return [names[t] for t in ids if t in names]

    def ranking(
        self,
        project_id: str,
        terms: Sequence[str],
        rankings: Mapping[str, Sequence[str]],
        weights: Mapping[str, float],
        sessions: int,
        rrf_k: int,
    ) -> list[str]:
        """The candidates (ids in `rankings`) of the `sessions` sessions among theirs whose
        keys best match `terms`, each session's best first by fused rank, in turns; [] when
        no key holds a query term."""
        snap = self.keywords.snapshot(project_id)
        vocab = snap.docs.vocab
        wanted = {tid for t in terms if (tid := vocab.get(t)) is not None}
        if not wanted or sessions <= 0:
            return []
        fused = rrf_fuse(rankings, weights, rrf_k)
        ids = sorted(fused, key=lambda i: -fused[i])
        at = snap.docs.ids.lookup(ids)
        held = (at >= 0) & (at < snap.n)
        codes = np.full(len(ids), -1, dtype=np.int64)
        codes[held] = snap.docs.attrs.columns["session_id"].codes[at[held]]
        with self._lock:
            state = self._current(project_id, snap)
            chosen = _best_sessions(state, wanted, set(codes.tolist()) - {-1}, sessions)
        if not chosen:
            return []
        per: dict[int, list[str]] = {s: [] for s in chosen}
        for item_id, code in zip(ids, codes.tolist(), strict=True):
            if code in per:
                per[code].append(item_id)
        out: list[str] = []
        for n in range(max(len(v) for v in per.values())):
            out += [turns[n] for turns in per.values() if n < len(turns)]
        return out

    def _current(self, project_id: str, snap: KeywordSnapshot) -> _Keys:
        """The project's keys brought up to `snap` (under the lock)."""
        state = self._cache.get(project_id)
        if state is None or state.docs is not snap.docs or snap.n < state.counted:
            state = self._cache[project_id] = _Keys(docs=snap.docs)
        if state.seen is not snap:
            _refresh(state, snap)
        if state.dirty:
            _rekey(state, self.size)
        return state


def _refresh(state: _Keys, snap: KeywordSnapshot) -> None:
    """Count in the rows `snap` holds beyond those counted, count out those it marks dead."""
    n, start = snap.n, state.counted
    dead = snap.docs.dead[:n].copy()  # marks may be added while we read
    gone = np.flatnonzero(dead[:start] & ~state.dead[:start])
    post = snap.postings
    if start < n:
        new = np.zeros(n, dtype=np.bool_)
        new[start:n] = ~dead[start:n]
        # The sorted postings are rebuilt when the appended ones grow large: while they
        # are the ones read last time, every row appended since is in the appended part.
        whole = post.docs is not state.sorted_docs
        _count(state, snap, new, +1, whole)
    if gone.size:
        old = np.zeros(n, dtype=np.bool_)
        old[gone] = True
        _count(state, snap, old, -1, True)
    state.seen, state.sorted_docs = snap, post.docs
    state.counted, state.dead = n, dead


def _count(
    state: _Keys, snap: KeywordSnapshot, rows: npt.NDArray[np.bool_], sign: int, whole: bool
) -> None:
    """Add (`sign` 1) or take away (-1) the terms of the rows marked in `rows` to their
    sessions' counts; `whole`: look in the sorted postings too, not only the appended."""
    post = snap.postings
    terms = [post.tail_terms[rows[post.tail_docs]]]
    docs = [post.tail_docs[rows[post.tail_docs]]]
    if whole and post.docs.size:
        hit = np.flatnonzero(rows[post.docs])
        terms.append((np.searchsorted(post.offsets, hit, side="right") - 1).astype(np.int32))
        docs.append(post.docs[hit])
    term = np.concatenate(terms).astype(np.int64)
    session = snap.docs.attrs.columns["session_id"].codes[np.concatenate(docs)].astype(np.int64)
    keep = (session >= 0) & _words(state, snap)[term]  # a row of no session is in no key
    if not keep.any():
        return
    span = np.int64(len(snap.docs.vocab) + 1)
    pairs, times = np.unique(session[keep] * span + term[keep], return_counts=True)
    counts, sessions_with, dirty = state.counts, state.sessions_with, state.dirty
    for pair, c in zip(pairs.tolist(), times.tolist(), strict=True):
        s, t = divmod(pair, int(span))
        per = counts.setdefault(s, {})
        before = per.get(t, 0)
        after = before + sign * c
        if after > 0:
            per[t] = after
        else:
            per.pop(t, None)
        if (before > 0) != (after > 0):
            sessions_with[t] = sessions_with.get(t, 0) + (1 if after > 0 else -1)
            if sessions_with[t] <= 0:
                del sessions_with[t]
        dirty.add(s)


def _words(state: _Keys, snap: KeywordSnapshot) -> npt.NDArray[np.bool_]:
    """Per term id, whether it may be in a key: a key is words. The single characters
    keyword search also indexes a Chinese word by (cjk_terms.py), and single letters or
    digits, say nothing a session is about on their own."""
    vocab, short = snap.docs.vocab, state.short
    if short.size < len(vocab):
        try:  # the index appends terms behind a snapshot: those past it are read too
            new = list(itertools.islice(vocab, short.size, None))
        except RuntimeError:  # the vocabulary grew while it was read: read it whole
            new = list(vocab)[short.size :]
        added = np.fromiter((len(t) < 2 for t in new), dtype=np.bool_, count=len(new))
        state.short = short = np.concatenate([short, added])
    return ~short


def _rekey(state: _Keys, size: int) -> None:
    """Compute the keys of the sessions changed since their last."""
    total = sum(1 for per in state.counts.values() if per)
    for s in state.dirty:
        for t in state.keys.pop(s, []):
            state.keys_with[t] -= 1
        per = state.counts.get(s)
        if not per:
            state.counts.pop(s, None)
            continue
        key = key_terms(per, state.sessions_with, total, size)
        state.keys[s] = key
        for t in key:
            state.keys_with[t] = state.keys_with.get(t, 0) + 1
    state.dirty.clear()


def _best_sessions(state: _Keys, wanted: set[int], among: set[int], limit: int) -> list[int]:
    """Up to `limit` of the sessions `among` whose keys hold `wanted` terms, best first:
    each key term of the query adds its BM25 idf over the keys (all keys are alike in
    length, each term once, so BM25 comes down to the idf)."""
    n = len(state.keys)
    scores: list[tuple[float, int]] = []
    for s in among:
        held = wanted.intersection(state.keys.get(s, ()))
        if held:
            score = 0.0
            for t in held:
                score += _idf(n, state.keys_with.get(t, 1))
            scores.append((score, -s))
    return [-neg for _, neg in heapq.nlargest(limit, scores)]
