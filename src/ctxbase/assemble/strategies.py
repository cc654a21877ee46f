"""Memory-layer strategies: how each policy strategy finds candidates for the prompt.

A `Gatherer` collects the candidates of one assembly, merged by owner (an entity or an event)
across strategies, with what it dropped and why (retracted, expired, threshold, top_k,
consensus) and every relation it looked at. The strategies are seed 000's: referenced code
first, semantic recall, the project baseline, error-driven repair; multi-agent consensus is
run by the assembler, which can build the other agents' views.

Scores share one scale in [0, 1] so strategies mix: referenced code ~1.0, failing tests and
their logs ~0.95, what a relation leads to gets the parent's score times the edge's
confidence times 0.9, semantic hits 0.8 times their score relative to the best hit, the
project baseline 0.2-0.3.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..components import ComponentsSource, components_of
from ..model import Entity, Event, Relation
from ..retrieve.config import DEFAULT_RELATION_THRESHOLDS as SEARCH_THRESHOLDS
from ..retrieve.config import PRESETS, SearchConfig, get_preset
from ..retrieve.indexing import names_its_text
from ..retrieve.kb_view import entities_in_view
from ..retrieve.search import Candidate
from ..retrieve.signals import Confidence, rated_false, tool_failed
from ..store.base import ItemFilter
from .budget import fit_to_tokens
from .lifecycle import Status
from .policy import (
    DEFAULT_SEARCH,
    DEFAULT_SEARCH_PRESET,
    ErrorDrivenRepair,
    MultiAgentConsensus,
    Policy,
    ProjectScopeFallback,
    ReferencedCodeFirst,
    SemanticRecall,
)
from .recall_gate import gate_search, is_the_intent
from .repeats import contained_repeats, cut_from
from .state import MESSAGE_SCOPE, message_statuses, statuses_of
from .tokens import TokenCounter

if TYPE_CHECKING:
    from ..anchor.signing import SignatureCheck

__all__ = [
    "CODE_TYPES",
    "FOLLOW_PER_NODE",
    "Gatherer",
    "MemoryCandidate",
    "error_driven_repair",
    "event_failed",
    "label_for",
    "project_scope_fallback",
    "referenced_code_first",
    "semantic_recall",
]

CODE_TYPES = frozenset({"code", "sql", "test_case", "function", "class", "method", "script"})
_TEST_TYPES = frozenset({"test_case", "test"})
_LABEL_WORDS = {
    "user_message": "message",
    "assistant_message": "message",
    "tool_result": "tool result",
    "tool_invocation": "tool call",
    "test_case": "test case",
}
_BASELINE_TYPES = ("document", "requirement")
_ORDER_EDGE_TYPES = frozenset({"NEXT", "CAUSED_BY", "REFERS_TO", "MENTIONS"})
_SEMANTIC_EDGES = ("REFERENCES", "GENERATES", "FOLLOWS", "MODIFIES", "VALIDATES")
# A node's edges of one type followed at most (the oldest first): a document that thousands
# of items reference adds what the budget can hold, not the whole project.
FOLLOW_PER_NODE = 200


def label_for(type_: str, owner_id: str, name: str = "") -> str:
    """The source label of a memory item: "[document doc_101] Redis 规范", "[tool result ev_1]"."""
    head = f"[{_LABEL_WORDS.get(type_, type_.replace('_', ' '))} {owner_id}]"
    return f"{head} {name}" if name else head


def event_failed(event: Event) -> bool:
    """A tool result that reports a failure (metadata error, or a non-zero exit code)."""
    return tool_failed(event.metadata)


@dataclass
class MemoryCandidate:
    """One candidate of the memory layer, merged across the strategies that found it."""

    owner_id: str
    kind: str  # "entity" | "event"
    type: str
    name: str
    text: str
    score: float
    strategies: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    explain: dict[str, object] | None = None
    session_id: str | None = None
    partial: bool = False  # only the passages of a long entity that a search matched
    repo: str | None = None  # the repository of an ingested entity

    def item_text(self, counter: TokenCounter, max_item_tokens: int) -> str:
        body = (
            self.text
            if counter.count(self.text) <= max_item_tokens
            else (fit_to_tokens(self.text, max_item_tokens, counter) + " …")
        )
        # a name that only repeats the text (a requirement sentence) is not shown twice
        name = "" if names_its_text(self.name, self.text) else self.name
        return f"{label_for(self.type, self.owner_id, name)}\n{body}"


def relation_entry(rel: Relation, strategy: str, floor: float) -> dict[str, Any]:
    """A relation as the trace lists it: followed when its confidence reaches `floor`."""
    return {
        "from": rel.from_id,
        "to": rel.to_id,
        "type": rel.type,
        "confidence": rel.confidence,
        "source": rel.source,
        "strategy": strategy,
        "followed": rel.confidence >= floor,
    }


def _entity_cand(e: Entity, score: float, strategy: str, reason: str) -> MemoryCandidate:
    repo = e.properties.get("repo")
    return MemoryCandidate(
        e.id,
        "entity",
        e.type,
        e.name,
        e.text or e.name,
        score,
        [strategy],
        [reason],
        repo=repo if isinstance(repo, str) else None,
    )


def _event_cand(e: Event, score: float, strategy: str, reason: str) -> MemoryCandidate:
    return MemoryCandidate(
        e.id,
        "event",
        e.type,
        "",
        e.text or "",
        score,
        [strategy],
        [reason],
        session_id=e.session_id,
    )


class Gatherer:
    """The memory candidates of one assembly, with what was dropped and which edges followed."""

    def __init__(
        self,
        cb: ComponentsSource,
        pid: str,
        policy: Policy,
        *,
        session_id: str | None,
        intent: str,
        exclude: set[str],
        task_id: str | None = None,
        record: bool = True,
        signing_key: bytes | None = None,
        check: SignatureCheck | None = None,
        repos: frozenset[str] | None = None,
        statuses: Mapping[str, Mapping[str, Status]] | None = None,
    ) -> None:
        """`statuses`: message statuses already read, by session (not read again)."""
        cb = components_of(cb)
        self.cb, self.pid, self.policy = cb, pid, policy
        # with repositories named, entities ingested from any other one stay out
        self.repos = repos
        self.repos_seen: set[str] = set()  # the named ones some candidate came from
        # With a key (require_signature) only verified entities, units and relations enter;
        # what the check refuses is reported once, by the trace (build_result).
        self.signing_key = signing_key
        if check is None and signing_key is not None:
            from ..anchor.signing import SignatureCheck

            check = SignatureCheck(cb.store, pid, signing_key)
        self.check = check
        self.session_id, self.task_id, self.intent = session_id, task_id, intent
        self.exclude, self.record = exclude, record
        self.cands: dict[str, MemoryCandidate] = {}
        self.dropped: list[dict[str, Any]] = []
        self._drops: set[tuple[str, str, str]] = set()
        self.considered: list[dict[str, Any]] = []
        self.relations: list[dict[str, Any]] = []
        self.notes: list[str] = []
        self._pinned_hidden: frozenset[str] | None = None
        # True once a search found a hit about the question (a keyword match, or similarity
        # at the relevance floor); the project baseline is added only to such questions
        self.on_topic = False
        self._statuses: dict[str, Mapping[str, Status]] = dict(statuses or {})
        self._hidden: dict[str, str | None] = {}

    def drop_repeats(self) -> None:
        """Leave out candidates that say what another says (assemble/repeats.py); the one
        kept ranks at the better of the two scores."""
        texts = {k: (c.text, c.kind == "entity") for k, c in self.cands.items()}
        for gone, holder in contained_repeats(texts).items():
            cand = self.cands.pop(gone)
            kept = self.cands[holder]
            kept.score = max(kept.score, cand.score)
            self.drop(gone, "duplicate", f"says what {holder!r} says")

    def drop_withdrawn(self, also: Sequence[str] = ()) -> dict[str, Confidence]:
        """Leave out candidates rated false ("wrong"), and statements anchoring cut from a
        message that is rated false or retracted: searches leave out what is itself rated
        false, but references, edges and the session's own code reach memories without a
        search, and a statement (a decision, its SQL) stands or falls with its message.
        Returns those of `also` (the history's messages) that are rated false."""
        store = self.cb.store
        cut: dict[str, tuple[str, str]] = {}  # entity -> (the message it came from, its text)
        entities = [c.owner_id for c in self.cands.values() if c.kind == "entity"]
        for e in store.get_entities(self.pid, entities) if entities else []:
            source = e.properties.get("event_id")
            if isinstance(source, str) and source:
                cut[e.id] = (source, e.text)
        wanted = list(dict.fromkeys(source for source, _ in cut.values()))
        events = {ev.id: ev for ev in store.get_events(self.pid, wanted)} if wanted else {}
        sources = {
            k: source
            for k, (source, text) in cut.items()
            if source in events and cut_from(text, events[source].text or "")
        }
        self._prefetch_statuses(events.values())
        known = self.cb.searcher.known_signals
        false = rated_false(store, self.pid, [*self.cands, *events, *also], known)
        for owner_id in list(self.cands):
            source = sources.get(owner_id)
            if owner_id in false:
                conf = false[owner_id]
                self.drop(owner_id, "rated false", f"{conf.source} (confidence {conf.value:g})")
            elif source is not None and source in false:
                self.drop(
                    owner_id, "rated false", f"cut from {source}, rated {false[source].source}"
                )
            elif source is not None and (status := self._message_status(events[source])):
                self.drop(owner_id, status, f"cut from {source}, a {status} message")
            else:
                continue
            del self.cands[owner_id]
        return {i: false[i] for i in also if i in false}

    def _message_status(self, e: Event) -> str | None:
        """Why message `e` is out of prompts by its status (retracted...), or None."""
        status = self._statuses.get(e.session_id, {}).get(e.id, Status.ACTIVE)
        if status == Status.ACTIVE:
            return None
        return "retracted" if status == Status.EXPIRED else str(status)

    def drop(self, owner_id: str, reason: str, detail: str = "") -> None:
        if self.record:
            key = (owner_id, reason, detail)
            if key in self._drops:  # a long entity's passages drop once, not per passage
                return
            self._drops.add(key)
            self.dropped.append(
                {"id": owner_id, "layer": "memory", "reason": reason, "detail": detail}
            )

    def _prefetch_statuses(self, nodes: Iterable[Entity | Event]) -> None:
        """The message statuses of the sessions the events among `nodes` are in, in one
        read: a search's hits span many sessions, and reading each when its first event is
        checked cost a round trip per session."""
        missing = list(
            dict.fromkeys(
                n.session_id
                for n in nodes
                if isinstance(n, Event) and n.session_id not in self._statuses
            )
        )
        if not missing:
            return
        found = self.cb.store.get_states(self.pid, [(MESSAGE_SCOPE, s) for s in missing])
        for session_id in missing:
            self._statuses[session_id] = statuses_of(found.get((MESSAGE_SCOPE, session_id), []))

    def _hidden_reason(self, e: Event) -> str | None:
        if e.id not in self._hidden:
            statuses = self._statuses.get(e.session_id)
            if statuses is None:
                statuses = message_statuses(self.cb, e.session_id, project=self.pid)
                self._statuses[e.session_id] = statuses
            status = statuses.get(e.id, Status.ACTIVE)
            reason: str | None = None
            if status != Status.ACTIVE:
                reason = "retracted" if status == Status.EXPIRED else str(status)
            elif e.type == "tool_result" and e.metadata.get("per_turn"):
                later = self.cb.store.list_events(
                    self.pid, e.session_id, types=["user_message"], since=e.ts
                )
                if any(u.seq is not None and e.seq is not None and u.seq > e.seq for u in later):
                    reason = "expired"
            self._hidden[e.id] = reason
        return self._hidden[e.id]

    def _signature_refused(self, entity_id: str) -> bool:
        """With a signature check: True for an entity that is tampered or unsigned."""
        if self.check is None:
            return False
        return self.check.entity(entity_id) in ("invalid", "unsigned")

    def note_unknown_repos(self) -> None:
        """Note the named repositories the project has none of: a misspelt name leaves
        every repository's code out, which must not pass for an answer about it. (The
        names are listed only when a named one brought no candidate: it reads every item.)"""
        unseen = (self.repos or frozenset()) - self.repos_seen
        if not unseen:
            return
        known = self.cb.store.list_repos(self.pid)
        unknown = sorted(unseen - set(known))
        if unknown:
            self.notes.append(
                f"repos: no repository {', '.join(map(repr, unknown))} is ingested in project "
                f"{self.pid!r} (ingested: {', '.join(known) or 'none'}); only memory of no "
                "repository could come in"
            )

    def verified(self, rels: list[Relation]) -> list[Relation]:
        """The relations that may be followed: all, or with a check the verified ones."""
        return rels if self.check is None else self.check.relations(rels)

    def _pinned_out(self) -> frozenset[str]:
        """Units a pinned knowledge-base version hides, as this assembly's searches saw it."""
        if self._pinned_hidden is None:
            view = self.cb.searcher.kb_views.last(self.pid)
            hidden = frozenset(view.hidden_owner_ids) if view is not None else frozenset()
            self._pinned_hidden = hidden
        return self._pinned_hidden

    def add(self, cand: MemoryCandidate, event: Event | None = None) -> bool:
        if cand.owner_id in self.exclude:
            return False  # already in the history layer or the latest input
        if cand.kind == "entity" and self._signature_refused(cand.owner_id):
            return False
        if self.repos is not None and cand.repo is not None:
            if cand.repo not in self.repos:
                self.drop(cand.owner_id, "other repository", f"ingested from {cand.repo!r}")
                return False
            self.repos_seen.add(cand.repo)
        if cand.repo is not None and cand.owner_id in self._pinned_out():  # reached by an edge
            self.drop(cand.owner_id, "not in the pinned version", "written since its tag")
            return False
        if event is not None:
            if (
                self.task_id is not None
                and event.session_id == self.session_id
                and event.task_id not in (None, self.task_id)
            ):
                # switch_task scoped this session's other tasks out; search must not undo it
                self.drop(cand.owner_id, "other task", f"message of task {event.task_id}")
                return False
            hidden = self._hidden_reason(event)
            if hidden is not None:
                self.drop(
                    cand.owner_id,
                    hidden,
                    "message status"
                    if hidden != "expired"
                    else "per-turn tool result; a later turn began",
                )
                return False
        old = self.cands.get(cand.owner_id)
        if old is None:
            self.cands[cand.owner_id] = cand
            return True
        if old.partial and cand.partial and cand.text not in old.text:
            old.text += "\n…\n" + cand.text
        old.score = max(old.score, cand.score)
        old.strategies.extend(s for s in cand.strategies if s not in old.strategies)
        old.reasons.extend(cand.reasons)
        old.explain = old.explain or cand.explain
        return True

    def nodes(self, ids: Sequence[str]) -> dict[str, Entity | Event]:
        out: dict[str, Entity | Event] = {
            e.id: e for e in self.cb.store.get_entities(self.pid, ids)
        }
        rest = [i for i in ids if i not in out]
        if rest:
            out.update({e.id: e for e in self.cb.store.get_events(self.pid, rest)})
        return out

    def add_node(self, node: Entity | Event, score: float, strategy: str, reason: str) -> bool:
        if isinstance(node, Entity):
            return self.add(_entity_cand(node, score, strategy, reason))
        return self.add(_event_cand(node, score, strategy, reason), node)

    def follow(
        self,
        seeds: Mapping[str, float],
        types: Sequence[str],
        strategy: str,
        *,
        hops: int = 1,
        want: frozenset[str] | None = None,
    ) -> list[str]:
        """Follow edges of `types` from the seeds, both directions, under the policy's
        per-type confidence thresholds; returns the nodes reached."""
        reached: list[str] = []
        frontier = dict(seeds)
        seen = set(seeds)
        for _ in range(hops):
            if not frontier:
                break
            rels = self.cb.store.list_relations(
                self.pid, list(frontier), types=list(types), limit_per_node=FOLLOW_PER_NODE
            )
            refused: set[str] = set()
            if self.check is not None:
                refused = {r.id for r in rels} - {r.id for r in self.check.relations(rels)}
            nxt: dict[str, float] = {}
            for rel in rels:
                src = rel.from_id if rel.from_id in frontier else rel.to_id
                other = rel.to_id if src == rel.from_id else rel.from_id
                floor = self.policy.threshold_for(rel.type)
                entry = relation_entry(rel, strategy, floor)
                if self.check is not None and rel.id in refused:
                    entry["followed"] = False  # unsigned or tampered: reported by the trace
                    entry["detail"] = self.check.refused[rel.id][1]
                    self.relations.append(entry)
                    continue
                if not entry["followed"]:
                    detail = f"confidence {rel.confidence} below {floor} for {rel.type}"
                    entry["detail"] = detail
                    self.relations.append(entry)
                    self.drop(other, "threshold", detail)
                    continue
                self.relations.append(entry)
                score = frontier[src] * rel.confidence * 0.9
                if other not in seen and score > nxt.get(other, 0.0):
                    nxt[other] = score
            found = self.nodes(list(nxt))
            for nid, score in nxt.items():
                node = found.get(nid)
                if node is None or (want is not None and node.type not in want):
                    continue
                seen.add(nid)
                if self.add_node(node, score, strategy, f"{strategy}: linked to a seed"):
                    reached.append(nid)
            frontier = {n: s for n, s in nxt.items() if n in found}
        return reached

    def search(
        self,
        query: str,
        config: SearchConfig,
        flt: ItemFilter | None,
        strategy: str,
        min_score: float,
        weight: float,
    ) -> None:
        decay = self.policy.time_decay_half_life_days
        if decay is not None and config.time_decay_half_life_days is None:
            config = config.model_copy(update={"time_decay_half_life_days": decay})
        if self.check is None:
            resp = self.cb.search(query, project=self.pid, config=config, filters=flt)
        else:
            from ..anchor.signing import checked_search

            resp = checked_search(self.cb, self.pid, query, config, flt, self.check)
        embedder = self.cb.embedder
        gate = gate_search(
            resp,
            query,
            embedder.name if embedder else None,
            self.policy.relevance_floor,
            strategy,
        )
        self.notes.extend(gate.notes)
        if gate.evidence is None:
            for c in resp.results:
                self._consider(c, strategy, None)
                self.drop(
                    c.item.owner_id,
                    "off topic",
                    f"{strategy}: no hit shares a keyword with the intent or reaches "
                    f"similarity {gate.floor}",
                )
            return
        self.on_topic = True
        # Hits already in the prompt (history, the latest input) or saying just the intent
        # take no top_k place: as many of the next hits the search ranked move up.
        spare = [c for c in resp.considered if c.dropped == "below top_k"]
        hits = list(resp.results)
        owners = self.nodes(
            list(dict.fromkeys(c.item.owner_id for c in [*hits, *spare[: len(hits)]]))
        )
        self._prefetch_statuses(owners.values())
        # the intent matching its own message is no measure of the others' relevance
        scores = [c.score for c in hits if not is_the_intent(owners.get(c.item.owner_id), query)]
        best = max(scores, default=0.0) or 1.0
        promoted: set[str] = set()
        n = 0
        while n < len(hits):
            c = hits[n]
            n += 1
            node = owners.get(c.item.owner_id)
            if c.item.owner_id in self.exclude or is_the_intent(node, query):
                if c.item.owner_id not in self.exclude:
                    self.drop(c.item.owner_id, "the intent", "the question's own message")
                if spare:
                    nxt = spare.pop(0)
                    promoted.add(nxt.item.item_id)
                    hits.append(nxt)
                    if nxt.item.owner_id not in owners:
                        owners.update(self.nodes([nxt.item.owner_id]))
                continue
            rel = c.score / best
            self._consider(c, strategy, rel, min_score)
            if rel < min_score:
                self.drop(
                    c.item.owner_id,
                    "threshold",
                    f"{strategy}: relative score {rel:.3f} below {min_score}",
                )
                continue
            if node is None:
                continue
            if isinstance(node, Entity):
                cand = _entity_cand(node, weight * rel, strategy, f"{strategy}: search hit")
                if c.item.kind == "chunk":  # a long entity: keep the passages that matched
                    cand.text, cand.partial = c.item.text, True
                cand.explain = c.explain()
                self.add(cand)
            else:
                ev = _event_cand(node, weight * rel, strategy, f"{strategy}: search hit")
                ev.explain = c.explain()
                self.add(ev, node)
        for c in resp.considered:
            if c.dropped and c.item.item_id not in promoted:
                self._consider(c, strategy, None)
                # The detail says which search and why, as for the other drops; the search's
                # own word ("below top_k") only repeated the reason.
                over = "top_k" in c.dropped
                k = (
                    f"dynamic top_k {config.dynamic_top_k[0]}-{config.dynamic_top_k[1]}"
                    if config.dynamic_top_k  # seed 002's (min, max)
                    else f"top_k {config.top_k}"
                )
                detail = f"ranked below {k}" if over else c.dropped
                self.drop(
                    c.item.owner_id, "top_k" if over else "duplicate", f"{strategy}: {detail}"
                )

    def _consider(
        self, c: Candidate, strategy: str, relative: float | None, min_score: float | None = None
    ) -> None:
        """Record a search hit: `relative` is its score over the best hit's, the value the
        strategy's `min_score` is compared with."""
        if self.record:
            self.considered.append(
                {**c.explain(), "strategy": strategy, "relative": relative, "min_score": min_score}
            )


# -- strategies ---------------------------------------------------------------------------------


def _recent_entities(g: Gatherer, types: Sequence[str], limit: int) -> list[Entity]:
    """The `limit` most recently updated entities of `types` (earlier types first)."""
    store = g.cb.store
    found = [
        e for t in types for e in store.list_entities(g.pid, type=t, limit=limit, newest_first=True)
    ]
    # a pinned knowledge-base version: as the assembly's searches saw it (retrieve/kb_view.py)
    found = entities_in_view(store, g.pid, g.cb.searcher.kb_views.last(g.pid), found, types)
    order = {t: i for i, t in enumerate(types)}
    found.sort(key=lambda e: (order.get(e.type, 99), -e.updated_at, e.id))
    return found[:limit]


def _matched_entities(g: Gatherer, types: Sequence[str], limit: int) -> list[Entity]:
    """Entities of `types` that share words with the intent (keyword search: no shared word,
    no match, so an unrelated question finds nothing), best first."""
    flt = ItemFilter(kinds=("entity", "chunk"), types=tuple(types))
    resp = g.cb.search(
        g.intent, project=g.pid, config=get_preset("keyword", top_k=limit), filters=flt
    )
    owners = list(dict.fromkeys(c.item.owner_id for c in resp.results))
    found = {e.id: e for e in g.cb.store.get_entities(g.pid, owners)}
    return [found[o] for o in owners if o in found]


def referenced_code_first(g: Gatherer, s: ReferencedCodeFirst) -> None:
    """Code and SQL the conversation points back at: what this session referenced, then the
    code that the documents and requirements named by the intent are linked to. Nothing is
    added when nothing is referenced or matched (never "the latest code" of the project)."""
    folded = g.intent.casefold()
    types = ["sql", "code"] if ("sql" in folded or "查询语句" in folded) else ["code", "sql"]
    if any(w in folded for w in ("test", "测试", "用例")):
        types.append("test_case")
    ranked: list[str] = []
    why: dict[str, str] = {}
    if g.session_id:  # what this session pointed at, newest first
        recent = list(reversed(g.cb.store.list_events(g.pid, g.session_id, last_n=50)))
        for ev in recent:
            for ref in ev.refers_to:
                if ref not in why:
                    ranked.append(ref)
                    why[ref] = f"referenced by {ev.id} in this session"
        if s.refers_back(g.intent) is not None:
            # "把刚才生成的 SQL 改成支持分页": the code and SQL this session's turns produced
            # (anchored from their blocks), newest first, are what "刚才" points at.
            _produced_in_session(g, recent, ranked, why)
    chosen = [e for e in g.cb.store.get_entities(g.pid, ranked) if e.type in types]
    anchors = _matched_entities(g, ["document", "requirement"], s.max_items)
    anchor_of: dict[str, str] = {}  # linked code -> the document or requirement it came from
    if anchors:  # the code those documents and requirements are linked to
        anchor_ids = [a.id for a in anchors]
        rels = g.cb.store.list_relations(g.pid, anchor_ids, types=list(_SEMANTIC_EDGES))
        for rel in sorted(rels, key=lambda r: -r.confidence):
            if rel.confidence < g.policy.threshold_for(rel.type):
                continue
            other = rel.to_id if rel.from_id in anchor_ids else rel.from_id
            anchor_of.setdefault(other, (rel.from_id if other == rel.to_id else rel.to_id))
        for e in g.cb.store.get_entities(g.pid, list(anchor_of)):
            if e.type in types and e.id not in why:
                chosen.append(e)
                why[e.id] = f"linked to {anchor_of[e.id]}, which the intent names"
    for e in _matched_entities(g, types, s.max_items):  # code the intent names itself
        if e.id not in why:
            chosen.append(e)
            why[e.id] = f"{e.type} named by the intent"
    seeds: dict[str, float] = {}
    for i, e in enumerate(chosen[: s.max_items]):
        seeds[e.id] = 1.0 - 0.02 * i
        g.add(_entity_cand(e, seeds[e.id], s.name, f"{s.name}: {why[e.id]}"))
    used = {anchor_of[e] for e in seeds if e in anchor_of}
    for i, a in enumerate(x for x in anchors if x.id in used):  # and the documents that led there
        g.add(_entity_cand(a, 0.9 - 0.02 * i, s.name, f"{s.name}: {a.type} named by the intent"))
    if not seeds:
        g.notes.append(f"{s.name}: nothing referenced or named; no code added")
        return
    # The events that referenced the code come with it (where it was produced or discussed).
    rels = g.verified(
        g.cb.store.list_relations(g.pid, list(seeds), direction="in", types=["REFERS_TO"])
    )
    by_entity: dict[str, list[str]] = {}
    for rel in rels:
        by_entity.setdefault(rel.to_id, []).append(rel.from_id)
    events = {e.id: e for e in g.cb.store.get_events(g.pid, [r.from_id for r in rels])}
    for eid, refs in by_entity.items():
        newest = sorted((events[r] for r in refs if r in events), key=lambda e: -e.ts)[:2]
        for ev in newest:
            g.add(_event_cand(ev, seeds[eid] * 0.9, s.name, f"{s.name}: referenced {eid}"), ev)
    g.follow(seeds, _SEMANTIC_EDGES, s.name, hops=2)


def _produced_in_session(
    g: Gatherer, recent: Sequence[Event], ranked: list[str], why: dict[str, str]
) -> None:
    """Add to `ranked` what the events `recent` (newest first) GENERATE, in that order."""
    order = {ev.id: i for i, ev in enumerate(recent)}
    rels = g.verified(
        g.cb.store.list_relations(g.pid, list(order), direction="out", types=["GENERATES"])
    )
    for rel in sorted(rels, key=lambda r: order.get(r.from_id, len(order))):
        if rel.from_id in order and rel.to_id not in why:
            ranked.append(rel.to_id)
            why[rel.to_id] = f"produced by {rel.from_id} in this session"


def semantic_recall(g: Gatherer, s: SemanticRecall) -> None:
    overrides: dict[str, Any] = {
        "top_k": min(s.top_k, g.policy.top_k),
        "relation_thresholds": {**SEARCH_THRESHOLDS, **g.policy.relation_thresholds},
    }
    if g.policy.dynamic_top_k is not None:
        overrides["dynamic_top_k"] = g.policy.dynamic_top_k
        overrides["token_allowance"] = g.policy.memory_token_allowance
    preset = s.search_preset
    if preset not in PRESETS and preset == DEFAULT_SEARCH_PRESET:
        preset, overrides["graph_hops"] = DEFAULT_SEARCH  # one hop along trusted edges
    g.search(g.intent, get_preset(preset, **overrides), None, s.name, s.min_score, 0.8)


def project_scope_fallback(g: Gatherer, s: ProjectScopeFallback, session_messages: int) -> None:
    if session_messages >= s.fallback_depth and len(g.cands) >= g.policy.top_k:
        g.notes.append(f"{s.name}: the session has enough context; not widened")
        return
    # first what other sessions of the project said about this (named by exclusion: listing
    # every other session of a large project costs more than the search)
    others = ItemFilter(
        kinds=("event",),
        exclude_session_ids=(g.session_id,) if g.session_id is not None else None,
    )
    cfg = get_preset("hybrid", top_k=s.fallback_depth)
    g.search(g.intent, cfg, others, s.name, 0.0, 0.3)
    # The project's baseline is for questions about the project: one of its messages or
    # entities must be about the intent.
    if not g.on_topic and not _matched_entities(g, [*_BASELINE_TYPES, "code", "sql"], 1):
        g.notes.append(f"{s.name}: the intent matches nothing here; no project baseline")
        return
    docs = _recent_entities(g, list(_BASELINE_TYPES), 2 * s.fallback_depth)
    for i, e in enumerate(docs):
        g.add(_entity_cand(e, 0.3 - 0.005 * i, s.name, f"{s.name}: project {e.type}"))
    for i, e in enumerate(_recent_entities(g, ["code", "sql"], s.fallback_depth)):
        g.add(_entity_cand(e, 0.25 - 0.005 * i, s.name, f"{s.name}: recent project {e.type}"))


def error_driven_repair(g: Gatherer, s: ErrorDrivenRepair, failing: Event | None) -> None:
    def code_ids() -> list[str]:
        ranked = sorted(g.cands.values(), key=lambda c: -c.score)
        return [
            c.owner_id
            for c in ranked
            if c.kind == "entity" and c.type in CODE_TYPES and c.type not in _TEST_TYPES
        ][:3]

    if failing is not None:
        g.add(_event_cand(failing, 0.96, s.name, f"{s.name}: the last tool result failed"), failing)
        refs = g.nodes(failing.refers_to)
        # and what its log names (a test, a file), anchored on capture
        named = g.cb.store.list_relations(
            g.pid, [failing.id], direction="out", types=["REFERENCES"]
        )
        refs.update(g.nodes([r.to_id for r in g.verified(named) if r.to_id not in refs]))
        for node in refs.values():
            g.add_node(node, 0.94, s.name, f"{s.name}: referenced by the failing run")
    ids = code_ids()
    if not ids:
        cfg = get_preset("hybrid", top_k=3)
        g.search(g.intent, cfg, ItemFilter(types=("code", "sql")), s.name, 0.0, 0.9)
        ids = code_ids() or [e.id for e in _recent_entities(g, ["code", "sql"], 3)]
    if not ids:
        g.notes.append(f"{s.name}: no code to repair found")
        return
    for node in g.nodes(ids).values():
        g.add_node(node, 0.92, s.name, f"{s.name}: code under repair")
    tests = g.follow(dict.fromkeys(ids, 1.05), ["VALIDATES"], s.name, want=_TEST_TYPES)
    if s.include_logs and tests:
        rels = g.verified(
            g.cb.store.list_relations(g.pid, tests, direction="in", types=["REFERS_TO"])
        )
        runs = [
            e
            for e in g.cb.store.get_events(g.pid, [r.from_id for r in rels])
            if e.type == "tool_result"
        ]
        for test_id in tests:
            mine = [e for e in runs if test_id in e.refers_to]
            mine.sort(key=lambda e: (not event_failed(e), -e.ts))
            failures = sum(event_failed(e) for e in mine)
            if failures > s.max_retry:
                g.notes.append(
                    f"{s.name}: {test_id} failed {failures} times, more than "
                    f"max_retry={s.max_retry}; escalate instead of retrying"
                )
            for ev in mine[: s.max_retry + 1]:
                score = 0.93 if event_failed(ev) else 0.5
                g.add(_event_cand(ev, score, s.name, f"{s.name}: run of {test_id}"), ev)
    if not s.include_test_cases:
        for t in tests:
            if t in g.cands and g.cands[t].strategies == [s.name]:
                del g.cands[t]
    # What the code was built from: its requirement and the documents that govern it.
    g.follow(dict.fromkeys(ids, 0.95), ["GENERATES", "FOLLOWS", "REFERENCES"], s.name, hops=2)


def multi_agent_consensus(
    g: Gatherer,
    s: MultiAgentConsensus,
    role: str,
    aliases: Mapping[str, Sequence[str]] | None = None,
) -> None:
    """What the named agents were given for this task, merged (seed 000): the last context
    assembled for each of them (of this task, else of the project) and what it produced;
    the entities every one of those contexts shares, and the relations among and from them
    whose confidence reaches `consensus_threshold`. The test agent so sees what the code
    agent saw, and code it wrote, without simulating the code agent's retrieval. A context
    assembled under one of an agent's `aliases` (code_gen for coder) is that agent's."""
    found = g.cb.store.latest_context_ids(g.pid, s.agents, task_id=g.task_id, aliases=aliases)
    if g.task_id is not None and not found:  # no context of this task yet: the project's
        found = g.cb.store.latest_context_ids(g.pid, s.agents, aliases=aliases)
    widened = {a: [r for r in names if r != a] for a, names in (aliases or {}).items()}
    if any(widened.values()):
        g.notes.append(
            f"{s.name}: contexts of "
            + "; ".join(f"{', '.join(o)} count as {a}'s" for a, o in widened.items() if o)
        )
    views: dict[str, set[str]] = {}
    for agent, context_id in found.items():
        # read in the database: decoding whole traces cost more than the rest of the strategy
        view = g.cb.store.context_entities(g.pid, context_id)
        if view is not None:
            views[f"{agent} ({context_id})"] = view
    if not views:
        g.notes.append(f"{s.name}: no context assembled for {', '.join(s.agents)} yet")
        return
    shared = set.intersection(*views.values())
    entities = {e.id: e for e in g.cb.store.get_entities(g.pid, sorted(shared))}
    label = ", ".join(views)
    for i, eid in enumerate(sorted(entities)):
        g.add(_entity_cand(entities[eid], 0.9 - 0.001 * i, s.name, f"{s.name}: in {label}"))
    kept = 0
    reached: list[tuple[str, Relation]] = []  # entities outside the shared set, by edge
    rels = g.verified(g.cb.store.list_relations(g.pid, sorted(entities)))
    for rel in sorted(rels, key=lambda r: (-r.confidence, r.from_id, r.to_id)):
        if rel.type in _ORDER_EDGE_TYPES:
            continue
        entry = relation_entry(rel, s.name, s.consensus_threshold)
        if not entry["followed"]:
            entry["detail"] = f"confidence {rel.confidence} below {s.consensus_threshold}"
            g.relations.append(entry)
            continue
        g.relations.append(entry)
        kept += 1
        other = rel.to_id if rel.from_id in entities else rel.from_id
        if other not in entities:
            reached.append((other, rel))
    nodes = {e.id: e for e in g.cb.store.get_entities(g.pid, [o for o, _ in reached])}
    for other, rel in reached:  # one read for all of them, added in edge order
        if other in nodes:
            g.add(_entity_cand(nodes[other], 0.8 * rel.confidence, s.name, f"{s.name}: {rel.type}"))
    g.notes.append(
        f"{s.name}: merged {label}: {len(entities)} shared entities, {kept} relations "
        f">= {s.consensus_threshold} (asked by {role!r})"
    )
