"""The candidates of one assembly's memory layer, gathered across strategies.

A `Gatherer` collects them, merged by owner (an entity or an event), with what it dropped
and why (retracted, expired, superseded, threshold, top_k, consensus, rated false) and
every relation it looked at; the strategies (strategies.py) feed it through `add`,
`follow` and `search`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..components import ComponentsSource, components_of
from ..model import Entity, Event, Relation
from ..retrieve.config import SearchConfig
from ..retrieve.expiry import expires_at
from ..retrieve.search import Candidate, SearchResponse
from ..retrieve.signals import Confidence, rated_false
from ..store.base import ItemFilter
from .echoes import memory_echoes
from .history_calls import CALL_TYPE
from .lifecycle import Status
from .memory_calls import shown_in_message
from .memory_candidate import (
    MENTION_TYPE,
    MemoryCandidate,
    entity_cand,
    event_cand,
    relation_entry,
)
from .policy import (
    Policy,
)
from .recall_gate import gate_search, hit_reason, is_the_intent, says_the_intent
from .repeats import bare_name, calls_held, contained_repeats, cut_from, said_in, same_result
from .state import MESSAGE_SCOPE, message_statuses, statuses_of

if TYPE_CHECKING:
    from ..anchor.signing import SignatureCheck
    from .user_scope import UserScope

__all__ = ["FOLLOW_PER_NODE", "Gatherer"]

# A node's edges of one type followed at most (the oldest first): a document that thousands
# of items reference adds what the budget can hold, not the whole project.
FOLLOW_PER_NODE = 200


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
        held: Mapping[str, str] | None = None,
        scope: UserScope | None = None,
    ) -> None:
        """`statuses`: message statuses already read, by session (not read again).
        `held`: the ids of `exclude` that the history holds, each with how (the trace's
        detail when a strategy reaches one); the others are the latest input's.
        `scope`: under memory_scope user, the sessions memory may draw on (user_scope.py)."""
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
        self.held: Mapping[str, str] = held or {}
        self.scope = scope
        self.cands: dict[str, MemoryCandidate] = {}
        self.dropped: list[dict[str, Any]] = []
        self._drops: set[tuple[str, str, str]] = set()
        # the candidates left out because another says what they say, by that other one:
        # when the budget leaves it out, the shorter one may fit in its place (stand_in_for)
        self.stand_ins: dict[str, list[tuple[MemoryCandidate, str]]] = {}
        self.considered: list[dict[str, Any]] = []
        self.relations: list[dict[str, Any]] = []
        self.notes: list[str] = []
        self._pinned_hidden: frozenset[str] | None = None
        # True once a search found a hit about the question (a keyword match, or similarity
        # at the relevance floor); the project baseline is added only to such questions
        self.on_topic = False
        self._statuses: dict[str, Mapping[str, Status]] = dict(statuses or {})
        self._hidden: dict[str, str | None] = {}
        # memories rated false with a note that would have come in (corrections.py): search
        # hits, each with the least score that would have ranked it (None: any), and
        # what edges and references reached (owner -> its rating, its text)
        self.rated_hits: list[tuple[Candidate, float | None]] = []
        self.rated: dict[str, tuple[Confidence, str]] = {}
        # other sessions' user messages that ask exactly the intent, left out as it is
        self.asked_exactly: dict[str, Event] = {}

    def drop_said(
        self, history: Mapping[str, str], results: Mapping[str, str] | None = None
    ) -> None:
        """Leave out candidates whose text a history entry (id -> text) already says
        (assemble/repeats.py `said_in`): the prompt would show it twice. `results`: the
        call text of each tool result of the history; a tool result of memory that gives
        the same answer to the same call is said there too (`same_result`), and so is a
        message that is mostly calls the history holds (`calls_held`). Run after
        memory_calls.link_calls, which finds the calls."""
        how = {
            "says": "says what {} in the history says",
            "holds": "said within {} in the history",
        }
        for owner_id, cand in list(self.cands.items()):
            entity = cand.kind == "entity"
            found = said_in(cand.shown, history, event=not entity, name=cand.name or None)
            if found is not None:
                hid, way = found
                detail = how.get(way, "a bare name; {} in the history says it").format(hid)
            elif same := same_result(cand.text, cand.call_text, history, results or {}):
                detail = f"the same result of the same call as {same} in the history"
            elif held := calls_held(cand.shown, cand.call_lines, history):
                detail = f"its calls are in the history ({', '.join(held)})"
            else:
                continue
            self.drop(owner_id, "in history", detail)
            del self.cands[owner_id]

    def _left_out(self, owner_id: str, node: Entity | Event | None = None) -> None:
        """Record why a hit of `exclude` stays out: the history holds it, it is the input,
        or it asks exactly the intent (another session's question is kept in
        `asked_exactly`: asked_before.py looks at what followed it)."""
        held = self.held.get(owner_id)
        if held is not None:
            self.drop(owner_id, "in history", held)
        elif owner_id in self.exclude or not isinstance(node, Event):
            self.drop(owner_id, "the intent", "(the latest input itself)")
        elif node.session_id == self.session_id:
            self.drop(owner_id, "the intent", "asks exactly the intent, earlier in this session")
        elif self.scope is not None and (refused := self.scope.refuses(node.session_id)):
            self.drop(owner_id, "other user", refused)  # what followed it is not read either
        else:
            self.asked_exactly.setdefault(owner_id, node)
            self.drop(
                owner_id, "the intent", f"asks exactly the intent (session {node.session_id!r})"
            )

    def drop_repeats(self) -> None:
        """Leave out candidates that say what another says (assemble/repeats.py); the one
        kept ranks at the better of the two scores."""
        texts = {k: (c.shown, c.kind == "entity") for k, c in self.cands.items()}
        for gone, holder in contained_repeats(texts).items():
            self._merge(gone, holder, f"says what {holder!r} says")
        # a call a message of memory shows on its lines (the same call made in another
        # session): the message shows it, with what led to it
        lines = {k: "\n".join(c.call_lines) for k, c in self.cands.items() if c.call_lines}
        for owner_id, cand in list(self.cands.items()):
            if cand.type != CALL_TYPE:
                continue
            shows = next((k for k, t in lines.items() if cut_from(cand.text, t)), None)
            if shows is not None:
                self._merge(owner_id, shows, f"the same call as {shows!r} shows")
        # a bare name (a mention: "table orders_archive") an item of memory says (a turn, a
        # statement cut from one): it says the name with what was said about it, in the slot
        # the name would take. A mention no item says is a name anchored from words of a
        # turn memory does not hold ("the archive table" -> archive): it takes no slot.
        shown = {k: c.shown for k, c in self.cands.items()}
        for owner_id, cand in list(self.cands.items()):
            if cand.kind != "entity" or not cand.name or not bare_name(cand.name, cand.text):
                continue
            others = {k: t for k, t in shown.items() if k != owner_id and k in self.cands}
            found = said_in(cand.text, others, event=False, name=cand.name)
            if found is not None:
                kept = self.cands[found[0]]
                kept.score = max(kept.score, cand.score)
                detail = f"a bare name; {found[0]} in memory says it"
                self.stand_ins.setdefault(found[0], []).append((cand, detail))
                self.drop(owner_id, "duplicate", detail)
            elif cand.type == MENTION_TYPE:
                detail = f"a bare name ({cand.text!r}); no item in memory says it"
                self.drop(owner_id, "bare mention", detail)
            else:
                continue
            del self.cands[owner_id]

    def _merge(self, gone: str, holder: str, detail: str) -> None:
        """Leave out `gone` for `holder`, which says it: `holder` ranks at the better of the
        two scores, and the results of a call left out go with the one that shows it."""
        cand = self.cands.pop(gone)
        kept = self.cands[holder]
        results = [c for c in self.cands.values() if c.unit == gone]
        if cand.type != CALL_TYPE and not results:
            # a call's results follow the one that shows it, so a call never stands in
            self.stand_ins.setdefault(holder, []).append((cand, detail))
        kept.score, kept.cued = max(kept.score, cand.score), kept.cued or cand.cued
        # what brought the one left out brought what it says: the trace keeps saying why
        kept.strategies += [s for s in cand.strategies if s not in kept.strategies]
        kept.reasons += [r for r in cand.reasons if r not in kept.reasons]
        for c in results:
            c.unit = holder
        self.drop(gone, "duplicate", detail)

    def drop_withdrawn(self, also: Sequence[str] = ()) -> dict[str, Confidence]:
        """Leave out candidates rated false ("wrong"), statements anchoring cut from a
        message that is rated false or retracted, and entities past their expiry time
        (retrieve/expiry.py): searches leave out what is itself rated false or expired, but
        references, edges and the session's own code reach memories without a search, and
        a statement (a decision, its SQL) stands or falls with its message.
        Returns those of `also` (the history's messages) that are rated false."""
        store = self.cb.store
        cut: dict[str, tuple[str, str]] = {}  # entity -> (the message it came from, its text)
        entities = [c.owner_id for c in self.cands.values() if c.kind == "entity"]
        now = time.time()
        for e in store.get_entities(self.pid, entities) if entities else []:
            at = expires_at(e.properties)  # an expired entity is out, however it came in
            if at is not None and at <= now:
                self.drop(e.id, "expired", f"expires_at {at:.0f} passed")
                del self.cands[e.id]
                continue
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
        for k, source in sources.items():  # a statement still in its words was said then
            if k in self.cands:
                self.cands[k].said_at = events[source].ts
        self._prefetch_statuses(events.values())
        known = self.cb.searcher.known_signals
        false = rated_false(store, self.pid, [*self.cands, *events, *also], known)
        for owner_id in list(self.cands):
            source = sources.get(owner_id)
            if owner_id in false:
                conf = false[owner_id]
                self.drop(owner_id, "rated false", f"{conf.source} (confidence {conf.value:g})")
                if conf.note:
                    self.rated.setdefault(owner_id, (conf, self.cands[owner_id].text))
            elif source is not None and source in false:
                self.drop(
                    owner_id, "rated false", f"cut from {source}, rated {false[source].source}"
                )
                if false[source].note:
                    self.rated.setdefault(source, (false[source], events[source].text or ""))
            elif source is not None and (status := self._message_status(events[source])):
                self.drop(owner_id, status, f"cut from {source}, a {status} message")
            else:
                continue
            del self.cands[owner_id]
        self._drop_echoes()
        return {i: false[i] for i in also if i in false}

    def _drop_echoes(self) -> None:
        """Leave out assistant messages that repeat a retracted user message they answer
        (echoes.py); their sessions' statuses were read when they came in."""
        answers = {
            k: c.session_id
            for k, c in self.cands.items()
            if c.type == "assistant_message" and c.session_id
        }
        if not answers:
            return
        for owner_id, asked in memory_echoes(
            self.cb.store, self.pid, answers, self._statuses
        ).items():
            self.drop(owner_id, "answers retracted", f"repeats {asked}, a retracted message")
            del self.cands[owner_id]

    def _message_status(self, e: Event) -> str | None:
        """Why message `e` is out of prompts by its status (retracted...), or None."""
        status = self._statuses.get(e.session_id, {}).get(e.id, Status.ACTIVE)
        if status == Status.ACTIVE:
            return None
        return "retracted" if status == Status.EXPIRED else str(status)

    def stand_in_for(
        self, left_out: Iterable[str], cut: Mapping[str, str]
    ) -> list[tuple[str, str]]:
        """Bring back, as candidates, what was left out because an item says it, now that
        the budget left that item out (`left_out`) or cut it to a part that does not say it
        (`cut`: the item's id and the text shown): a decision cut from a long message may
        fit where the message did not, so what it says is not lost. Each ranks just above
        the item it was left out for. Returns (that item, the one brought back) pairs."""
        back: list[tuple[str, str]] = []
        gone = {h: "" for h in left_out if h in self.stand_ins}
        shown = {h: " ".join(t.split()) for h, t in cut.items() if h in self.stand_ins}
        for holder, text in {**gone, **shown}.items():
            for cand, detail in self.stand_ins.pop(holder, []):
                if cand.owner_id in self.cands or " ".join(cand.shown.split()) in text:
                    continue
                if holder in self.cands:  # in the holder's place, before what it still shows
                    cand.score = math.nextafter(self.cands[holder].score, math.inf)
                self.cands[cand.owner_id] = cand
                key = (cand.owner_id, "duplicate", detail)
                self._drops.discard(key)
                self.dropped = [
                    d
                    for d in self.dropped
                    if (d["id"], d["reason"], d["detail"]) != key or d["layer"] != "memory"
                ]
                back.append((holder, cand.owner_id))
        return back

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

    def _signature_refused(self, cand: MemoryCandidate, event: Event | None) -> bool:
        """With a signature check: True for an entity or a captured event that is tampered
        or unsigned (the check records why; the trace lists it)."""
        if self.check is None or cand.kind not in ("entity", "event"):
            return False
        if cand.kind == "entity":
            return self.check.entity(cand.owner_id) in ("invalid", "unsigned")
        given = event if event is not None and event.id == cand.owner_id else None
        return self.check.event(given or cand.owner_id) != "valid"

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

    def _pinned_shown(self) -> frozenset[str]:
        """Earlier versions a pinned knowledge-base version serves as current."""
        view = self.cb.searcher.kb_views.last(self.pid)
        return frozenset(view.shown_owner_ids) if view is not None else frozenset()

    def add(self, cand: MemoryCandidate, event: Event | None = None) -> bool:
        if cand.owner_id in self.exclude:
            self._left_out(cand.owner_id)  # already in the history layer or the latest input
            return False
        if self.scope is not None and (refused := self.scope.refuses(cand.session_id)):
            self.drop(cand.owner_id, "other user", refused)  # however it was reached
            return False
        if not cand.text.strip():
            # an empty message (or an event of data only) would be a label with nothing under it
            self.drop(cand.owner_id, "threshold", "empty text")
            return False
        if self._signature_refused(cand, event):
            return False
        if cand.superseded and cand.owner_id not in self._pinned_shown():
            # spec@v1 reached by a reference, an edge or another agent's context: every
            # strategy serves the latest version only (a pinned version's own are served)
            self.drop(cand.owner_id, "superseded", cand.superseded)
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
            return self.add(entity_cand(node, score, strategy, reason))
        return self.add(event_cand(node, score, strategy, reason), node)

    def follow(
        self,
        seeds: Mapping[str, float],
        types: Sequence[str] | None,
        strategy: str,
        *,
        hops: int = 1,
        want: frozenset[str] | None = None,
        exclude_types: Sequence[str] = (),
    ) -> list[str]:
        """Follow edges of `types` (None: of every type but `exclude_types`) from the seeds,
        both directions, under the policy's per-type confidence thresholds; returns the
        nodes reached."""
        reached: list[str] = []
        frontier = dict(seeds)
        seen = set(seeds)
        for _ in range(hops):
            if not frontier:
                break
            rels = self.cb.store.list_relations(
                self.pid,
                list(frontier),
                types=None if types is None else list(types),
                exclude_types=exclude_types,
                limit_per_node=FOLLOW_PER_NODE,
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

    def scoped(self, flt: ItemFilter | None) -> ItemFilter | None:
        """`flt` as this assembly's searches apply it: under memory_scope user, without
        the sessions of other users."""
        return flt if self.scope is None else self.scope.filter(flt)

    def search(
        self,
        query: str,
        config: SearchConfig,
        flt: ItemFilter | None,
        strategy: str,
        min_score: float,
        weight: float,
    ) -> None:
        flt = self.scoped(flt)
        decay = self.policy.time_decay_half_life_days
        if decay is not None and config.time_decay_half_life_days is None:
            config = config.model_copy(update={"time_decay_half_life_days": decay})
        if self.check is None:
            resp = self.cb.search(query, project=self.pid, config=config, filters=flt)
        else:
            from ..anchor.signing import checked_search

            resp = checked_search(self.cb, self.pid, query, config, flt, self.check)
        if resp.embedder_error is not None:  # once per assembly, whichever search met it
            note = f"semantic search left out (keyword and graph only): {resp.embedder_error}"
            if note not in self.notes:
                self.notes.append(note)
        for note in (  # what the rewriting model added, or why it added nothing
            [f"query rewritten for {strategy}: {' | '.join(resp.rewrites)}"]
            if resp.rewrites
            else []
        ) + ([f"no query rewrite: {resp.rewrite_error}"] if resp.rewrite_error else []):
            if note not in self.notes:
                self.notes.append(note)
        embedder = self.cb.embedder
        gate = gate_search(
            resp,
            query,
            embedder.name if embedder else None,
            self.policy.relevance_floor,
            strategy,
            self.exclude - self.held.keys(),  # the latest input (the others: the history)
        )
        self.notes.extend(gate.notes)
        if gate.evidence is None:
            for c in resp.results:
                self._consider(c, strategy, None)
                if c.item.owner_id in self.exclude:  # the history or the latest input
                    self._left_out(c.item.owner_id)
                    continue
                if says_the_intent(c, query):  # another copy: not read, so named by its text
                    self.drop(c.item.owner_id, "the intent", f"{strategy}: says just the intent")
                    continue
                self.drop(
                    c.item.owner_id,
                    "off topic",
                    f"{strategy}: no hit shares a keyword with the intent or reaches "
                    f"similarity {gate.floor}",
                )
            self._rated_hits(resp, config)
            # what the search itself left out (retracted, rated wrong) says why it is missing
            self._search_drops(
                [c for c in resp.considered if c.retracted or c.expired or _rated_out(c)],
                config,
                strategy,
            )
            return
        self._rated_hits(resp, config)
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

        def move_up() -> None:  # the next hit the search ranked takes a freed place
            if spare:
                nxt = spare.pop(0)
                promoted.add(nxt.item.item_id)
                hits.append(nxt)
                if nxt.item.owner_id not in owners:
                    owners.update(self.nodes([nxt.item.owner_id]))

        n = 0
        while n < len(hits):
            c = hits[n]
            n += 1
            node = owners.get(c.item.owner_id)
            if c.item.owner_id in self.exclude or is_the_intent(node, query):
                self._left_out(c.item.owner_id, node)
                move_up()
                continue
            rel = c.score / best
            if rel >= min_score and shown_in_message(self, node, hits, owners, best, min_score):
                # a call its message (a hit too) shows on its lines (memory_calls.py): it
                # takes no place of its own either
                move_up()
            why = hit_reason(c, query, gate)
            self._consider(c, strategy, rel, min_score, why)
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
                cand = entity_cand(node, weight * rel, strategy, f"{strategy}: search hit, {why}")
                if c.item.kind == "chunk":  # a long entity: keep the passages that matched
                    cand.text, cand.partial = c.item.text, True
                cand.explain = c.explain()
                self.add(cand)
            else:
                ev = event_cand(node, weight * rel, strategy, f"{strategy}: search hit, {why}")
                ev.explain = c.explain()
                self.add(ev, node)
        self._search_drops(resp.considered, config, strategy, promoted)

    def _rated_hits(self, resp: SearchResponse, config: SearchConfig) -> None:
        """Keep the hits the search left out as rated false with a note (corrections.py):
        each with the least score that would have ranked it among the results."""
        rated = [c for c in resp.considered if c.correction and _rated_out(c)]
        if not rated:
            return
        k = config.dynamic_top_k[1] if config.dynamic_top_k else config.top_k
        scores = [c.score for c in resp.results]
        least = min(scores) if len(scores) >= k else None
        self.rated_hits.extend((c, least) for c in rated)

    def _search_drops(
        self,
        considered: Sequence[Candidate],
        config: SearchConfig,
        strategy: str,
        promoted: set[str] | frozenset[str] = frozenset(),
    ) -> None:
        """Record the hits a search left out (below top_k, rated wrong, retracted...)."""
        k = f"top_k {config.top_k}"
        if config.dynamic_top_k:  # seed 002's (min, max): past min, a weak hit ends it
            lo, hi = config.dynamic_top_k
            k = f"dynamic top_k {lo}-{hi}"
            if sum(c.dropped is None for c in considered) < hi:
                k = f"dynamic top_k {lo}-{hi} (past min {lo}, below half the best hit's score)"
        for c in considered:
            if c.dropped and c.dropped != "off topic" and c.item.item_id not in promoted:
                self._consider(c, strategy, None)
                # The detail says which search and why, as for the other drops; the search's
                # own word ("below top_k") only repeated the reason.
                over = "top_k" in c.dropped
                detail = f"ranked below {k}" if over else c.dropped
                self.drop(c.item.owner_id, _search_drop_reason(c), f"{strategy}: {detail}")

    def _consider(
        self,
        c: Candidate,
        strategy: str,
        relative: float | None,
        min_score: float | None = None,
        gate: str | None = None,
    ) -> None:
        """Record a search hit: `relative` is its score over the best hit's, the value the
        strategy's `min_score` is compared with; `gate`, why the relevance gate let it in
        (recall_gate.hit_reason)."""
        if self.record:
            hit = {**c.explain(), "strategy": strategy, "relative": relative}
            hit["min_score"] = min_score
            if gate is not None:
                hit["gate"] = gate
            self.considered.append(hit)


def _rated_out(c: Candidate) -> bool:
    """Left out by its search for a confidence below min_confidence (rated wrong)."""
    dropped = c.dropped or ""
    return dropped.startswith("confidence ") and "min_confidence" in dropped


def _search_drop_reason(c: Candidate) -> str:
    """The trace's reason for a hit its search left out: "top_k", "retracted" (a retracted
    message or a statement cut from one), "answers retracted" (an assistant message that
    repeats a retracted message it answers, as echoes.py drops it), "expired" (the same of
    a per-turn tool result of an earlier turn), "rated false" (confidence below min_confidence:
    rated wrong), "duplicate" (a near-duplicate of a better hit), else the search's word."""
    dropped = c.dropped or ""
    if "top_k" in dropped:
        return "top_k"
    if c.retracted:
        return "answers retracted" if dropped.startswith("retracted: answers") else "retracted"
    if c.expired:
        return "expired"
    if _rated_out(c):
        return "rated false"
    if dropped.startswith("near-duplicate"):
        return "duplicate"
    return dropped.split(":", 1)[0] or "duplicate"


# -- strategies ---------------------------------------------------------------------------------
