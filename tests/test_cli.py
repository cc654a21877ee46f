"""The `ctxbase` command end to end on a real SQLite file (fast "hash" embedder)."""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import ctxbase
from ctxbase.capture.bus import BusConfig
from ctxbase.cli import main
from ctxbase.demo import run_demo
from ctxbase.store import open_store
from ctxbase.store.base import SCHEMA_VERSION


def _run(capsys: Any, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_demo_prints_the_causal_chain_and_an_assembled_context(tmp_path: Path, capsys: Any) -> None:
    code, out, _ = _run(capsys, "--db", str(tmp_path / "d.db"), "--embedder", "hash", "demo")
    assert code == 0
    assert "causal chain of the tool result" in out
    assert "<- tool_invocation" in out and "<- user_message" in out
    assert "assembled context" in out and "run_sql" in out


def test_demo_matches_the_question_by_meaning_too(tmp_path: Path) -> None:
    # The demo waits for its vectors: the day-3 question's hits carry a similarity, not
    # only a keyword rank (a search never waits for vectors by itself).
    lines: list[str] = []
    result = run_demo(str(tmp_path / "d.db"), embedder="hash", out=lines.append)
    assert result["embedded"] is True
    assert any(line.startswith("vectors: every event embedded by") for line in lines)
    with ctxbase.open(str(tmp_path / "d.db"), project="demo-shop", embedder="hash") as cb:
        trace = cb.get_trace(result["context_id"])
        assert cb.embedder is not None
        assert not cb.store.pending_embeddings(cb.embedder.name, 1, "demo-shop")
    found = [c["explain"] for c in trace["candidates"] if c.get("explain")]
    assert any(e["similarity"] is not None for e in found)


def test_capture_events_chain_search_forget(tmp_path: Path, capsys: Any) -> None:
    base = ["--db", str(tmp_path / "c.db"), "--project", "p", "--embedder", "hash"]
    code, first, _ = _run(capsys, *base, "capture", "--session", "s1", "--text", "订单查询要加缓存")
    assert code == 0
    first_id = first.strip()
    code, second, _ = _run(
        capsys,
        *base,
        "capture",
        "--session",
        "s1",
        "--type",
        "tool_result",
        "--text",
        "缓存命中率 12%",
        "--parent",
        first_id,
    )
    second_id = second.strip()
    code, out, _ = _run(capsys, *base, "events", "s1", "--json")
    assert [e["id"] for e in json.loads(out)] == [first_id, second_id]
    code, out, _ = _run(capsys, *base, "chain", second_id)
    assert code == 0 and "订单查询要加缓存" in out
    code, out, _ = _run(capsys, *base, "search", "缓存", "--preset", "keyword", "--json")
    assert {r["owner_id"] for r in json.loads(out)} == {first_id, second_id}
    # what the text lines show is in the JSON too: the type, and where it was said
    by_id = {r["owner_id"]: r for r in json.loads(out)}
    assert (by_id[second_id]["type"], by_id[second_id]["session_id"]) == ("tool_result", "s1")
    code, out, _ = _run(capsys, *base, "forget", "--session", "s1")
    assert code == 0 and json.loads(out)["removed"]["events"] == 2
    code, _, err = _run(capsys, *base, "chain", second_id)
    assert code == 3 and "not found" in err


def test_a_chain_shows_how_many_links_each_event_is_away(tmp_path: Path, capsys: Any) -> None:
    base = ["--db", str(tmp_path / "k.db"), "--embedder", "none"]

    def capture(kind: str, text: str, *parents: str) -> str:
        extra = [a for p in parents for a in ("--parent", p)]
        args = ["capture", "--session", "s", "--type", kind, "--text", text, *extra]
        return _run(capsys, *base, *args)[1].strip()

    ask = capture("user_message", "the cache is cold")
    plan = capture("assistant_message", "check the TTL", ask)
    call = capture("tool_invocation", "redis-cli TTL key", plan)
    code, out, _ = _run(capsys, *base, "chain", ask, "--down")
    lines = out.splitlines()[1:]
    assert code == 0 and lines[0].startswith("  -> assistant_message")
    assert lines[1].startswith("    -> tool_invocation")  # an effect of an effect
    code, out, _ = _run(capsys, *base, "chain", call, "--json")
    assert [(e["id"], e["depth"]) for e in json.loads(out)] == [(call, 0), (plan, 1), (ask, 2)]


def test_bad_input_exits_2_with_the_field(tmp_path: Path, capsys: Any) -> None:
    base = ["--db", str(tmp_path / "c.db"), "--embedder", "none"]
    code, _, err = _run(
        capsys, *base, "capture", "--session", "s1", "--type", "nope", "--text", "x"
    )
    assert code == 2 and "type" in err
    code, _, err = _run(
        capsys, *base, "capture", "--session", "s1", "--text", "x", "--parent", "ev_missing"
    )
    assert code == 2 and "error: --parent: 'ev_missing' does not exist" in err  # the option


def test_assemble_and_trace(tmp_path: Path, capsys: Any) -> None:
    base = ["--db", str(tmp_path / "a.db"), "--project", "p", "--embedder", "hash"]
    _run(capsys, *base, "capture", "--session", "s1", "--text", "The Redis TTL is 10 minutes")
    code, out, _ = _run(
        capsys, *base, "assemble", "what is the Redis TTL?", "--role", "coder", "--json"
    )
    payload = json.loads(out)
    assert code == 0 and payload["context_id"]
    assert any("10 minutes" in str(m.get("content")) for m in payload["messages"])
    code, out, _ = _run(capsys, *base, "trace", payload["context_id"])
    assert code == 0 and "policy" in out


def test_migrate_and_migrate_data(tmp_path: Path, capsys: Any) -> None:
    src = str(tmp_path / "src.db")
    dst = str(tmp_path / "dst.db")
    _run(
        capsys,
        "--db",
        src,
        "--project",
        "p",
        "--embedder",
        "none",
        "capture",
        "--session",
        "s",
        "--text",
        "hello",
    )
    code, out, _ = _run(capsys, "--db", src, "migrate")
    assert code == 0 and f"schema version {SCHEMA_VERSION}" in out
    code, out, _ = _run(capsys, "--project", "p", "migrate-data", "--from", src, "--to", dst)
    assert code == 0 and "events" in out
    code, out, _ = _run(
        capsys, "--db", dst, "--project", "p", "--embedder", "none", "events", "s", "--json"
    )
    assert [e["text"] for e in json.loads(out)] == ["hello"]
    bulk = str(tmp_path / "bulk.db")
    args = ("--project", "p", "migrate-data", "--bulk", "--from", src, "--to", bulk)
    code, out, _ = _run(capsys, *args)
    assert code == 0 and "differs" not in out


def test_the_installed_entry_point_runs() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ctxbase.cli", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and "assemble" in done.stdout


def test_ingest_reports_counts_and_skips(tmp_path: Path, capsys: Any) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "orders.py").write_text(
        "def recent_orders(db):\n    return db.query('SELECT * FROM orders')\n", encoding="utf-8"
    )
    (repo / "blob.bin").write_bytes(b"\x00\x01\x02binary")
    base = ["--db", str(tmp_path / "i.db"), "--project", "p", "--embedder", "hash"]
    code, out, _ = _run(capsys, *base, "ingest", str(repo))
    assert code == 0 and "1 new" in out and "blob.bin" in out
    code, out, _ = _run(capsys, *base, "ingest", str(repo))
    assert code == 0 and "1 unchanged" in out


def test_demo_runs_any_number_of_times_on_one_database(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Each run forgets the demo project and records it again: the tombstones of the last
    run must not swallow the new captures (they once did: "session 'day3-followup' not
    found" on every run after the first)."""
    db = str(tmp_path / "demo.db") if backend == "sqlite" else request.getfixturevalue("pg_url")
    src = str(Path(ctxbase.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    for run in (1, 2):
        done = subprocess.run(
            [sys.executable, "-m", "ctxbase", "--db", db, "--embedder", "hash", "demo"],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
        )
        assert done.returncode == 0, f"run {run}: {done.stderr}"
        assert "session day3-followup:" in done.stdout
        assert "<- tool_invocation" in done.stdout, f"run {run}"
    store = open_store(db)
    try:
        assert [e.seq for e in store.list_events("demo-shop", "day1-requirements")] == [
            1,
            2,
            3,
            4,
            5,
            6,
        ]
    finally:
        store.close()


def test_ingest_and_search_name_the_repository(tmp_path: Path, capsys: Any) -> None:
    base = ["--db", str(tmp_path / "r.db"), "--project", "p", "--embedder", "hash"]
    for name, word in (("one", "flamingo"), ("two", "pelican")):
        root = tmp_path / name
        root.mkdir()
        (root / "README.md").write_text(f"# {name}\n\nOverview of the {word}.\n", "utf-8")
        code, out, _ = _run(capsys, *base, "ingest", str(root), "--repo", f"r-{name}")
        assert code == 0 and "1 new" in out and f"(repository r-{name})" in out
    code, out, _ = _run(capsys, *base, "search", "overview", "--preset", "keyword", "--json")
    assert code == 0 and {r["repo"] for r in json.loads(out)} == {"r-one", "r-two"}
    code, out, _ = _run(
        capsys, *base, "search", "overview", "--preset", "keyword", "--repo", "r-two", "--json"
    )
    assert {(r["repo"], r["path"]) for r in json.loads(out)} == {("r-two", "README.md")}
    # a mistyped name beside a real one: exit 3 naming it, not the real one's hits alone
    code, out, err = _run(
        capsys, *base, "search", "overview", "--repo", "r-two", "--repo", "r-tow", "--json"
    )
    assert code == 3 and out == "" and "'r-tow'" in err and "r-one, r-two" in err, err
    code, out, _ = _run(
        capsys,
        *base,
        "assemble",
        "flamingo pelican",
        "--role",
        "coder",
        "--repo",
        "r-one",
        "--json",
    )
    docs = json.loads(out)["documents"]
    assert code == 0 and docs and {d["repo"] for d in docs} == {"r-one"}
    code, _, err = _run(capsys, *base, "ingest", str(tmp_path / "one"), "--repo", "a/b")
    assert code == 2 and "repo" in err


def test_ingest_refuses_files_another_repository_holds(tmp_path: Path, capsys: Any) -> None:
    """Two packages copied into one folder are repository `repos`; ingesting one of them
    again under another name once stored every symbol twice without a word."""
    base = ["--db", str(tmp_path / "o.db"), "--project", "lib", "--embedder", "hash"]
    for pkg, cls in (("sortedcontainers", "SortedList"), ("annotated_types", "Gt")):
        (tmp_path / "repos" / pkg).mkdir(parents=True)
        (tmp_path / "repos" / pkg / "__init__.py").write_text(f'"""{pkg}."""\n')
        (tmp_path / "repos" / pkg / "core.py").write_text(f"class {cls}:\n    pass\n")
        code, out, _ = _run(capsys, *base, "ingest", str(tmp_path / "repos" / pkg))
        assert code == 0 and "(repository repos)" in out
    code, out, _ = _run(capsys, *base, "status", "--json")
    before = {k: json.loads(out)[k] for k in ("entities", "search_units")}
    sc = str((tmp_path / "repos" / "sortedcontainers").resolve())
    code, out, err = _run(capsys, *base, "ingest", sc, "--repo", "sc")
    assert (code, out) == (2, "")
    assert err.startswith("error: path: repository 'repos' already holds 2 files of " + sc)
    assert (
        "Pass --repo repos to update them, forget 'repos' first (ctxbase forget --repo repos: "
        "all of its files) to store them as 'sc' alone, or pass --allow-overlap" in err
    )
    assert "repo=" not in err and "allow_overlap" not in err and len(err.splitlines()) == 1
    code, out, _ = _run(capsys, *base, "status", "--json")
    assert {k: json.loads(out)[k] for k in before} == before  # nothing written
    code, out, _ = _run(capsys, *base, "ingest", sc, "--repo", "sc", "--allow-overlap")
    assert code == 0 and "2 new" in out
    assert "(repository sc; 2 of its files also held by repos)" in out


def test_forget_repo_is_the_way_out_of_an_overlap(tmp_path: Path, capsys: Any) -> None:
    """The overlap refusal names `ctxbase forget --repo OLD`; doing so removes the old
    repository whole, and the folder is then ingested under its own name alone."""
    base = ["--db", str(tmp_path / "f.db"), "--project", "lib", "--embedder", "hash"]
    for pkg, cls in (("sortedcontainers", "SortedList"), ("annotated_types", "Gt")):
        (tmp_path / "repos" / pkg).mkdir(parents=True)
        (tmp_path / "repos" / pkg / "__init__.py").write_text(f'"""{pkg}."""\n')
        (tmp_path / "repos" / pkg / "core.py").write_text(f"class {cls}:\n    pass\n")
        assert _run(capsys, *base, "ingest", str(tmp_path / "repos" / pkg))[0] == 0
    sc = str((tmp_path / "repos" / "sortedcontainers").resolve())
    code, _, err = _run(capsys, *base, "ingest", sc, "--repo", "sc")
    assert code == 2 and "ctxbase forget --repo repos" in err
    code, out, _ = _run(capsys, *base, "entities", "--repo", "repos", "--json")
    held = json.loads(out)
    assert code == 0 and len(held) >= 4 and {e["repo"] for e in held} == {"repos"}
    code, out, err = _run(capsys, *base, "entities", "--repo", "rpos")
    assert (code, out) == (3, "") and "its repositories: repos" in err
    code, out, err = _run(capsys, *base, "forget", "--repo", "repos", "--soft")
    assert (code, out) == (2, "") and "cannot be hidden" in err
    code, out, err = _run(capsys, *base, "forget", "--repo", "rpos")
    assert (code, out) == (3, "") and "repository 'rpos' not found" in err

    code, out, _ = _run(capsys, *base, "forget", "--repo", "repos")

    report = json.loads(out)
    assert code == 0 and report["repos"] == ["repos"]
    assert report["removed"]["entities"] == len(held)
    code, out, _ = _run(capsys, *base, "entities", "--json")
    assert json.loads(out) == []
    code, out, _ = _run(capsys, *base, "entities", "--repo", "repos", "--json")
    assert (code, json.loads(out)) == (0, [])  # forgotten whole: no typo
    # again: forgotten before, no error (as a session), and nothing removed
    code, out, err = _run(capsys, *base, "forget", "--repo", "repos")
    report = json.loads(out)
    assert code == 0 and (report["repos"], report["already_forgotten"]) == ([], ["repos"])
    assert report["total"] == 0 and "already forgotten in project 'lib': repo 'repos'" in err
    code, out, _ = _run(capsys, *base, "ingest", sc, "--repo", "sc")
    assert code == 0 and "2 new" in out and "(repository sc)" in out


def test_version_and_global_options_after_the_command(tmp_path: Path, capsys: Any) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.startswith("ctxbase ")
    db = str(tmp_path / "g.db")
    code, out, _ = _run(
        capsys, "capture", "--session", "s", "--text", "hello after", "--db", db,
        "--project", "shop", "--embedder", "hash",
    )  # fmt: skip
    assert code == 0 and out.strip().startswith("ev_")
    code, out, _ = _run(capsys, "events", "s", "--db", db, "--project", "shop")
    assert code == 0 and "hello after" in out
    code, _, err = _run(capsys, "--db", db, "events", "s")  # another project: not found
    assert code == 3 and "error:" in err


def test_capture_reads_long_text_from_a_file_or_stdin(
    tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = ["--db", str(tmp_path / "t.db"), "--embedder", "hash"]
    body = "订单缓存 " * 60_000  # ~900 KB: too long for a command line
    path = tmp_path / "long.txt"
    path.write_text(body, encoding="utf-8")
    code, out, _ = _run(capsys, *base, "capture", "--session", "s", "--text-file", str(path))
    assert code == 0
    monkeypatch.setattr("sys.stdin", io.StringIO("from standard input"))
    code, _, _ = _run(capsys, *base, "capture", "--session", "s", "--text", "-")
    assert code == 0
    code, out, _ = _run(capsys, *base, "events", "s", "--json")
    texts = [e["text"] for e in json.loads(out)]
    assert texts == [body, "from standard input"]
    code, _, err = _run(capsys, *base, "capture", "--session", "s", "--text-file", "nope.txt")
    assert code == 3 and "nope.txt" in err
    code, _, err = _run(capsys, *base, "capture", "--session", "s", "--text-file", str(tmp_path))
    assert code == 2 and "is a directory, not a file" in err and "Traceback" not in err
    # a number too large for any database is an error line, not a driver's crash
    for args in (["events", "s", "--last", "9" * 20], ["entities", "--limit", "9" * 20]):
        code, _, err = _run(capsys, *base, *args)
        option = args[-2]  # named as typed, not as the library's parameter
        assert code == 2 and f"error: {option}: must be <= 9223372036854775807" in err, args


def test_read_text_loses_one_final_line_break_as_a_shell_does(
    tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = ["--db", str(tmp_path / "t.db"), "--embedder", "hash"]
    monkeypatch.setattr("sys.stdin", io.StringIO("echoed\n"))  # `echo echoed | ... --text -`
    assert _run(capsys, *base, "capture", "--session", "s", "--text", "-")[0] == 0
    path = tmp_path / "note.txt"
    path.write_bytes("第一行\r\n第二行\r\n\r\n".encode())  # a blank last line is kept
    assert _run(capsys, *base, "capture", "--session", "s", "--text-file", str(path))[0] == 0
    assert _run(capsys, *base, "capture", "--session", "s", "--text", "as typed\n")[0] == 0
    out = _run(capsys, *base, "events", "s", "--json")[1]
    texts = [e["text"] for e in json.loads(out)]
    assert texts == ["echoed", "第一行\n第二行\n", "as typed\n"]


def test_trace_finds_its_project_keys_take_the_global_project_and_policies_load(
    tmp_path: Path, capsys: Any
) -> None:
    db = str(tmp_path / "p.db")
    base = ["--db", db, "--embedder", "hash"]
    _run(capsys, *base, "--project", "shop", "capture", "--session", "s", "--text", "订单缓存")
    policies = tmp_path / "policies.yaml"
    policies.write_text(
        "version: 1\ninherit_presets: false\n"
        "policies:\n  - name: only\n    match: {default: true}\n"
    )
    code, out, _ = _run(
        capsys, *base, "--project", "shop", "assemble", "订单缓存", "--role", "coder",
        "--policies", str(policies), "--json",
    )  # fmt: skip
    assert code == 0
    context_id = json.loads(out)["context_id"]
    code, out, _ = _run(capsys, *base, "trace", context_id, "--json")  # no --project
    assert code == 0 and json.loads(out)["policy"] == "only"
    code, _, err = _run(capsys, *base, "assemble", "x", "--role", "coder", "--policies", "no.yaml")
    assert code == 3 and "no.yaml" in err
    code, out, _ = _run(capsys, *base, "--project", "shop", "keys", "create", "--json")
    assert code == 0 and json.loads(out)["projects"] == ["shop"]


def test_demo_writes_the_project_named_and_never_forgets_another(
    tmp_path: Path, capsys: Any
) -> None:
    db = str(tmp_path / "d.db")
    base = ["--db", db, "--embedder", "hash"]
    code, out, err = _run(capsys, *base, "--project", "mine", "demo")
    assert code == 0, err
    assert "ctxbase demo — project 'mine'" in out
    code, out, _ = _run(capsys, *base, "projects")
    assert out.split() == ["mine"]  # not demo-shop
    assert _run(capsys, *base, "demo", "--project", "mine")[0] == 0  # a re-run: its own data
    # a project with other data: refused before anything is forgotten
    assert (
        _run(capsys, *base, "--project", "shop", "capture", "--session", "s", "--text", "x")[0] == 0
    )
    code, _, err = _run(capsys, *base, "demo", "--project", "shop")
    assert code == 2 and "project 'shop' already holds data" in err
    code, out, _ = _run(capsys, *base, "--project", "shop", "events", "s", "--json")
    assert code == 0 and [e["text"] for e in json.loads(out)] == ["x"]


def test_project_is_refused_where_it_does_not_apply_and_filters_keys(
    tmp_path: Path, capsys: Any
) -> None:
    base = ["--db", str(tmp_path / "k.db"), "--embedder", "none"]
    for argv, why in (
        (["serve", "--no-auth", "--project", "x"], "serve serves every project"),
        (["--project", "x", "serve", "--no-auth"], "serve serves every project"),
        (["migrate", "--project", "x"], "the whole database"),
        (["--project", "x", "keys", "revoke", "k_1"], "a key is revoked by its id"),
        (["projects", "--project", "x"], "projects lists every project of the database"),
        (["--project", "x", "projects", "--json"], "every project of the database"),
    ):
        code, out, err = _run(capsys, *base, *argv)
        assert (code, out) == (2, ""), (argv, err)
        assert err.startswith("error: --project: does not apply: ") and why in err, err
    for command in (["serve"], ["migrate"], ["keys", "revoke"], ["projects"]):
        with pytest.raises(SystemExit):
            main([*command, "--help"])
        shown = " ".join(capsys.readouterr().out.split())
        assert "--project PROJECT refused: " in shown  # the help says so too
    shop = json.loads(_run(capsys, *base, "keys", "create", "--project", "shop", "--json")[1])
    every = json.loads(_run(capsys, *base, "keys", "create", "--project", "*", "--json")[1])
    _run(capsys, *base, "keys", "create", "--project", "blog")
    code, out, _ = _run(capsys, *base, "keys", "list", "--project", "shop", "--json")
    assert code == 0
    assert [k["key_id"] for k in json.loads(out)] == [shop["key_id"], every["key_id"]]
    code, out, _ = _run(capsys, *base, "--project", "shop", "keys", "list")
    assert len(out.splitlines()) == 2
    assert len(_run(capsys, *base, "keys", "list")[1].splitlines()) == 3
    code, out, err = _run(capsys, *base, "keys", "list", "--project", "nosuch")
    assert code == 0 and err == ""  # the '*' key may use every project, and only it
    assert len(out.splitlines()) == 1 and every["key_id"] in out


def test_serve_on_a_busy_port_is_its_own_error(tmp_path: Path, capsys: Any) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        code, _, err = _run(
            capsys, "--db", str(tmp_path / "s.db"), "serve", "--no-auth", "--port", str(port)
        )
    assert code == 5 and f"127.0.0.1:{port}" in err and "Traceback" not in err


def test_projects_sessions_entities_and_status(tmp_path: Path, capsys: Any) -> None:
    base = ["--db", str(tmp_path / "l.db"), "--embedder", "hash", "--project", "shop"]
    _run(capsys, *base, "capture", "--session", "s1", "--text", "订单缓存")
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "README.md").write_text("# Redis 规范\n\n订单查询缓存五分钟。\n")
    _run(capsys, *base, "ingest", str(tmp_path / "repo"))
    code, out, _ = _run(capsys, *base[:-2], "projects", "--json")  # every project: no --project
    assert code == 0 and json.loads(out) == ["shop"]
    code, out, _ = _run(capsys, *base, "sessions", "--json")
    assert code == 0 and [s["session_id"] for s in json.loads(out)] == ["s1"]
    docs_only = ["--db", str(tmp_path / "d.db"), "--embedder", "hash", "--project", "docs"]
    _run(capsys, *docs_only, "ingest", str(tmp_path / "repo"))
    code, out, err = _run(capsys, *docs_only, "sessions")  # none: said, not nothing
    assert (code, out) == (0, "") and "no sessions in project 'docs'" in err
    code, out, _ = _run(capsys, *base, "entities", "--json")
    assert code == 0 and any(e["type"] == "document" for e in json.loads(out))
    code, out, _ = _run(capsys, *base, "entities", "--type", "document")
    assert code == 0 and "document" in out
    # A type nothing has ("code_symbol" for "code") names the types there are.
    code, out, err = _run(capsys, *base, "entities", "--type", "code_symbol")
    assert code == 0 and out == "" and "'code_symbol'" in err and "document" in err
    code, out, _ = _run(capsys, *base, "status", "--json")
    status = json.loads(out)
    assert code == 0 and status["sessions"] == 1 and status["search_units"] >= 2
    assert status["schema_version"] == SCHEMA_VERSION and status["pending_vectors"] >= 0
    assert (status["events"], status["hidden_events"]) == (1, 0)
    event = json.loads(_run(capsys, *base, "events", "s1", "--json")[1])[0]["id"]
    assert _run(capsys, *base, "forget", "--soft", "--event", event)[0] == 0
    status = json.loads(_run(capsys, *base, "status", "--json")[1])
    assert (status["events"], status["hidden_events"]) == (0, 1)


def test_listings_show_a_multi_line_text_on_its_own_row(tmp_path: Path, capsys: Any) -> None:
    # A pasted log or code block (or `echo ... | capture --text -`'s trailing newline) must
    # not spill over the rows that follow it.
    base = ["--db", str(tmp_path / "m.db"), "--project", "p", "--embedder", "hash"]
    code, first, _ = _run(
        capsys, *base, "capture", "--session", "s1", "--text", "cache\n\nis off\n"
    )
    code, second, _ = _run(
        capsys, *base, "capture", "--session", "s1", "--text", "why\nno cache", "--parent",
        first.strip(),
    )  # fmt: skip
    code, out, _ = _run(capsys, *base, "events", "s1")
    assert code == 0 and out.splitlines()[0].endswith("cache is off")
    assert len(out.splitlines()) == 2
    code, out, _ = _run(capsys, *base, "chain", second.strip())
    assert code == 0 and len(out.splitlines()) == 2 and out.splitlines()[0].endswith("why no cache")
    code, out, _ = _run(capsys, *base, "search", "cache", "--preset", "keyword")
    assert code == 0 and len(out.splitlines()) == 2


def test_feedback_marks_a_memory_and_shows_it(tmp_path: Path, capsys: Any) -> None:
    base = ["--db", str(tmp_path / "f.db"), "--project", "p", "--embedder", "hash"]
    code, out, _ = _run(capsys, *base, "capture", "--session", "s1", "--text", "cache ttl 60s")
    assert code == 0
    event_id = out.strip()
    code, out, _ = _run(capsys, *base, "feedback", event_id, "wrong", "--note", "it is 300s")
    assert code == 0 and "wrong (confidence 0)" in out and "it is 300s" in out
    code, out, _ = _run(capsys, *base, "feedback", event_id, "neutral", "--by", "li")
    assert code == 0 and "by li" in out
    code, out, _ = _run(capsys, *base, "feedback", event_id, "--json")
    shown = json.loads(out)
    assert shown["current"]["label"] == "neutral"
    assert [h["label"] for h in shown["history"]] == ["wrong", "neutral"]
    code, out, _ = _run(capsys, *base, "feedback", event_id)
    assert code == 0 and "neutral" in out and "before:" in out
    code, _, err = _run(capsys, *base, "feedback", event_id, "great")
    assert code == 2 and "label" in err
    code, _, err = _run(capsys, *base, "feedback", "ev_nosuch", "liked")
    assert code == 3
    code, _, err = _run(capsys, *base, "feedback", event_id, "--note", "x")
    assert code == 2


def test_search_shows_a_rating_and_names_what_a_wrong_rating_left_out(
    tmp_path: Path, capsys: Any
) -> None:
    base = ["--db", str(tmp_path / "r.db"), "--project", "p", "--embedder", "hash"]
    ids = {}
    for name, text in (
        ("old", "the cache TTL is 60 seconds"),
        ("new", "the cache TTL is 300 seconds"),
        ("keys", "the cache keys use the order id"),
        ("boot", "the cache is warmed at boot"),
    ):
        ids[name] = _run(capsys, *base, "capture", "--session", "s", "--text", text)[1].strip()
    for name, label in (("old", "wrong"), ("new", "liked"), ("keys", "disliked")):
        assert _run(capsys, *base, "feedback", ids[name], label)[0] == 0
    code, out, err = _run(capsys, *base, "search", "cache TTL", "--preset", "keyword")
    assert code == 0 and "correction of" not in err  # a rating without a note: no correction
    note = ["--note", "it is 300 seconds since the upgrade"]
    assert _run(capsys, *base, "feedback", ids["old"], "wrong", *note)[0] == 0
    code, out, err = _run(capsys, *base, "search", "cache TTL", "--preset", "keyword")
    assert code == 0
    # the note, as an assembly shows it in the memory's place
    said = f"note: correction of {ids['old']} (rated wrong): it is 300 seconds since the upgrade"
    assert said in err.splitlines()
    lines = {name: [ln for ln in out.splitlines() if ids[name] in ln] for name in ids}
    assert lines["old"] == []  # rated wrong: left out, as assembly leaves it out
    assert "(liked 0.75)" in lines["new"][0] and "(disliked 0.25)" in lines["keys"][0]
    assert "(" not in lines["boot"][0]  # nobody rated it: nothing shown
    assert f"1 match left out, rated wrong: {ids['old']}" in err
    assert f"ctxbase feedback {ids['old']} neutral" in err
    code, out, err = _run(capsys, *base, "search", "cache TTL", "--preset", "keyword", "--json")
    hits = {h["owner_id"]: h for h in json.loads(out)}
    assert ids["old"] not in hits and ids["old"] in err
    assert (hits[ids["new"]]["confidence"], hits[ids["new"]]["confidence_source"]) == (
        0.75,
        "feedback:liked",
    )
    assert "confidence" not in hits[ids["boot"]]
    # a search whose shown hits all rank above the rated one does not name it
    code, out, err = _run(capsys, *base, "search", "warmed at boot", "-k", "1")
    assert code == 0 and ids["boot"] in out
    assert "rated wrong" not in err and "correction of" not in err
    code, out, err = _run(capsys, *base, "search", "TTL 60", "-k", "1", "--preset", "keyword")
    assert code == 0 and f"rated wrong: {ids['old']}" in err  # it would have been the hit


def test_search_min_similarity_floors_each_hit_as_the_library_does(
    tmp_path: Path, capsys: Any
) -> None:
    db = str(tmp_path / "f.db")
    base = ["--db", db, "--project", "p", "--embedder", "hash"]
    for text in (
        "The orders cache TTL is 300 seconds",
        "orders shipped late on Monday",
        "cache TTL for sessions is 60 seconds",
    ):
        assert _run(capsys, *base, "capture", "--session", "s", "--text", text)[0] == 0
    query = [*base, "search", "orders cache TTL", "--preset", "keyword", "--json"]
    code, out, _ = _run(capsys, *query)
    every = json.loads(out)
    code, out, _ = _run(capsys, *query, "--min-similarity", "0.5")
    floored = json.loads(out)
    assert code == 0 and floored and len(floored) < len(every)
    assert all(h["similarity"] >= 0.5 for h in floored)
    with ctxbase.open(db, project="p", embedder="hash") as cb:
        library = cb.search("orders cache TTL", preset="keyword", min_similarity=0.5)
        assert [h["id"] for h in floored] == [c.item_id for c in library.results]
    # the library's limits, named as the option
    for bad, said in (
        ("1.5", "must be <= 1.0 (got 1.5)"),
        ("-2", "must be >= -1.0 (got -2.0)"),
        ("nan", "must be a finite number (got nan)"),
    ):
        code, _, err = _run(capsys, *query, "--min-similarity", bad)
        assert code == 2 and f"error: --min-similarity: {said}" in err, err
    plain = ["--db", db, "--project", "p", "--embedder", "none"]
    code, _, err = _run(capsys, *plain, "search", "orders", "--min-similarity", "0.5")
    assert code == 2 and "--min-similarity: needs an embedder" in err, err
    # nothing that close: the empty answer names the floor as what may have left it empty
    code, out, err = _run(
        capsys, *base, "search", "orders cache TTL", "--preset", "keyword", "--min-similarity",
        "0.999",
    )  # fmt: skip
    assert (code, out) == (0, "") and "no match for 'orders cache TTL'" in err
    assert "note: hits less similar to the query than --min-similarity 0.999 are left out" in err


def test_capture_refuses_a_blank_role_as_a_blank_agent(tmp_path: Path, capsys: Any) -> None:
    base = ["--db", str(tmp_path / "r.db"), "--embedder", "none"]
    for option, said in (("--role", "is blank"), ("--agent", "must be 1-200 ASCII characters")):
        code, _, err = _run(capsys, *base, "capture", "--session", "s", "--text", "x", option, "")
        assert code == 2 and f"error: {option}: {said}" in err, (option, err)


def test_assemble_names_its_options_in_errors(
    tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not the library's fields (session_id, role, signing_key)."""
    monkeypatch.delenv("CTXBASE_HMAC_KEY", raising=False)
    base = ["--db", str(tmp_path / "o.db"), "--project", "p", "--embedder", "hash"]
    assert _run(capsys, *base, "capture", "--session", "s", "--text", "hello")[0] == 0
    for extra, said in (
        (["--session", "bad id"], "error: --session: must be 1-200 ASCII characters"),
        (["--require-signature"], "error: --require-signature: require_signature needs a key"),
    ):
        code, _, err = _run(capsys, *base, "assemble", "hi", "--role", "coder", *extra)
        assert code == 2 and err.startswith(said), err
    code, _, err = _run(capsys, *base, "assemble", "hi", "--role", " ")
    assert code == 2 and err.startswith("error: --role: "), err


def test_search_set_changes_one_setting_of_the_preset(tmp_path: Path, capsys: Any) -> None:
    db = str(tmp_path / "s.db")
    base = ["--db", db, "--project", "p", "--embedder", "hash"]
    for text in ("审核结果出来了，我们的申请被驳回了", "The weather is fine today"):
        assert _run(capsys, *base, "capture", "--session", "s", "--text", text)[0] == 0
    query = [*base, "search", "Why was our application rejected?", "--preset", "keyword"]
    code, out, _ = _run(capsys, *query, "--json")
    assert code == 0 and json.loads(out) == []  # no shared keyword
    code, out, _ = _run(capsys, *query, "--json", "--set", "term_bridge=0.5")
    hits = json.loads(out)
    assert code == 0 and hits and "驳回" in hits[0]["text"]
    with ctxbase.open(db, project="p", embedder="hash") as cb:
        library = cb.search("Why was our application rejected?", preset="keyword", term_bridge=0.5)
        assert [h["id"] for h in hits] == [c.item_id for c in library.results]
    # JSON values, and several settings at once
    code, out, _ = _run(
        capsys, *query, "--json", "--set", "term_bridge=0.5", "--set", 'graph_types=["REFERS_TO"]'
    )
    assert code == 0 and [h["id"] for h in json.loads(out)] == [h["id"] for h in hits]
    for bad, said in (
        ("term_bridge=2", "error: --set term_bridge: must be <= 1.0 (got 2)"),
        ("nope=1", "error: --set nope: is not a search setting (settings: keyword, "),
        ("term_brige=1", "error: --set term_brige: is not a search setting (did you mean "),
        ("top_k=3", "error: --set top_k: has its own option: use -k/--top-k"),
        ("top_kk=3", "error: --set top_kk: is not a search setting (did you mean top_k? it has"),
        ('session_ids=["s"]', "error: --set session_ids: is a filter, not a setting"),
        ("bare", "error: --set: expects FIELD=VALUE, got 'bare'"),
    ):
        code, _, err = _run(capsys, *query, "--set", bad)
        assert code == 2 and said in err, err


def test_chain_shows_a_hidden_cause_by_id_and_goes_on(tmp_path: Path, capsys: Any) -> None:
    base = ["--db", str(tmp_path / "h.db"), "--project", "p", "--embedder", "none"]

    def capture(kind: str, text: str, *parents: str) -> str:
        extra = [a for p in parents for a in ("--parent", p)]
        code, out, _ = _run(
            capsys, *base, "capture", "--session", "s", "--type", kind, "--text", text, *extra
        )
        assert code == 0
        return out.strip()

    u = capture("user_message", "why is checkout slow")
    t = capture("tool_invocation", "run_sql()", u)
    r = capture("tool_result", "zqxsecret rows", t)
    a = capture("assistant_message", "add an index", r)
    code, _, _ = _run(capsys, *base, "forget", "--soft", "--event", r)
    assert code == 0
    code, out, err = _run(capsys, *base, "chain", a)
    assert code == 0
    assert f"[hidden] {r}" in out and "zqxsecret" not in out
    assert "run_sql()" in out and "why is checkout slow" in out  # beyond the hidden link
    assert f"restore --event {r}" in err
    code, out, _ = _run(capsys, *base, "chain", a, "--json")
    rows = json.loads(out)
    assert [(e["id"], e.get("marks", [])) for e in rows] == [
        (a, []),
        (r, ["hidden"]),
        (t, []),
        (u, []),
    ]
    assert "zqxsecret" not in out
    code, _, err = _run(capsys, *base, "chain", r)
    assert code == 3 and "is hidden (restore brings it back)" in err
    # downstream too: the hidden result by id, the answer beyond it
    code, out, err = _run(capsys, *base, "chain", u, "--down")
    assert code == 0
    assert f"[hidden] {r}" in out and "zqxsecret" not in out
    assert "run_sql()" in out and "add an index" in out
    assert f"restore --event {r}" in err


def test_chain_of_a_merged_id_starts_from_the_event_it_went_into(
    tmp_path: Path, capsys: Any
) -> None:
    db = str(tmp_path / "m.db")
    bursts = BusConfig(linger_s=0.5, aggregate_window_s=5.0)
    with ctxbase.open(db, project="p", embedder=None, bus_config=bursts) as cb:
        u = cb.record("user_message", session_id="s", text="why is checkout slow").id
        a, b = (
            cb.capture("internal_thought", session_id="s", text=t, parent_event_ids=[u])
            for t in ("read the plan", "the scan is sequential")
        )
    base = ["--db", db, "--project", "p", "--embedder", "none"]
    code, out, _ = _run(capsys, *base, "chain", str(b))
    assert code == 0
    assert out.splitlines()[0].startswith(f"internal_thought {a} (holds {b}, merged into it):")
    assert "why is checkout slow" in out
    code, out, _ = _run(capsys, *base, "chain", str(b), "--json")
    rows = json.loads(out)
    assert [(e["id"], e.get("merged_id")) for e in rows] == [(a, b), (u, None)]
    assert "merged_id" not in rows[1]
    code, _, err = _run(capsys, *base, "forget", "--event", str(b))
    assert code == 1 and f"merged into event '{a}'" in err


def test_an_empty_search_names_hidden_events_and_a_blank_filter_is_refused(
    tmp_path: Path, capsys: Any
) -> None:
    base = ["--db", str(tmp_path / "t.db"), "--embedder", "hash", "--project", "shop"]
    _run(capsys, *base, "capture", "--session", "a", "--text", "the cache key is user:42")
    code, out, err = _run(capsys, *base, "search", "nothing like this", "--preset", "keyword")
    # nothing matched, nothing hidden: one line saying so (an empty answer is no silence)
    assert (code, out, err) == (0, "", "no match for 'nothing like this' in project 'shop'\n")
    assert _run(capsys, *base, "forget", "--soft", "--session", "a")[0] == 0
    code, out, err = _run(capsys, *base, "search", "cache key", "--preset", "keyword")
    assert code == 0 and out == ""
    assert "1 hidden event(s) of the project" in err and "ctxbase restore" in err
    for flag in ("--path", "--agent", "--type"):
        code, out, err = _run(capsys, *base, "search", "cache", flag, " ")
        assert code == 2 and f"error: {flag}: is blank" in err, flag


def test_opening_with_another_embedder_says_it_replaces_the_stored_vectors(
    tmp_path: Path, capsys: Any
) -> None:
    db = ["--db", str(tmp_path / "t.db"), "--project", "shop"]
    _run(capsys, *db, "--embedder", "hash", "capture", "--session", "a", "--text", "cache key")
    code, _, err = _run(capsys, *db, "--embedder", "hash", "status")
    assert code == 0 and "holds vectors made by" not in err  # the same model: nothing to say
    code, _, err = _run(capsys, *db, "--embedder", "hash:64", "status")
    assert code == 0
    assert (
        "note: project 'shop' holds vectors made by 'hash/ngram-256'; this command embeds with"
        " 'hash/ngram-64', which replaces them as it goes"
    ) in err
    code, _, err = _run(capsys, *db, "--embedder", "hash:64", "--quiet", "status")
    assert code == 0 and "holds vectors" not in err
    # a capture refused for its type says only why: the store is not opened, so no note
    args = ("capture", "--session", "a", "--type", "bogus", "--text", "x")
    code, _, err = _run(capsys, *db, "--embedder", "hash:64", *args)
    assert code == 2 and "unknown event type 'bogus'" in err and "holds vectors" not in err
