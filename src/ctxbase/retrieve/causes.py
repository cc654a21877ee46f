"""The causal chain of an event, and its effects, through hidden and forgotten links.

A soft-deleted event is hidden from every read, and so are the CAUSED_BY edges touching it:
walked over visible edges alone, a chain stopped at the first hidden cause and said nothing
of it. Here a hidden cause is shown by a placeholder in its place, marked "hidden" (its id,
type, session, agent, time, seq and parent ids; never its text, data or metadata; `active`
False; `restore` brings it back), and the walk goes on through it, by its parent ids, to
the causes beyond.

Effects (downstream) go the same way: a hidden effect is shown by its placeholder and the
walk goes on to the effects beyond it, over the edges the store keeps for hidden events
(`list_relations(include_hidden=True)`: a hidden effect's own CAUSED_BY edges are hidden
with it, and a hidden event records its parents but not its children).

A hard-forgotten event leaves no placeholder: a forget removes its edges with it, so
nothing records that its effects had that cause, and their chain ends there. Asked for
the chain of a hidden or forgotten event itself, `check_chain_root` says which it is.

A chain with no hidden link costs what it did: the visible walk, plus a look at the parent
ids of the events it read.
"""

from __future__ import annotations

from ..errors import NotFoundError, ValidationError
from ..model import Event
from ..store.base import Store
from . import graph
from .retracted import with_marks

__all__ = [
    "HIDDEN",
    "causal_chain",
    "causes_with_hops",
    "check_chain_root",
    "effects",
    "effects_with_hops",
    "missing_event",
    "placeholder",
    "read_event",
]

HIDDEN = "hidden"


def check_chain_root(store: Store, project_id: str, event_id: str) -> Event:
    """The event a chain starts from (the aggregated event an id merged into it names, see
    `read_event`). NotFoundError when it is not visible, saying when it is hidden (restore
    brings it back) or was forgotten."""
    if not event_id:
        raise ValidationError("event_id", "is empty")  # no event is stored without an id
    found = read_event(store, project_id, event_id, include_inactive=True)
    if found is not None and found.active:
        return found
    raise missing_event(store, project_id, event_id, hidden=found is not None, found=found)


def read_event(
    store: Store, project_id: str, event_id: str, *, include_inactive: bool = False
) -> Event | None:
    """The stored event `event_id` names: that event, or, for the id of an event the
    capture bus merged into an aggregated one, that one with `merged_id` saying so. The
    store's aliases are read only when no event has the id."""
    found = store.get_events(project_id, [event_id], include_inactive)
    if found:
        return found[0]
    into = store.event_aliases(project_id, [event_id]).get(event_id)
    if into is None:
        return None
    found = store.get_events(project_id, [into], include_inactive)
    return found[0].model_copy(update={"merged_id": event_id}) if found else None


def missing_event(
    store: Store,
    project_id: str,
    event_id: str,
    *,
    hidden: bool | None = None,
    found: Event | None = None,
) -> NotFoundError:
    """The NotFoundError for an event a read did not find visible: it is hidden (restore
    brings it back), was hard-forgotten, or never was. `hidden` when the caller already
    knows whether a hidden event holds the id, `found` when it read that event (None for
    both: look). An id merged into a hidden aggregated event says which event that is."""
    if found is None and hidden is not False:
        found = read_event(store, project_id, event_id, include_inactive=True)
    if found is not None and found.merged_id is not None:
        message: str | None = (
            f"event {event_id!r} was merged into event {found.id!r}, which is hidden "
            "(restore brings it back)"
        )
    elif found is not None or hidden:
        message = f"event {event_id!r} is hidden (restore brings it back)"
    elif store.forgotten_ids(project_id, [event_id]):
        return NotFoundError.forgotten("event", event_id)
    else:
        message = None
    return NotFoundError("event", event_id, message=message)


def placeholder(event: Event) -> Event:
    """What a chain shows for a hidden cause: ids and times, no content."""
    return Event(
        id=event.id,
        project_id=event.project_id,
        session_id=event.session_id,
        agent_id=event.agent_id,
        type=event.type,
        ts=event.ts,
        seq=event.seq,
        parent_event_ids=list(event.parent_event_ids),
        active=False,
        marks=[HIDDEN],
    )


def causal_chain(
    store: Store, project_id: str, root: Event, max_hops: int = 50, max_nodes: int = 10_000
) -> list[Event]:
    """Everything upstream of `root` (its causes, theirs...), nearest first, with a
    placeholder for each hidden cause (see the module)."""
    return [e for e, _ in causes_with_hops(store, project_id, root, max_hops, max_nodes)]


def causes_with_hops(
    store: Store, project_id: str, root: Event, max_hops: int = 50, max_nodes: int = 10_000
) -> list[tuple[Event, int]]:
    """`causal_chain` with each cause's distance from `root` in hops."""
    hits = graph.upstream(store, project_id, root.id, max_hops=max_hops, max_nodes=max_nodes)
    visible = store.get_events(project_id, [h.node_id for h in hits])
    seen = {root.id, *(h.node_id for h in hits)}
    if all(p in seen for e in (root, *visible) for p in e.parent_event_ids):
        hops = {h.node_id: h.hops for h in hits}  # nothing hidden on the way
        return [(e, hops[e.id]) for e in with_marks(store, project_id, visible)]
    chain = _walk(store, project_id, root, max_hops, max_nodes)
    live = [e for e, _ in chain if e.active]
    marked = {e.id: e for e in with_marks(store, project_id, live)}
    return [(marked.get(e.id, e) if e.active else e, hops) for e, hops in chain]


def _walk(
    store: Store, project_id: str, root: Event, max_hops: int, max_nodes: int
) -> list[tuple[Event, int]]:
    """Level by level, each level in id order: a visible event's causes are those its open
    CAUSED_BY edges reach (as the visible walk follows them) and its hidden parents; a
    hidden event's, all its parents (its edges are hidden with it)."""
    out: dict[str, tuple[Event, int]] = {}
    frontier = [root]
    for hop in range(1, max_hops + 1):
        if not frontier or len(out) >= max_nodes:
            break
        live = [e.id for e in frontier if e.active]
        rels = (
            store.list_relations(project_id, live, direction="out", types=["CAUSED_BY"])
            if live
            else []
        )
        followed = {r.to_id for r in rels if r.from_id in live}
        of_live = {p for e in frontier if e.active for p in e.parent_event_ids}
        of_hidden = {p for e in frontier if not e.active for p in e.parent_event_ids}
        wanted = sorted((followed | of_live | of_hidden) - out.keys() - {root.id})
        found = [
            e
            for e in store.get_events(project_id, wanted, include_inactive=True)
            if e.id in followed or e.id in of_hidden or (e.id in of_live and not e.active)
        ]
        frontier = found[: max(0, max_nodes - len(out))]
        for event in frontier:  # ids that are no event (an entity, a dangling edge) end here
            out[event.id] = (event if event.active else placeholder(event), hop)
    return list(out.values())


def effects(
    store: Store, project_id: str, root: Event, max_hops: int = 50, max_nodes: int = 10_000
) -> list[Event]:
    """Everything downstream of `root` (what it caused, and what that caused...), nearest
    first, with a placeholder for each hidden effect (see the module)."""
    return [e for e, _ in effects_with_hops(store, project_id, root, max_hops, max_nodes)]


def effects_with_hops(
    store: Store, project_id: str, root: Event, max_hops: int = 50, max_nodes: int = 10_000
) -> list[tuple[Event, int]]:
    """`effects` with each effect's distance from `root` in hops."""
    hits = graph.downstream(
        store, project_id, root.id, max_hops=max_hops, max_nodes=max_nodes, include_hidden=True
    )
    found = store.get_events(project_id, [h.node_id for h in hits], include_inactive=True)
    live = {e.id: e for e in with_marks(store, project_id, [e for e in found if e.active])}
    hops = {h.node_id: h.hops for h in hits}
    # ids that are no event (an entity, a dangling edge) are left out, as the walk did
    return [(live[e.id] if e.active else placeholder(e), hops[e.id]) for e in found]
