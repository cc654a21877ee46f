"""The rules capture anchoring applies to stored events (see capture_anchor.py, which runs
them off the caller's thread): code and SQL blocks, requirement and decision statements,
spec references, mentions of files, tables, routes and people, names of known entities,
and, when configured, what a chat model finds (llm_extract.py).

`anchor_events` applies them to a batch; it is public for anchoring events stored earlier.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Sequence

from ..components import Components, ComponentsSource, components_of
from ..model import Entity, Event, make_entity_id
from . import extract
from .capture_anchor import SKIP_TYPES, AnchorConfig
from .llm_extract import LLMExtractor, llm_links
from .weave import (
    Link,
    SymbolIndex,
    SymbolIndexCache,
    find_mentions,
    is_distinctive,
    weave_requirement,
    write_links,
)

__all__ = ["anchor_events"]

log = logging.getLogger(__name__)

_FENCE = re.compile(r"^\s*(```|~~~)", re.MULTILINE)
# Who states requirements and decisions (a tool's output or a log does not).
# A run of events anchored in one transaction: at most _CHUNK, committed after _CHUNK_S.
_CHUNK = 64
_CHUNK_S = 0.05
_STATEMENT_TYPES = frozenset({"user_message", "assistant_message", "system"})
_TEST_FN = re.compile(r"^test_?(.+)$")


def _link(from_id: str, rel: str, to_id: str, conf: float, rule: str, **props: object) -> Link:
    return Link(from_id, rel, to_id, conf, rule, dict(props), origin="ctxbase")


def _statement_entities(
    cb: Components, ev: Event, cfg: AnchorConfig, titles: dict[str, str]
) -> tuple[list[Link], list[str]]:
    links: list[Link] = []
    requirements: list[str] = []
    found = extract.statements(ev.text or "") if cfg.statements else []
    if not found:
        return links, requirements
    _write_statements(cb, ev, cfg, titles, found, links, requirements)
    return links, requirements


def _write_statements(
    cb: Components,
    ev: Event,
    cfg: AnchorConfig,
    titles: dict[str, str],
    found: Sequence[extract.Statement],
    links: list[Link],
    requirements: list[str],
) -> None:
    said_by_user = ev.type == "user_message"
    for n, st in enumerate(found, start=1):
        conf = st.confidence if said_by_user else round(st.confidence - 0.1, 3)
        eid = make_entity_id(st.kind, f"{ev.id}#{st.kind[0]}{n}")
        props: dict[str, object] = {
            "session_id": ev.session_id,
            "event_id": ev.id,
            "said_at": ev.ts,  # when it was said: what time decay and dates read
            "agent_id": ev.agent_id,
            "rule": f"ctxbase:{st.rule}",
            "confidence": conf,
        }
        if ev.agent_role:
            props["agent_role"] = ev.agent_role
        name = st.text if len(st.text) <= 80 else st.text[:79] + "…"
        cb.upsert_entity(st.kind, name, st.text, id=eid, properties=props, project=ev.project_id)
        links.append(_link(ev.id, "GENERATES", eid, conf, st.rule))
        if cfg.spec_references:
            for ref in extract.spec_references(st.text):
                hit = extract.match_document(ref.phrase, titles)
                if hit is not None:
                    links.append(
                        _link(eid, "FOLLOWS", hit[0], hit[1], "follows_spec", phrase=ref.phrase)
                    )
        if st.kind == "requirement":
            requirements.append(eid)


_WORD = re.compile(r"(?<![\w./-])([A-Za-z_][\w.]*[A-Za-z0-9_])(?![\w/])")


def _known_mention_names(cb: Components, pid: str) -> dict[str, str]:
    """Names of the project's mention entities (tables, files, APIs) -> their ids."""
    return {e.name.lower(): e.id for e in cb.store.list_entities(pid, type="mention")}


def _mention_links(
    cb: Components, ev: Event, prose: str, index: SymbolIndex, known: dict[str, str]
) -> list[Link]:
    links: list[Link] = []
    found = extract.mentions(prose)
    named = {m.value.lower() for m in found}
    for w in _WORD.finditer(prose):  # a distinctive name mentioned before, said bare this time
        word = w.group(1).lower()
        if word in known and word not in named and is_distinctive(w.group(1)):
            named.add(word)
            links.append(_link(ev.id, "MENTIONS", known[word], 0.75, "known_mention"))
    for m in found:
        target: str | None = None
        if m.kind == "table":
            owners = index.table(m.value)
            target = owners[0] if len(owners) == 1 else None
        elif m.kind == "file":
            owners = index.paths.get(m.value) or index.basenames.get(m.value, [])
            target = owners[0] if len(owners) == 1 else None
        if target is None:
            target = make_entity_id("mention", f"{m.kind}:{m.value}")
            if known.get(m.value.lower()) != target:
                if not cb.store.get_entities(ev.project_id, [target]):
                    cb.upsert_entity(
                        "mention",
                        m.value,
                        f"{m.kind} {m.value}",
                        id=target,
                        properties={"kind": m.kind, "rule": f"ctxbase:{m.rule}"},
                        project=ev.project_id,
                    )
                known[m.value.lower()] = target
        links.append(_link(ev.id, "MENTIONS", target, m.confidence, m.rule, kind=m.kind))
    return links


def _code_links(
    cb: Components, ev: Event, entity_ids: Sequence[str], index: SymbolIndex
) -> list[Link]:
    """Tests named after code, and what an answer to an assembled context used of it."""
    from ..assemble.loop import used_evidence

    links: list[Link] = []
    own = cb.store.get_entities(ev.project_id, list(entity_ids))
    for e in own:
        if e.type != "test_case":
            continue
        m = _TEST_FN.match(e.name.rsplit(".", 1)[-1])
        if m is None:
            continue
        tail = m.group(1)
        for name, owners in index.bare.items():
            named = len(name) >= 4 and tail.startswith(name) and len(owners) == 1
            if named and owners[0] not in entity_ids:
                links.append(_link(owners[0], "VALIDATES", e.id, 0.7, "test_name", name=name))
    context_id = ev.metadata.get("context_id")
    if not isinstance(context_id, str) or not own:
        return links
    trace = cb.store.get_trace(ev.project_id, context_id)
    if not trace:
        return links
    ids = [
        str(c["id"])
        for c in trace.get("candidates", ())
        if c.get("included") and c.get("kind") == "entity"
    ]
    # a block's module wrapper says nothing its functions do not; a new version of a context
    # entity is its MODIFIES edge's business
    context = [
        c
        for c in cb.store.get_entities(ev.project_id, ids)
        if c.id not in entity_ids and c.properties.get("kind") != "module"
    ]
    units = [e for e in own if e.properties.get("kind") != "module"] or own
    for e in units:
        output = f"{ev.text or ''}\n{e.name}\n{e.text}"
        for c in context:
            evidence = used_evidence(c, output)
            if evidence is None:
                continue
            if e.type == "test_case" and c.type in ("code", "sql"):
                links.append(_link(c.id, "VALIDATES", e.id, 0.8, "context_used", evidence=evidence))
            if c.type != "test_case" and c.name != e.name:
                links.append(_link(c.id, "GENERATES", e.id, 0.8, "context_used", evidence=evidence))
    return links


def anchor_events(
    cb: ComponentsSource,
    events: Sequence[Event],
    config: AnchorConfig | None = None,
    *,
    index: SymbolIndex | None = None,
    extractor: LLMExtractor | None = None,
    indexes: SymbolIndexCache | None = None,
) -> int:
    """Anchor stored events (see module doc); returns how many edges were written.
    `extractor` is the LLM client to use (else one for this call when `config.llm` is set);
    `indexes` keeps the projects' symbol indexes between calls (else read for this one)."""
    cb = components_of(cb)
    cfg = config or AnchorConfig()
    own = extractor is None and cfg.llm is not None
    if own and cfg.llm is not None:
        extractor = LLMExtractor(cfg.llm)
    try:
        return _anchor_events(cb, events, cfg, index, extractor, indexes)
    finally:
        if own and extractor is not None:
            extractor.close()


def _anchor_events(
    cb: Components,
    events: Sequence[Event],
    cfg: AnchorConfig,
    index: SymbolIndex | None,
    extractor: LLMExtractor | None,
    kept: SymbolIndexCache | None,
) -> int:
    written = 0
    indexes: dict[str, SymbolIndex] = {}
    known: dict[str, dict[str, str]] = {}  # project -> mention names
    todo = [ev for ev in events if (ev.text or "").strip() and ev.type not in SKIP_TYPES]
    start = 0
    while start < len(todo):
        pid = todo[start].project_id
        chunk: list[Event] = []
        for ev in todo[start : start + _CHUNK]:  # a run of one project's events
            if ev.project_id != pid:
                break
            chunk.append(ev)
        for_llm: list[tuple[Event, list[Link], str, SymbolIndex]] = []
        # What events make is written in a transaction that holds the project's write lock
        # and first reads the events again: one forgotten (or hidden) since it was stored,
        # by this base or another process, makes nothing, and a forget that comes after the
        # commit takes what it made (store/forget_steps.py). One commit for a run of events
        # (not one each), cut short after _CHUNK_S so a capture writer waits little.
        try:
            with cb.store.transaction():
                began = time.monotonic()
                stored = _still_stored(cb, pid, [ev.id for ev in chunk])
                idx = index if index is not None else indexes.get(pid)
                if idx is None:
                    idx = indexes[pid] = (
                        kept.get(cb.store, pid)
                        if kept is not None
                        else SymbolIndex.from_store(cb.store, pid)
                    )
                for ev in chunk:
                    start += 1
                    if ev.id in stored:
                        made, links, prose = _anchor_one(cb, ev, cfg, idx, known)
                        written += made
                        for_llm.append((ev, links, prose, idx))
                    if time.monotonic() - began > _CHUNK_S:
                        break
        except BaseException:
            if kept is not None:  # it may hold entities this rolled back
                kept.drop(pid)
            raise
        cb.notify_embedder()  # their entities' units are committed now
        for ev, links, prose, idx in for_llm:
            if extractor is not None and extractor.wants(ev.type, prose):
                if pid not in known:
                    known[pid] = _known_mention_names(cb, pid)
                have = {(lk.from_id, lk.type, lk.to_id) for lk in links}
                written += _llm_anchor(cb, ev, prose, extractor, idx, known[pid], have, cfg)
    if written:
        cb.notify_embedder()
    return written


def _still_stored(cb: Components, project_id: str, ids: Sequence[str]) -> set[str]:
    """Inside a transaction: hold the project's write lock, then which of `ids` are still
    stored, visible events (a forget or hide waits for the transaction, or came before)."""
    cb.store.hold_project(project_id)
    return {e.id for e in cb.store.get_events(project_id, list(ids))}


def _anchor_one(
    cb: Components,
    ev: Event,
    cfg: AnchorConfig,
    idx: SymbolIndex,
    known: dict[str, dict[str, str]],
) -> tuple[int, list[Link], str]:
    """The rules' entities and edges of one stored event, inside the caller's transaction:
    how many edges were written, the links, and its prose (the text without code blocks)."""
    pid = ev.project_id
    text = ev.text or ""
    written = 0
    links: list[Link] = []
    prose = text
    produced = ev.metadata.get("produced")
    fenced = _FENCE.search(text) is not None
    if fenced:  # the parsers (sqlglot among them) load for the first code block
        from .anchoring import anchor_message
        from .fenced import extract_code_blocks
    if cfg.code_blocks and fenced and not produced:
        report = anchor_message(cb, ev, index=idx, origin="ctxbase")
        written += len(report.relations)
        for e in cb.store.get_entities(pid, report.entity_ids):
            idx.add(e)
        links.extend(_code_links(cb, ev, report.entity_ids, idx))
    if fenced:
        blocks = extract_code_blocks(text)
        for block in reversed(blocks):
            prose = prose[: block.start] + prose[block.end :]
        if not (cfg.code_blocks and not produced):  # anchor_message did not weave prose
            links.extend(_known_names(ev, prose, idx, cfg))
    else:
        links.extend(_known_names(ev, prose, idx, cfg))
    requirements: list[str] = []
    if ev.type in _STATEMENT_TYPES and (cfg.statements or cfg.spec_references):
        titles = idx.document_titles
        found, requirements = _statement_entities(cb, ev, cfg, titles)
        links.extend(found)
        covered = {s.text for s in extract.statements(prose)} if cfg.statements else set()
        if cfg.spec_references:
            for ref in extract.spec_references(prose):
                if ref.sentence in covered:
                    continue  # its requirement FOLLOWS the document
                hit = extract.match_document(ref.phrase, titles)
                if hit is not None:
                    links.append(
                        _link(ev.id, "REFERENCES", hit[0], hit[1], ref.rule, phrase=ref.phrase)
                    )
            links.extend(_spec_applies_to(cb, ev, prose, titles))
    if cfg.mentions:
        if pid not in known:
            known[pid] = _known_mention_names(cb, pid)
        links.extend(_mention_links(cb, ev, prose, idx, known[pid]))
    links = [lk for lk in links if lk.confidence >= cfg.min_confidence]
    if links:
        written += len(write_links(cb, links, project=pid))
    code: dict[str, list[Entity]] = {}
    for req in requirements:  # FOLLOWS the documents it names, GENERATES code
        written += len(
            weave_requirement(
                cb, req, project=pid, index=idx, origin="ctxbase", found=links,
                session_code=code,
            )
        )  # fmt: skip
    return written, links, prose


def _llm_anchor(
    cb: Components,
    ev: Event,
    prose: str,
    extractor: LLMExtractor,
    idx: SymbolIndex,
    known: dict[str, str],
    have: set[tuple[str, str, str]],
    cfg: AnchorConfig,
) -> int:
    """Write what the model adds to the rules' edges of one event (`have`); 0 when it
    fails: the rules' edges are already written and stay."""
    try:
        found = extractor.extract(prose)
        if found is None:
            return 0
        stated: dict[tuple[str, str], str] = {}
        if cfg.statements and ev.type in _STATEMENT_TYPES:
            for n, st in enumerate(extract.statements(ev.text or ""), start=1):
                stated[(st.kind, st.text)] = make_entity_id(st.kind, f"{ev.id}#{st.kind[0]}{n}")
        # the model answered outside any transaction; what it found is written, as the
        # rules' part, only while the event is still stored
        with cb.store.transaction():
            if ev.id not in _still_stored(cb, ev.project_id, [ev.id]):
                return 0
            links = [
                lk
                for lk in llm_links(cb, ev, found, idx, known, stated)
                if lk.confidence >= cfg.min_confidence
                and (lk.from_id, lk.type, lk.to_id) not in have
            ]
            return len(write_links(cb, links, project=ev.project_id)) if links else 0
    except Exception as exc:  # the model's part is best effort: the event stays anchored
        extractor.record_error(f"writing what the model found in {ev.id} failed: {exc}")
        log.warning("LLM extraction for %s not written: %s", ev.id, exc)
        return 0


_PRODUCED_LOOKBACK = 50  # events of the session searched for the code a message means
_PRODUCED_MAX = 5  # entities one producing event contributes


def _spec_applies_to(cb: Components, ev: Event, prose: str, titles: dict[str, str]) -> list[Link]:
    """A sentence naming a document and code ("参考刚才的合规指南修改 SQL"): the document
    REFERENCES the SQL or code of that kind that the session produced last, before `ev`."""
    wanted: dict[str, tuple[str, float]] = {}  # document -> (kind, confidence)
    for ref in extract.spec_references(prose):
        kind = extract.code_asked_for(ref.sentence.replace(ref.phrase, " "))
        hit = extract.match_document(ref.phrase, titles) if kind else None
        if kind and hit is not None and hit[0] not in wanted:
            wanted[hit[0]] = (kind, hit[1])
    if not wanted:
        return []
    pid = ev.project_id
    session = [e.id for e in cb.store.list_events(pid, ev.session_id, last_n=_PRODUCED_LOOKBACK)]
    before = session[: session.index(ev.id)] if ev.id in session else session
    order = {eid: n for n, eid in enumerate(before)}  # oldest first
    rels = cb.store.list_relations(pid, list(order), direction="out", types=["GENERATES"])
    made = {e.id: e for e in cb.store.get_entities(pid, [r.to_id for r in rels])}
    links: list[Link] = []
    for doc_id, (kind, conf) in wanted.items():
        by_event: dict[str, list[str]] = {}
        for rel in rels:
            entity = made.get(rel.to_id)
            if rel.from_id in order and entity is not None and entity.type == kind:
                by_event.setdefault(rel.from_id, []).append(entity.id)
        if by_event:
            newest = max(by_event, key=lambda eid: order[eid])
            for entity_id in sorted(by_event[newest])[:_PRODUCED_MAX]:
                # event_id: forgetting the message forgets the relation it made
                links.append(
                    _link(doc_id, "REFERENCES", entity_id, conf, "spec_applies_to", event_id=ev.id)
                )
    return links


def _known_names(ev: Event, prose: str, idx: SymbolIndex, cfg: AnchorConfig) -> list[Link]:
    return [
        _link(ev.id, "REFERENCES", m.entity_id, m.confidence, "mentions", matched=m.matched)
        for m in find_mentions(prose, idx)
        if m.confidence >= cfg.min_confidence and m.entity_id != ev.id
    ]
