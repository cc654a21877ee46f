"""What each key role may do, over a real server: a hard forget (forget, purge, a whole
project, a fact with its history) needs an admin key and tells a write key so, while a
write key still hides (soft-delete) and restores; a read key may flush, which changes
nothing, so a reader gets read-your-writes of another writer."""

from __future__ import annotations

import pytest
from live_server import Live

import ctxbase
from ctxbase.serve.errors import PermissionDeniedError


def _event(live: Live, key: str, pid: str, text: str = "orders are cached 300 s") -> str:
    body = {"type": "user_message", "session_id": "s", "text": text}
    r = live.client(key).post(f"/v1/projects/{pid}/events", json=body)
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


@pytest.mark.parametrize(
    "body",
    [
        {"event_ids": ["EVENT"]},
        {"soft_deleted_older_than_s": 0},
        {"whole_project": True},
        {"session_id": "s"},
    ],
)
def test_a_write_key_gets_403_saying_a_hard_forget_needs_an_admin_key(
    live: Live, pid: str, body: dict[str, object]
) -> None:
    writer = live.key(pid, role="write")
    event_id = _event(live, writer, pid)
    c = live.client(writer)
    body = {k: [event_id] if v == ["EVENT"] else v for k, v in body.items()}
    r = c.post(f"/v1/projects/{pid}/forget", json=body)
    assert r.status_code == 403, r.text
    error = r.json()["error"]
    assert error["code"] == "forbidden"
    assert "a hard forget" in error["message"] and "needs an admin key" in error["message"]
    assert "this key has role 'write'" in error["message"]
    assert "soft-delete" in error["message"]  # what the key may do instead
    # nothing was forgotten, and the soft forget stays a write key's
    assert c.get(f"/v1/projects/{pid}/events/{event_id}").status_code == 200
    hidden = c.post(f"/v1/projects/{pid}/soft-delete", json={"ids": [event_id]})
    assert hidden.status_code == 200 and hidden.json()["changed"] >= 1
    assert c.get(f"/v1/projects/{pid}/events/{event_id}").status_code == 404
    assert c.post(f"/v1/projects/{pid}/restore", json={"ids": [event_id]}).status_code == 200
    # an admin key forgets
    admin = live.client(live.key(pid, role="admin"))
    assert admin.post(f"/v1/projects/{pid}/forget", json=body).status_code == 200


def test_the_sdk_raises_permission_denied_for_a_write_keys_hard_forget(
    live: Live, pid: str
) -> None:
    writer = live.key(pid, role="write")
    event_id = _event(live, writer, pid)
    with ctxbase.connect(live.url, api_key=writer, project=pid) as client:
        with pytest.raises(PermissionDeniedError, match="hard forget needs an admin key"):
            client.forget(event_ids=[event_id])
        with pytest.raises(PermissionDeniedError, match="needs an admin key"):
            client.purge_soft_deleted(0)
        client.set_fact("ttl", 300, scope_id="t")
        with pytest.raises(PermissionDeniedError, match="hard delete of a fact needs an admin"):
            client.delete_fact("ttl", scope_id="t", hard=True)
        assert client.soft_delete([event_id]) >= 1  # hiding stays allowed


def test_a_read_key_flushes_and_reads_what_another_client_wrote(live: Live, pid: str) -> None:
    writer = live.key(pid, role="write")
    reader = live.key(pid, role="read")
    _event(live, writer, pid)  # the project exists
    with (
        ctxbase.connect(live.url, api_key=writer, project=pid) as w,
        ctxbase.connect(live.url, api_key=reader, project=pid) as r,
    ):
        queued = w.capture("user_message", session_id="s2", text="invoices are kept 7 years")
        assert queued
        assert live.client(reader).post(f"/v1/projects/{pid}/flush").status_code == 204
        r.flush()
        assert r.get_event(queued).text == "invoices are kept 7 years"
        assert [e.id for e in r.last_events("s2", 5)] == [queued]
        # flushing wrote nothing for the reader: writing is still refused
        with pytest.raises(PermissionDeniedError, match="needs a write key"):
            r.record("user_message", session_id="s2", text="x")
