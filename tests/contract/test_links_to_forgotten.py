"""An event written just after its parent was forgotten (the check at the call passed, the
forget committed before the write, as another process's forget can) does not bring the
forgotten id back as an edge: the write reads the tombstones under its lock, on every
backend."""

from __future__ import annotations

from ctxbase import ContextBase
from ctxbase.model import Event


def test_a_parent_forgotten_before_the_write_is_left_out_of_the_child(cb: ContextBase) -> None:
    parent = cb.record("user_message", session_id="x", text="the question")
    named = cb.record("user_message", session_id="y", text="a reference kept")
    cb.forget(event_ids=[parent.id])
    child = Event(
        project_id=cb.project,
        session_id="y",
        type="assistant_message",
        text="the answer",
        id="ev_child0001",
        parent_event_ids=[parent.id],
        refers_to=[parent.id, named.id],
    )
    # the store's write, as the library makes it once the call's check has passed
    (stored,) = cb.store.write_events([child], [[]])
    assert (stored.parent_event_ids, stored.refers_to) == ([], [named.id])
    again = cb.get_event(child.id)
    assert (again.parent_event_ids, again.refers_to) == ([], [named.id])
    edges = {(r.type, r.to_id) for r in cb.relationships(child.id, direction="out")}
    assert ("CAUSED_BY", parent.id) not in edges and ("REFERS_TO", parent.id) not in edges
    assert ("REFERS_TO", named.id) in edges
    assert cb.relationships(parent.id) == []
