"""An entity whose `expires_at` property has passed is out of every search and assembly,
however it is reached (a search, a message referring to it), while the store still reads it
back; a write that moves its expiry out shows it again. Both backends, "hash" embedder."""

from __future__ import annotations

import json
import time

from ctxbase import ContextBase
from ctxbase.integrations.tools import ToolScope, run_tool
from ctxbase.retrieve.expiry import EXPIRED_REASON

TEXT = "the staging password rotates monthly"


def _owners(cb: ContextBase, query: str) -> list[str]:
    return [c.item.owner_id for c in cb.search(query).results]


def test_search_and_assembly_leave_an_expired_entity_out(cb: ContextBase) -> None:
    until = time.time() + 3.0  # a first search loads the indexes: it takes its time
    props = {"path": "docs/rotation.md", "expires_at": until}
    doc = cb.upsert_entity("document", "rotation", TEXT, properties=props)
    assert _owners(cb, "staging password rotates") == [doc.id]
    # no write in between: what the search remembers is the time, not a verdict
    time.sleep(max(0.0, until - time.time()) + 0.1)
    response = cb.search("staging password rotates")
    assert response.results == []
    gone = [c for c in response.considered if c.item.owner_id == doc.id]
    assert gone and all(c.expired and c.dropped == EXPIRED_REASON for c in gone)
    assert gone[0].explain()["expired"] is True
    # so does the agents' search tool, and even a search that keeps memories rated wrong
    hits = run_tool(ToolScope(cb), "search_memory", {"query": "staging password rotates"})
    assert hits["results"] == []
    assert cb.search("staging password rotates", min_confidence=0.0).results == []
    # the store keeps it: whoever set the expiry deletes it
    assert cb.get_entity(doc.id).text == TEXT

    # reached without a search (the project baseline, there for an intent that matches a
    # message of the project; the intent's own copy is no such match): left out all the same
    cb.record("user_message", session_id="t", text="the budget is fixed at 5k")
    cb.record("user_message", session_id="s", text="what about the budget", refers_to=[doc.id])
    ctx = cb.assemble_context(
        agent_role="coder", user_intent="what about the budget", session_id="s"
    )
    assert "rotates" not in json.dumps(ctx.messages)
    dropped = cb.get_trace(ctx.context_id)["dropped"]
    assert any(d["id"] == doc.id and d["detail"].startswith("expires_at") for d in dropped)

    # a write that moves the expiry out shows it again, to search and assembly
    props["expires_at"] = time.time() + 60
    cb.upsert_entity("document", "rotation", TEXT, properties=props)
    assert _owners(cb, "staging password rotates") == [doc.id]
    ctx = cb.assemble_context(
        agent_role="coder", user_intent="what about the budget", session_id="s"
    )
    assert "rotates" in json.dumps(ctx.messages)


def test_entities_without_a_usable_expiry_never_expire(cb: ContextBase) -> None:
    for n, expiry in enumerate([None, "yesterday", True]):
        props = {} if expiry is None else {"expires_at": expiry}
        cb.upsert_entity("note", f"n{n}", f"{TEXT} note {n}", properties=props)
    assert len(cb.search("staging password rotates", top_k=10).results) == 3
