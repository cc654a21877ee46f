"""A repository is where it lives: two folders with the same name never take each other's
files for deleted ones; the same folder (or a checkout of the same remote) re-ingested
updates and removes as before."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from ctxbase import ContextBase
from ctxbase.anchor.ingest import ingest_path
from ctxbase.anchor.repository import REPOSITORY_SCOPE, recorded_places, remote_identity
from ctxbase.errors import RepositoryNameTakenError, ValidationError


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return root.resolve()


def _active(cb: ContextBase) -> set[tuple[str | None, str]]:
    """(repository, path) of every active file entity."""
    return {
        (e.properties.get("repo"), str(e.properties["path"])) for e in cb.list_entities(type="file")
    }


def _code_names(cb: ContextBase) -> set[str]:
    """The last part of each code entity's name (`alpha_orders` of `alpha.alpha_orders`)."""
    return {e.name.rsplit(".", 1)[-1] for e in cb.list_entities(type="code")}


def _two_src_folders(tmp_path: Path) -> tuple[Path, Path]:
    one = _write(tmp_path / "p1" / "src", {"alpha.py": "def alpha_orders():\n    return 1\n"})
    two = _write(tmp_path / "p2" / "src", {"beta.py": "def beta_orders():\n    return 2\n"})
    return one, two


def test_a_second_folder_with_the_same_name_is_refused_and_removes_nothing(
    cb: ContextBase, tmp_path: Path
) -> None:
    one, two = _two_src_folders(tmp_path)
    first = ingest_path(cb, one)
    assert (first.repo, first.repo_root, first.moved_from) == ("src", str(one.resolve()), None)
    with pytest.raises(RepositoryNameTakenError) as caught:
        ingest_path(cb, two)
    error = caught.value
    assert isinstance(error, ValidationError) and error.field == "repo"
    assert (error.repo, error.held_by, error.folder) == ("src", str(one), str(two))
    assert "repo=NAME" in str(error) and "moved=True" in str(error) and str(one) in str(error)
    assert _active(cb) == {("src", "alpha.py")}  # nothing removed, nothing added
    assert "alpha_orders" in _code_names(cb) and "beta_orders" not in _code_names(cb)
    # named, the second folder is a repository of its own; both are kept
    named = ingest_path(cb, two, repo="p2-src")
    assert (named.repo, named.files_new, named.files_deleted) == ("p2-src", 1, 0)
    assert _active(cb) == {("src", "alpha.py"), ("p2-src", "beta.py")}
    # later ingests without a name find the name each folder was ingested under
    again = ingest_path(cb, two)
    assert (again.repo, again.files_unchanged, again.files_deleted) == ("p2-src", 1, 0)
    first_again = ingest_path(cb, one)
    assert (first_again.repo, first_again.files_unchanged, first_again.files_deleted) == (
        "src",
        1,
        0,
    )
    assert _active(cb) == {("src", "alpha.py"), ("p2-src", "beta.py")}
    # a name given explicitly is refused the same way when another folder holds it
    with pytest.raises(RepositoryNameTakenError):
        ingest_path(cb, two, repo="src")
    assert _active(cb) == {("src", "alpha.py"), ("p2-src", "beta.py")}
    places = recorded_places(cb.store, cb.project)
    assert {n: p.root for n, p in places.items()} == {"src": str(one), "p2-src": str(two)}
    # forgetting the whole project forgets where its repositories were
    cb.forget(whole_project=True)
    assert recorded_places(cb.store, cb.project) == {}
    assert ingest_path(cb, two).repo == "src"


def test_the_same_folder_again_updates_and_removes_its_own_files(
    cb: ContextBase, tmp_path: Path
) -> None:
    one, two = _two_src_folders(tmp_path)
    _write(one, {"gamma.py": "def gamma_orders():\n    return 3\n"})
    ingest_path(cb, one)
    ingest_path(cb, two, repo="other")
    (one / "gamma.py").unlink()
    _write(one, {"alpha.py": "def alpha_orders_v2():\n    return 11\n"})
    again = ingest_path(cb, one)
    assert (again.repo, again.files_changed, again.files_deleted) == ("src", 1, 1)
    assert [f.path for f in again.files if f.status == "deleted"] == ["gamma.py"]
    assert _active(cb) == {("src", "alpha.py"), ("other", "beta.py")}
    names = _code_names(cb)
    assert "alpha_orders_v2" in names and "gamma_orders" not in names and "beta_orders" in names


def test_packages_under_two_src_folders_are_two_repositories(
    cb: ContextBase, tmp_path: Path
) -> None:
    """A package is stored under its parent (`src`), and deletion is limited to the package's
    own path: two packages of different names shared `src` without harm, two of the same
    name took each other's modules for deleted ones. Both are now told apart by folder."""
    one = _write(tmp_path / "a" / "src" / "pkg", {"__init__.py": "", "m1.py": "X = 1\n"})
    two = _write(tmp_path / "b" / "src" / "pkg", {"__init__.py": "", "m2.py": "Y = 2\n"})
    assert ingest_path(cb, one).repo_root == str(one.parent)
    with pytest.raises(RepositoryNameTakenError) as caught:
        ingest_path(cb, two)
    assert caught.value.held_by == str(one.parent)
    assert ingest_path(cb, two, repo="b").files_deleted == 0
    assert _active(cb) == {
        ("src", "pkg/__init__.py"),
        ("src", "pkg/m1.py"),
        ("b", "pkg/__init__.py"),
        ("b", "pkg/m2.py"),
    }


def _git_checkout(root: Path, remote: str) -> Path:
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "remote", "add", "origin", remote], check=True)
    return root


def test_a_checkout_of_the_same_remote_elsewhere_is_the_same_repository(
    cb: ContextBase, tmp_path: Path
) -> None:
    first = _write(tmp_path / "old" / "tools", {"a.md": "# A\n\nOsprey.\n", "b.md": "# B\n"})
    _git_checkout(first, "https://someone:secret-token@github.com/acme/tools.git")
    assert ingest_path(cb, first).repo == "tools"
    moved = tmp_path / "new" / "tools-checkout"
    moved.parent.mkdir()
    shutil.move(str(first), str(moved))
    (moved / "b.md").unlink()
    subprocess.run(
        ["git", "-C", str(moved), "remote", "set-url", "origin", "git@github.com:acme/tools"],
        check=True,
    )
    report = ingest_path(cb, moved)
    assert (report.repo, report.moved_from, report.repo_root) == ("tools", str(first), str(moved))
    assert (report.files_unchanged, report.files_deleted) == (1, 1)
    assert _active(cb) == {("tools", "a.md")}
    place = recorded_places(cb.store, cb.project)["tools"]
    assert (place.root, place.remote) == (str(moved), "github.com/acme/tools")
    history = cb.store.state_history(cb.project, REPOSITORY_SCOPE, "", "tools")
    assert [h.new_value["root"] for h in history] == [str(first), str(moved)]
    for fact in cb.store.get_state(cb.project, REPOSITORY_SCOPE, ""):
        assert "secret-token" not in str(fact.value)  # credentials are not recorded
    # another remote whose name is also `tools` is another repository
    fork = _write(tmp_path / "fork" / "tools", {"c.md": "# C\n"})
    _git_checkout(fork, "https://github.com/other/tools.git")
    with pytest.raises(RepositoryNameTakenError):
        ingest_path(cb, fork)
    assert _active(cb) == {("tools", "a.md")}


def test_a_folder_without_a_remote_that_moved_says_so(cb: ContextBase, tmp_path: Path) -> None:
    old = _write(tmp_path / "old" / "notes", {"a.md": "# A\n\nOsprey.\n", "b.md": "# B\n"})
    ingest_path(cb, old)
    new = tmp_path / "new" / "notes"
    new.parent.mkdir()
    shutil.move(str(old), str(new))
    (new / "b.md").unlink()
    with pytest.raises(RepositoryNameTakenError):
        ingest_path(cb, new)  # nothing tells it from another folder named alike
    assert _active(cb) == {("notes", "a.md"), ("notes", "b.md")}
    report = ingest_path(cb, new, moved=True)
    assert (report.repo, report.moved_from, report.repo_root) == ("notes", str(old), str(new))
    assert (report.files_unchanged, report.files_deleted) == (1, 1)
    assert _active(cb) == {("notes", "a.md")}
    assert ingest_path(cb, new).files_unchanged == 1  # recorded there now


def test_a_folder_moved_under_another_name_is_not_stored_twice(
    cb: ContextBase, tmp_path: Path
) -> None:
    old = _write(tmp_path / "r1", {"a.md": "# A\n\nOsprey.\n", "b.md": "# B\n"})
    ingest_path(cb, old)
    new = tmp_path / "r1moved"
    shutil.move(str(old), str(new))
    with pytest.raises(ValidationError) as caught:
        ingest_path(cb, new)  # its derived name is new: it would be a second copy
    assert caught.value.field == "moved"
    assert f"repository 'r1' was recorded at {old}, which is gone" in str(caught.value)
    assert "--moved --repo r1" in str(caught.value) and "--repo r1moved" in str(caught.value)
    assert _active(cb) == {("r1", "a.md"), ("r1", "b.md")}  # nothing was changed
    report = ingest_path(cb, new, moved=True, repo="r1")
    assert (report.repo, report.moved_from, report.files_unchanged) == ("r1", str(old), 2)
    assert _active(cb) == {("r1", "a.md"), ("r1", "b.md")}
    # asked for by name, a second repository is the caller's choice
    other = ingest_path(cb, _write(tmp_path / "copy", {"a.md": "# A\n"}), repo="copy")
    assert other.repo == "copy"


def test_a_name_whose_files_are_all_gone_is_free(cb: ContextBase, tmp_path: Path) -> None:
    one, two = _two_src_folders(tmp_path)
    ingest_path(cb, one)
    (one / "alpha.py").unlink()
    assert ingest_path(cb, one).files_deleted == 1
    report = ingest_path(cb, two)
    assert (report.repo, report.moved_from, report.files_new) == ("src", str(one), 1)
    assert _active(cb) == {("src", "beta.py")}


def test_a_repository_ingested_before_places_were_recorded_is_adopted(
    cb: ContextBase, tmp_path: Path
) -> None:
    """Its place is unknown: the next ingest under its name records its own folder, and
    from then on another folder is refused."""
    one, two = _two_src_folders(tmp_path)
    ingest_path(cb, one)
    assert cb.store.delete_state(cb.project, REPOSITORY_SCOPE, "", "src", None)
    assert recorded_places(cb.store, cb.project) == {}
    again = ingest_path(cb, one)
    assert (again.repo, again.files_unchanged, again.moved_from) == ("src", 1, None)
    assert recorded_places(cb.store, cb.project)["src"].root == str(one)
    with pytest.raises(RepositoryNameTakenError):
        ingest_path(cb, two)


def test_remote_identity() -> None:
    same = {
        remote_identity(url)
        for url in (
            "https://github.com/encode/httpx.git",
            "https://user:token@GitHub.com/encode/httpx",
            "https://user:p@ss:word@github.com/encode/httpx/",
            "ssh://git@github.com:22/encode/httpx.git",
            "git@github.com:encode/httpx.git",
            "github.com:encode/httpx/",
        )
    }
    assert same == {"github.com/encode/httpx"}
    assert remote_identity("/srv/git/tools.git") == "/srv/git/tools"
    assert remote_identity("file:///srv/git/tools.git") == "file:///srv/git/tools"
    assert remote_identity("C:\\repos\\tools") == "C:\\repos\\tools"
    assert "token" not in str(remote_identity("weird+scheme://user:token@/x"))
    assert remote_identity(None) is None and remote_identity("  ") is None


def test_moved_is_refused_while_the_recorded_folder_still_holds_the_files(
    cb: ContextBase, tmp_path: Path
) -> None:
    """A copy is not a move: taking `moved` at its word would hide every file of the
    folder still in place."""
    old = _write(tmp_path / "a" / "notes", {"a.md": "# A\n\nOsprey.\n", "b.md": "# B\n"})
    ingest_path(cb, old)
    copy = tmp_path / "b" / "notes"
    shutil.copytree(old, copy)
    with pytest.raises(ValidationError, match="still holds 2 of its files: it was not moved"):
        ingest_path(cb, copy, moved=True)
    assert _active(cb) == {("notes", "a.md"), ("notes", "b.md")}  # nothing was changed
