"""Memory-layer strategies: how each policy strategy finds candidates for the prompt.

Each strategy feeds the assembly's `Gatherer` (gatherer.py), which merges the candidates by
owner and records what it dropped and why. The strategies are seed 000's: referenced code
first, semantic recall, the project baseline, error-driven repair; multi-agent consensus is
consensus.py's.

Scores share one scale in [0, 1] so strategies mix: referenced code ~1.0, failing tests and
their logs ~0.95, what a relation leads to gets the parent's score times the edge's
confidence times 0.9, semantic hits 0.8 times their score relative to the best hit, the
project baseline 0.2-0.3.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..model import Entity, Event
from ..retrieve.config import DEFAULT_RELATION_THRESHOLDS as SEARCH_THRESHOLDS
from ..retrieve.config import PRESETS, get_preset
from ..retrieve.kb_view import entities_in_view
from ..retrieve.named_code import code_names
from ..retrieve.recency import Kind, anchored_times, recency_cue, recent_kinds
from ..store.base import ItemFilter
from .gatherer import Gatherer
from .memory_candidate import CODE_TYPES, entity_cand, event_cand, event_failed
from .policy_strategies import (
    DEFAULT_SEARCH,
    DEFAULT_SEARCH_PRESET,
    ErrorDrivenRepair,
    ProjectScopeFallback,
    ReferencedCodeFirst,
    SemanticRecall,
)

__all__ = [
    "error_driven_repair",
    "project_scope_fallback",
    "referenced_code_first",
    "semantic_recall",
]
_TEST_TYPES = frozenset({"test_case", "test"})
_BASELINE_TYPES = ("document", "requirement")
_ORDER_EDGE_TYPES = frozenset({"NEXT", "CAUSED_BY", "REFERS_TO", "MENTIONS"})
# What links code to the documents, requirements and tests about it: every edge but the
# events' order and the code's own structure (ingested CALLS, IMPORTS, ...), so an edge the
# caller named (seed 000's doc_101 -MUST_CACHE-> sql_202) links as REFERENCES does.
_NOT_LINKS = tuple(sorted(_ORDER_EDGE_TYPES | {"CALLS", "IMPORTS", "INHERITS", "CONTAINS"}))
_DOC_TYPES = frozenset({"document"})


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


# Entities of a kind read, newest updated first, to find the newest made in conversation.
_NEWEST_SCAN = 50


def _newest_made(g: Gatherer, kinds: Sequence[Kind], limit: int) -> list[Entity]:
    """The `limit` entities of `kinds` most recently produced in conversation (anchored
    from a message: ingested code is no "last time"), newest message first."""
    store = g.cb.store
    types = sorted({t for k in kinds for t in k.entity_types})
    found = [
        e
        for t in types
        for e in store.list_entities(g.pid, type=t, limit=_NEWEST_SCAN, newest_first=True)
    ]
    when = anchored_times(store, g.pid, found)
    made = [e for e in found if e.id in when]
    made.sort(key=lambda e: (-when[e.id], e.id))
    return made[:limit]


def _named_code(g: Gatherer, types: Sequence[str], limit: int) -> list[tuple[Entity, str]]:
    """Code of `types` the intent names by an identifier, a file or a table name
    (retrieve/named_code.py), with the name: a kind word alone ("the function", "这个函数")
    names nothing, so it selects nothing. Found by a keyword search for the names, kept
    where the entity's name, path or text says one of them."""
    names = code_names(g.intent)
    if not names:
        return []
    flt = ItemFilter(kinds=("entity", "chunk"), types=tuple(types))
    resp = g.cb.search(
        " ".join(names),
        project=g.pid,
        config=get_preset("keyword", top_k=limit * 4),
        filters=g.scoped(flt),
    )
    owners = list(dict.fromkeys(c.item.owner_id for c in resp.results))
    found = {e.id: e for e in g.cb.store.get_entities(g.pid, owners)}
    out: list[tuple[Entity, str]] = []
    for e in (found[o] for o in owners if o in found):
        said = f"{e.name}\n{e.properties.get('path', '')}\n{e.text or ''}".casefold()
        name = next((n for n in names if n.casefold() in said), None)
        if name is not None:
            out.append((e, name))
    # what is called so first: the function itself before the module that holds it
    out.sort(key=lambda pair: pair[1].casefold() not in pair[0].name.casefold())
    return out[:limit]


def _matched_entities(g: Gatherer, types: Sequence[str], limit: int) -> list[Entity]:
    """Entities of `types` that share words with the intent (keyword search: no shared word,
    no match, so an unrelated question finds nothing), best first."""
    flt = ItemFilter(kinds=("entity", "chunk"), types=tuple(types))
    resp = g.cb.search(
        g.intent, project=g.pid, config=get_preset("keyword", top_k=limit), filters=g.scoped(flt)
    )
    owners = list(dict.fromkeys(c.item.owner_id for c in resp.results))
    found = {e.id: e for e in g.cb.store.get_entities(g.pid, owners)}
    return [found[o] for o in owners if o in found]


def referenced_code_first(g: Gatherer, s: ReferencedCodeFirst) -> None:
    """Seed 000's "优先检索被 document 引用的 code，再加载其关联的 document/test_case": code and
    SQL the conversation points back at, then the documents and tests linked to it.

    The code: what this session referenced; when the intent points back in time at a kind
    it names ("上次那个SQL") and this session made none, the newest of that kind made in
    conversation, newest first; then the code linked to the documents and requirements the
    intent names (and to the documents those requirements follow); then code the intent
    names itself. With it come the documents, requirements and test cases linked to it (any
    edge but the events' order and the code's structure: a caller's MUST_CACHE too, two
    hops) and the messages that made it. With no such code, the documents and requirements
    the intent names come alone (the trace says so); an intent that names nothing adds
    nothing (never "the latest code" of the project)."""
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
    found = {e.id: e for e in g.cb.store.get_entities(g.pid, ranked)}
    chosen = [found[i] for i in ranked if i in found and found[i].type in types]
    kinds = recent_kinds(g.intent) if s.refers_back(g.intent) is not None else ()
    kind_types = {t for k in kinds for t in k.entity_types}
    if s.recent_of_kind and kinds and not any(e.type in kind_types for e in chosen):
        # "上次那个SQL", "the query from last time", and this session made none: the newest
        # of that kind, wherever it was made (what this session made is what "刚才" means)
        cue = recency_cue(g.intent)
        for e in _newest_made(g, kinds, s.recent_of_kind):
            if e.id not in why:
                chosen.append(e)
                why[e.id] = f"the newest {e.type} made in conversation ({cue!r})"
    anchors = _named_anchors(g, s.max_items)
    anchor_of: dict[str, str] = {}  # linked code -> the document or requirement it came from
    if anchors:  # the code those documents and requirements are linked to
        rels = g.verified(g.cb.store.list_relations(g.pid, list(anchors), exclude_types=_NOT_LINKS))
        for rel in sorted(rels, key=lambda r: -r.confidence):
            if rel.confidence < g.policy.threshold_for(rel.type):
                continue
            other = rel.to_id if rel.from_id in anchors else rel.from_id
            anchor_of.setdefault(other, (rel.from_id if other == rel.to_id else rel.to_id))
        for e in g.cb.store.get_entities(g.pid, list(anchor_of)):
            if e.type in types and e.id not in why:
                chosen.append(e)
                why[e.id] = f"linked to {anchor_of[e.id]}, which {anchors[anchor_of[e.id]][1]}"
    for e, name in _named_code(g, types, s.max_items):  # code the intent names itself
        if e.id not in why:
            chosen.append(e)
            why[e.id] = f"{e.type} named by the intent ({name!r})"
    seeds: dict[str, float] = {}
    for i, e in enumerate(chosen[: s.max_items]):
        seeds[e.id] = 1.0 - 0.02 * i
        g.add(entity_cand(e, seeds[e.id], s.name, f"{s.name}: {why[e.id]}"))
    if not seeds:
        _anchors_alone(g, s, anchors)
        return
    used = {anchor_of[e] for e in seeds if e in anchor_of}
    for i, aid in enumerate(a for a in anchors if a in used):  # and the documents that led there
        a, said = anchors[aid]
        g.add(entity_cand(a, 0.9 - 0.02 * i, s.name, f"{s.name}: {a.type} that {said}"))
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
            g.add(event_cand(ev, seeds[eid] * 0.9, s.name, f"{s.name}: referenced {eid}"), ev)
    # ... then its linked documents, requirements and test cases, with the relations
    g.follow(seeds, None, s.name, hops=2, exclude_types=_NOT_LINKS)
    _why_made(g, s, {e.id: e for e in chosen if e.id in seeds}, seeds)


def _named_anchors(g: Gatherer, limit: int) -> dict[str, tuple[Entity, str]]:
    """The documents and requirements the intent names, best first, then the documents those
    requirements follow (seed 000, day 1: the requirement leads to document_101): id ->
    (entity, what brought it, as "the intent names" or "requirement_201 follows")."""
    named = _matched_entities(g, ["document", "requirement"], limit)
    out: dict[str, tuple[Entity, str]] = {e.id: (e, "the intent names") for e in named}
    reqs = [e.id for e in named if e.type == "requirement"]
    if not reqs:
        return out
    rels = g.verified(g.cb.store.list_relations(g.pid, reqs, exclude_types=_NOT_LINKS))
    linked: dict[str, str] = {}
    for rel in sorted(rels, key=lambda r: -r.confidence):
        if rel.confidence >= g.policy.threshold_for(rel.type):
            other = rel.to_id if rel.from_id in reqs else rel.from_id
            linked.setdefault(other, rel.from_id if other == rel.to_id else rel.to_id)
    for e in g.cb.store.get_entities(g.pid, [i for i in linked if i not in out]):
        if e.type in _DOC_TYPES:
            out[e.id] = (e, f"{linked[e.id]} (named by the intent) is linked to")
    return out


def _anchors_alone(
    g: Gatherer, s: ReferencedCodeFirst, anchors: Mapping[str, tuple[Entity, str]]
) -> None:
    """No code referenced or named: the documents (first) and requirements the intent names,
    which the code to write will hang off; nothing when it names none either."""
    if not anchors:
        g.notes.append(f"{s.name}: nothing referenced or named; no code added")
        return
    order = sorted(anchors.values(), key=lambda a: a[0].type not in _DOC_TYPES)
    for i, (a, said) in enumerate(order):
        g.add(entity_cand(a, 0.9 - 0.02 * i, s.name, f"{s.name}: {a.type} that {said}"))
    g.notes.append(
        f"{s.name}: no code referenced or named; added the documents and requirements the "
        "intent names (and the documents they are linked to) instead"
    )


def _why_made(
    g: Gatherer, s: ReferencedCodeFirst, entities: Mapping[str, Entity], seeds: Mapping[str, float]
) -> None:
    """What the messages that made the referenced code answered (their CAUSED_BY parents:
    the request, the decision behind it), a step below the messages themselves."""
    made_by: dict[str, str] = {}  # producing message -> the code it made (the best seed)
    for eid in sorted(entities, key=lambda i: -seeds[i]):
        source = entities[eid].properties.get("event_id")
        if isinstance(source, str) and source:
            made_by.setdefault(source, eid)
    if not made_by:
        return
    rels = g.verified(
        g.cb.store.list_relations(g.pid, list(made_by), direction="out", types=["CAUSED_BY"])
    )
    causes = {e.id: e for e in g.cb.store.get_events(g.pid, [r.to_id for r in rels])}
    for rel in rels:
        if (cause := causes.get(rel.to_id)) is not None and rel.from_id in made_by:
            eid = made_by[rel.from_id]
            reason = f"{s.name}: {rel.from_id} made {eid} in answer to it"
            g.add(event_cand(cause, seeds[eid] * 0.9**3, s.name, reason), cause)


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
        "top_k": s.top_k,  # its own when written, else the policy's (Policy._recall_depth)
        "relation_thresholds": {**SEARCH_THRESHOLDS, **g.policy.relation_thresholds},
    }
    if g.policy.dynamic_top_k is not None:
        # memory_token_allowance is not the search's: the assembler counts it on what the
        # prompt holds (memory_section.keep_within_allowance), so every hit it cuts is named
        # as cut by the allowance and the note counts them all
        overrides["dynamic_top_k"] = g.policy.dynamic_top_k
    preset = s.search_preset
    if preset not in PRESETS and preset == DEFAULT_SEARCH_PRESET:
        preset, overrides["graph_hops"] = DEFAULT_SEARCH  # one hop along trusted edges
    g.search(g.intent, get_preset(preset, **overrides), None, s.name, s.min_score, 0.8)


def project_scope_fallback(
    g: Gatherer, s: ProjectScopeFallback, session_messages: int, new_task: str | None = None
) -> None:
    """Seed 000's "加载 project 下所有 document + 最近 3 个 code，保证新任务不脱离项目基线":
    what other sessions said about the intent, then the project's documents and
    requirements and its latest code, for an intent about the project. For `new_task` (a
    task with no turn yet: task_cues.py) the baseline loads whatever the intent says."""
    if new_task is None and session_messages >= s.fallback_depth and len(g.cands) >= g.policy.top_k:
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
    if (
        new_task is None
        and not g.on_topic
        and not _matched_entities(g, [*_BASELINE_TYPES, "code", "sql"], 1)
    ):
        g.notes.append(f"{s.name}: the intent matches nothing here; no project baseline")
        return
    of = "" if new_task is None else f" (baseline of new task {new_task!r})"
    docs = _recent_entities(g, list(_BASELINE_TYPES), 2 * s.fallback_depth)
    for i, e in enumerate(docs):
        g.add(entity_cand(e, 0.3 - 0.005 * i, s.name, f"{s.name}: project {e.type}{of}"))
    for i, e in enumerate(_recent_entities(g, ["code", "sql"], s.fallback_depth)):
        g.add(entity_cand(e, 0.25 - 0.005 * i, s.name, f"{s.name}: recent project {e.type}{of}"))


def error_driven_repair(g: Gatherer, s: ErrorDrivenRepair, failing: Event | None) -> None:
    def code_ids() -> list[str]:
        ranked = sorted(g.cands.values(), key=lambda c: -c.score)
        return [
            c.owner_id
            for c in ranked
            if c.kind == "entity" and c.type in CODE_TYPES and c.type not in _TEST_TYPES
        ][:3]

    if failing is not None:
        g.add(event_cand(failing, 0.96, s.name, f"{s.name}: the last tool result failed"), failing)
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
                g.add(event_cand(ev, score, s.name, f"{s.name}: run of {test_id}"), ev)
    if not s.include_test_cases:
        for t in tests:
            if t in g.cands and g.cands[t].strategies == [s.name]:
                del g.cands[t]
    # What the code was built from: its requirement and the documents that govern it.
    g.follow(dict.fromkeys(ids, 0.95), ["GENERATES", "FOLLOWS", "REFERENCES"], s.name, hops=2)
