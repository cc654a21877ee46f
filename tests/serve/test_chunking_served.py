"""A server cuts what it stores by its chunking setting (`ctxbase serve --chunking ...`): a
long tool result captured over HTTP is stored in the chunks of that setting."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from live_server import Live, start

from ctxbase.retrieve.chunking import CHUNKING_PRESETS, ChunkingConfig, chunk_text
from ctxbase.serve.settings import ServerSettings
from ctxbase.store import open_store
from ctxbase.store.base import ItemFilter

OUTPUT = "\n\n".join(
    " ".join(
        f"Row {p * 6 + s}: the cache of region r{p} held {400 + s * 7} keys after warm-up "
        f"step {s}, and {s + 2} of them expired early."
        for s in range(6)
    )
    for p in range(12)
)


def _stored_chunks(db: str, project: str, owner: str) -> list[str]:
    store = open_store(db)
    try:
        items = store.get_items(project, sorted(store.filter_item_ids(project, ItemFilter())))
    finally:
        store.close()
    mine = [it for it in items if it.owner_id == owner]
    return [it.text for it in sorted(mine, key=lambda it: int(it.item_id.partition("#")[2]))]


@pytest.mark.parametrize(
    ("setting", "config"),
    [
        (None, CHUNKING_PRESETS["default"]),
        ("fine", CHUNKING_PRESETS["fine"]),
        ({"max_tokens": 96, "overlap_tokens": 0}, ChunkingConfig(max_tokens=96, overlap_tokens=0)),
    ],
)
def test_a_served_capture_is_cut_by_the_server_setting(
    tmp_path: Path, setting: object, config: ChunkingConfig
) -> None:
    overrides = {} if setting is None else {"chunking": setting}
    server = start(tmp_path, embedder=None, **overrides)
    try:
        live = Live(server.url, server.settings.db, server)
        project = f"ch-{uuid.uuid4().hex[:8]}"
        with live.client(live.key(project)) as c:
            r = c.post(
                f"/v1/projects/{project}/events",
                json={"type": "tool_result", "session_id": "s1", "text": OUTPUT},
            )
        assert r.status_code == 201, r.text
        chunks = _stored_chunks(live.db, project, r.json()["id"])
    finally:
        server.stop()
    assert chunks == [c.text for c in chunk_text(OUTPUT, config)]
    assert len(chunks) > 1


def test_settings_travel_to_worker_processes_as_json() -> None:
    settings = ServerSettings(chunking="coarse")
    again = ServerSettings.model_validate_json(settings.model_dump_json())
    assert again.chunking == CHUNKING_PRESETS["coarse"].model_dump()
    assert ServerSettings().chunking is None  # the defaults
    with pytest.raises(ValueError, match=r"chunking\.overlap_tokens: must be smaller"):
        ServerSettings(chunking={"max_tokens": 32})
