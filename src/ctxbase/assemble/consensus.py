"""Multi-agent consensus (seed 000's `multi_agent_consensus`): what the agents of one task
established, merged for the one asking.

Seed 000: "合并各 Agent 的 context_id，取交集实体 + 高置信度关系，避免 Agent 间理解冲突". Each
agent the strategy lists (`agents: [code_gen, test_gen]`) has a view: the last context
assembled for it (of this task, else of the project; contexts assembled under one of its
role aliases count, role_aliases.py) and what the answer to that context produced
(`record_outcome`'s artefacts and the code anchored from the answer's blocks). The asker is
given

* the entities every view holds (the intersection),
* what each other agent produced in answer to its context (the code the code generator
  wrote reaches the test writer although the test writer never saw it),
* the relations among and from those whose confidence reaches `consensus_threshold`,
* and the conflicts between the views, shown instead of one side winning: one agent worked
  from a version that another's view, or the store, has since superseded ("code_gen
  worked from document_101, superseded by document_102; test_gen from document_102"), one
  agent's answer wrote a new version over what another agent's answer produced (the
  earlier text is quoted), or two agents hold different current entities of one type and
  name. Each conflict is a
  memory item of its own ("[conflict between agents]") and a trace note; the current
  version comes in, the superseded one is dropped as such (gatherer.py), and both sides of
  a name conflict come in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..model import Entity, Relation
from .gatherer import Gatherer
from .memory_candidate import MemoryCandidate, entity_cand, relation_entry
from .policy_strategies import MultiAgentConsensus
from .role_aliases import PolicySelector, acting_agent

__all__ = ["CONFLICT", "AgentView", "acts_as_agent", "agent_views", "multi_agent_consensus"]

CONFLICT = "conflict"  # the kind and type of a conflict's memory item
_ORDER_EDGE_TYPES = frozenset({"NEXT", "CAUSED_BY", "REFERS_TO", "MENTIONS"})


@dataclass(frozen=True)
class AgentView:
    """What one agent was given and what it produced: its last context and that context's
    answer."""

    agent: str
    context_id: str
    seen: frozenset[str]  # the entities the context carried (and its outcome names)
    produced: frozenset[str]  # what the answer to it produced

    @property
    def label(self) -> str:
        return f"{self.agent} ({self.context_id})"

    @property
    def held(self) -> frozenset[str]:
        return self.seen | self.produced


def acts_as_agent(
    g: Gatherer, policies: PolicySelector, s: MultiAgentConsensus, role: str
) -> str | None:
    """The consensus agent `role` acts as under another name (it selects the same policy as
    that agent), noted in the trace; None when it is none of them."""
    agent = acting_agent(policies, g.pid, g.intent, g.policy.name, s.agents)
    if agent is not None:
        g.notes.append(
            f"{s.name}: role {role!r} acts as agent {agent!r} "
            f"(both select policy {g.policy.name!r})"
        )
    return agent


def _produced(g: Gatherer, context_id: str) -> frozenset[str]:
    """What the answer to a context produced: the outcome's artefacts and the entities its
    answer's blocks were anchored as (GENERATES from the answer event)."""
    trace = g.cb.store.get_trace(g.pid, context_id) or {}
    outcome = trace.get("outcome")
    if not isinstance(outcome, dict):
        return frozenset()
    out = {str(i) for i in outcome.get("entities") or () if isinstance(i, str)}
    event_id = outcome.get("event_id")
    if isinstance(event_id, str) and event_id:
        rels = g.cb.store.list_relations(g.pid, [event_id], direction="out", types=["GENERATES"])
        out.update(r.to_id for r in g.verified(rels))
    return frozenset(out)


def agent_views(
    g: Gatherer, s: MultiAgentConsensus, aliases: Mapping[str, Sequence[str]] | None
) -> list[AgentView]:
    """Each listed agent's view, in the order `agents` lists them; agents with no context
    yet left out."""
    found = g.cb.store.latest_context_ids(g.pid, s.agents, task_id=g.task_id, aliases=aliases)
    if g.task_id is not None and not found:  # no context of this task yet: the project's
        found = g.cb.store.latest_context_ids(g.pid, s.agents, aliases=aliases)
    views: list[AgentView] = []
    for agent in s.agents:
        context_id = found.get(agent)
        if context_id is None:
            continue
        # read in the database: decoding whole traces cost more than the rest of the strategy
        seen = g.cb.store.context_entities(g.pid, context_id)
        if seen is not None:
            views.append(AgentView(agent, context_id, frozenset(seen), _produced(g, context_id)))
    return views


def _asker(role: str, aliases: Mapping[str, Sequence[str]] | None) -> str:
    folded = role.casefold()
    for agent, names in (aliases or {}).items():
        if folded in {n.casefold() for n in names}:
            return agent
    return role


def _head(e: Entity) -> str:
    """The id of the entity an earlier version belongs to (itself for a current one)."""
    for key in ("archived_from", "superseded_by"):
        value = e.properties.get(key)
        if not e.latest and isinstance(value, str) and value:
            return value
    return e.id


def _version_conflicts(
    views: Sequence[AgentView], nodes: Mapping[str, Entity]
) -> list[tuple[str, str, str]]:
    """(key, text, current id) per entity some view held in a version that is not the
    latest: which agent held which version, and which one is current."""
    groups: dict[str, dict[str, list[str]]] = {}  # head -> entity id -> agent labels
    for view in views:
        for eid in sorted(view.held):
            node = nodes.get(eid)
            if node is not None:
                groups.setdefault(_head(node), {}).setdefault(eid, []).append(view.label)
    out: list[tuple[str, str, str]] = []
    for head, held in sorted(groups.items()):
        stale = [eid for eid in held if not nodes[eid].latest]
        if not stale:
            continue
        sides = []
        for eid, labels in held.items():
            node = nodes[eid]
            how = "" if node.latest else f" ({_superseded_how(node, head)})"
            sides.append(f"{', '.join(labels)} worked from {eid}{how}")
        text = (
            f"{'; '.join(sides)}. The current version is {head}: build on it, not on "
            f"{', '.join(stale)}."
        )
        by_context = {v.context_id: v.label for v in views}
        for eid in stale:  # an agent's own artefact replaced: what it said is not lost
            made_by = by_context.get(str(nodes[eid].properties.get("context_id")))
            if made_by is not None:
                text += f"\n{eid}, produced by {made_by}, said:\n{_short(nodes[eid].text)}"
        out.append((head, text, head))
    return out


def _superseded_how(node: Entity, head: str) -> str:
    if "archived_from" in node.properties:
        return f"version {node.version} of {head}, since changed"
    return f"superseded by {head} since"


def _name_conflicts(
    views: Sequence[AgentView], nodes: Mapping[str, Entity]
) -> list[tuple[str, str, list[str]]]:
    """(key, text, ids) per type and name for which different agents hold different current
    entities with different text."""
    named: dict[tuple[str, str], dict[str, list[str]]] = {}
    for view in views:
        for eid in sorted(view.held):
            node = nodes.get(eid)
            if node is None or not node.latest or not node.name.strip():
                continue
            key = (node.type, node.name.strip().casefold())
            named.setdefault(key, {}).setdefault(eid, []).append(view.label)
    out: list[tuple[str, str, list[str]]] = []
    for (kind, _), held in sorted(named.items()):
        texts = {nodes[eid].text.strip() for eid in held}
        owners = {label for labels in held.values() for label in labels}
        if len(held) < 2 or len(texts) < 2 or len(owners) < 2:
            continue
        name = nodes[next(iter(held))].name
        sides = "; ".join(f"{', '.join(labels)} holds {eid}" for eid, labels in held.items())
        text = (
            f"the agents hold different {kind} {name!r}: {sides}. They differ: settle which "
            "one stands before building on either."
        )
        out.append((f"{kind}:{name}", text, list(held)))
    return out


def _overwrites(
    g: Gatherer, views: Sequence[AgentView], nodes: Mapping[str, Entity]
) -> list[tuple[str, str]]:
    """(key, text) per entity one agent's answer wrote over a version another agent's
    answer produced (`record_outcome` marks each artefact with its context): the second
    write would otherwise silently stand for both."""
    by_context = {v.context_id: v for v in views}
    written = [
        e
        for e in nodes.values()
        if e.latest and e.version > 1 and e.properties.get("context_id") in by_context
    ]
    earlier = [f"{e.id}@v{k}" for e in written for k in range(1, e.version)]
    kept = {k.id: k for k in g.cb.store.get_entities(g.pid, earlier)} if earlier else {}
    out: list[tuple[str, str]] = []
    for e in sorted(written, key=lambda n: n.id):
        writer = by_context[str(e.properties["context_id"])]
        for k in range(e.version - 1, 0, -1):
            old = kept.get(f"{e.id}@v{k}")
            other = by_context.get(str(old.properties.get("context_id"))) if old else None
            if old is None or other is None or other.agent == writer.agent:
                continue
            if old.text.strip() == e.text.strip():
                break
            text = (
                f"{writer.label} wrote version {e.version} of {e.id} over version {k}, which "
                f"{other.label} produced; they differ. Version {k} said:\n{_short(old.text)}"
            )
            out.append((f"{e.id}@v{k}", text))
            break
    return out


def _short(text: str, limit: int = 400) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[:limit].rstrip() + " …"


def _conflict_item(g: Gatherer, s: MultiAgentConsensus, key: str, text: str) -> None:
    cand = MemoryCandidate(
        f"{CONFLICT}:{key}",
        CONFLICT,
        CONFLICT,
        "",
        text,
        0.9,
        [s.name],
        [f"{s.name}: the agents' contexts disagree"],
    )
    g.cands[cand.owner_id] = cand
    g.notes.append(f"{s.name}: conflict: {text}")


def multi_agent_consensus(
    g: Gatherer,
    s: MultiAgentConsensus,
    role: str,
    aliases: Mapping[str, Sequence[str]] | None = None,
) -> None:
    """Merge the listed agents' views for `role` (see the module doc)."""
    widened = {a: [r for r in names if r != a] for a, names in (aliases or {}).items()}
    if any(widened.values()):
        g.notes.append(
            f"{s.name}: contexts of "
            + "; ".join(f"{', '.join(o)} count as {a}'s" for a, o in widened.items() if o)
        )
    views = agent_views(g, s, aliases)
    if not views:
        g.notes.append(f"{s.name}: no context assembled for {', '.join(s.agents)} yet")
        return
    asker = _asker(role, aliases)
    shared = frozenset.intersection(*(v.held for v in views))
    everything = sorted(frozenset.union(*(v.held for v in views)))
    nodes = {e.id: e for e in g.cb.store.get_entities(g.pid, everything)}
    label = ", ".join(v.label for v in views)
    taken: dict[str, Entity] = {}
    for i, eid in enumerate(sorted(e for e in shared if e in nodes)):
        taken[eid] = nodes[eid]
        g.add(entity_cand(nodes[eid], 0.9 - 0.001 * i, s.name, f"{s.name}: in {label}"))
    established: set[str] = set()
    for view in views:
        if view.agent == asker:
            continue
        for eid in sorted(e for e in view.produced if e in nodes):
            established.add(eid)
            score = 0.9 if eid in taken else 0.86  # shared as well: it keeps that rank
            taken[eid] = nodes[eid]
            reason = f"{s.name}: produced by {view.label} in answer to its context"
            g.add(entity_cand(nodes[eid], score, s.name, reason))
    kept = _relations(g, s, taken)
    conflicts = 0
    for key, text, current in _version_conflicts(views, nodes):
        conflicts += 1
        _conflict_item(g, s, key, text)
        if current not in taken:
            found = g.cb.store.get_entities(g.pid, [current])
            if found and found[0].latest:
                reason = f"{s.name}: the current version of what an agent worked from"
                g.add(entity_cand(found[0], 0.88, s.name, reason))
    for key, text in _overwrites(g, views, nodes):
        conflicts += 1
        _conflict_item(g, s, key, text)
    for key, text, ids in _name_conflicts(views, nodes):
        conflicts += 1
        _conflict_item(g, s, key, text)
        for eid in ids:
            g.add(entity_cand(nodes[eid], 0.87, s.name, f"{s.name}: one side of a conflict"))
    g.notes.append(
        f"{s.name}: merged {label}: {len(shared)} shared entities, {len(established)} produced by "
        f"the other agents, {kept} relations >= {s.consensus_threshold}, {conflicts} "
        f"conflicts (asked by {role!r})"
    )


def _relations(g: Gatherer, s: MultiAgentConsensus, taken: Mapping[str, Entity]) -> int:
    """The relations among and from the merged entities that reach the consensus threshold,
    and the entities they lead to; returns how many were kept."""
    kept = 0
    reached: list[tuple[str, Relation]] = []  # entities outside the merged set, by edge
    rels = g.verified(g.cb.store.list_relations(g.pid, sorted(taken)))
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
        other = rel.to_id if rel.from_id in taken else rel.from_id
        if other not in taken:
            reached.append((other, rel))
    nodes = {e.id: e for e in g.cb.store.get_entities(g.pid, [o for o, _ in reached])}
    for other, rel in reached:  # one read for all of them, added in edge order
        if other in nodes:
            g.add(entity_cand(nodes[other], 0.8 * rel.confidence, s.name, f"{s.name}: {rel.type}"))
    return kept
