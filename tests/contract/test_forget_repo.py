"""Forgetting an ingested repository on every backend: two repositories in one project,
a knowledge-base tag over both (pinned) and an assembled context that used the first;
`forget(repo=...)` removes every entity of the first, where it lives and its part of the
tag, leaves the second as it was, and nothing of the first is left in the raw database
(SQLite file after a VACUUM, every PostgreSQL column). Ingesting it again afterwards is a
fresh ingest, not "unchanged"."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from ctxbase import ContextBase
from ctxbase.anchor.repository import recorded_places
from ctxbase.errors import NotFoundError, UnknownReposError, ValidationError
from ctxbase.store.sqlite import SQLiteStore
from residue import postgres_copies, sqlite_file_copies, sqlite_file_copies_where


def _marker() -> str:
    """A name unique per test (PostgreSQL is shared), kept whole by the tokenizer."""
    return "zqx" + "".join(chr(ord("a") + int(c, 16)) for c in uuid.uuid4().hex[:10]) + "qz"


def _repo(root: Path, func: str, topic: str) -> Path:
    (root / "src").mkdir(parents=True)
    (root / "src" / "orders.py").write_text(
        f'"""Orders."""\n\n\ndef {func}(cart):\n    """Check out the {topic} cart."""\n'
        "    return cart\n",
        encoding="utf-8",
    )
    (root / "README.md").write_text(
        f"# {topic.title()}\n\nCall {func} to finish the {topic} order.\n", encoding="utf-8"
    )
    return root


def _copies(cb: ContextBase, needles: list[str], pg_url: str | None) -> dict[str, Any]:
    if isinstance(cb.store, SQLiteStore):
        found: dict[str, Any] = {
            n: c for n, c in sqlite_file_copies(cb.store.path, needles).items() if c
        }
        if found:
            found["tables"] = sqlite_file_copies_where(cb.store.path, needles)
        return found
    assert pg_url is not None
    out: dict[str, Any] = {}
    for table, column, needle in postgres_copies(pg_url, needles, project_id=cb.project):
        out.setdefault(needle, []).append(f"{table}.{column}")
    return out


def _keyword(cb: ContextBase, query: str) -> list[str]:
    return [c.item.text for c in cb.search(query, preset="keyword", top_k=10).results]


def test_forget_repo_leaves_nothing_and_the_other_repo_as_it_was(
    cb: ContextBase, backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    pg_url = str(request.getfixturevalue("pg_url")) if backend == "postgres" else None
    gone, kept = _marker(), _marker()
    shop = _repo(tmp_path / "checkout-app", gone, "shop")
    blog = _repo(tmp_path / "writer", kept, "blog")
    assert cb.ingest(str(shop), repo="shop").files_new == 2
    assert cb.ingest(str(blog), repo="blog").files_new == 2
    cb.wait_for_embeddings(timeout=60)
    assert cb.tag_knowledge("v1").repos == ("blog", "shop")
    cb.pin_knowledge("v1")
    blog_before = sorted(e.id for e in cb.list_entities(repos=["blog"]))
    shop_ids = [e.id for e in cb.list_entities(repos=["shop"])]
    assert blog_before and shop_ids and not set(blog_before) & set(shop_ids)
    assert any(gone in t for t in _keyword(cb, gone))
    assembled = cb.assemble_context(agent_role="coder", user_intent="finish the shop cart order")
    assert gone in str(cb.get_trace(assembled.context_id))

    report = cb.forget(repo="shop")

    assert report.repos == ["shop"] and report.removed["entities"] >= len(shop_ids)
    assert cb.list_entities(repos=["shop"]) == []
    assert cb.store.repo_entity_ids(cb.project, ["shop"]) == {}
    assert cb.store.list_repos(cb.project) == ["blog"]
    assert set(recorded_places(cb.store, cb.project)) == {"blog"}
    assert not any(gone in t for t in _keyword(cb, gone))
    assert any(kept in t for t in _keyword(cb, kept))  # the other repository: untouched
    assert sorted(e.id for e in cb.list_entities(repos=["blog"])) == blog_before
    tag = cb.knowledge_tags()[0]
    assert (tag.name, tag.repos, tag.pinned) == ("v1", ("blog",), True)
    assert tag.entities == len(blog_before)
    assert _copies(cb, [gone, str(shop)], pg_url) == {}
    assert _copies(cb, [kept], pg_url)  # the scan finds what is there

    again = cb.ingest(str(shop), repo="shop")  # a fresh ingest: every file is new
    assert (again.files_new, again.files_unchanged, again.moved_from) == (2, 0, None)
    assert any(gone in t for t in _keyword(cb, gone))


def test_forget_repo_names_the_known_ones_and_refuses_to_hide(
    cb: ContextBase, tmp_path: Path
) -> None:
    name = _marker()
    cb.ingest(str(_repo(tmp_path / "shop", name, "shop")), repo="shop")
    count = len(cb.list_entities())
    with pytest.raises(UnknownReposError) as caught:
        cb.forget(repos=["shop", "shpo"])
    assert isinstance(caught.value, NotFoundError)
    assert str(caught.value) == (
        f"repository 'shpo' not found in project {cb.project!r} (its repositories: shop)"
    )
    assert len(cb.list_entities()) == count  # nothing done, "shop" included
    with pytest.raises(ValidationError):
        cb.forget(repo="a/b")
    cb.forget(repo="shop")
    assert cb.store.forgotten_ids(cb.project, ["shop", "shpo"], ("repo",)) == {"shop"}
    # forgotten before: said so, as for a session (a retry is harmless), not "not found"
    again = cb.forget(repo="shop")
    assert (again.repos, again.already_forgotten, again.total) == ([], ["shop"], 0)
    with pytest.raises(UnknownReposError, match="it has no ingested repository"):
        cb.forget(repos=["shop", "shpo"])  # a typo beside it is still refused


def test_a_whole_project_forget_names_the_repositories_it_forgot(
    cb: ContextBase, tmp_path: Path
) -> None:
    """Forgetting the whole project forgets (tombstones) its repositories: its report names
    them as `forget(repo=...)` does, and a later forget of one says "already forgotten"."""
    assert cb.ingest(str(_repo(tmp_path / "a", _marker(), "shop")), repo="shop").files_new == 2
    assert cb.ingest(str(_repo(tmp_path / "b", _marker(), "blog")), repo="blog").files_new == 2
    report = cb.forget(whole_project=True)
    assert report.repos == ["blog", "shop"] and report.removed["entities"] > 0
    again = cb.forget(whole_project=True)  # nothing left: none forgotten by this one
    assert again.repos == [] and again.total == 0
    cb.record("user_message", session_id="s", text="a fresh start")  # held again
    later = cb.forget(repo="shop")
    assert later.already_forgotten == ["shop"] and later.repos == []


def test_forget_whole_project_on_the_command_line_lists_its_repositories(
    tmp_path: Path, capsys: Any
) -> None:
    import json

    from ctxbase.cli import main

    db = str(tmp_path / "w.db")
    base = ["--db", db, "--project", "p", "--embedder", "none", "-q"]
    shop = _repo(tmp_path / "shop", _marker(), "shop")
    assert main([*base, "ingest", str(shop), "--repo", "orders"]) == 0
    capsys.readouterr()
    assert main([*base, "forget", "--whole-project", "--yes"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["repos"] == ["orders"] and report["removed"]["entities"] > 0
