"""Over a real server, the id of a low-priority event the capture queue merged into a burst
names the stored event: REST reads, chains and parent links, and the SDK's, as the library
does (tests/contract/test_merged_event_ids.py); hiding or forgetting it alone is a 409
naming the stored event. The server's writer lingers, so a burst queued over REST waits
in the queue together and only the calls themselves write it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from live_server import Live

import ctxbase
from ctxbase import ContextBase, NotFoundError
from ctxbase.capture.bus import BusConfig
from ctxbase.errors import ConflictError
from ctxbase.serve.server import BackgroundServer
from ctxbase.serve.settings import ServerSettings


@pytest.fixture
def lingering(tmp_path: Path) -> Iterator[Live]:
    db = str(tmp_path / "bursts.db")
    config = BusConfig(linger_s=30.0, aggregate_window_s=30.0, batch_size=10_000)
    cb = ContextBase(db, embedder="hash", bus_config=config)
    settings = ServerSettings(db=db, port=0, embedder="hash", rate_limit_per_s=0)
    server = BackgroundServer(settings, cb).start()
    try:
        yield Live(server.url, db, server)
    finally:
        server.stop()
        cb.close()


def _queue(c: httpx.Client, base: str, text: str, **fields: object) -> str:
    body = {"type": "internal_thought", "session_id": "s", "text": text, **fields}
    r = c.post(f"{base}/events/queue", json=body)
    assert r.status_code == 202, r.text
    return str(r.json()["id"])


def test_a_merged_id_names_the_stored_event_over_rest_and_the_sdk(
    lingering: Live, pid: str
) -> None:
    base = f"/v1/projects/{pid}"
    key = lingering.key(pid, role="admin")
    with lingering.client(key) as c:
        r = c.post(f"{base}/events", json={"type": "user_message", "session_id": "s",
                                           "text": "why is the export slow?"})  # fmt: skip
        assert r.status_code == 201, r.text
        u = r.json()["id"]
        a, b, c_id = (_queue(c, base, t, parent_event_ids=[u]) for t in ("plan", "scan", "fix"))
        assert len({a, b, c_id}) == 3
        # read before anything wrote the burst: the read writes it
        got = c.get(f"{base}/events/{b}")
        assert got.status_code == 200, got.text
        assert (got.json()["id"], got.json()["merged_id"]) == (a, b)
        assert c.get(f"{base}/events/{a}").json()["merged_id"] is None
        assert [e["id"] for e in c.get(f"{base}/events/{c_id}/causes").json()] == [u]
        child = c.post(f"{base}/events", json={"type": "assistant_message", "session_id": "s",
                                               "text": "add an index",
                                               "parent_event_ids": [b]})  # fmt: skip
        assert child.status_code == 201, child.text
        assert child.json()["parent_event_ids"] == [a]
        assert [e["id"] for e in c.get(f"{base}/events/{b}/effects").json()] == [child.json()["id"]]
        for path, body in (("soft-delete", {"ids": [b]}), ("forget", {"event_ids": [c_id]})):
            r = c.post(f"{base}/{path}", json=body)
            assert r.status_code == 409, r.text
            assert f"merged into event '{a}'" in r.text
    with ctxbase.connect(lingering.url, api_key=key, project=pid) as client:
        read = client.get_event(c_id)
        assert (read.id, read.merged_id) == (a, c_id)
        with pytest.raises(ConflictError, match=f"merged into event '{a}'"):
            client.forget(event_ids=[b])
        report = client.forget(event_ids=[a])
        assert report.removed["event_aliases"] == 2
        with pytest.raises(NotFoundError, match="hard-forgotten"):
            client.get_event(b)
