"""A backup copied back (migrate-data) does not undo a repository forget, on every backend.

Two repositories, a tag over both (pinned) and a tag over the first alone; a backup taken
before the first is forgotten. Copied into the store that forgot, the backup brings back
neither where the repository lived, nor the tag over it alone, nor its part of the other
tag or of the pinned view; copied into a store holding only the forgotten store's
tombstones, it gives that store's records. A repository ingested again after its forget is
held again: the copy brings back what the backup holds of it, as for a session used again,
and forgetting it again forgets it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ctxbase import ContextBase
from ctxbase.anchor.repository import recorded_places
from ctxbase.store.base import Store
from ctxbase.store.repo_records import KB_PIN_KEY, KB_PIN_SCOPE, KB_TAG_SCOPE
from ctxbase.store.sqlite import SQLiteStore
from ctxbase.store.transfer import copy_project


def _repo(root: Path, func: str) -> Path:
    (root / "src").mkdir(parents=True)
    (root / "src" / "orders.py").write_text(
        f'"""Orders."""\n\n\ndef {func}(cart):\n    """Check out the cart."""\n    return cart\n',
        encoding="utf-8",
    )
    (root / "README.md").write_text(f"# Notes\n\nCall {func} to finish.\n", encoding="utf-8")
    return root


def _rows(store: Store, pid: str, table: str) -> list[dict[str, Any]]:
    return [r for batch in store.export_rows(pid, table) for r in batch]


def _records(store: Store, pid: str) -> str:
    """Every state record and every version of one, as one text (to look for ids in)."""
    rows = _rows(store, pid, "state") + _rows(store, pid, "state_history")
    return json.dumps(rows, default=str)


def _state(store: Store, pid: str) -> dict[tuple[str, str, str], Any]:
    return {(r["scope"], r["scope_id"], r["key"]): r["value"] for r in _rows(store, pid, "state")}


def _ingest_two(cb: ContextBase, tmp_path: Path) -> tuple[list[str], list[str]]:
    """Repositories shop and blog, tag v1 over both (pinned), vshop over shop alone; the
    entity ids of each."""
    cb.ingest(str(_repo(tmp_path / "shop", "zqxshopcart")), repo="shop")
    cb.ingest(str(_repo(tmp_path / "blog", "zqxblogpost")), repo="blog")
    cb.tag_knowledge("v1")
    cb.tag_knowledge("vshop", repos=["shop"])
    cb.pin_knowledge("v1")
    shop = [e.id for e in cb.list_entities(repos=["shop"])]
    blog = [e.id for e in cb.list_entities(repos=["blog"])]
    assert shop and blog
    return shop, blog


def test_a_backup_does_not_bring_back_a_forgotten_repository(
    cb: ContextBase, tmp_path: Path
) -> None:
    pid = cb.project
    shop, blog = _ingest_two(cb, tmp_path)
    bak, fresh = SQLiteStore(str(tmp_path / "bak.db")), SQLiteStore(str(tmp_path / "fresh.db"))
    try:
        assert all(c.matches for c in copy_project(cb.store, bak, pid).values())
        cb.forget(repo="shop")
        assert cb.store.forgotten_ids(pid, ["shop", "blog"], ("repo",)) == {"shop"}
        live_state = _state(cb.store, pid)
        history = _rows(cb.store, pid, "state_history")

        counts = copy_project(bak, cb.store, pid, batch=2)

        assert all(c.matches for c in counts.values()), counts
        assert counts["entities"].forgotten == len(shop)
        # shop's place record, the vshop tag (the versions of both) and the source's v1 and
        # pinned view, whose records here are the forget's rewrites (already there)
        assert counts["state"].forgotten == 2 and counts["state"].written == 0
        assert _state(cb.store, pid) == live_state
        assert _rows(cb.store, pid, "state_history") == history
        assert set(recorded_places(cb.store, pid)) == {"blog"}
        tags = {t.name: t for t in cb.knowledge_tags()}
        assert set(tags) == {"v1"} and tags["v1"].repos == ("blog",) and tags["v1"].pinned
        assert cb.list_entities(repos=["shop"]) == []
        records = _records(cb.store, pid)
        assert not any(i in records for i in shop)
        again = cb.forget(repo="shop")  # still forgotten: nothing comes back to forget
        assert (again.repos, again.already_forgotten, again.total) == ([], ["shop"], 0)

        # A store holding only the tombstones: the backup gives it the forget's records.
        fresh.import_rows(pid, "tombstones", _rows(cb.store, pid, "tombstones"))
        counts = copy_project(bak, fresh, pid, batch=3)
        assert all(c.matches for c in counts.values()), counts
        assert counts["state"].redacted == 2  # v1 and the pinned view, without shop
        assert counts["state_history"].redacted == 2  # one first version of each
        assert _state(fresh, pid) == live_state | {
            (KB_PIN_SCOPE, "", KB_PIN_KEY): _state(fresh, pid)[(KB_PIN_SCOPE, "", KB_PIN_KEY)]
        }
        pinned = _state(fresh, pid)[(KB_PIN_SCOPE, "", KB_PIN_KEY)]
        assert pinned["tag"] == "v1" and pinned["repos"] == ["blog"]
        tag = _state(fresh, pid)[(KB_TAG_SCOPE, "", "v1")]
        assert tag["repos"] == ["blog"] and set(tag["entities"]) <= set(blog)
        versions = [r for r in _rows(fresh, pid, "state_history") if r["key"] == "v1"]
        assert [(r["version"], r["cause"], r["old_value"]) for r in versions] == [
            (1, "forget", None)
        ]
        assert not any(i in _records(fresh, pid) for i in shop)
        assert _rows(fresh, pid, "entities") and not {
            r["entity_id"] for r in _rows(fresh, pid, "entities")
        } & set(shop)
    finally:
        bak.close()
        fresh.close()


def test_a_repository_ingested_again_after_its_forget_is_copied(
    cb: ContextBase, tmp_path: Path
) -> None:
    """Its tombstone stays but blocks nothing: the ingest is a new one, the destination
    holds it again, so the backup's records of it are copied; a forget forgets it again."""
    pid = cb.project
    _ingest_two(cb, tmp_path)
    bak = SQLiteStore(str(tmp_path / "bak.db"))
    try:
        copy_project(cb.store, bak, pid)
        cb.forget(repo="shop")
        again = cb.ingest(str(tmp_path / "shop"), repo="shop")
        assert (again.files_new, again.files_unchanged) == (2, 0)
        assert cb.store.forgotten_ids(pid, ["shop"], ("repo",)) == {"shop"}

        counts = copy_project(bak, cb.store, pid)

        assert all(c.matches for c in counts.values()), counts
        assert counts["state"].forgotten == 0 and counts["state"].redacted == 0
        assert {t.name for t in cb.knowledge_tags()} == {"v1", "vshop"}
        assert set(recorded_places(cb.store, pid)) == {"blog", "shop"}
        report = cb.forget(repo="shop")
        assert report.repos == ["shop"] and report.already_forgotten == []
        assert cb.list_entities(repos=["shop"]) == []
        assert {t.name for t in cb.knowledge_tags()} == {"v1"}
    finally:
        bak.close()


def test_a_backup_into_a_project_forgotten_whole_leaves_its_repositories_out(
    cb: ContextBase, tmp_path: Path
) -> None:
    """A whole-project forget forgets its repositories too (their tombstones): the project
    written to again and one repository ingested again, the backup brings back what it
    holds of that one alone; the other's place record and the tag over it alone stay out,
    and the tag over both comes back without it."""
    pid = cb.project
    shop, _ = _ingest_two(cb, tmp_path)
    bak = SQLiteStore(str(tmp_path / "bak.db"))
    try:
        copy_project(cb.store, bak, pid)
        report = cb.forget(whole_project=True)
        assert report.total > 0
        assert cb.store.forgotten_ids(pid, ["shop", "blog"], ("repo",)) == {"shop", "blog"}
        cb.ingest(str(tmp_path / "blog"), repo="blog")

        counts = copy_project(bak, cb.store, pid)

        assert set(recorded_places(cb.store, pid)) == {"blog"}
        tags = {t.name: t for t in cb.knowledge_tags()}
        assert set(tags) == {"v1"} and tags["v1"].repos == ("blog",)
        assert counts["entities"].forgotten >= len(shop)
        assert cb.list_entities(repos=["shop"]) == []
        assert not any(i in _records(cb.store, pid) for i in shop)
        pinned = _state(cb.store, pid)[(KB_PIN_SCOPE, "", KB_PIN_KEY)]
        assert pinned["tag"] == "v1" and pinned["repos"] == ["blog"]
    finally:
        bak.close()


def test_a_re_run_into_a_backup_forgets_there_a_repository_the_source_forgot(
    cb: ContextBase, tmp_path: Path
) -> None:
    """The other way round: a backup made before the forget, refreshed by copying the
    source into it again, keeps no record that names the forgotten repository (where it
    lived, the tag over it alone, its part of the other tag and of the pinned view), and
    none of its entities; the other repository is as the source holds it."""
    pid = cb.project
    shop, blog = _ingest_two(cb, tmp_path)
    bak = SQLiteStore(str(tmp_path / "bak.db"))
    try:
        copy_project(cb.store, bak, pid)
        assert set(recorded_places(bak, pid)) == {"shop", "blog"}
        cb.forget(repo="shop")

        counts = copy_project(cb.store, bak, pid, batch=2)

        assert all(c.matches for c in counts.values()), counts
        assert counts["entities"].removed == len(shop)
        assert counts["state"].removed >= 2  # shop's place record, the vshop tag
        assert set(recorded_places(bak, pid)) == {"blog"}
        assert bak.forgotten_ids(pid, ["shop", "blog"], ("repo",)) == {"shop"}
        assert not any(i in _records(bak, pid) for i in shop)
        assert "zqxshopcart" not in _records(bak, pid)
        state = _state(bak, pid)
        assert set(state) == set(_state(cb.store, pid))
        assert state[(KB_TAG_SCOPE, "", "v1")]["repos"] == ["blog"]
        assert set(state[(KB_TAG_SCOPE, "", "v1")]["entities"]) <= set(blog)
        pinned = state[(KB_PIN_SCOPE, "", KB_PIN_KEY)]
        assert pinned["tag"] == "v1" and pinned["repos"] == ["blog"]
        assert not set(pinned.get("shown") or ()) & set(shop)
        assert {r["entity_id"] for r in _rows(bak, pid, "entities")} >= set(blog)
        again = copy_project(cb.store, bak, pid)  # a further re-run: nothing left to forget
        assert sum(c.removed for c in again.values()) == 0
    finally:
        bak.close()


def test_a_repository_ingested_again_in_the_source_reaches_the_backup(
    cb: ContextBase, tmp_path: Path
) -> None:
    """Forgotten in the source, copied (the backup forgets it too and holds its
    tombstones), ingested again: the next re-run brings the new ingest, its place record
    and its entities (the same ids) to the backup."""
    pid = cb.project
    shop, _ = _ingest_two(cb, tmp_path)
    bak = SQLiteStore(str(tmp_path / "bak.db"))
    try:
        copy_project(cb.store, bak, pid)
        cb.forget(repo="shop")
        copy_project(cb.store, bak, pid)
        assert set(recorded_places(bak, pid)) == {"blog"}
        cb.ingest(str(tmp_path / "shop"), repo="shop")
        again = {e.id for e in cb.list_entities(repos=["shop"])}
        assert again & set(shop)  # ids tombstoned in the backup

        counts = copy_project(cb.store, bak, pid)

        assert all(c.matches for c in counts.values()), counts
        assert set(recorded_places(bak, pid)) == {"blog", "shop"}
        held = {r["entity_id"] for r in _rows(bak, pid, "entities")}
        assert again <= held
        assert sum(c.written for c in copy_project(cb.store, bak, pid).values()) == 0
    finally:
        bak.close()
