"""A unit a user hid or hard-forgot stays out when its code changes; one the ingest removed
itself comes back when it reappears (anchor/left_out.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

import ctxbase
from ctxbase import ContextBase
from ctxbase.anchor.ingest import ingest_path

A = 'def pelican_route():\n    """pelicanalpha"""\n    return 1\n\n\ndef other():\n    return 2\n'
B = 'def gull():\n    """gullomega"""\n    return 3\n'


def _tree(tmp_path: Path) -> Path:
    root = tmp_path / "r6"
    root.mkdir()
    (root / "a.py").write_text(A, encoding="utf-8")
    (root / "b.py").write_text(B, encoding="utf-8")
    return root


def _unit(cb: ContextBase, name: str) -> str:
    stored = cb.store.list_entities(cb.project, type="code", latest_only=False)
    return next(e.id for e in stored if e.name == name and "@" not in e.id)


def _visible(cb: ContextBase) -> set[str]:
    return {e.name for e in cb.store.list_entities(cb.project, type="code")}


def _found(cb: ContextBase, query: str) -> list[str]:
    return [hit.text or "" for hit in cb.search(query).results]


def _edit(root: Path, name: str, old: str, new: str) -> None:
    path = root / name
    path.write_text(path.read_text(encoding="utf-8").replace(old, new), encoding="utf-8")


def test_a_hidden_and_a_forgotten_unit_stay_out_when_their_code_changes(
    cb: ContextBase, tmp_path: Path
) -> None:
    root = _tree(tmp_path)
    ingest_path(cb, root)
    hidden, forgotten = _unit(cb, "a.pelican_route"), _unit(cb, "b.gull")
    cb.set_hidden([hidden])
    cb.forget(entity_ids=[forgotten])
    again = ingest_path(cb, root)
    assert again.files_unchanged == 2 and again.left_out == []

    _edit(root, "b.py", "return 3", "return 33")
    _edit(root, "a.py", "return 1\n", "return 11\n")
    changed = ingest_path(cb, root)
    assert changed.files_changed == 2
    assert sorted(changed.left_out) == sorted([(hidden, "hidden"), (forgotten, "forgotten")])
    assert "2 units left out: hidden or forgotten before" in changed.summary()
    assert [tuple(p) for p in changed.to_dict()["left_out"]] == changed.left_out
    assert hidden not in changed.written_ids and forgotten not in changed.written_ids
    assert "a.pelican_route" not in _visible(cb) and "b.gull" not in _visible(cb)
    assert not any("gullomega" in t or "pelicanalpha" in t for t in _found(cb, "gullomega"))
    assert not any("pelicanalpha" in t for t in _found(cb, "pelicanalpha"))
    # the hidden one holds its new version, hidden; the forgotten one is not stored at all
    new = cb.store.get_entities(cb.project, [hidden], include_inactive=True)[0]
    assert not new.active and "return 11" in (new.text or "")
    assert cb.store.get_entities(cb.project, [forgotten], include_inactive=True) == []
    assert cb.store.forgotten_ids(cb.project, [forgotten], ("entity",)) == {forgotten}
    # a sibling in the same file was written as usual
    assert "a.other" in _visible(cb)

    # restoring the hidden one shows the version the ingest wrote
    assert cb.set_hidden([hidden], hidden=False).changed >= 1
    assert "a.pelican_route" in _visible(cb)
    assert any("pelicanalpha" in t for t in _found(cb, "pelicanalpha"))


def test_readmit_brings_both_back_visible(cb: ContextBase, tmp_path: Path) -> None:
    root = _tree(tmp_path)
    ingest_path(cb, root)
    hidden, forgotten = _unit(cb, "a.pelican_route"), _unit(cb, "b.gull")
    cb.set_hidden([hidden])
    cb.forget(entity_ids=[forgotten])
    # files unchanged: readmit reads the two files holding them again
    back = ingest_path(cb, root, readmit=True)
    assert sorted(back.readmitted) == sorted([hidden, forgotten]) and back.left_out == []
    assert "2 hidden or forgotten units readmitted" in back.summary()
    assert {"a.pelican_route", "b.gull", "a.other"} <= _visible(cb)
    assert cb.store.forgotten_ids(cb.project, [forgotten], ("entity",)) == set()
    assert any("gullomega" in t for t in _found(cb, "gullomega"))
    # back for good: the next edit writes them visible, nothing left out
    _edit(root, "b.py", "return 3", "return 33")
    later = ingest_path(cb, root)
    assert later.left_out == [] and "b.gull" in _visible(cb)


def test_a_unit_the_ingest_removed_comes_back_when_it_reappears(
    cb: ContextBase, tmp_path: Path
) -> None:
    root = _tree(tmp_path)
    ingest_path(cb, root)
    _edit(root, "a.py", "def pelican_route", "def renamed_route")
    removed = ingest_path(cb, root)
    assert removed.units_removed >= 1 and "a.pelican_route" not in _visible(cb)
    (root / "b.py").unlink()
    assert ingest_path(cb, root).files_deleted == 1 and "b.gull" not in _visible(cb)

    _edit(root, "a.py", "def renamed_route", "def pelican_route")
    (root / "b.py").write_text(B, encoding="utf-8")
    back = ingest_path(cb, root)
    assert back.left_out == []
    assert {"a.pelican_route", "b.gull"} <= _visible(cb)


def test_a_hidden_unit_removed_then_readded_stays_hidden(cb: ContextBase, tmp_path: Path) -> None:
    root = _tree(tmp_path)
    ingest_path(cb, root)
    hidden = _unit(cb, "b.gull")
    cb.set_hidden([hidden])
    (root / "b.py").unlink()
    ingest_path(cb, root)  # the file goes: the ingest removes a unit the user hid
    (root / "b.py").write_text(B.replace("return 3", "return 4"), encoding="utf-8")
    back = ingest_path(cb, root)
    assert back.left_out == [(hidden, "hidden")] and "b.gull" not in _visible(cb)


def test_forgetting_a_repository_then_ingesting_it_brings_every_unit_back(
    cb: ContextBase, tmp_path: Path
) -> None:
    root = _tree(tmp_path)
    first = ingest_path(cb, root)
    cb.forget(repo=first.repo)
    _edit(root, "b.py", "return 3", "return 33")
    again = ingest_path(cb, root)
    assert again.left_out == [] and {"a.pelican_route", "b.gull"} <= _visible(cb)


def test_the_cli_names_the_units_left_out_and_readmits_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ctxbase.cli import main

    root = _tree(tmp_path)
    base = ["--db", str(tmp_path / "c.db"), "--project", "p", "--embedder", "hash", "-q"]
    assert main([*base, "ingest", str(root)]) == 0
    with ctxbase.open(str(tmp_path / "c.db"), project="p", embedder="hash") as cb:
        hidden, forgotten = _unit(cb, "a.pelican_route"), _unit(cb, "b.gull")
    assert main([*base, "forget", "--soft", "--entity", hidden]) == 0
    assert main([*base, "forget", "--entity", forgotten]) == 0
    capsys.readouterr()
    _edit(root, "b.py", "return 3", "return 33")
    _edit(root, "a.py", "return 1\n", "return 11\n")
    assert main([*base, "ingest", str(root)]) == 0
    out = capsys.readouterr().out
    assert "2 units left out: hidden or forgotten before" in out
    assert f"  {hidden}: hidden before, left out" in out
    assert f"  {forgotten}: forgotten before, left out" in out
    assert main([*base, "ingest", str(root), "--readmit"]) == 0
    assert "2 hidden or forgotten units readmitted" in capsys.readouterr().out
    assert main([*base, "entities", "--type", "code"]) == 0
    listed = capsys.readouterr().out
    assert "b.gull" in listed and "a.pelican_route" in listed


def test_a_removed_unit_purged_since_comes_back_when_it_reappears(
    cb: ContextBase, tmp_path: Path
) -> None:
    root = _tree(tmp_path)
    ingest_path(cb, root)
    gull = _unit(cb, "b.gull")
    (root / "b.py").write_text("def tern():\n    return 5\n", encoding="utf-8")
    ingest_path(cb, root)
    cb.forget(soft_deleted_older_than=0)  # the retention purge hard-forgets it
    assert cb.store.forgotten_ids(cb.project, [gull], ("entity",)) == {gull}
    (root / "b.py").write_text(B, encoding="utf-8")
    back = ingest_path(cb, root)
    assert back.left_out == [] and "b.gull" in _visible(cb)
