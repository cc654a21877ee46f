"""A search hit reads as what it found: `hit.text` (its unit's text) and `hit.id` (the event
or entity found, a chunk's owner), the same embedded and through `ctxbase.connect`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from live_server import Live, embedded_and_remote, serve_on_param

FILLER = " ".join(f"row{i} ok" for i in range(400))  # a long output: cut into chunks


@pytest.fixture(scope="module", params=["sqlite"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Live]:
    yield from serve_on_param(request, tmp_path_factory, "hit-fields")


def _scenario(api: Any) -> dict[str, Any]:
    short = api.record(
        "user_message", session_id="s1", text="the orders cache expires after 300 seconds"
    )
    long = api.record("tool_result", session_id="s1", text=f"{FILLER} zebracorn was the last row")
    api.flush()
    (hit,) = api.search("orders cache expires", top_k=1).results
    (chunk,) = api.search("zebracorn", top_k=1).results
    with pytest.raises(AttributeError):
        hit.text = "changed"  # read-only: the item's text stays the truth
    return {
        "short": (hit.id == short.id, hit.text, hit.text == hit.item.text),
        "chunk": (
            chunk.id == long.id,
            chunk.item_id != chunk.id,  # the unit is a chunk of the event
            "zebracorn" in chunk.text,
            len(chunk.text) < len(api.get_event(chunk.id).text),
        ),
    }


def test_hits_have_text_and_id_embedded_and_remote(
    server: Live, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    local, remote = embedded_and_remote(server, tmp_path, request, _scenario)
    assert local == remote
    assert local["short"] == (True, "the orders cache expires after 300 seconds", True)
    assert local["chunk"] == (True, True, True, True)
