"""Exact BM25 keyword search over a project's items, held in memory.

The store's own keyword query (FTS5's bm25, PostgreSQL's tsvector ranking) computes a score
for every item that matches any query term: tens of thousands for a common word in a large
project. Here the postings are compact arrays and a query scores only the postings it
touches with numpy (bm25_scoring.py): for the best `limit`, a common term's long postings are
only looked up for the items that can still reach them (MaxScore, bounded by each term's
largest frequency and shortest item, held per term). Same scoring as the stores: FTS5's bm25 over
two columns (indexed terms = own plus live context terms, weight 1; own terms, weight
OWN_TERMS_WEIGHT), k1 = 1.2, b = 0.75, statistics over the project's active items.

Like the vector index: when the store's index generation moves, the items stored since the
last read are appended (`Store.keyword_changes`). Rows that left the store's index since
(removed, hidden, replaced; a row restored or whose context words changed comes back as a
new row) are marked dead in place: their postings no longer score, and the statistics
(item count, document frequencies, lengths) are those a reload would compute. Past half of
the rows dead, or when the store cannot tell what it removed, the project is read again.
An index can still be a moment behind the store, so the best rows are
always checked against the store (project, active, filter) before they are returned. What
filters read of each item is held too (row_filter.py): a filter rules out what it can here,
so about `limit` rows are checked in the store instead of several times as many.
"""

from __future__ import annotations

import dataclasses
import math
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import islice
from typing import Literal, Protocol

import numpy as np
import numpy.typing as npt

from ..store.base import OWN_TERMS_WEIGHT, ItemFilter, KeywordRow, Store
from .bm25_scoring import (
    BM25_B,
    BM25_K1,
    Admit,
    Ranked,
    TermPostings,
    best,
    dense,
    exhaustive,
    top,
)
from .id_map import IdMap
from .row_filter import RowAttributes
from .synced import appendable, current, generation, grown

__all__ = ["BM25_B", "BM25_K1", "Admission", "KeywordIndex", "KeywordSnapshot"]

_OWN = 1.0 + OWN_TERMS_WEIGHT  # an own term counts in both columns

# Appended postings are kept unsorted and scanned per query term; past this many (or an
# eighth of the sorted postings) they are merged into the sorted arrays.
_TAIL_POSTINGS = 65_536
_BATCH = 8192  # items tokenised at once when loading
# Rows checked against the store first: `limit` of them when little is filtered out (only
# items changed since the index's read fail), more under a filter checked on candidates.
_SLACK = 8


class Admission(Protocol):
    """What a structured filter admits: `ids` when the filter was listed whole, else
    `admits` checks candidates against the store."""

    ids: set[str] | None

    def admits(self, ids: Iterable[str]) -> set[str]: ...


I32 = npt.NDArray[np.int32]
F32 = npt.NDArray[np.float32]


def _postings(
    rows: Sequence[KeywordRow], first_doc: int, vocab: dict[str, int]
) -> tuple[I32, I32, F32, F32]:
    """(term ids, doc positions, weighted term frequency, doc lengths) of `rows`, one
    posting per (doc, term); new terms are added to `vocab`."""
    tokens: list[str] = []
    counts: list[int] = []  # per doc: own terms, then context terms
    for r in rows:
        own = r.terms.split()
        ctx = r.context_terms.split()
        tokens += own
        tokens += ctx
        counts.append(len(own))
        counts.append(len(ctx))
    n = len(rows)
    sizes = np.asarray(counts, dtype=np.int64).reshape(n, 2) if n else np.zeros((0, 2), np.int64)
    # FTS5's row length: both columns, the own terms being in each
    lengths = (2 * sizes[:, 0] + sizes[:, 1]).astype(np.float32)
    if not tokens:
        empty = np.zeros(0, dtype=np.int32)
        return empty, empty, np.zeros(0, dtype=np.float32), lengths
    setdefault = vocab.setdefault
    term = np.fromiter(
        (setdefault(t, len(vocab)) for t in tokens), dtype=np.int64, count=len(tokens)
    )
    doc = np.repeat(np.arange(first_doc, first_doc + n, dtype=np.int64), sizes.sum(axis=1))
    weight = np.repeat(np.tile(np.asarray([_OWN, 1.0]), n), sizes.ravel())
    span = np.int64(first_doc + n)
    keys, inverse = np.unique(term * span + doc, return_inverse=True)
    freq = np.bincount(inverse.ravel(), weights=weight, minlength=keys.size)
    return (
        (keys // span).astype(np.int32),
        (keys % span).astype(np.int32),
        freq.astype(np.float32),
        lengths,
    )


@dataclass
class _Docs:
    """Documents of one project, append-only: a search sees the first `n` of a snapshot
    while later documents are appended behind it."""

    ids: IdMap = field(default_factory=IdMap)  # id by position and position by id
    vocab: dict[str, int] = field(default_factory=dict)
    lengths: F32 = field(default_factory=lambda: np.zeros(0, dtype=np.float32))
    attrs: RowAttributes = field(default_factory=RowAttributes)  # what filters read
    # the store's change number of each row (KeywordRow.seq), ascending
    seqs: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    # rows that left the store's index; a snapshot reads it below its `n` (marks made
    # after it was taken show too: they are gone from the store as well)
    dead: npt.NDArray[np.bool_] = field(default_factory=lambda: np.zeros(0, dtype=np.bool_))
    n: int = 0
    # some term is not plain ASCII (Chinese, say): what a cross-language query could meet
    non_ascii: bool = False

    def add(self, rows: Sequence[KeywordRow]) -> tuple[I32, I32, F32]:
        start, known = self.n, len(self.vocab)
        # in batches: the strings of one batch at a time, not of the whole project
        parts = [
            _postings(rows[i : i + _BATCH], start + i, self.vocab)
            for i in range(0, len(rows), _BATCH)
        ]
        if not parts:
            return _postings([], start, self.vocab)[:3]
        if not self.non_ascii:  # the terms first seen now come last in the vocabulary
            self.non_ascii = not all(t.isascii() for t in islice(self.vocab, known, None))
        terms, docs, freqs, lengths = (np.concatenate(p) for p in zip(*parts, strict=True))
        self.lengths = grown(self.lengths, start + len(rows), start)
        self.lengths[start : start + len(rows)] = lengths
        self.seqs = grown(self.seqs, start + len(rows), start)
        self.seqs[start : start + len(rows)] = [r.seq for r in rows]
        self.dead = grown(self.dead, start + len(rows), start)
        self.attrs.append(rows)
        self.ids.extend(r.item_id for r in rows)
        self.n += len(rows)
        return terms, docs, freqs

    def held(self, seqs: Sequence[int]) -> npt.NDArray[np.int64]:
        """The live positions of the rows numbered `seqs` (numbers not held are left out)."""
        if not seqs or not self.n:
            return np.zeros(0, dtype=np.int64)
        wanted = np.unique(np.asarray(seqs, dtype=np.int64))
        held = self.seqs[: self.n]
        at = np.minimum(np.searchsorted(held, wanted), self.n - 1)
        at = at[held[at] == wanted]
        return np.asarray(at[~self.dead[at]], dtype=np.int64)


@dataclass(frozen=True)
class _Postings:
    """Sorted postings (CSR by term) plus appended ones not merged yet."""

    offsets: npt.NDArray[np.int64]  # term t's postings: [offsets[t], offsets[t + 1])
    docs: I32
    freqs: F32
    tail_terms: I32
    tail_docs: I32
    tail_freqs: F32

    # per term, for its bound on what it adds to a score: the largest frequency and the
    # shortest item among its sorted postings (appended ones are read per query)
    peaks: F32
    shortest: F32

    @staticmethod
    def build(terms: I32, docs: I32, freqs: F32, vocab_size: int, lengths: F32) -> _Postings:
        order = np.lexsort((docs, terms))
        offsets = np.zeros(vocab_size + 1, dtype=np.int64)
        np.cumsum(np.bincount(terms, minlength=vocab_size), out=offsets[1:])
        docs, freqs = docs[order], freqs[order]
        held = np.flatnonzero(np.diff(offsets))
        peaks = np.zeros(vocab_size, dtype=np.float32)
        shortest = np.full(vocab_size, np.inf, dtype=np.float32)
        if held.size:
            peaks[held] = np.maximum.reduceat(freqs, offsets[held])
            shortest[held] = np.minimum.reduceat(lengths[docs], offsets[held])
        empty = np.zeros(0, dtype=np.int32)
        no_tail = np.zeros(0, np.float32)
        return _Postings(offsets, docs, freqs, empty, empty, no_tail, peaks, shortest)

    def appended(
        self, terms: I32, docs: I32, freqs: F32, vocab_size: int, lengths: F32
    ) -> _Postings:
        tail_terms = np.concatenate([self.tail_terms, terms])
        if tail_terms.size > max(_TAIL_POSTINGS, self.docs.size // 8):
            sorted_terms = np.repeat(
                np.arange(self.offsets.size - 1, dtype=np.int32), np.diff(self.offsets)
            )
            return _Postings.build(
                np.concatenate([sorted_terms, tail_terms]),
                np.concatenate([self.docs, self.tail_docs, docs]),
                np.concatenate([self.freqs, self.tail_freqs, freqs]),
                vocab_size,
                lengths,
            )
        return dataclasses.replace(
            self,
            tail_terms=tail_terms,
            tail_docs=np.concatenate([self.tail_docs, docs]),
            tail_freqs=np.concatenate([self.tail_freqs, freqs]),
        )

    def of(self, term: int) -> tuple[I32, F32]:
        return self.held(term)[:2]

    def held(self, term: int, lengths: F32 | None = None) -> tuple[I32, F32, float, float]:
        """The term's postings (positions ascending, frequencies), the largest frequency and
        the shortest item's length among them (with `lengths`, else 0 and inf)."""
        peak, short = 0.0, math.inf
        if term + 1 < self.offsets.size:
            lo, hi = int(self.offsets[term]), int(self.offsets[term + 1])
            docs, freqs = self.docs[lo:hi], self.freqs[lo:hi]
            if lengths is not None:
                peak, short = float(self.peaks[term]), float(self.shortest[term])
        else:
            docs, freqs = self.docs[:0], self.freqs[:0]
        if self.tail_terms.size:
            hit = self.tail_terms == term
            if hit.any():
                tail_docs, tail_freqs = self.tail_docs[hit], self.tail_freqs[hit]
                docs = np.concatenate([docs, tail_docs])
                freqs = np.concatenate([freqs, tail_freqs])
                if lengths is not None:
                    peak = max(peak, float(tail_freqs.max()))
                    short = min(short, float(lengths[tail_docs].min()))
        return docs, freqs, peak, short

    def at(self, term: int, among: npt.NDArray[np.int64]) -> tuple[I32, F32]:
        """`of(term)` restricted to the doc positions `among` (sorted): a binary search per
        position instead of reading the whole list, for a filter listed whole."""
        docs, freqs = self.docs[:0], self.freqs[:0]
        if term + 1 < self.offsets.size:
            lo, hi = int(self.offsets[term]), int(self.offsets[term + 1])
            sorted_docs = self.docs[lo:hi]  # sorted by doc within a term (see build)
            at = np.searchsorted(sorted_docs, among)
            found = at < sorted_docs.size
            found[found] = sorted_docs[at[found]] == among[found]
            docs, freqs = sorted_docs[at[found]], self.freqs[lo:hi][at[found]]
        if self.tail_terms.size:
            hit = self.tail_terms == term
            if hit.any():
                tail = self.tail_docs[hit]
                keep = np.isin(tail, among)
                docs = np.concatenate([docs, tail[keep]])
                freqs = np.concatenate([freqs, self.tail_freqs[hit][keep]])
        return docs, freqs

    def dead_counts(self, dead: npt.NDArray[np.bool_], vocab_size: int) -> npt.NDArray[np.int64]:
        """Per term, how many of its postings are of the rows marked in `dead`."""
        hit = np.flatnonzero(dead[self.docs])
        terms = np.searchsorted(self.offsets, hit, side="right") - 1
        tail = self.tail_terms[dead[self.tail_docs]]
        return np.bincount(np.concatenate([terms, tail]), minlength=vocab_size).astype(np.int64)

    def df(self, term: int) -> int:
        """How many docs hold `term`."""
        n = 0
        if term + 1 < self.offsets.size:
            n = int(self.offsets[term + 1] - self.offsets[term])
        if self.tail_terms.size:
            n += int(np.count_nonzero(self.tail_terms == term))
        return n

    @property
    def size(self) -> int:
        return int(self.docs.size + self.tail_docs.size)

    @property
    def nbytes(self) -> int:
        arrays = (self.offsets, self.docs, self.freqs, self.tail_terms, self.tail_docs)
        extra = (self.tail_freqs, self.peaks, self.shortest)
        return sum(int(a.nbytes) for a in (*arrays, *extra))


@dataclass(frozen=True)
class _Loaded:
    generation: int
    marker: int
    removals: int
    docs: _Docs
    n: int  # rows held, dead ones included
    live: int  # rows not dead: BM25's item count
    total_length: float  # of the live rows
    postings: _Postings
    norms: npt.NDArray[np.float64]  # per item: BM25's length term k1 * (1 - b + b * dl / avgdl)
    avgdl: float
    # per term, its postings of dead rows (None: no row dead)
    dead_df: npt.NDArray[np.int64] | None

    @staticmethod
    def of(
        gen: int,
        marker: int,
        removals: int,
        docs: _Docs,
        postings: _Postings,
        dead_df: npt.NDArray[np.int64] | None = None,
    ) -> _Loaded:
        n = docs.n
        lengths = docs.lengths[:n].astype(np.float64)  # float32 arithmetic would round
        alive = ~docs.dead[:n]
        live = int(np.count_nonzero(alive))
        # lengths are whole numbers: the float64 sum is exact in any order, as a reload's
        total = float(lengths[alive].sum()) if live < n else float(lengths.sum())
        avgdl = total / live if live and total > 0 else 1.0
        return _Loaded(
            gen,
            marker,
            removals,
            docs,
            n,
            live,
            total,
            postings,
            _norms(lengths, avgdl),
            avgdl,
            dead_df if live < n else None,
        )

    def df(self, term: int, held: int) -> int:
        """Live items holding `term`, of which `held` postings are held."""
        return held - int(self.dead_df[term]) if self.dead_df is not None else held

    def alive(self, positions: npt.NDArray[np.integer]) -> npt.NDArray[np.bool_]:
        alive: npt.NDArray[np.bool_] = ~self.docs.dead[positions]
        return alive


# What other in-memory views read from (retrieve/session_keys.py): the project's rows, their
# attributes and postings as of one store generation.
KeywordSnapshot = _Loaded


def _updated(
    cached: _Loaded,
    gone: npt.NDArray[np.int64],
    rows: Sequence[KeywordRow],
    gen: int,
    marker: int,
    removals: int,
) -> _Loaded:
    """`cached` with its live rows at positions `gone` marked dead and `rows` appended:
    what a reload of the same rows would score, to the statistics (the live item count,
    total length and each term's document frequency count live rows only)."""
    docs = cached.docs
    dead_df = cached.dead_df
    if gone.size:
        newly = np.zeros(cached.n, dtype=np.bool_)
        newly[gone] = True
        counts = cached.postings.dead_counts(newly, len(docs.vocab))
        dead_df = counts if dead_df is None else dead_df + counts
        docs.dead[gone] = True
    terms, positions, freqs = docs.add(rows)
    postings = cached.postings
    if rows:
        postings = postings.appended(
            terms, positions, freqs, len(docs.vocab), docs.lengths[: docs.n]
        )
    if dead_df is not None and dead_df.size < len(docs.vocab):  # new terms: none dead
        dead_df = np.concatenate([dead_df, np.zeros(len(docs.vocab) - dead_df.size, np.int64)])
    return _Loaded.of(gen, marker, removals, docs, postings, dead_df)


def _in_order(docs: _Docs, rows: Sequence[KeywordRow]) -> bool:
    """Whether `rows` are numbered after every row held, ascending (as the store hands
    them out), so a row's number finds its position."""
    seqs = np.fromiter((r.seq for r in rows), dtype=np.int64, count=len(rows))
    last = int(docs.seqs[docs.n - 1]) if docs.n else 0
    return not seqs.size or (int(seqs[0]) > last and bool(np.all(np.diff(seqs) > 0)))


def _replaced(docs: _Docs, new_ids: Sequence[str], gone: npt.NDArray[np.int64]) -> bool:
    """Whether every new row whose id is held replaces a row that left (dead already or
    `gone` now): else the store changed a row without saying so."""
    if not new_ids or not docs.n:
        return True
    at = docs.ids.lookup(new_ids)
    at = at[(at >= 0) & (at < docs.n)]
    live = at[~docs.dead[at]]
    return bool(np.isin(live, gone).all())


def _both(alive: Admit, admit: Admit | None) -> Admit:
    """`alive` and then `admit` (on the rows `alive` passes)."""

    def admitted(positions: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        keep = alive(positions)
        if admit is not None and keep.any():
            keep[keep] = admit(positions[keep])
        return keep

    return admitted


def _norms(lengths: npt.NDArray[np.float64], avgdl: float) -> npt.NDArray[np.float64]:
    """BM25's length term of items of these lengths."""
    return np.asarray(BM25_K1 * (1.0 - BM25_B + BM25_B * lengths / avgdl), dtype=np.float64)


class KeywordIndex:
    """Per project keyword postings, shared by all searches of one ContextBase."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._cache: dict[str, _Loaded] = {}
        self._lock = threading.Lock()
        self.reloads = 0  # full reads of a project's items (the rest were appends)
        self.scored = 0  # postings read by searches (whole, or looked up for a candidate)
        self.scoring: Literal["top", "exhaustive", "dense"] = "top"

    def drop(self, project_id: str) -> int:
        """Forget the project's postings held in memory (after a hard forget); returns how
        many items they covered."""
        with self._lock:
            loaded = self._cache.pop(project_id, None)
        return loaded.n if loaded is not None else 0

    def stats(self, project_id: str) -> dict[str, int]:
        """Size of the project's index: items, distinct terms, postings, bytes of arrays."""
        loaded = self._load(project_id)
        return {
            "items": loaded.live,
            "terms": len(loaded.docs.vocab),
            "postings": loaded.postings.size,
            "array_bytes": loaded.postings.nbytes + int(loaded.docs.lengths.nbytes),
            "attribute_bytes": loaded.docs.attrs.nbytes,
        }

    def frequencies(self, project_id: str, terms: Iterable[str]) -> tuple[int, dict[str, int]]:
        """The project's item count and how many of its items hold each of `terms` (in their
        own terms or their context's, as BM25 counts them); terms no item holds are left out."""
        loaded = self._load(project_id)
        vocab, out = loaded.docs.vocab, {}
        for term in terms:
            tid = vocab.get(term)
            if tid is not None and (df := loaded.df(tid, int(loaded.postings.of(tid)[0].size))):
                out[term] = df
        return loaded.live, out

    def holds_non_ascii(self, project_id: str) -> bool:
        """Whether some item of the project holds a term that is not plain ASCII (a Chinese
        word, say), dead items included."""
        return self._load(project_id).docs.non_ascii

    def screen(self, project_id: str, ids: Sequence[str], flt: ItemFilter) -> list[bool] | None:
        """Per id, whether `flt` may admit it by the attributes held here (False only where
        the store would not admit it either; an id not held here may pass), or None when
        the project's index is not current (never loaded, or behind the store): it is not
        read for this, and a replaced row's old attributes must not rule it out."""
        with self._lock:
            loaded = self._cache.get(project_id)
        if loaded is None or loaded.generation != generation(self.store, project_id):
            return None
        at = loaded.docs.ids.lookup(ids)
        held = (at >= 0) & (at < loaded.n)
        keep = np.ones(len(ids), dtype=np.bool_)
        keep[held] = loaded.docs.attrs.admitted(flt, at[held])
        return [bool(k) for k in keep]

    def count_admitted(self, project_id: str, flt: ItemFilter) -> int | None:
        """How many items `flt` admits by the attributes held here (give or take the items
        changed since the index's read), or None when the index cannot tell: not loaded, or
        `flt` has conditions it does not hold."""
        with self._lock:
            if project_id not in self._cache:
                return None
        loaded = self._load(project_id)
        attrs = loaded.docs.attrs
        if not attrs.holds(flt):
            return None
        dead = np.flatnonzero(loaded.docs.dead[: loaded.n])
        return attrs.count(flt, loaded.n) - int(np.count_nonzero(attrs.admitted(flt, dead)))

    def snapshot(self, project_id: str) -> KeywordSnapshot:
        """The project's index as of the store's current generation (read or brought up to
        date first); its rows below `n` and their postings do not change (rows marked dead
        later show as dead in it too)."""
        return self._load(project_id)

    def _load(self, project_id: str) -> _Loaded:
        gen = generation(self.store, project_id)
        return current(
            self._lock,
            self._cache,
            project_id,
            gen,
            lambda cached: self._appended(cached, project_id, gen),
            lambda: self._reloaded(project_id, gen),
        )

    def _appended(self, cached: _Loaded, project_id: str, gen: int) -> _Loaded | None:
        """`cached` less the rows the store removed since and plus the items stored since,
        or None when only a reload is right."""
        delta = self.store.keyword_changes(project_id, cached.marker)
        docs = cached.docs
        new_ids = [r.item_id for r in delta.rows]
        if delta.removed is None:  # the store cannot tell what left: only appends
            if not appendable(cached, delta.removals, docs.n, new_ids, docs.ids):
                return None
            gone = np.zeros(0, dtype=np.int64)
        else:
            if docs.n != cached.n:
                return None  # rows appended by another snapshot
            gone = docs.held(delta.removed)
            if not _in_order(docs, delta.rows) or not _replaced(docs, new_ids, gone):
                return None
            dead = cached.n - cached.live + gone.size
            if 2 * dead > cached.n + len(delta.rows):
                return None  # most rows dead: a reload compacts
        return _updated(cached, gone, delta.rows, gen, delta.marker, delta.removals)

    def _reloaded(self, project_id: str, gen: int) -> _Loaded:
        self.reloads += 1
        delta = self.store.keyword_changes(project_id, 0)
        docs = _Docs()
        terms, positions, freqs = docs.add(delta.rows)
        postings = _Postings.build(terms, positions, freqs, len(docs.vocab), docs.lengths)
        return _Loaded.of(gen, delta.marker, delta.removals, docs, postings)

    def search(
        self,
        project_id: str,
        terms: Sequence[str],
        limit: int,
        flt: ItemFilter | None = None,
        allowed: Admission | None = None,
        mode: Literal["or", "and"] = "or",
        weights: Mapping[str, float] | None = None,
    ) -> list[tuple[str, float]]:
        """The best `limit` active items of the project for `terms` with their BM25 scores
        (higher is better) that `flt` admits, checked against the store; `allowed` is `flt`
        already resolved by the caller (search.FilterScope), checked through it instead.
        A term in `weights` counts that much of its BM25 weight (its idf scaled)."""
        loaded = self._load(project_id)
        if limit <= 0:
            return []
        among: npt.NDArray[np.int64] | None = None
        if allowed is not None and allowed.ids is not None:
            # a filter listed whole (read from the store by this search): score only its items
            among = np.unique(loaded.docs.ids.positions(allowed.ids, loaded.n))
            among = among[loaded.alive(among)]
        postings = self._postings(loaded, terms, mode, among, weights)
        if not postings:
            return []
        whole = among is not None
        attrs = loaded.docs.attrs
        # what the attributes held here rule out is never looked up in the store, nor is
        # a dead row
        admit: Admit | None = None if flt is None or whole else partial(attrs.admitted, flt)
        if loaded.live < loaded.n and not whole:
            admit = _both(loaded.alive, admit)
        rank = self._ranking(loaded.norms, postings, mode, admit, pruned=not whole)
        # a filter the attributes do not decide whole fails more often in the store
        broad = not whole and not attrs.holds(flt)
        ranked = rank(4 * limit + 64 if broad else limit + _SLACK)
        ids = loaded.docs.ids
        hits: list[tuple[str, float]] = []
        checked = 0
        while True:
            order = ranked.positions[checked:]
            window = [ids[int(p)] for p in order]
            admitted = self._admitted(project_id, window, flt, allowed)
            hits += [
                (i, float(s))
                for i, s in zip(window, ranked.scores[checked:], strict=True)
                if i in admitted
            ]
            checked = ranked.positions.size
            if len(hits) >= limit or ranked.complete or checked == 0:
                return hits[:limit]
            ranked = rank(checked * 8)

    def _postings(
        self,
        loaded: _Loaded,
        terms: Sequence[str],
        mode: Literal["or", "and"],
        among: npt.NDArray[np.int64] | None,
        weights: Mapping[str, float] | None = None,
    ) -> list[TermPostings]:
        """The query terms' postings (with `among`, only those of these sorted positions),
        each idf scaled by the term's weight (1 when not given); none when no item can
        match."""
        wanted = list(dict.fromkeys(t for t in terms if t.strip()))
        weights = weights or {}
        vocab, out = loaded.docs.vocab, []
        n = loaded.live
        for term in wanted:
            tid = vocab.get(term)
            if tid is None or not n:
                continue
            tf_bound = 1.0
            if among is None:
                docs, freqs, peak, short = loaded.postings.held(tid, loaded.docs.lengths)
                df = loaded.df(tid, int(docs.size))
                if df:  # no item holds more of it, none is shorter (dead ones included)
                    norm = float(_norms(np.asarray([short], np.float64), loaded.avgdl)[0])
                    tf_bound = peak / (peak + norm)
            else:  # idf still counts every doc of the term
                df = loaded.df(tid, loaded.postings.df(tid))
                docs, freqs = loaded.postings.at(tid, among)
            if not df:
                continue
            idf = math.log((n - df + 0.5) / (df + 0.5))
            idf = idf if idf > 0 else 1e-6  # as FTS5: a very common term still counts a little
            out.append(TermPostings(docs, freqs, idf * weights.get(term, 1.0), tf_bound))
        if mode == "and" and len(out) < len(wanted):
            return []
        return out

    def _ranking(
        self,
        norms: npt.NDArray[np.float64],
        postings: list[TermPostings],
        mode: Literal["or", "and"],
        admit: Admit | None,
        pruned: bool,
    ) -> Callable[[int], Ranked]:
        """The best k matches for a k, by `self.scoring`: "top" prunes what cannot reach the
        k best where it can, "exhaustive" scores every match once, "dense" as "exhaustive"
        through one score per item of the project (the former way, kept to compare)."""
        if pruned and mode == "or" and self.scoring == "top":

            def pruning(k: int) -> Ranked:
                ranked = top(postings, norms, k, admit)
                self.scored += ranked.read
                return ranked

            return pruning
        every = (dense if self.scoring == "dense" else exhaustive)(postings, norms, mode)
        self.scored += every.read
        positions, scores = every.positions, every.scores
        if admit is not None and positions.size:
            keep = admit(positions)
            positions, scores = positions[keep], scores[keep]

        def listed(k: int) -> Ranked:
            pick = best(positions, scores, min(k, positions.size))
            return Ranked(positions[pick], scores[pick], 0, k >= positions.size)

        return listed

    def _admitted(
        self,
        project_id: str,
        window: list[str],
        flt: ItemFilter | None,
        allowed: Admission | None,
    ) -> set[str]:
        """The ids of `window` that are, in the store now, active items of the project
        that the filter admits: an index a moment behind never returns a forgotten,
        hidden or foreign item."""
        if not window:
            return set()
        if allowed is not None:  # `flt` resolved: listed from the store, or checked there
            return allowed.admits(window)
        return self.store.filter_item_ids(project_id, flt or ItemFilter(), among=window)
