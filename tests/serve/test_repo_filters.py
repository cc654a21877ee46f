"""The repository filter over REST and the SDK: search and assembly restricted to one
ingested repository, hits naming their repository, bad filters answered with 422."""

from __future__ import annotations

from pathlib import Path

import pytest
from live_server import Live

import ctxbase
from ctxbase.errors import NotFoundError
from ctxbase.store.base import ItemFilter


def _ingest_two(db: str, pid: str, tmp_path: Path) -> None:
    texts = {"alpha": "Overview: the flamingo store.", "beta": "Overview: the pelican client."}
    with ctxbase.open(db, project=pid, embedder="hash", background_embedding=False) as cb:
        for name, text in texts.items():
            root = tmp_path / name
            (root / "src").mkdir(parents=True)
            (root / "README.md").write_text(f"# {name}\n\n{text}\n", encoding="utf-8")
            (root / "src" / "__init__.py").write_text(f'"""{text}"""\n', encoding="utf-8")
            assert cb.ingest(str(root)).repo == name
        cb.wait_for_embeddings()


def test_search_and_assembly_filter_by_repository(live: Live, pid: str, tmp_path: Path) -> None:
    _ingest_two(live.db, pid, tmp_path)
    key = live.key(pid)
    with ctxbase.connect(live.url, api_key=key, project=pid) as client:
        every = client.search("overview", preset="keyword", top_k=50).results
        assert {c.item.repo for c in every} == {"alpha", "beta"}
        flt = ItemFilter(repos=("beta",))
        only = client.search("overview", preset="keyword", filters=flt, top_k=50).results
        assert only and {c.item.repo for c in only} == {"beta"}
        assert {c.item.path for c in only} == {"README.md", "src/__init__.py"}
        shorthand = client.search("overview", preset="keyword", repos="beta", top_k=50).results
        assert [c.item.item_id for c in shorthand] == [c.item.item_id for c in only]
        ctx = client.assemble_context(
            agent_role="coder", user_intent="flamingo pelican overview", repos=["alpha"]
        )
        assert {e.get("repo") for e in [*ctx.documents, *ctx.code_snippets]} == {"alpha"}
        assert not any(n.startswith("repos:") for n in ctx.trace["notes"])
        # a repository the project does not hold: an answer, with a note naming it
        ctx = client.assemble_context(
            agent_role="coder", user_intent="flamingo pelican overview", repos=["alpah", "beta"]
        )
        (note,) = [n for n in ctx.trace["notes"] if n.startswith("repos:")]
        assert "'alpah'" in note and "'beta'" not in note and "ingested: alpha, beta" in note
    with ctxbase.open(live.db, project=pid, embedder="hash") as cb:  # the library says the same
        ctx = cb.assemble_context(
            agent_role="coder", user_intent="flamingo pelican overview", repos=["alpah", "beta"]
        )
        assert [n for n in ctx.trace["notes"] if n.startswith("repos:")] == [note]
    with live.client(key) as http:
        url = f"/v1/projects/{pid}/search"
        body = {"query": "overview", "preset": "keyword", "filters": {"repos": ["alpha"]}}
        answer = http.post(url, json=body)
        assert answer.status_code == 200
        assert {h["item"]["repo"] for h in answer.json()["results"]} == {"alpha"}
        bad = http.post(url, json={"query": "overview", "filters": {"repos": "alpha"}})
        assert bad.status_code == 422 and "repos" in bad.text
        typo = http.post(url, json={**body, "filters": {"repos": ["alpah"]}})
        assert typo.status_code == 404 and typo.json()["error"]["code"] == "not_found"
        assert "'alpah'" in typo.text and "its repositories: alpha, beta" in typo.text
        bad = http.post(
            "/v1/context/assemble",
            json={"project_id": pid, "agent_role": "coder", "user_intent": "x", "repos": 3},
        )
        assert bad.status_code == 422 and "repos" in bad.text


def test_search_names_a_session_the_project_does_not_hold(live: Live, pid: str) -> None:
    key = live.key(pid)
    with ctxbase.connect(live.url, api_key=key, project=pid) as client:
        client.capture("user_message", session_id="s-real", text="the flamingo cache ttl")
        found = client.search("flamingo", preset="keyword", session_id="s-real").results
        assert found and {c.item.session_id for c in found} == {"s-real"}
        with pytest.raises(NotFoundError, match="session 'no-such-session'"):
            client.search("flamingo", preset="keyword", session_id="no-such-session")
    with live.client(key) as http:
        body = {"query": "flamingo", "filters": {"session_ids": ["no-such-session"]}}
        typo = http.post(f"/v1/projects/{pid}/search", json=body)
        assert typo.status_code == 404 and typo.json()["error"]["code"] == "not_found"
        assert "session 'no-such-session' not found" in typo.text
