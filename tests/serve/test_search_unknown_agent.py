"""A search filtered by an agent id or role nothing of the project was recorded by is a
NotFoundError naming it (REST 404), embedded and remote alike, not an empty answer that a
typo would give: as for a session id the project does not hold."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from live_server import Live, embedded_or_remote

from ctxbase.errors import NotFoundError

PROJECT = "unknown-agents"


@pytest.fixture(params=["embedded", "remote"])
def api(request: pytest.FixtureRequest, live: Live, tmp_path: Path) -> Iterator[Any]:
    yield from embedded_or_remote(request.param, live, tmp_path / "agents.db", PROJECT)


def test_an_agent_nothing_was_recorded_by_is_not_found(api: Any) -> None:
    api.record(
        "user_message", session_id="s1", text="cache the orders", agent_id="alice",
        agent_role="user",
    )  # fmt: skip
    api.record("assistant_message", session_id="s1", text="done", agent_id="bot")
    found = api.search("orders", filters={"agent_ids": ["alice"]}, preset="keyword")
    assert [h.item.agent_id for h in found.results] == ["alice"]
    # a known agent with no match is an empty answer, not an error
    quiet = api.search("zebra giraffe", filters={"agent_ids": ["bot"]}, preset="keyword")
    assert quiet.results == []
    with pytest.raises(NotFoundError) as exc:
        api.search("orders", filters={"agent_ids": ["alice", "alcie"]}, preset="keyword")
    assert str(exc.value) == (
        "no shown item of project 'unknown-agents' was recorded by agent 'alcie'"
    )
    assert list(exc.value.ids) == ["alcie"]
    with pytest.raises(NotFoundError, match="by agent role 'usr'"):
        api.search("orders", filters={"agent_roles": ["usr"]})
