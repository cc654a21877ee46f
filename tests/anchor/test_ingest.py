"""Repository ingestion: the ctxbase tree itself, incremental re-ingest, bad files, ignores."""

from __future__ import annotations

import ast
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest

import ctxbase
from ctxbase import ContextBase
from ctxbase.anchor.gitignore import compile_gitignore, is_ignored, walk_files
from ctxbase.anchor.ingest import ingest_path
from ctxbase.anchor.python_code import module_name_for_path

SOURCE = Path(ctxbase.__file__).parent


def _copy_tree(dst: Path) -> Path:
    target = dst / "ctxbase"
    shutil.copytree(SOURCE, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return target


def _open(tmp_path: Path, name: str = "x.db", **kw: object) -> ContextBase:
    return ctxbase.open(str(tmp_path / name), project="p", embedder="hash", **kw)


@pytest.fixture(scope="module")
def tree_ingest(tmp_path_factory: pytest.TempPathFactory) -> tuple[ContextBase, Path, object]:
    tmp = tmp_path_factory.mktemp("tree")
    root = _copy_tree(tmp)
    cb = _open(tmp, background_embedding=False)
    seen: list[tuple[int, int]] = []
    report = ingest_path(cb, root, progress=lambda done, total, path: seen.append((done, total)))
    assert seen[-1][0] == seen[-1][1] == report.files_total
    return cb, root, report


def _own_nodes(func: ast.FunctionDef) -> list[ast.AST]:
    """Nodes of a function body, not entering nested functions or classes (their own units)."""
    out: list[ast.AST] = []
    nested = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    stack: list[ast.AST] = [n for n in func.body if not isinstance(n, nested)]
    while stack:
        node = stack.pop()
        out.append(node)
        stack.extend(c for c in ast.iter_child_nodes(node) if not isinstance(c, nested))
    return out


def _ast_counts(root: Path) -> tuple[Counter[str], set[tuple[str, str]]]:
    """Independent count of definitions, and (caller, callee) pairs of same-module calls."""
    counts: Counter[str] = Counter()
    pairs: set[tuple[str, str]] = set()
    for path in root.rglob("*.py"):
        module = module_name_for_path(str(path.relative_to(root.parent)))
        tree = ast.parse(path.read_text("utf-8"))
        top_functions = {
            n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                counts["class"] += 1
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                counts["function"] += 1
        for node in tree.body:
            if not isinstance(node, ast.FunctionDef):
                continue
            for call in _own_nodes(node):
                if (
                    isinstance(call, ast.Call)
                    and isinstance(call.func, ast.Name)
                    and call.func.id in top_functions
                    and call.func.id != node.name
                ):
                    pairs.add((f"{module}.{node.name}", f"{module}.{call.func.id}"))
    return counts, pairs


def test_ctxbase_tree_counts_match_an_ast_walk(tree_ingest: tuple) -> None:
    cb, root, report = tree_ingest
    counts, pairs = _ast_counts(root)
    # the Python units (the tree also ships the web console's JavaScript)
    python = [e for e in cb.list_entities(type="code") if e.properties["path"].endswith(".py")]
    kinds = Counter(e.properties.get("kind") for e in python)
    assert kinds["class"] == counts["class"]
    assert kinds["function"] + kinds["method"] == counts["function"]
    assert kinds["module"] == sum(1 for p in root.rglob("*.py") if p.stat().st_size)
    assert report.errors == [] and report.files_failed == 0

    by_symbol = {e.properties["symbol"]: e.id for e in cb.list_entities(type="code")}
    calls = {(r.from_id, r.to_id) for r in cb.relationships(types=["CALLS"])}
    missing = [p for p in pairs if (by_symbol[p[0]], by_symbol[p[1]]) not in calls]
    assert len(pairs) > 50 and missing == []
    rel_counts = Counter(r.type for r in cb.relationships())
    assert rel_counts["CONTAINS"] == report.units_total
    assert rel_counts["IMPORTS"] > 100 and rel_counts["INHERITS"] > 5
    assert rel_counts["CALLS"] > len(pairs)


def test_ctxbase_tree_known_edges(tree_ingest: tuple) -> None:
    cb, _, _ = tree_ingest
    code = {e.properties["symbol"]: e for e in cb.list_entities(type="code")}
    upsert = code["ctxbase.knowledge_graph.GraphMethods.upsert_entity"]
    write = code["ctxbase.contextbase.ContextBase._insert_events"]
    items = code["ctxbase.retrieve.indexing.event_items"]
    out = {r.to_id: r for r in cb.relationships(write.id, direction="out", types=["CALLS"])}
    assert out[items.id].confidence == 0.95 and out[items.id].source == "auto:calls"
    sqlite_store = code["ctxbase.store.sqlite.SQLiteStore"]
    store_base = code["ctxbase.store.base.Store"]
    inherits = cb.relationships(sqlite_store.id, direction="out", types=["INHERITS"])
    assert store_base.id in {r.to_id for r in inherits}
    # The class unit holds its own lines, not its methods' bodies.
    assert "def upsert_entity" in code["ctxbase.knowledge_graph.GraphMethods"].text
    assert "self.store.upsert_entity(" not in code["ctxbase.knowledge_graph.GraphMethods"].text
    assert upsert.properties["path"] == "ctxbase/knowledge_graph.py"
    assert upsert.properties["line_start"] < upsert.properties["line_end"]


def test_reingest_unchanged_is_a_no_op(tree_ingest: tuple) -> None:
    cb, root, first = tree_ingest
    again = ingest_path(cb, root)
    assert again.files_unchanged == first.files_new
    assert again.units_written == again.units_moved == again.relations_written == 0


def test_incremental_reingest_touches_only_the_changed_file(tmp_path: Path) -> None:
    root = _copy_tree(tmp_path)
    cb = _open(tmp_path, background_embedding=False)
    first = ingest_path(cb, root)
    cb.wait_for_embeddings()
    assert cb.store.pending_embeddings(cb.embedder.name, 10) == []  # type: ignore[union-attr]

    target = root / "anchor" / "plaintext.py"
    source = target.read_text("utf-8")
    # Change one function body and add one function at the end (nothing moves).
    changed = source.replace(
        'raise ValueError(f"max_chars must be positive (got {max_chars})")',
        'raise ValueError(f"max_chars must be at least 1 (got {max_chars})")',
    )
    assert changed != source
    changed += "\n\ndef chunk_count(text: str) -> int:\n    return len(chunk_text(text))\n"
    target.write_text(changed, "utf-8")

    second = ingest_path(cb, root)
    assert (second.files_changed, second.files_new) == (1, 0)
    assert second.files_unchanged == first.files_new - 1
    changed_file = [f for f in second.files if f.status == "changed"]
    assert [f.path for f in changed_file] == ["ctxbase/anchor/plaintext.py"]
    written = {e.properties["symbol"] for e in cb.store.get_entities("p", second.written_ids)}
    assert written == {
        "ctxbase.anchor.plaintext",  # the module's own lines gained a function header
        "ctxbase.anchor.plaintext.chunk_text",
        "ctxbase.anchor.plaintext.chunk_count",
    }
    assert second.units_moved == 0
    pending = cb.store.pending_embeddings(cb.embedder.name, 1000)  # type: ignore[union-attr]
    pending_owners = {item_id.split("#")[0] for _, item_id, _ in pending}
    # Only the re-written units wait for vectors (and the file's summary, which now names
    # the new function); the old version kept its vector.
    file_id = next(e.id for e in cb.list_entities(type="file", name=changed_file[0].path))
    assert pending_owners == {*second.written_ids, file_id}

    chunk_text = cb.get_entity(second.written_ids[1])
    assert chunk_text.version == 2
    old = cb.store.get_entities("p", [f"{chunk_text.id}@v1"])[0]
    assert old.latest is False and "must be positive" in old.text
    modifies = cb.relationships(chunk_text.id, direction="out", types=["MODIFIES"])
    assert [(r.to_id, r.source) for r in modifies] == [(old.id, "auto:version")]
    hits = cb.search("max_chars must be positive", preset="keyword").results
    assert all(not h.item.owner_id.endswith("@v1") for h in hits)
    hits_all = cb.search("max_chars must be positive", preset="keyword", latest_only=False)
    assert any(h.item.owner_id == old.id for h in hits_all.results)


def test_lines_moved_keep_vectors_and_removed_units_are_soft_deleted(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "m.py").write_text(
        "def alpha_one():\n    return 1\n\n\ndef beta_two():\n    return 2\n"
    )
    cb = _open(tmp_path, background_embedding=False)
    ingest_path(cb, root)
    cb.wait_for_embeddings()
    (root / "m.py").write_text("# header\n\n\ndef beta_two():\n    return 2\n")
    report = ingest_path(cb, root)
    assert report.units_removed == 1 and report.units_moved == 1
    names = {e.properties["symbol"] for e in cb.list_entities(type="code")}
    assert names == {"m", "m.beta_two"}
    beta = next(e for e in cb.list_entities(type="code") if e.name == "m.beta_two")
    assert beta.properties["line_start"] == 4
    pending = {i for _, i, _ in cb.store.pending_embeddings(cb.embedder.name, 100)}  # type: ignore[union-attr]
    assert beta.id not in pending  # moved, not re-embedded
    (root / "m.py").unlink()
    gone = ingest_path(cb, root)
    assert gone.files_deleted == 1
    assert cb.list_entities(type="code") == []


def test_bad_files_are_reported_with_reasons(tmp_path: Path) -> None:
    root = tmp_path / "bad"
    root.mkdir()
    (root / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4)
    (root / "blob.bin").write_bytes(b"\x00\x01\x02" * 100)
    (root / "huge.txt").write_text("x" * 5000)
    (root / "notes_gbk.txt").write_bytes("订单查询接口需要支持分页和缓存。".encode("gb18030"))
    (root / "latin.txt").write_bytes(bytes(range(0xA0, 0x100)) * 3)
    (root / "broken.py").write_text("def broken(:\n    pass\n")
    (root / "ok.py").write_text("def fine_function():\n    return 1\n")
    cb = _open(tmp_path)
    report = ingest_path(cb, root, max_file_bytes=4000)
    reasons = dict(report.skipped)
    assert reasons["logo.png"].startswith("binary: PNG")
    assert "NUL" in reasons["blob.bin"]
    assert "over the 4000 limit" in reasons["huge.txt"]
    assert "GB18030" in reasons["latin.txt"]
    fallbacks = dict(report.fallbacks)
    assert "SyntaxError" in fallbacks["broken.py"]
    assert report.errors == [] and report.files_new == 3
    gbk = next(e for e in cb.list_entities(type="file") if e.name == "notes_gbk.txt")
    assert gbk.properties["encoding"] == "gb18030"
    assert any("分页" in e.text for e in cb.list_entities(type="section"))
    broken = [e for e in cb.list_entities(type="code") if e.properties["path"] == "broken.py"]
    assert broken and all(e.properties.get("fallback") for e in broken)
    # A re-ingest still reports the skipped files, without writing anything.
    again = ingest_path(cb, root, max_file_bytes=4000)
    assert dict(again.skipped) == reasons and again.units_written == 0


def test_gitignore_patterns() -> None:
    rules = compile_gitignore("*.log\n!keep.log\nbuild/\n/top.txt\ndocs/**/draft*\n\\#odd\n")
    assert is_ignored(rules, "a/b/x.log", False)
    assert not is_ignored(rules, "a/keep.log", False)
    assert is_ignored(rules, "pkg/build", True)
    assert not is_ignored(rules, "pkg/build", False)  # a file named build is kept
    assert is_ignored(rules, "top.txt", False) and not is_ignored(rules, "a/top.txt", False)
    assert is_ignored(rules, "docs/x/y/draft1.md", False)
    assert is_ignored(rules, "#odd", False)
    nested = compile_gitignore("*.tmp\n", base="sub")
    assert is_ignored(nested, "sub/a.tmp", False) and not is_ignored(nested, "a.tmp", False)


def test_walk_respects_gitignore_and_skips_tool_folders(tmp_path: Path) -> None:
    root = tmp_path / "w"
    for rel in (
        "a.py",
        "debug.log",
        "out/gen.py",
        "sub/b.py",
        "sub/c.tmp",
        "node_modules/x/index.js",
        "__pycache__/a.cpython-311.pyc",
        "env/pyvenv.cfg",
        "env/lib/site.py",
    ):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("x = 1\n")
    (root / ".gitignore").write_text("*.log\nout/\n")
    (root / "sub" / ".gitignore").write_text("*.tmp\n")
    assert walk_files(root) == [".gitignore", "a.py", "sub/.gitignore", "sub/b.py"]


def test_git_repository_listing_and_commit(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "core.py").write_text("def core_function():\n    return 1\n")
    (root / "ignored.py").write_text("def nope():\n    pass\n")
    (root / ".gitignore").write_text("ignored.py\n")

    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
            cwd=root,
            capture_output=True,
            check=True,
            text=True,
        )
        return done.stdout.strip()

    git("init", "-q")
    git("add", "-A")
    git("commit", "-q", "-m", "init")
    head = git("rev-parse", "HEAD")
    (root / "pkg" / "untracked.py").write_text("def fresh_function():\n    return 2\n")
    cb = _open(tmp_path)
    report = ingest_path(cb, root / "pkg")
    assert report.git_commit == head
    paths = sorted(f.path for f in report.files)
    assert paths == ["pkg/core.py", "pkg/untracked.py"]
    core = next(e for e in cb.list_entities(type="code") if e.name == "pkg.core.core_function")
    assert core.properties["git_commit"] == head


def test_files_git_tracks_in_tool_folders_are_named_as_skipped(tmp_path: Path) -> None:
    """A committed .vscode/settings.json or a virtual environment is never ingested, and
    the report says so, file by file, rather than counting nothing."""
    root = tmp_path / "repo"
    for rel, text in {
        "app.py": "def main():\n    return 1\n",
        ".vscode/settings.json": '{"editor.tabSize": 4}\n',
        "venv/lib/site.py": "x = 1\n",
        "src/pkg.egg-info/PKG-INFO": "Name: pkg\n",
    }.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    for args in (["init", "-q"], ["add", "-f", "-A"], ["commit", "-q", "-m", "init"]):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=root,
                       check=True, capture_output=True)  # fmt: skip
    report = ingest_path(_open(tmp_path), root)
    assert (report.files_total, report.files_skipped) == (4, 3)
    assert report.skipped == [
        (".vscode/settings.json", "in a tool or dependency folder (.vscode/), never ingested"),
        ("src/pkg.egg-info/PKG-INFO",
         "in a tool or dependency folder (pkg.egg-info/), never ingested"),
        ("venv/lib/site.py", "in a tool or dependency folder (venv/), never ingested"),
    ]  # fmt: skip
    assert [f.path for f in report.files if f.status == "new"] == ["app.py"]


def test_the_gitignore_walk_lists_what_git_lists(tmp_path: Path) -> None:
    import shutil
    import subprocess

    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    root = tmp_path / "tree"
    files = [
        "a.log", "keep.log", "top.txt", "x/top.txt", "build/out.bin", "x/build/out.bin",
        "src/build", "docs/draft1.md", "docs/a/b/draft2.md", "docs/final.md", "[abc].txt",
        "b.txt", "#odd", "sub/one.tmp", "sub/important.tmp", "sub/deep/two.tmp",
        "lib/a/x/b/c.py", "lib/a/b/d.py", "lib/keep.py", "name with space.md", "ünï.md",
    ]  # fmt: skip
    for rel in files:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x\n", encoding="utf-8")
    (root / ".gitignore").write_text(
        "*.log\n!keep.log\nbuild/\n/top.txt\ndocs/**/draft*\n[abc].txt\n\\#odd\nlib/a/**/b\n"
    )
    (root / "sub" / ".gitignore").write_text("*.tmp\n!important.tmp\n")
    walked = set(walk_files(root))
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    listed = subprocess.run(
        ["git", "-c", "core.quotepath=off", "ls-files", "-co", "--exclude-standard", "-z"],
        cwd=root,
        check=True,
        capture_output=True,
    ).stdout.decode("utf-8")
    from_git = {p for p in listed.split("\0") if p}
    assert walked == from_git
    assert "keep.log" in walked and "a.log" not in walked
    assert "b.txt" not in walked and "[abc].txt" in walked  # a class, not a literal name


def test_a_file_size_limit_under_one_byte_is_refused_and_removes_nothing(tmp_path: Path) -> None:
    # `ingest --max-file-bytes -1` skipped every file as too big, and so removed every
    # entity an earlier ingest had stored for them.
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "app.py").write_text("def f():\n    return 1\n", encoding="utf-8")
    with ctxbase.open(str(tmp_path / "i.db"), project="p", embedder=None) as cb:
        first = cb.ingest(str(tmp_path / "repo"))
        stored = len(cb.list_entities())
        assert first.files_new == 1 and stored > 0
        for bad in (-1, 0, 1.5, True):
            with pytest.raises(ctxbase.ValidationError) as err:
                cb.ingest(str(tmp_path / "repo"), max_file_bytes=bad)
            assert err.value.field == "max_file_bytes"
        assert len(cb.list_entities()) == stored
