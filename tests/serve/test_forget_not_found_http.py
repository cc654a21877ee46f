"""POST /forget, /soft-delete and /restore over HTTP, on both backends, say what they did
not find: the ids the project does not hold are named in the answer, every id unknown is a
404 naming them, an event, entity or session forgotten before is a 200 naming it as
already forgotten (so the SDK's retry after a lost answer succeeds), and an id hidden (or
visible) already is a 200 that says so. The remote SDK answers as the embedded ContextBase does."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from live_server import Live, embedded_and_remote, serve_on_param
from test_idempotency import _LoseFirstAnswer

import ctxbase
from ctxbase.errors import NotFoundError


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Live]:
    yield from serve_on_param(request, tmp_path_factory, "forget404")


def _event(c: httpx.Client, base: str, session: str, text: str) -> str:
    r = c.post(f"{base}/events", json={"type": "user_message", "session_id": session, "text": text})
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def test_rest_forget_names_unknown_ids_and_404s_when_none_matched(server: Live, pid: str) -> None:
    base = f"/v1/projects/{pid}"
    with server.client(server.key(pid, role="admin")) as c:
        kept = _event(c, base, "s1", "the deploy key rotates monthly")
        gone = _event(c, base, "s1", "the staging password is hunter2")

        r = c.post(f"{base}/forget", json={"event_ids": ["ev_typo"], "entity_ids": ["doc_x"]})
        assert r.status_code == 404, r.text
        err = r.json()["error"]
        assert err["code"] == "not_found" and err["ids"] == ["ev_typo", "doc_x"]
        assert err["message"] == (
            f"nothing to forget: event 'ev_typo', entity 'doc_x' not found in project {pid!r}"
        )
        r = c.post(f"{base}/forget", json={"session_id": "nosuch"})
        assert r.status_code == 404 and "session 'nosuch' not found" in r.text

        r = c.post(f"{base}/forget", json={"event_ids": [gone, "ev_typo"]})
        assert r.status_code == 200, r.text
        assert r.json()["removed"]["events"] == 1 and r.json()["not_found"] == ["ev_typo"]
        again = c.post(f"{base}/forget", json={"event_ids": [gone]})
        assert again.status_code == 200, again.text
        assert again.json()["already_forgotten"] == [gone] and again.json()["not_found"] == []
        assert again.json()["total"] == 0 and again.json()["removed"] == {}
        mixed = c.post(f"{base}/forget", json={"event_ids": ["ev_typo"], "entity_ids": [gone]})
        assert mixed.status_code == 200, mixed.text
        assert (mixed.json()["not_found"], mixed.json()["already_forgotten"]) == (
            ["ev_typo"],
            [gone],
        )

        purge = c.post(f"{base}/forget", json={"soft_deleted_older_than_s": 0, "event_ids": ["x"]})
        assert purge.status_code == 200 and purge.json()["not_found"] == ["x"]
        assert c.get(f"{base}/events/{kept}").status_code == 200


def test_rest_soft_delete_and_restore_tell_unknown_from_unchanged(server: Live, pid: str) -> None:
    base = f"/v1/projects/{pid}"
    with server.client(server.key(pid, role="write")) as c:
        ev = _event(c, base, "s1", "a note to hide")

        r = c.post(f"{base}/soft-delete", json={"ids": [ev, "ev_typo"]})
        assert r.json() == {
            "changed": 1, "unchanged": [], "not_found": ["ev_typo"], "already_forgotten": [],
            "sources_hidden": [], "sources_still_visible": [], "same_text_still_visible": [],
        }  # fmt: skip
        r = c.post(f"{base}/soft-delete", json={"ids": [ev]})
        assert r.status_code == 200
        assert r.json() == {
            "changed": 0, "unchanged": [ev], "not_found": [], "already_forgotten": [],
            "sources_hidden": [], "sources_still_visible": [], "same_text_still_visible": [],
        }  # fmt: skip
        r = c.post(f"{base}/soft-delete", json={"ids": ["ev_typo"]})
        assert r.status_code == 404, r.text
        assert r.json()["error"]["ids"] == ["ev_typo"]
        assert r.json()["error"]["message"] == (
            f"nothing to hide: 'ev_typo' matches no event or entity of project {pid!r}"
        )

        r = c.post(f"{base}/restore", json={"ids": [ev]})
        assert r.json() == {
            "changed": 1, "unchanged": [], "not_found": [], "already_forgotten": [],
            "sources_hidden": [], "sources_still_visible": [], "same_text_still_visible": [],
        }  # fmt: skip
        r = c.post(f"{base}/restore", json={"ids": [ev, "ev_typo"]})
        assert r.json() == {
            "changed": 0, "unchanged": [ev], "not_found": ["ev_typo"], "already_forgotten": [],
            "sources_hidden": [], "sources_still_visible": [], "same_text_still_visible": [],
        }  # fmt: skip
        r = c.post(f"{base}/restore", json={"ids": ["ev_typo", "doc_typo"]})
        assert r.status_code == 404 and r.json()["error"]["ids"] == ["ev_typo", "doc_typo"]
        assert c.post(f"{base}/soft-delete", json={"ids": []}).json()["changed"] == 0


def test_rest_soft_delete_and_restore_of_forgotten_ids_say_so(server: Live, pid: str) -> None:
    base = f"/v1/projects/{pid}"
    with server.client(server.key(pid, role="admin")) as c:
        ev = _event(c, base, "s1", "a note to forget")
        kept = _event(c, base, "s1", "a note to keep")
        assert c.post(f"{base}/forget", json={"event_ids": [ev]}).status_code == 200
        for path in ("soft-delete", "restore"):
            # every id forgotten: nothing to do, a 200 that says why (a 404 before)
            r = c.post(f"{base}/{path}", json={"ids": [ev]})
            assert r.status_code == 200, r.text
            assert r.json() == {
                "changed": 0, "unchanged": [], "not_found": [], "already_forgotten": [ev],
                "sources_hidden": [], "sources_still_visible": [], "same_text_still_visible": [],
            }  # fmt: skip
            r = c.post(f"{base}/{path}", json={"ids": [ev, "ev_typo"]})
            assert r.status_code == 200, r.text
            assert (r.json()["not_found"], r.json()["already_forgotten"]) == (["ev_typo"], [ev])
        r = c.post(f"{base}/soft-delete", json={"ids": [kept, ev]})
        assert (r.json()["changed"], r.json()["already_forgotten"]) == (1, [ev])


def _scenario(api: Any) -> dict[str, Any]:
    """The same calls on the embedded API and the remote SDK; what each gave, with the
    project and the event ids (which differ: the backends may share one database) named
    alike."""
    out: dict[str, Any] = {}
    first = api.record("user_message", session_id="s1", text="first note")
    second = api.record("user_message", session_id="s1", text="second note")
    hidden = api.set_hidden([first.id, "ev_typo"], True)
    out["hidden"] = (hidden.changed, hidden.unchanged, hidden.not_found)
    out["hidden_again"] = api.soft_delete([first.id])
    again = api.set_hidden([first.id], True)
    out["unchanged"] = (again.changed, again.unchanged, again.not_found)
    back = api.set_hidden([first.id, "ev_typo"], False)
    out["restored"] = (back.changed, back.unchanged, back.not_found)
    out["restored_again"] = api.restore([first.id])
    for call in (
        lambda: api.soft_delete(["ev_typo"]),
        lambda: api.restore(["ev_typo", "doc_typo"]),
        lambda: api.forget(event_ids=["ev_typo"], session_id="nosuch"),
    ):
        with pytest.raises(NotFoundError) as err:
            call()
        out.setdefault("errors", []).append((type(err.value), str(err.value), err.value.ids))
    report = api.forget(event_ids=[second.id, "ev_typo"])
    out["forget"] = (report.removed.get("events"), report.not_found, report.already_forgotten)
    repeat = api.forget(event_ids=[second.id, "ev_typo"])
    out["forget_again"] = (repeat.total, repeat.not_found, repeat.already_forgotten)
    with pytest.raises(NotFoundError) as typo:
        api.forget(event_ids=["ev_typo"])
    out["typo_again"] = (str(typo.value), typo.value.ids)
    gone = api.set_hidden([second.id, "ev_typo"], True)
    out["hide_forgotten"] = (gone.changed, gone.not_found, gone.already_forgotten)
    out["restore_forgotten"] = api.restore([second.id])
    api.forget(session_id="s1")
    session = api.forget(session_id="s1")
    out["session_again"] = (session.total, session.not_found, session.already_forgotten)
    text = repr(out).replace(api.project, "<p>").replace(first.id, "<first>")
    return {"text": text.replace(second.id, "<second>")}


def test_the_remote_sdk_answers_as_the_embedded_api(
    server: Live, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    local, remote = embedded_and_remote(server, tmp_path, request, _scenario)
    assert remote == local
    expected = {
        "hidden": (1, [], ["ev_typo"]),
        "hidden_again": 0,
        "unchanged": (0, ["<first>"], []),
        "restored": (1, [], ["ev_typo"]),
        "restored_again": 0,
        "errors": [
            (
                NotFoundError,
                "nothing to hide: 'ev_typo' matches no event or entity of project '<p>'",
                ("ev_typo",),
            ),
            (
                NotFoundError,
                "nothing to restore: 'ev_typo', 'doc_typo' match no event or entity of "
                "project '<p>'",
                ("ev_typo", "doc_typo"),
            ),
            (
                NotFoundError,
                "nothing to forget: event 'ev_typo', session 'nosuch' not found in project '<p>'",
                ("ev_typo", "nosuch"),
            ),
        ],
        "forget": (1, ["ev_typo"], []),
        "forget_again": (0, ["ev_typo"], ["<second>"]),
        "typo_again": (
            "nothing to forget: event 'ev_typo' not found in project '<p>'",
            ("ev_typo",),
        ),
        "hide_forgotten": (0, ["ev_typo"], ["<second>"]),
        "restore_forgotten": 0,
        "session_again": (0, [], ["s1"]),
    }
    assert local == {"text": repr(expected)}


def test_the_async_client_reports_the_same(server: Live, pid: str) -> None:
    async def run() -> tuple[Any, str]:
        key = server.key(pid, role="write")
        async with ctxbase.connect_async(server.url, api_key=key, project=pid) as ac:
            ev = await ac.record("user_message", session_id="s", text="hide me")
            report = await ac.set_hidden([ev.id, "ev_typo"], True)
            with pytest.raises(NotFoundError) as err:
                await ac.restore(["ev_typo"])
            return report, str(err.value)

    report, error = asyncio.run(run())
    assert (report.changed, report.unchanged, report.not_found) == (1, [], ["ev_typo"])
    assert error == f"nothing to restore: 'ev_typo' matches no event or entity of project {pid!r}"


@pytest.mark.parametrize("what", ["event", "entity", "session"])
def test_the_sdk_retry_of_a_forget_whose_answer_was_lost_succeeds(
    server: Live, pid: str, what: str
) -> None:
    """The first forget is done on the server but its answer never arrives (the connection
    drops); the SDK sends it again and gets the report, the event (entity, session) named
    as forgotten."""
    key = server.key(pid, role="admin")
    with ctxbase.connect(server.url, api_key=key, project=pid) as direct:
        event = direct.record("user_message", session_id="s1", text="the api token is abc123")
        doc = direct.upsert_entity("document", "tokens.md", "the api token rotates")
    named: dict[str, Any] = {
        "event": {"event_ids": [event.id]},
        "entity": {"entity_ids": [doc.id]},
        "session": {"session_id": "s1"},
    }[what]
    gone = {"event": event.id, "entity": doc.id, "session": "s1"}[what]
    handler = type("Lose", (_LoseFirstAnswer,), {"upstream": server.url, "lost": 0})
    proxy = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{proxy.server_address[1]}"
        with ctxbase.connect(url, api_key=key, project=pid, backoff=0.01) as client:
            report = client.forget(**named)
            assert handler.lost == 2  # the forget went twice
            assert (report.total, report.already_forgotten, report.not_found) == (0, [gone], [])
            with pytest.raises(NotFoundError):
                client.get_entity(doc.id) if what == "entity" else client.get_event(event.id)
    finally:
        proxy.shutdown()
        proxy.server_close()
        thread.join(timeout=10)


def test_rest_forget_of_nothing_names_the_fields_of_its_body(server: Live, pid: str) -> None:
    with server.client(server.key(pid, role="admin")) as c:
        _event(c, f"/v1/projects/{pid}", "s1", "something to hold")
        r = c.post(f"/v1/projects/{pid}/forget", json={})
        assert r.status_code == 422, r.text
        message = r.json()["error"]["message"]
        assert "repos" in message and "soft_deleted_older_than_s" in message, message
        for field in ("repos", "soft_deleted_older_than_s"):  # the fields it names are taken
            named = {field: ["nosuch"] if field == "repos" else 3600.0}
            assert c.post(f"/v1/projects/{pid}/forget", json=named).status_code != 422


def test_rest_forget_in_an_unknown_project_is_an_unknown_project(server: Live, pid: str) -> None:
    with server.client(server.key(pid, role="admin")) as c:
        _event(c, f"/v1/projects/{pid}", "s1", "something to hold")
    with server.client(server.key("*", role="admin")) as c:
        r = c.post(f"/v1/projects/{pid}-typo/forget", json={"session_id": "s1"})
        assert r.status_code == 404, r.text
        assert f"project '{pid}-typo' not found" in r.json()["error"]["message"]
        r = c.post(f"/v1/projects/{pid}/forget", json={"session_id": "s1"})
        assert r.status_code == 200, r.text  # a project forgotten from: still known
        r = c.post(f"/v1/projects/{pid}/forget", json={"whole_project": True})
        assert r.status_code == 200, r.text
        r = c.post(f"/v1/projects/{pid}/forget", json={"whole_project": True})
        assert r.status_code == 200, r.text  # forgotten whole before: a retry, no typo
