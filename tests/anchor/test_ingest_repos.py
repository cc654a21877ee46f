"""Several repositories in one project: entities keyed by repository and path, each ingest
touching only its own repository, the `repos` filter, and nothing read outside the root."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from ctxbase import ContextBase
from ctxbase.anchor.entities import write_entity
from ctxbase.anchor.ingest import anchor_file_text, ingest_path
from ctxbase.anchor.repository import default_repo_name, name_from_remote, unsafe_reason
from ctxbase.errors import RepositoryOverlapError, UnknownReposError, ValidationError
from ctxbase.model import Entity
from ctxbase.store.base import ItemFilter
from ctxbase.store.schema import TABLES

SECRET = "zanzibar-launch-code-4417"


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return root


def _two_repos(tmp_path: Path) -> tuple[Path, Path]:
    """Two folders with overlapping relative paths and a word of their own each."""
    a = _write(
        tmp_path / "a" / "sqlite-utils",
        {
            "README.md": "# sqlite-utils\n\nOverview: table upserts with flamingo transforms.\n",
            "src/__init__.py": '"""sqlite-utils."""\n\ndef flamingo_rows():\n    return 1\n',
            "docs/cli.md": "# CLI\n\nThe flamingo command line.\n",
        },
    )
    b = _write(
        tmp_path / "b" / "httpx",
        {
            "README.md": "# httpx\n\nOverview: an HTTP client with pelican transports.\n",
            "src/__init__.py": '"""httpx package."""\n\ndef pelican_send():\n    return 2\n',
            "docs/api.md": "# API\n\nThe pelican client API.\n",
        },
    )
    return a, b


def _files(cb: ContextBase) -> dict[tuple[str | None, str], Entity]:
    return {
        (e.properties.get("repo"), str(e.properties.get("path"))): e
        for e in cb.list_entities(type="file")
    }


def _owners(cb: ContextBase, query: str, **filters: object) -> set[str | None]:
    flt = ItemFilter(**filters) if filters else None  # type: ignore[arg-type]
    hits = cb.search(query, preset="keyword", filters=flt, top_k=50).results
    return {c.item.repo for c in hits}


def test_two_repositories_with_the_same_paths_keep_their_entities(
    cb: ContextBase, tmp_path: Path
) -> None:
    a, b = _two_repos(tmp_path)
    first = ingest_path(cb, a)
    second = ingest_path(cb, b)
    assert (first.repo, second.repo) == ("sqlite-utils", "httpx")
    assert second.files_deleted == 0 and second.units_removed == 0
    files = _files(cb)
    for repo in ("sqlite-utils", "httpx"):
        for rel in ("README.md", "src/__init__.py"):
            assert (repo, rel) in files, (repo, rel)
    assert files[("sqlite-utils", "README.md")].id != files[("httpx", "README.md")].id
    # both searchable, and each hit names its repository
    assert _owners(cb, "flamingo") == {"sqlite-utils"}
    assert _owners(cb, "pelican") == {"httpx"}
    code = [e for e in cb.list_entities(type="code") if e.properties["path"] == "src/__init__.py"]
    assert len(code) == 4  # a module and a function in each repository
    assert sorted(e.properties["repo"] for e in code) == ["httpx"] * 2 + ["sqlite-utils"] * 2
    # the repository filter restricts results
    assert _owners(cb, "overview", repos=("httpx",)) == {"httpx"}
    assert _owners(cb, "overview", repos=("sqlite-utils",)) == {"sqlite-utils"}
    assert _owners(cb, "overview") == {"httpx", "sqlite-utils"}
    assert _owners(cb, "flamingo", repos=("httpx",)) == set()
    both = ("httpx", "sqlite-utils")
    assert _owners(cb, "overview", repos=both, path_prefix="README") == set(both)
    # the vector layer honours it too
    cb.wait_for_embeddings()
    hits = cb.search("client transports", preset="semantic", filters=ItemFilter(repos=("httpx",)))
    assert hits.results and {c.item.repo for c in hits.results} == {"httpx"}


def test_reingesting_one_repository_removes_only_its_own_deleted_file(
    cb: ContextBase, tmp_path: Path
) -> None:
    a, b = _two_repos(tmp_path)
    ingest_path(cb, a)
    ingest_path(cb, b)
    (b / "README.md").unlink()
    again = ingest_path(cb, b)
    assert again.files_deleted == 1 and again.files_unchanged == 2
    assert [f.path for f in again.files if f.status == "deleted"] == ["README.md"]
    files = _files(cb)
    assert ("httpx", "README.md") not in files
    assert ("sqlite-utils", "README.md") in files
    assert _owners(cb, "overview") == {"sqlite-utils"}
    assert _owners(cb, "pelican") == {"httpx"}  # the rest of httpx is still there
    # and the first repository, re-ingested, finds nothing to change or delete
    untouched = ingest_path(cb, a)
    assert (untouched.files_unchanged, untouched.files_deleted) == (3, 0)


def test_repository_name_given_or_from_the_git_remote(cb: ContextBase, tmp_path: Path) -> None:
    root = _write(tmp_path / "checkout", {"README.md": "# Title\n\nOsprey notes.\n"})
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    git = ["git", "-C", str(root)]
    subprocess.run([*git, "remote", "add", "origin", "git@github.com:simonw/sqlite-utils.git"])
    assert ingest_path(cb, root).repo == "sqlite-utils"
    # the same files under a second name: refused unless both copies are asked for
    with pytest.raises(RepositoryOverlapError):
        ingest_path(cb, root, repo="fork")
    named = ingest_path(cb, root, repo="fork", allow_overlap=True)
    assert named.repo == "fork" and named.files_new == 1
    assert {r for r, _ in _files(cb)} == {"sqlite-utils", "fork"}
    with pytest.raises(ValidationError) as caught:
        ingest_path(cb, root, repo="a/b")
    assert caught.value.field == "repo"


def test_repository_names() -> None:
    assert name_from_remote("https://github.com/encode/httpx.git") == "httpx"
    assert name_from_remote("git@github.com:simonw/sqlite-utils") == "sqlite-utils"
    assert name_from_remote("/srv/git/tools.git/") == "tools"
    assert default_repo_name(Path("/work/my:repo"), None) == "my-repo"
    assert default_repo_name(Path("/"), None) == "root"


def test_unsafe_names_are_refused(tmp_path: Path) -> None:
    base = tmp_path.resolve()
    (base / "ok.md").write_text("fine")
    assert unsafe_reason(base, "ok.md") is None
    for bad in ("../x", "a/../../x", "/etc/passwd", "a//b", "./ok.md", ""):
        assert unsafe_reason(base, bad) is not None, bad


def _secret_nowhere(cb: ContextBase) -> None:
    for table in TABLES:
        for rows in cb.store.export_rows(cb.project, table):
            dumped = json.dumps(rows, default=str, ensure_ascii=False)
            assert SECRET not in dumped, table


def test_links_out_of_the_root_store_nothing_of_their_target(
    cb: ContextBase, tmp_path: Path
) -> None:
    outside = _write(tmp_path / "outside", {"secret.txt": f"{SECRET}\n", "dir/s.md": SECRET})
    root = _write(tmp_path / "repo", {"README.md": "# Repo\n\nHeron docs.\n"})
    os.symlink("../outside/secret.txt", root / "notes.md")
    os.symlink(outside / "dir", root / "linked")
    os.symlink("README.md", root / "again.md")  # inside the root: not followed either
    report = ingest_path(cb, root)
    reasons = dict(report.skipped)
    assert "outside the repository" in reasons["notes.md"]
    assert "outside the repository" in reasons["linked"]
    assert "README.md inside the repository" in reasons["again.md"]
    assert report.files_new == 1 and report.files_skipped == 3
    _secret_nowhere(cb)
    assert cb.search(SECRET, preset="keyword").results == []
    assert _owners(cb, "heron") == {"repo"}


def test_links_out_of_a_git_checkout_are_skipped(cb: ContextBase, tmp_path: Path) -> None:
    _write(tmp_path / "outside", {"secret.txt": f"{SECRET}\n"})
    root = _write(tmp_path / "repo", {"README.md": "# Repo\n\nHeron docs.\n"})
    os.symlink("../outside/secret.txt", root / "notes.md")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    report = ingest_path(cb, root)
    assert "outside the repository" in dict(report.skipped)["notes.md"]
    _secret_nowhere(cb)


def test_files_ingested_before_repositories_are_replaced_not_duplicated(
    cb: ContextBase, tmp_path: Path
) -> None:
    """Entities written the way ingest wrote them before (ids keyed by path alone, no `repo`):
    an ingest listing the same path replaces them; other such files stay searchable."""
    root = _write(tmp_path / "app", {"README.md": "# App\n\nKestrel setup.\n"})
    for rel, text in (("README.md", "# App\n\nKestrel setup.\n"), ("old.md", "# Old\n\nIbis.\n")):
        _, specs, _, _ = anchor_file_text(text, rel, "markdown")
        units = {}
        for spec in specs:
            assert "repo" not in spec.properties
            write_entity(cb, _entity(cb, spec.id, spec.type, spec.name, spec.text, spec.properties))
            units[spec.id] = [spec.unit_hash, spec.place_hash]
        props = {"path": rel, "content_hash": "x", "status": "text", "units": units}
        write_entity(cb, _entity(cb, f"file:legacy-{len(rel)}", "file", rel, "", props))
    assert _owners(cb, "kestrel") == {None}
    report = ingest_path(cb, root)
    assert report.legacy_replaced == 1 and report.files_new == 1
    files = _files(cb)
    assert set(files) == {("app", "README.md"), (None, "old.md")}
    assert _owners(cb, "kestrel") == {"app"}  # once, from the repository's own entities
    hits = cb.search("kestrel", preset="keyword", top_k=50).results
    assert len({c.item.owner_id for c in hits if c.item.type == "section"}) == 1
    assert _owners(cb, "ibis") == {None}  # unknown repository: left as it was
    assert _owners(cb, "ibis", repos=("app",)) == set()


def _entity(cb: ContextBase, eid: str, etype: str, name: str, text: str, props: object) -> Entity:
    return Entity(
        id=eid,
        project_id=cb.project,
        type=etype,
        name=name,
        text=text,
        properties=dict(props),  # type: ignore[call-overload]
        version=1,
    )


def _assembled_repos(cb: ContextBase, **kw: object) -> tuple[set[str | None], list[str]]:
    ctx = cb.assemble_context(
        agent_role="coder", user_intent="flamingo pelican overview", max_tokens=4000, **kw
    )
    entries = [*ctx.documents, *ctx.code_snippets]
    dropped = [d["reason"] for d in ctx.trace["dropped"]]
    return {e.get("repo") for e in entries}, dropped


def test_assembly_can_name_the_repository(cb: ContextBase, tmp_path: Path) -> None:
    a, b = _two_repos(tmp_path)
    ingest_path(cb, a)
    ingest_path(cb, b)
    cb.wait_for_embeddings()
    both, dropped = _assembled_repos(cb)
    assert both == {"httpx", "sqlite-utils"} and "other repository" not in dropped
    only, dropped = _assembled_repos(cb, repos=["httpx"])
    assert only == {"httpx"} and "other repository" in dropped
    with pytest.raises(ValidationError) as caught:
        cb.assemble_context(agent_role="coder", user_intent="x", repos="httpx")  # type: ignore[arg-type]
    assert caught.value.field == "repos"


def test_links_and_mentions_stay_in_their_own_repository(cb: ContextBase, tmp_path: Path) -> None:
    readme = "# {0}\n\nRead the [guide](docs/guide.md), then src/helpers.py for {0}.\n"
    for name in ("left", "right"):
        _write(
            tmp_path / name,
            {
                "README.md": readme.format(name),
                "docs/guide.md": f"# Guide\n\nHow {name} works.\n",
                "src/helpers.py": "def shared_helper_name():\n    return 0\n",
            },
        )
        ingest_path(cb, tmp_path / name)
    entities = {e.id: e for t in ("section", "document", "file") for e in cb.list_entities(type=t)}
    rels = [
        r
        for r in cb.relationships(types=["REFERENCES"])
        if r.from_id in entities and r.to_id in entities
    ]
    rules = {r.properties.get("rule") or r.source for r in rels}
    assert any("cites" in str(x) for x in rules) and any("mentions" in str(x) for x in rules)
    for r in rels:
        assert entities[r.from_id].properties["repo"] == entities[r.to_id].properties["repo"], r


def test_a_fifo_is_skipped_without_blocking(cb: ContextBase, tmp_path: Path) -> None:
    root = _write(tmp_path / "repo", {"README.md": "# Repo\n\nHeron docs.\n"})
    os.mkfifo(root / "pipe.txt")
    report = ingest_path(cb, root)
    assert dict(report.skipped)["pipe.txt"] == "not a regular file"
    assert report.files_new == 1


def test_a_version_2_database_gains_the_repo_column(tmp_path: Path) -> None:
    """Items stored before schema v3 have no repository: still found, never by a repo filter."""
    import sqlite3

    import ctxbase
    from ctxbase.store.base import SCHEMA_VERSION

    db = tmp_path / "old.db"
    root = _write(tmp_path / "app", {"README.md": "# App\n\nKestrel setup.\n"})
    with ctxbase.open(str(db), project="p", embedder=None) as cb:
        cb.ingest(str(root))
    conn = sqlite3.connect(db)
    conn.execute("ALTER TABLE items DROP COLUMN repo")
    conn.execute("UPDATE meta SET value='2' WHERE key='schema_version'")
    conn.commit()
    conn.close()
    with ctxbase.open(str(db), project="p", embedder=None) as cb:
        assert cb.store.schema_version() == SCHEMA_VERSION
        assert _owners(cb, "kestrel") == {None}
        # the repository is recorded as ingested (a search under it is no typo), but no
        # item of it names it: the filter finds none of them
        assert _owners(cb, "kestrel", repos=("app",)) == set()
        with pytest.raises(UnknownReposError, match="its repositories: app"):
            _owners(cb, "kestrel", repos=("ap",))  # a typo names what the project has
        again = cb.ingest(str(root))  # an unchanged file keeps its items as they were
        assert again.files_unchanged == 1


def test_without_a_remote_the_repository_is_the_folder_paths_are_relative_to(
    cb: ContextBase, tmp_path: Path
) -> None:
    # package metadata is not read: the checkout's folder names the repository
    checkout = _write(
        tmp_path / "checkout-7",
        {
            "pyproject.toml": '[project]\nname = "coolpkg"\n',
            "coolpkg/__init__.py": "def cormorant():\n    return 1\n",
        },
    )
    assert ingest_path(cb, checkout).repo == "checkout-7"
    # a Python package is stored under its parent, as imports name it: the same repository
    package = ingest_path(cb, checkout / "coolpkg")
    assert (package.repo, package.files_unchanged) == ("checkout-7", 1)
    # in a git checkout without a remote, a subfolder belongs to the top level's repository
    top = _write(tmp_path / "tool", {"lib/m.py": "def heron():\n    return 2\n"})
    subprocess.run(["git", "init", "-q", str(top)], check=True)
    assert ingest_path(cb, top / "lib").repo == "tool"
    assert {(r, p) for r, p in _files(cb)} == {
        ("checkout-7", "pyproject.toml"),
        ("checkout-7", "coolpkg/__init__.py"),
        ("tool", "lib/m.py"),
    }
