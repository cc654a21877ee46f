"""A file's units, removals and file entity are written in one store transaction."""

from __future__ import annotations

from pathlib import Path

from ctxbase import ContextBase
from ctxbase.anchor.ingest import ingest_path
from ctxbase.store.base import Store

V1 = "def kept():\n    return 1\n\n\ndef dropped():\n    return 2\n"
# The last function's decorator (kept whole in its properties) is over the 1 MB JSON
# limit: its write fails after the new `added` was written, mid-file.
V2 = (
    "def kept():\n    return 10\n\n\ndef added():\n    return 3\n\n\n"
    '@tag("' + "x" * 1_100_000 + '")\ndef huge():\n    return 4\n'
)


def _code(cb: ContextBase) -> dict[str, int]:
    return {e.name: e.version for e in cb.store.list_entities(cb.project, type="code")}


def test_a_write_failing_mid_file_leaves_nothing_of_the_file(
    cb: ContextBase, tmp_path: Path
) -> None:
    tree = tmp_path / "pkg"
    tree.mkdir()
    (tree / "mod.py").write_text(V1, encoding="utf-8")
    first = ingest_path(cb, tree, max_file_bytes=3_000_000)
    assert first.files_new == 1 and first.units_written >= 3
    before = _code(cb)
    file_id = next(e for e in cb.store.list_entities(cb.project, type="file")).id
    old_hash = cb.store.get_entities(cb.project, [file_id])[0].properties["content_hash"]

    (tree / "mod.py").write_text(V2, encoding="utf-8")
    failed = ingest_path(cb, tree, max_file_bytes=3_000_000)
    assert failed.files_failed == 1, failed.errors
    assert "over the limit" in failed.errors[0][1]
    assert failed.units_written == failed.units_removed == 0
    # Nothing of the new content: no `added`, `kept` still at version 1, `dropped` active.
    assert _code(cb) == before
    stored = cb.store.get_entities(cb.project, [file_id])[0]
    assert stored.properties["content_hash"] == old_hash

    # Once the file is fixed it is anchored in full by the next ingest.
    (tree / "mod.py").write_text(V2.replace("x" * 1_100_000, "small"), encoding="utf-8")
    fixed = ingest_path(cb, tree, max_file_bytes=3_000_000)
    assert fixed.files_changed == 1 and not fixed.errors
    after = _code(cb)
    assert "mod.added" in after and "mod.dropped" not in after and after["mod.kept"] == 2


def test_store_transaction_commits_once_and_rolls_back_whole(store: Store) -> None:
    from ctxbase.model import Entity

    pid = "tx-project"
    store.ensure_project(pid)

    def entity(i: int) -> Entity:
        return Entity(id=f"e{i}", project_id=pid, type="note", name=f"n{i}", text=f"t{i}")

    try:
        with store.transaction():
            store.upsert_entity(entity(1), [])
            # reads inside see the block's own writes
            assert [e.id for e in store.get_entities(pid, ["e1"])] == ["e1"]
            with store.transaction():  # a nested block joins the outer one
                store.upsert_entity(entity(2), [])
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    assert store.get_entities(pid, ["e1", "e2"]) == []
    with store.transaction():
        store.upsert_entity(entity(1), [])
        store.upsert_entity(entity(2), [])
    assert {e.id for e in store.get_entities(pid, ["e1", "e2"])} == {"e1", "e2"}
