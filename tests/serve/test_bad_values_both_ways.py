"""Values of the wrong shape are a ValidationError naming the field, embedded and remote
alike, before anything is stored or sent: event metadata that is not a mapping, a fact
value that is not JSON (a set, bytes)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from live_server import Live, embedded_or_remote

from ctxbase.errors import ValidationError

PROJECT = "bad-values"


@pytest.fixture(params=["embedded", "remote"])
def api(request: pytest.FixtureRequest, live: Live, tmp_path: Path) -> Iterator[Any]:
    yield from embedded_or_remote(request.param, live, tmp_path / "values.db", PROJECT)


def test_metadata_that_is_not_a_mapping_is_named(api: Any) -> None:
    for bad in ([1], "k=v", 3):
        with pytest.raises(ValidationError, match="metadata: must be a mapping"):
            api.record("user_message", session_id="s1", text="x", metadata=bad)
    assert api.record("user_message", session_id="s1", text="x", metadata={"k": 1}).metadata == {
        "k": 1
    }


def test_a_fact_value_that_is_not_json_is_named(api: Any) -> None:
    for bad in ({1, 2}, b"raw"):
        with pytest.raises(ValidationError, match="value"):
            api.set_fact("k", bad, scope_id="t1")
    assert api.get_facts(scope_id="t1") == {}


def test_a_fact_of_an_empty_scope_id_is_refused(api: Any) -> None:
    with pytest.raises(ValidationError, match="scope_id"):
        api.set_fact("k", 1, scope_id="", scope="session")
