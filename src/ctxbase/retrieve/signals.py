"""What a search knows about its candidates beyond their text: confidence and use.

Seed 001 (6.2) asks for two signals against "memory hallucination": a confidence on every
stored event (from a tool's return status, the user's like or dislike, later checks) and
a time decay that spares what is "frequently retrieved or explicitly linked". The store
keeps them as state records keyed by the node (store.base.FEEDBACK_SCOPE, USES_SCOPE);
`read_signals` reads what a search's config needs of them for its candidates: confidence
by key, remembered (`KnownSignals`) while the project's index generation stands (feedback
moves it), so a repeated search reads nothing more; with a time decay, the uses and
links of the candidates (two bounded reads). `UsageRecorder` counts the memories
assembled contexts placed and writes them in batches.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import StorageError
from ..store.base import FEEDBACK_SCOPE, USES_SCOPE, Store
from .config import SearchConfig

__all__ = [
    "USES_FLUSH_EVERY",
    "USES_FLUSH_S",
    "Confidence",
    "KnownSignals",
    "Signals",
    "UsageRecorder",
    "feedback_confidence",
    "rated_false",
    "read_signals",
    "tool_failed",
]

log = logging.getLogger(__name__)

# Uses held in memory are written once this many assembled contexts noted them, or on the
# first note this long after the last write, and when the base closes.
USES_FLUSH_EVERY = 32
USES_FLUSH_S = 30.0


@dataclass(frozen=True, slots=True)
class Confidence:
    value: float
    source: str  # "feedback:<label>" or "tool_error"
    # feedback's note ("it is 20 s, not 30 s"), when given, and when the feedback was given
    note: str | None = None
    at: float | None = None


@dataclass
class Signals:
    """Per owner id (event or entity): confidence when not neutral, the assembled contexts
    that placed it, and the edge that links it (the relation type) when one does."""

    confidence: dict[str, Confidence] = field(default_factory=dict)
    uses: dict[str, int] = field(default_factory=dict)
    linked: dict[str, str] = field(default_factory=dict)


def tool_failed(metadata: Mapping[str, Any]) -> bool:
    """A tool result that reports a failure: metadata `error`, or a non-zero `exit_code`."""
    code = metadata.get("exit_code")
    return bool(metadata.get("error")) or (code is not None and code != 0)


def feedback_confidence(value: Any, at: float | None = None) -> Confidence | None:
    """The confidence a stored feedback record (its value; `at`: when it was given) sets,
    with its note, or None if malformed."""
    if not isinstance(value, Mapping):
        return None
    conf = value.get("confidence")
    if isinstance(conf, bool) or not isinstance(conf, int | float):
        return None
    note = value.get("note")
    note = note.strip() if isinstance(note, str) and note.strip() else None
    return Confidence(float(conf), f"feedback:{value.get('label', '?')}", note, at)


def _decays(config: SearchConfig) -> bool:
    return bool(config.time_decay_half_life_days)


class KnownSignals:
    """What searches read of confidence, per project: each node's feedback (or that it has
    none) while the project's index generation stands, and whether a tool result reports a
    failure (its metadata never changes). Bounded: past `limit` entries it starts again."""

    def __init__(self, limit: int = 100_000) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._feedback: dict[str, tuple[int, dict[str, Confidence | None]]] = {}
        self._failed: dict[tuple[str, str], bool] = {}

    def feedback(
        self, store: Store, project_id: str, ids: Collection[str]
    ) -> dict[str, Confidence]:
        from .synced import generation  # numpy: not for the commands that only give feedback

        gen = generation(store, project_id)
        with self._lock:
            held_gen, held = self._feedback.get(project_id, (gen, {}))
            known = dict(held) if held_gen == gen else {}
        missing = [i for i in ids if i not in known]
        if missing:
            found = store.get_state_keys(project_id, FEEDBACK_SCOPE, "", missing)
            for i in missing:
                fact = found.get(i)
                known[i] = (
                    None if fact is None else feedback_confidence(fact.value, fact.updated_at)
                )
            with self._lock:
                if len(known) > self.limit:
                    known = {i: known[i] for i in ids}
                self._feedback[project_id] = (gen, known)
        return {i: c for i in ids if (c := known.get(i)) is not None}

    def failed_tools(self, store: Store, project_id: str, ids: Collection[str]) -> set[str]:
        with self._lock:
            known = {
                i: self._failed[(project_id, i)] for i in ids if (project_id, i) in self._failed
            }
        missing = [i for i in ids if i not in known]
        if missing:
            events = {e.id: tool_failed(e.metadata) for e in store.get_events(project_id, missing)}
            with self._lock:
                if len(self._failed) > self.limit:
                    self._failed.clear()
                for i, failed in events.items():
                    self._failed[(project_id, i)] = failed
            known.update(events)
        return {i for i, failed in known.items() if failed}

    def drop(self, project_id: str) -> int:
        """Forget what is held of a project (after a hard forget); the entries dropped."""
        with self._lock:
            n = len(self._feedback.pop(project_id, (0, {}))[1])
            gone = [k for k in self._failed if k[0] == project_id]
            for k in gone:
                del self._failed[k]
            return n + len(gone)


def rated_false(
    store: Store, project_id: str, ids: Collection[str], known: KnownSignals
) -> dict[str, Confidence]:
    """Those of `ids` whose feedback says they are false (confidence below the default
    `SearchConfig.min_confidence`: "wrong"), with that confidence. Searches leave them out
    themselves; an assembly's history window and the strategies that follow references
    and edges read no search, and ask this once for what they gathered."""
    if not ids:
        return {}
    floor = SearchConfig.model_fields["min_confidence"].default
    rated = known.feedback(store, project_id, ids)
    return {i: c for i, c in rated.items() if c.value < floor}


def read_signals(
    store: Store,
    project_id: str,
    owners: Mapping[str, str],
    config: SearchConfig,
    usage: UsageRecorder | None = None,
    known: KnownSignals | None = None,
) -> Signals:
    """The signals of `owners` (owner id -> its item's type) that `config` uses: confidence
    unless `confidence_weight` and `min_confidence` are both 0 (through `known`, which
    remembers them); uses and links only with a time decay. Uses not yet written by
    `usage` count too. A link is a deliberate edge (store.rows.is_deliberate: created
    through the API, an explicit reference), never one a rule inferred."""
    out = Signals()
    ids = list(owners)
    if not ids:
        return out
    known = known if known is not None else KnownSignals()
    if config.confidence_weight > 0 or config.min_confidence > 0:
        out.confidence.update(known.feedback(store, project_id, ids))
        tools = [i for i, t in owners.items() if t == "tool_result" and i not in out.confidence]
        if config.tool_error_confidence is not None and tools:
            for event_id in known.failed_tools(store, project_id, tools):
                out.confidence[event_id] = Confidence(config.tool_error_confidence, "tool_error")
    if not _decays(config):
        return out
    for key, fact in store.get_state_keys(project_id, USES_SCOPE, "", ids).items():
        out.uses[key] = int(fact.version)
    if usage is not None:
        for key, n in usage.pending(project_id, ids).items():
            out.uses[key] = out.uses.get(key, 0) + n
    types = [t for t in config.decay_spare_relations if t != "CAUSED_BY"]
    if types:
        # "explicitly linked": an edge a rule inferred from a name or a co-occurrence does
        # not count, or everything old that names anything would never decay
        rels = store.list_relations(
            project_id, ids, types=types, limit_per_node=1, deliberate_only=True
        )
        for rel in rels:
            for end in (rel.from_id, rel.to_id):
                if end in owners:
                    out.linked.setdefault(end, rel.type)
    if "CAUSED_BY" in config.decay_spare_relations:  # an event it caused: the edge comes in
        for rel in store.list_relations(
            project_id, ids, direction="in", types=["CAUSED_BY"], limit_per_node=1
        ):
            if rel.to_id in owners:
                out.linked.setdefault(rel.to_id, "CAUSED_BY")
    return out


class UsageRecorder:
    """Counts, per project and node, the assembled contexts that placed it, and writes the
    counts in batches (`Store.add_uses`): an assembly adds no write of its own."""

    def __init__(
        self, store: Store, flush_every: int = USES_FLUSH_EVERY, flush_s: float = USES_FLUSH_S
    ) -> None:
        self.store = store
        self.flush_every = flush_every
        self.flush_s = flush_s
        self._lock = threading.Lock()
        self._counts: dict[str, Counter[str]] = {}
        self._last: dict[str, float] = {}  # project -> when it last noted a use
        self._noted = 0
        self._written_at = time.monotonic()

    def note(self, project_id: str, node_ids: Iterable[str], at: float | None = None) -> None:
        """One assembled context placed these nodes."""
        ids = set(node_ids)
        if not ids:
            return
        with self._lock:
            self._counts.setdefault(project_id, Counter()).update(ids)
            self._last[project_id] = time.time() if at is None else at
            self._noted += 1
            due = (
                self._noted >= self.flush_every
                or time.monotonic() - self._written_at >= self.flush_s
            )
        if due:
            self.flush()

    def pending(self, project_id: str, ids: Collection[str]) -> dict[str, int]:
        """Uses of `ids` noted but not written yet."""
        with self._lock:
            counts = self._counts.get(project_id)
            if not counts:
                return {}
            return {i: counts[i] for i in ids if counts.get(i)}

    def forget(self, project_id: str, ids: Collection[str] | None = None) -> int:
        """Drop noted uses of forgotten nodes (None: the whole project); how many."""
        with self._lock:
            counts = self._counts.get(project_id)
            if not counts:
                return 0
            if ids is None:
                del self._counts[project_id]
                return len(counts)
            gone = [i for i in ids if i in counts]
            for i in gone:
                del counts[i]
            return len(gone)

    def flush(self) -> None:
        """Write every noted use. A failed write is logged and keeps them for the next
        try: a use is a hint, and an assembly must not fail for it."""
        with self._lock:
            batch, self._counts = self._counts, {}
            last, self._last = self._last, {}
            self._noted = 0
            self._written_at = time.monotonic()
        for pid, counts in batch.items():
            try:
                self.store.add_uses(pid, dict(counts), last.get(pid, time.time()))
            except StorageError as exc:
                log.warning("memory uses of project %s not written yet: %s", pid, exc)
                with self._lock:
                    self._counts.setdefault(pid, Counter()).update(counts)
                    self._last.setdefault(pid, last.get(pid, time.time()))
