"""Forgetting an ingested repository over REST and the SDK: GET /entities?repo= lists one
repository's entities, POST /forget {repos} removes it (admin keys only) and names it in
the report, an unknown name is a 404 naming the project's repositories, and one forgotten
before is named as already forgotten."""

from __future__ import annotations

from pathlib import Path

import pytest
from live_server import Live

import ctxbase
from ctxbase.errors import UnknownReposError


def _ingest_two(db: str, pid: str, tmp_path: Path) -> None:
    texts = {"alpha": "Overview: the flamingo store.", "beta": "Overview: the pelican client."}
    with ctxbase.open(db, project=pid, embedder="hash", background_embedding=False) as cb:
        for name, text in texts.items():
            root = tmp_path / name
            (root / "src").mkdir(parents=True)
            (root / "README.md").write_text(f"# {name}\n\n{text}\n", encoding="utf-8")
            (root / "src" / "__init__.py").write_text(f'"""{text}"""\n', encoding="utf-8")
            assert cb.ingest(str(root)).repo == name


def test_forget_a_repository_over_rest_and_the_sdk(live: Live, pid: str, tmp_path: Path) -> None:
    _ingest_two(live.db, pid, tmp_path)
    c = live.client(live.key(pid))
    entities = f"/v1/projects/{pid}/entities"
    beta = c.get(entities, params={"repo": "beta"}).json()
    assert beta and {e["properties"]["repo"] for e in beta} == {"beta"}
    both = c.get(entities, params=[("repo", "alpha"), ("repo", "beta")]).json()
    assert {e["properties"]["repo"] for e in both} == {"alpha", "beta"}
    # a mistyped repository is a 404 naming the project's, not an empty list
    typo = c.get(entities, params=[("repo", "beta"), ("repo", "alpah")])
    assert typo.status_code == 404, typo.text
    assert "repository 'alpah' not found" in typo.text and "alpha, beta" in typo.text
    with (
        ctxbase.open(live.db, project=pid, embedder="hash") as cb,
        pytest.raises(UnknownReposError, match="its repositories: alpha, beta"),
    ):
        cb.list_entities(repos=["alpah"])
    # a write key may not forget
    assert c.post(f"/v1/projects/{pid}/forget", json={"repos": ["alpha"]}).status_code == 403
    admin = live.client(live.key(pid, role="admin"))
    r = admin.post(f"/v1/projects/{pid}/forget", json={"repos": ["alpah"]})
    assert r.status_code == 404, r.text
    assert "repository 'alpah' not found" in r.text and "its repositories: alpha, beta" in r.text

    with ctxbase.connect(live.url, api_key=live.key(pid, role="admin"), project=pid) as client:
        assert {e.id for e in client.list_entities(repos=["beta"])} == {e["id"] for e in beta}
        report = client.forget(repo="alpha")
        assert report.repos == ["alpha"] and report.removed["entities"] == len(both) - len(beta)
        assert client.list_entities(repos=["alpha"]) == []  # forgotten whole: none, no 404
        again = client.forget(repo="alpha")  # forgotten before: said so, no 404
        assert (again.repos, again.already_forgotten, again.total) == ([], ["alpha"], 0)
        hits = client.search("flamingo overview", preset="keyword", top_k=20).results
        assert hits and {h.item.repo for h in hits} == {"beta"}
    assert c.get(entities, params={"repo": "beta"}).json() == beta
