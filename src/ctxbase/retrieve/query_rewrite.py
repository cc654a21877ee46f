"""An optional LLM query rewrite: alternative wordings of a query, each searched too.

Seed 001 (6.3) asks for it: before retrieval, a model rewrites or expands the user's
question "so that it matches how the history put it" (基于上下文的查询重写). A question and
the turn that answers it often share no word ("上次那个慢查询怎么修的" against "给 orders.user_id
加了索引"); a model that knows the language can name the words the answer would use.

Off by default: no LLM is on the query path unless one is configured
(`ctxbase.open(..., query_rewrite=QueryRewriteConfig(...))`, or CTXBASE_REWRITE_BASE_URL and
CTXBASE_REWRITE_MODEL). Any OpenAI-compatible chat completions endpoint works. Only the
query is sent, never stored memory. Each alternative is searched by keyword (semantically
too with `rewrite_semantic`) and fused as one more ranking at `rewrite_weight` of its
method's weight, as a query's conjunct parts are (part_search.py).

A search never waits on a broken model: the call is bounded by `timeout_s` in all (a server
that answers byte by byte included), a failure leaves the search as it would be without a
rewrite (the response's `rewrite_error` says why), and the endpoint is left alone for
`retry_after_s` before it is asked again. Answers are kept per query (`cache_size`), so an
agent re-asking the same question pays once; a hard forget empties the cache.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic import ValidationError as PydanticError

from ..errors import EmbedderUnavailableError, ValidationError

if TYPE_CHECKING:
    from ..store.base import ItemFilter
    from .config import SearchConfig
    from .filter_scope import FilterScope
    from .search import Searcher

__all__ = [
    "QueryRewriteConfig",
    "QueryRewriter",
    "Rewrite",
    "RewriteStats",
    "parse_rewrites",
    "resolve_rewrite",
    "rewrite_rankings",
]

_SYSTEM_PROMPT = (
    "You help search an AI agent's memory: conversation turns, tool calls and results, "
    "documents and code, in any language. Rewrite the user's search query into at most "
    "{n} alternative queries, in the query's own language, that use the words the stored "
    "text that answers it would likely use: the question as a statement, the specific "
    "terms, names and synonyms it implies. Keep each short. Answer with JSON only: "
    '{{"queries": ["...", "..."]}}.'
)
_MAX_QUERY_CHARS = 500  # an alternative longer than this is cut (a model that rambled)


class QueryRewriteConfig(BaseModel):
    """Where the rewriting model is and how long a search may wait for it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    base_url: str = Field(min_length=1)  # the API root, ".../v1"
    model: str = Field(min_length=1)
    # The name of the environment variable holding the key (the key is never stored here).
    api_key_env: str | None = "CTXBASE_REWRITE_API_KEY"
    # The whole call, connection to last byte: the search goes on without it after this.
    timeout_s: float = Field(default=3.0, gt=0, le=60)
    # After a failure the endpoint is left alone this long (searches go on without it).
    retry_after_s: float = Field(default=30.0, ge=0)
    max_rewrites: int = Field(default=3, ge=1, le=8)
    cache_size: int = Field(default=1024, ge=0)
    json_mode: bool = True  # ask for response_format json_object

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> QueryRewriteConfig | None:
        """The endpoint named by CTXBASE_REWRITE_BASE_URL and CTXBASE_REWRITE_MODEL (key in
        CTXBASE_REWRITE_API_KEY), or None: no rewrite."""
        source = os.environ if env is None else env
        base_url = source.get("CTXBASE_REWRITE_BASE_URL", "").strip()
        model = source.get("CTXBASE_REWRITE_MODEL", "").strip()
        if not base_url or not model:
            return None
        return cls(base_url=base_url, model=model)

    def api_key(self) -> str | None:
        """The key, read from `api_key_env` when it is needed (None: no key is sent)."""
        return (os.environ.get(self.api_key_env) or None) if self.api_key_env else None


def resolve_rewrite(spec: Any) -> QueryRewriteConfig | None:
    """The rewriting model of `query_rewrite=`: a QueryRewriteConfig or a mapping of its
    fields; None: CTXBASE_REWRITE_BASE_URL / _MODEL if set; True: those, which must be;
    False: none."""
    if spec is False:
        return None
    if spec is None or spec is True:
        found = QueryRewriteConfig.from_env()
        if spec is True and found is None:
            raise ValidationError(
                "query_rewrite",
                "True needs CTXBASE_REWRITE_BASE_URL and CTXBASE_REWRITE_MODEL set; or pass "
                "QueryRewriteConfig(base_url=..., model=...)",
            )
        return found
    if isinstance(spec, QueryRewriteConfig):
        return spec
    if isinstance(spec, Mapping):
        try:
            return QueryRewriteConfig.model_validate(dict(spec))
        except PydanticError as exc:
            first = exc.errors()[0]
            where = ".".join(str(x) for x in first["loc"])
            raise ValidationError(f"query_rewrite.{where}", first["msg"]) from exc
    raise ValidationError(
        "query_rewrite",
        "must be a QueryRewriteConfig, a mapping of its fields, True or False "
        f"(got {type(spec).__name__})",
    )


@dataclass(frozen=True)
class Rewrite:
    """What the model made of one query: its alternatives, or why there are none."""

    queries: tuple[str, ...] = ()
    error: str | None = None
    cached: bool = False


@dataclass
class RewriteStats:
    requests: int = 0
    rewritten: int = 0  # answers that gave at least one alternative
    cached: int = 0
    errors: int = 0
    last_error: str | None = None


def parse_rewrites(content: str, query: str, limit: int) -> tuple[str, ...]:
    """The alternatives in a model's answer: a JSON object's `queries` (or a JSON list),
    else one per line; blank ones, the query itself and repeats left out, at most `limit`.
    ValueError when the answer holds none in either form."""
    text = content.strip()
    fenced = re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", text, re.DOTALL)
    if fenced:
        text = fenced.group(1)
    found: list[Any]
    try:
        parsed = json.loads(text)
    except ValueError:
        found = [re.sub(r"^\s*(?:[-*•]|\d+[.)、])\s*", "", line) for line in text.splitlines()]
        if not any(line.strip() for line in found):
            raise ValueError("the answer names no alternative query") from None
    else:
        if isinstance(parsed, dict):
            parsed = parsed.get("queries")
        if not isinstance(parsed, list):
            raise ValueError('the answer is JSON without a "queries" list')
        found = parsed
    seen = {query.strip().casefold()}
    out: list[str] = []
    for q in found:
        if not isinstance(q, str):
            continue
        q = " ".join(q.split())[:_MAX_QUERY_CHARS]
        if q and q.casefold() not in seen:
            seen.add(q.casefold())
            out.append(q)
    return tuple(out[:limit])


@dataclass
class QueryRewriter:
    """Asks the configured model for a query's alternatives; bounded, cached, backing off."""

    config: QueryRewriteConfig
    stats: RewriteStats = field(default_factory=RewriteStats)
    _cache: OrderedDict[str, tuple[str, ...]] = field(default_factory=OrderedDict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _resting_until: float = 0.0
    _pool: ThreadPoolExecutor | None = None

    def rewrite(self, query: str) -> Rewrite:
        key = query.strip()
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                self.stats.cached += 1
                return Rewrite(self._cache[key], cached=True)
            resting = self._resting_until - time.monotonic()
            if resting > 0:
                return Rewrite(
                    error=f"{self.stats.last_error} (not asked again for {resting:.0f} s)"
                )
            self.stats.requests += 1
            if self._pool is None:
                self._pool = ThreadPoolExecutor(4, thread_name_prefix="ctxbase-rewrite")
            pool = self._pool
        future: Future[tuple[str, ...]] = pool.submit(self._ask, key)
        try:
            queries = future.result(timeout=self.config.timeout_s)
        except FutureTimeout:
            return self._failed(f"no answer within {self.config.timeout_s:g} s")
        except Exception as exc:  # the endpoint's failure is the search's note, not its error
            return self._failed(str(exc))
        with self._lock:
            self.stats.rewritten += bool(queries)
            if self.config.cache_size:
                self._cache[key] = queries
                while len(self._cache) > self.config.cache_size:
                    self._cache.popitem(last=False)
        return Rewrite(queries)

    def forget(self) -> int:
        """Empty the cache (a hard forget: a cached query may quote forgotten text)."""
        with self._lock:
            n = len(self._cache)
            self._cache.clear()
            return n

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    def _failed(self, why: str) -> Rewrite:
        message = f"query rewrite failed: {why}"
        with self._lock:
            self.stats.errors += 1
            self.stats.last_error = message
            self._resting_until = time.monotonic() + self.config.retry_after_s
        return Rewrite(error=message)

    def _ask(self, query: str) -> tuple[str, ...]:
        try:
            import httpx  # only when a model is configured
        except ImportError as exc:
            raise RuntimeError(
                "it needs httpx: pip install 'ctxbase[openai]' (or the server extra)"
            ) from exc

        cfg = self.config
        payload: dict[str, Any] = {
            "model": cfg.model,
            "messages": [
                {"role": "system", "content": _SYSTEM_PROMPT.format(n=cfg.max_rewrites)},
                {"role": "user", "content": query},
            ],
            "temperature": 0,
        }
        if cfg.json_mode:
            payload["response_format"] = {"type": "json_object"}
        headers = {"Content-Type": "application/json"}
        if key := cfg.api_key():
            headers["Authorization"] = f"Bearer {key}"
        url = f"{cfg.base_url.rstrip('/')}/chat/completions"
        try:
            response = httpx.post(url, json=payload, headers=headers, timeout=cfg.timeout_s)
        except httpx.HTTPError as exc:
            raise RuntimeError(f"request to {url} failed: {exc}") from exc
        if response.status_code >= 400:
            raise RuntimeError(f"{url} answered HTTP {response.status_code}")
        try:
            content = response.json()["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise RuntimeError(f"{url} did not answer a chat completion") from exc
        if not isinstance(content, str):
            raise RuntimeError(f"{url} answered a completion without text content")
        try:
            return parse_rewrites(content, query, cfg.max_rewrites)
        except ValueError as exc:
            raise RuntimeError(f"{url}: {exc}") from exc


# (ranking name, weight, hits best first)
RewriteRanking = tuple[str, float, list[tuple[str, float]]]


def rewrite_rankings(
    searcher: Searcher,
    project_id: str,
    queries: tuple[str, ...],
    flt: ItemFilter | None,
    allowed: FilterScope | None,
    config: SearchConfig,
    semantic: bool,
) -> list[RewriteRanking]:
    """One keyword ranking per alternative (and a semantic one with `rewrite_semantic`),
    each weighing `rewrite_weight` of its method's weight."""
    out: list[RewriteRanking] = []
    if semantic and config.rewrite_semantic:
        for q in queries:  # embedded side by side while the keyword searches run
            searcher.prefetch_query(q)
    for n, q in enumerate(queries):
        if config.keyword:
            hits = searcher._keyword_hits(project_id, q, flt, config, allowed)
            out.append((f"rewrite{n}", config.rewrite_weight * config.keyword_weight, hits))
        if semantic and config.rewrite_semantic:
            try:
                hits = searcher._semantic_hits(project_id, q, allowed, config)
            except EmbedderUnavailableError:
                semantic = False  # the whole query's search reports it
                continue
            out.append(
                (f"rewrite{n}_semantic", config.rewrite_weight * config.semantic_weight, hits)
            )
    return out
