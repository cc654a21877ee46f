"""A name holding NUL is refused alike on every backend. PostgreSQL text cannot hold NUL
and SQLite can: before, SQLite stored such an entity type, fact key or scope while
PostgreSQL failed with a storage error (or stored the name changed), and a read filtered
by such a name answered empty on one and failed on the other."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from ctxbase import ContextBase
from ctxbase.errors import ValidationError

NUL = "\x00"

# (what is called, the field the error names)
CASES: dict[str, tuple[Callable[[ContextBase], Any], str]] = {
    "entity type": (lambda cb: cb.upsert_entity(f"doc{NUL}x", "name", "text"), "type"),
    "entity name": (lambda cb: cb.upsert_entity("document", f"na{NUL}me", "text"), "name"),
    "fact key": (lambda cb: cb.set_fact(f"k{NUL}", "v", scope_id="s1", scope="session"), "key"),
    "fact scope": (
        lambda cb: cb.set_fact("k", "v", scope_id=f"s{NUL}", scope="session"),
        "scope_id",
    ),
    "event's agent role": (
        lambda cb: cb.record("user_message", session_id="s1", text="hi", agent_role=f"r{NUL}"),
        "agent_role",
    ),
    "entities by name": (lambda cb: cb.list_entities(name=f"a{NUL}"), "name"),
    "entities by type": (lambda cb: cb.list_entities(type=f"a{NUL}"), "type"),
    "facts of a scope": (
        lambda cb: cb.get_facts(scope_id=f"s{NUL}", scope="session"),
        "scope_id",
    ),
    "a fact's history": (
        lambda cb: cb.fact_history(f"k{NUL}", scope_id="s1", scope="session"),
        "key",
    ),
    "a fact deleted": (
        lambda cb: cb.delete_fact(f"k{NUL}", scope_id="s1", scope="session"),
        "key",
    ),
    "search by type": (
        lambda cb: cb.search("x", filters={"types": [f"a{NUL}"]}),
        "filters.types[0]",
    ),
    "search by role": (
        lambda cb: cb.search("x", filters={"agent_roles": [f"a{NUL}"]}),
        "filters.agent_roles[0]",
    ),
    "search by repo": (lambda cb: cb.search("x", repos=[f"a{NUL}"]), "filters.repos[0]"),
    "relations by type": (lambda cb: cb.relationships(types=[f"A{NUL}"]), "types[0]"),
    "neighbourhood by type": (
        lambda cb: cb.neighbourhood("ev_x", types=[f"A{NUL}"]),
        "types[0]",
    ),
    "a knowledge-base pin": (lambda cb: cb.pin_knowledge(f"v{NUL}1"), "name"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_name_with_nul_is_refused_alike(cb: ContextBase, case: str) -> None:
    cb.record("user_message", session_id="s1", text="hello")
    run, field = CASES[case]
    with pytest.raises(ValidationError) as caught:
        run(cb)
    assert caught.value.field == field
    assert "holds a NUL character (U+0000) at " in str(caught.value)
    assert str(caught.value).endswith("; a name cannot hold one")


def test_nothing_is_stored_under_a_refused_name(cb: ContextBase) -> None:
    for run, _ in (CASES["entity type"], CASES["entity name"], CASES["fact scope"]):
        with pytest.raises(ValidationError):
            run(cb)
    assert cb.list_entities() == []
    assert cb.get_facts(scope_id="s1", scope="session") == {}


def test_a_relation_type_with_nul_is_refused_before_the_store_is_read(cb: ContextBase) -> None:
    # PostgreSQL once failed reading the edge's earlier confidence with the type
    with pytest.raises(ValidationError) as caught:
        cb.create_edge("a", f"RE{NUL}L", "b", check_nodes=False)
    assert caught.value.field == "type"
    assert "UPPER_SNAKE_CASE" in str(caught.value)


def test_a_message_holding_nul_is_anchored_alike(cb: ContextBase) -> None:
    """Names the library derives from text are not refused: their NUL becomes U+FFFD on
    both backends, as PostgreSQL keeps text, and the message is anchored."""
    cb.record(
        "user_message", session_id="s1", text=f"We decided to use Post{NUL}greSQL for orders."
    )
    cb.flush()
    assert cb.anchor_stats().errors == 0
    names = [e.name for e in cb.list_entities(type="decision")]
    assert names == ["We decided to use Post\ufffdgreSQL for orders."]
