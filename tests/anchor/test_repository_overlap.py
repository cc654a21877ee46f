"""Files one repository of the project holds are not stored again under another name: an
ingest whose folder lists them (the same folder, one inside an ingested folder, or one that
contains one) is refused before anything is written, unless `allow_overlap` asks for both."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxbase import ContextBase
from ctxbase.anchor.ingest import ingest_path
from ctxbase.anchor.repository import REPOSITORY_SCOPE, recorded_places
from ctxbase.errors import RepositoryOverlapError, ValidationError


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return root.resolve()


def _entities(cb: ContextBase) -> list[tuple[str, int, bool]]:
    """Every entity with its version and whether it is active: what a refusal must not touch."""
    listed = cb.list_entities(latest_only=False)
    return sorted((e.id, e.version, e.active) for e in listed)


def _two_packages(tmp_path: Path) -> tuple[Path, Path]:
    """Two packages copied into one plain folder: both are stored under `repos` (their parent)."""
    sc = _write(
        tmp_path / "repos" / "sortedcontainers",
        {"__init__.py": '"""Sorted."""\n', "sortedlist.py": "class SortedList:\n    pass\n"},
    )
    at = _write(
        tmp_path / "repos" / "annotated_types",
        {"__init__.py": '"""Types."""\n', "types.py": "class Gt:\n    pass\n"},
    )
    return sc, at


def test_a_package_ingested_again_under_another_name_is_refused(
    cb: ContextBase, tmp_path: Path
) -> None:
    sc, at = _two_packages(tmp_path)
    assert ingest_path(cb, sc).repo == "repos"
    assert ingest_path(cb, at).repo == "repos"
    before = _entities(cb)
    with pytest.raises(RepositoryOverlapError) as caught:
        ingest_path(cb, sc, repo="sc")
    error = caught.value
    assert isinstance(error, ValidationError) and error.field == "path"
    assert (error.repo, error.held_by, error.held_root, error.folder) == (
        "sc",
        "repos",
        str(sc.parent),
        str(sc),
    )
    assert error.files == 2
    text = str(error)
    assert "repository 'repos' already holds 2 files of" in text
    assert "repo='repos'" in text and "allow_overlap=True" in text
    assert "nothing was changed" in text
    assert _entities(cb) == before  # nothing written, nothing removed
    assert set(recorded_places(cb.store, cb.project)) == {"repos"}
    # the same folder under the name that holds it is an ordinary update
    again = ingest_path(cb, sc, repo="repos")
    assert (again.files_unchanged, again.files_new, again.shared_with) == (2, 0, {})


def test_a_sibling_package_the_other_name_does_not_hold_is_its_own_repository(
    cb: ContextBase, tmp_path: Path
) -> None:
    sc, at = _two_packages(tmp_path)
    ingest_path(cb, sc)
    report = ingest_path(cb, at, repo="at")  # same parent folder, none of its files
    assert (report.repo, report.files_new, report.shared_with) == ("at", 2, {})


def test_the_same_plain_folder_under_another_name_is_refused(
    cb: ContextBase, tmp_path: Path
) -> None:
    notes = _write(tmp_path / "notes", {"a.md": "# A\n\nOsprey.\n", "b.md": "# B\n"})
    ingest_path(cb, notes)
    before = _entities(cb)
    with pytest.raises(RepositoryOverlapError) as caught:
        ingest_path(cb, notes, repo="other")
    assert (caught.value.held_by, caught.value.files) == ("notes", 2)
    assert _entities(cb) == before


def test_a_folder_inside_an_ingested_one_is_refused(cb: ContextBase, tmp_path: Path) -> None:
    proj = _write(tmp_path / "proj", {"top.md": "# Top\n", "sub/a.md": "# A\n\nOsprey.\n"})
    ingest_path(cb, proj)
    before = _entities(cb)
    with pytest.raises(RepositoryOverlapError) as caught:
        ingest_path(cb, proj / "sub")  # would be repository `sub`, paths relative to sub/
    error = caught.value
    assert (error.repo, error.held_by, error.held_root, error.files) == (
        "sub",
        "proj",
        str(proj),
        1,
    )
    # its paths are relative to another folder: the advice is to ingest that folder
    assert f"Ingest {proj} to update them" in str(error)
    assert _entities(cb) == before
    with pytest.raises(RepositoryOverlapError):
        ingest_path(cb, proj / "sub" / "a.md", repo="one-file")  # one file the same way


def test_a_folder_containing_an_ingested_one_is_refused(cb: ContextBase, tmp_path: Path) -> None:
    proj = _write(tmp_path / "proj", {"top.md": "# Top\n", "sub/a.md": "# A\n\nOsprey.\n"})
    ingest_path(cb, proj / "sub")
    before = _entities(cb)
    with pytest.raises(RepositoryOverlapError) as caught:
        ingest_path(cb, proj)
    error = caught.value
    assert (error.repo, error.held_by, error.held_root, error.files) == (
        "proj",
        "sub",
        str(proj / "sub"),
        1,
    )
    assert "to update them" not in str(error)  # updating `sub` is not what was asked
    assert _entities(cb) == before


def test_allow_overlap_keeps_both_and_is_remembered_for_that_pair(
    cb: ContextBase, tmp_path: Path
) -> None:
    sc, at = _two_packages(tmp_path)
    ingest_path(cb, sc)
    ingest_path(cb, at)
    both = ingest_path(cb, sc, repo="sc", allow_overlap=True)
    assert (both.repo, both.files_new, both.shared_with) == ("sc", 2, {"repos": 2})
    repos = {(e.properties.get("repo"), e.name) for e in cb.list_entities(type="file")}
    assert ("sc", "sortedcontainers/sortedlist.py") in repos
    assert ("repos", "sortedcontainers/sortedlist.py") in repos
    assert recorded_places(cb.store, cb.project)["sc"].shares == ("repos",)
    # either side's later ingests need not say it again, and still report it
    again = ingest_path(cb, sc, repo="sc")
    assert (again.files_unchanged, again.shared_with) == (2, {"repos": 2})
    assert ingest_path(cb, sc).shared_with == {"sc": 2}  # `repos`, found again by folder
    # a third name was not part of that choice
    with pytest.raises(RepositoryOverlapError) as caught:
        ingest_path(cb, sc, repo="third")
    assert caught.value.held_by in ("repos", "sc")


def test_a_repository_without_a_recorded_folder_is_not_refused_nor_broken(
    cb: ContextBase, tmp_path: Path
) -> None:
    """Stores written before folders were recorded: where its files live is unknown, so
    nothing is refused for it, and its own ingests work as before."""
    notes = _write(tmp_path / "notes", {"a.md": "# A\n\nOsprey.\n"})
    ingest_path(cb, notes)
    assert cb.store.delete_state(cb.project, REPOSITORY_SCOPE, "", "notes", None)
    again = ingest_path(cb, notes)
    assert (again.repo, again.files_unchanged, again.shared_with) == ("notes", 1, {})
    assert cb.store.delete_state(cb.project, REPOSITORY_SCOPE, "", "notes", None)
    other = ingest_path(cb, notes, repo="other")
    assert (other.repo, other.files_new) == ("other", 1)
