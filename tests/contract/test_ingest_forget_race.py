"""A repository forgotten while an ingest of it runs stays forgotten, on every backend.

The forget runs from a second ContextBase on the same database (its own connection), at
a chosen file of the ingest (its progress callback), so the race is the same every run:
the ingest stops with RepositoryForgottenError, nothing of the repository is left (what
it wrote before the forget went with it, nothing after was written), and an ingest
started afterwards holds it again."""

from __future__ import annotations

import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ctxbase import ContextBase
from ctxbase.anchor.entities import write_entity
from ctxbase.anchor.forget_watch import ForgetWatch
from ctxbase.anchor.repository import recorded_places
from ctxbase.errors import ConflictError, RepositoryForgottenError
from ctxbase.model import Entity
from ctxbase.store.base import Store
from ctxbase.store.sqlite import SQLiteStore

FILES = 24


def _marker() -> str:
    """A word unique per test (PostgreSQL is shared), kept whole by the tokenizer."""
    return "zqx" + "".join(chr(ord("a") + int(c, 16)) for c in uuid.uuid4().hex[:10]) + "qz"


def _repo(root: Path, word: str, files: int = FILES) -> Path:
    """`files` Python modules, each defining a function named after `word` and its number,
    calling the one before (so the ingest weaves edges between them)."""
    root.mkdir(parents=True)
    for n in range(files):
        call = f"    return {word}_{n - 1}(x)\n" if n else "    return x\n"
        (root / f"mod_{n:03d}.py").write_text(
            f'"""Module {n}."""\n\nfrom mod_{max(n - 1, 0):03d} import *\n\n\n'
            f'def {word}_{n}(x):\n    """Step {n} of the {word} pipeline."""\n{call}',
            encoding="utf-8",
        )
    return root


@pytest.fixture
def other(cb: ContextBase, backend: str, request: pytest.FixtureRequest) -> Iterator[ContextBase]:
    """A second ContextBase on cb's database and project: another connection, as a second
    process would have."""
    if backend == "sqlite":
        assert isinstance(cb.store, SQLiteStore)
        store: Store = SQLiteStore(cb.store.path)
    else:
        from ctxbase.store.postgres import PostgresStore

        store = PostgresStore(str(request.getfixturevalue("pg_url")), max_size=2)
    base = ContextBase(store, project=cb.project, embedder="hash", background_embedding=False)
    yield base
    base.close()


def _forget_at(other: ContextBase, at: int, repo: str) -> tuple[Callable[..., None], list[object]]:
    """A progress callback that forgets `repo` from `other` once `at` files are done."""
    reports: list[object] = []

    def progress(done: int, total: int, path: str) -> None:
        if done == at and not reports:
            reports.append(other.forget(repo=repo))

    return progress, reports


def _nothing_of(cb: ContextBase, repo: str, word: str) -> None:
    assert cb.list_entities(repos=[repo]) == []
    assert cb.store.repo_entity_ids(cb.project, [repo]) == {}
    assert repo not in cb.store.list_repos(cb.project)
    assert repo not in recorded_places(cb.store, cb.project)
    assert cb.search(word, preset="keyword", top_k=5).results == []


def test_a_forget_during_an_ingest_stops_it_and_nothing_of_the_repository_is_left(
    cb: ContextBase, other: ContextBase, tmp_path: Path
) -> None:
    word = _marker()
    folder = _repo(tmp_path / "big", word)
    cb.ingest(str(_repo(tmp_path / "small", _marker(), 2)), repo="small")
    kept = sorted(e.id for e in cb.list_entities(repos=["small"]))
    progress, reports = _forget_at(other, 5, "big")
    before = time.time()
    with pytest.raises(RepositoryForgottenError) as caught:
        cb.ingest(str(folder), repo="big", progress=progress)
    error = caught.value
    assert isinstance(error, ConflictError)
    assert (error.repo, error.files_done, error.files_total) == ("big", 5, FILES)
    assert error.forgotten_at is not None and before <= error.forgotten_at <= time.time()
    assert str(error).startswith(
        "repository 'big' was forgotten while this ingest ran (at 20"
    ) and str(error).endswith(
        "UTC): stopped after 5 of 24 files, nothing of it kept (an ingest started now "
        "holds it again)"
    )
    assert [getattr(r, "repos", None) for r in reports] == [["big"]]
    _nothing_of(cb, "big", word)
    _nothing_of(other, "big", word)
    assert sorted(e.id for e in cb.list_entities(repos=["small"])) == kept  # untouched

    again = cb.ingest(str(folder), repo="big")  # started after the forget: held again
    assert (again.files_new, again.files_failed) == (FILES, 0)
    assert len(cb.store.repo_entity_ids(cb.project, ["big"])["big"]) > FILES
    assert cb.search(f"{word}_7", preset="keyword", top_k=5).results


def test_an_ingest_with_nothing_to_write_still_reports_the_forget(
    cb: ContextBase, other: ContextBase, tmp_path: Path
) -> None:
    """Every file unchanged: no write would notice the tombstone; the checks between
    batches and at the end do, and the repository stays forgotten."""
    word = _marker()
    folder = _repo(tmp_path / "big", word)
    assert cb.ingest(str(folder), repo="big").files_new == FILES
    progress, reports = _forget_at(other, FILES, "big")  # after the last file
    with pytest.raises(RepositoryForgottenError, match=f"stopped after {FILES} of {FILES}"):
        cb.ingest(str(folder), repo="big", progress=progress)
    assert reports
    _nothing_of(cb, "big", word)


def test_a_forget_listing_the_repository_before_an_ingest_wrote_still_takes_it_all(
    cb: ContextBase, tmp_path: Path
) -> None:
    """The forget's own transaction reads the repository's entities: those an ingest wrote
    after the forget listed them (repo_forget.plan_repo_forget) go too, with where it
    lives."""
    word = _marker()
    folder = _repo(tmp_path / "big", word, 3)
    cb.ingest(str(folder), repo="big")
    listed = cb.store.repo_entity_ids(cb.project, ["big"])["big"]
    _repo(tmp_path / "more", word + "x", 3)
    for path in (tmp_path / "more").iterdir():
        path.rename(folder / ("more_" + path.name))
    assert cb.ingest(str(folder), repo="big").files_new == 3
    assert len(cb.store.repo_entity_ids(cb.project, ["big"])["big"]) > len(listed)
    cb.store.forget(cb.project, entity_ids=listed, repos=["big"])
    _nothing_of(cb, "big", word)


def test_a_tombstone_newer_than_the_ingest_start_stops_it_and_an_older_one_does_not(
    cb: ContextBase, tmp_path: Path
) -> None:
    """A forget that ran while the ingest read the store (before it knew the name) is
    newer than the ingest's start: stopped. One before the start: a new ingest."""
    cb.ingest(str(_repo(tmp_path / "big", _marker(), 1)), repo="big")
    started = time.time()
    cb.forget(repo="big")
    with pytest.raises(RepositoryForgottenError, match="stopped after 0 of 7 files"):
        ForgetWatch.start(cb.store, cb.project, "big", started, 7)
    watch = ForgetWatch.start(cb.store, cb.project, "big", time.time() + 1, 7)
    watch.check()  # the same tombstone: nothing forgotten since
    with watch.writing():
        pass


def _unit(cb: ContextBase, word: str) -> Entity:
    return Entity(
        id=f"big:{word}.py",
        project_id=cb.project,
        type="file",
        name=f"{word}.py",
        text=f"python file {word}.py",
        properties={"repo": "big", "path": f"{word}.py"},
    )


def test_a_write_in_flight_when_the_forget_starts_goes_with_it(
    cb: ContextBase, other: ContextBase, tmp_path: Path
) -> None:
    """Two connections at once: an ingest's write transaction still open when the forget
    starts is waited for, and what it wrote is forgotten too."""
    cb.ingest(str(_repo(tmp_path / "big", _marker(), 1)), repo="big")
    watch = ForgetWatch.start(cb.store, cb.project, "big", time.time(), 1)
    writing, done = threading.Event(), []

    def forget() -> None:
        writing.wait(10)
        done.append(other.forget(repo="big"))

    thread = threading.Thread(target=forget)
    thread.start()
    word = _marker()
    with watch.writing():
        write_entity(cb.components, _unit(cb, word), notify=False)
        writing.set()
        time.sleep(0.5)  # the forget waits for this transaction
        assert not done
    thread.join(30)
    assert done and done[0].removed["entities"] >= 2
    _nothing_of(cb, "big", word)


def test_a_write_starting_while_the_forget_commits_waits_and_is_refused(
    cb: ContextBase, other: ContextBase, tmp_path: Path
) -> None:
    """The forget's transaction still open when an ingest's write starts: the write waits
    for it (the project's write lock), then finds the tombstone and writes nothing."""
    cb.ingest(str(_repo(tmp_path / "big", _marker(), 1)), repo="big")
    watch = ForgetWatch.start(cb.store, cb.project, "big", time.time(), 1)
    forgetting, refused = threading.Event(), []
    word = _marker()

    def write() -> None:
        forgetting.wait(10)
        try:
            with watch.writing():
                write_entity(cb.components, _unit(cb, word), notify=False)
        except RepositoryForgottenError as error:
            refused.append(error)

    thread = threading.Thread(target=write)
    thread.start()
    with other.store.transaction():
        other.store.forget(other.project, repos=["big"])
        forgetting.set()
        time.sleep(0.5)  # the write waits for this transaction
        assert not refused
    thread.join(30)
    assert [e.repo for e in refused] == ["big"]
    _nothing_of(cb, "big", word)


def test_ctxbase_forget_from_another_process_stops_a_running_ingest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command-line race as a user runs it: `ctxbase ingest` in one process, `ctxbase
    forget --repo` in another once the ingest has written files; the ingest exits 1 saying
    the repository was forgotten, and nothing of it is left.

    The forget starts while the test holds the database's write lock and has seen, under
    it, at most 300 of the 500 files stored: the ingest has at least three writes left
    (two batches of 100 files to read, then its edges) and the forget one, so the forget
    lands before the ingest's last write even on a loaded machine. A busy machine can let
    the ingest get further before the test looks; that run is set aside and the race is
    run again on a new database."""
    import json

    for attempt in range(4):
        raced = _cli_race(tmp_path / f"try{attempt}")
        if raced is not None:
            break
    else:
        pytest.fail("four ingests all stored over 300 files before the test could hold them")
    db, word, out, err, returncode = raced
    forgot = json.loads(capsys.readouterr().out)
    assert forgot["repos"] == ["big"] and forgot["removed"]["entities"] > 0
    assert returncode == 1, (out, err)
    assert "error: repository 'big' was forgotten while this ingest ran (at " in err
    assert "of 500 files, nothing of it kept (an ingest started now holds it again)" in err
    assert out == ""
    with ContextBase(SQLiteStore(db), project="p", embedder="hash") as cb:
        _nothing_of(cb, "big", word)


def _cli_race(root: Path) -> tuple[str, str, str, str, int] | None:
    """One `ctxbase ingest` process of 500 files and a `ctxbase forget --repo` started mid-way;
    (database, marker word, the ingest's stdout, stderr, exit code), or None when the
    ingest stored more than 300 files before the test could hold it."""
    import os
    import subprocess
    import sys

    from ctxbase.cli import main

    root.mkdir(parents=True)
    db, word = str(root / "ir.db"), _marker()
    folder = _repo(root / "big", word, 500)
    base = ["--db", db, "--project", "p", "--embedder", "hash"]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "src")}
    ingest = subprocess.Popen(
        [sys.executable, "-m", "ctxbase", *base, "-q", "ingest", str(folder), "--repo", "big"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    codes: list[int] = []
    try:
        deadline = time.monotonic() + 120
        while not (Path(db).exists() and _files_written(db, "big")):
            assert ingest.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
        # Hold the database's write lock, then count the files stored: at most 300 leave
        # the ingest three writes, each waiting for this lock and then for the forget's.
        store = SQLiteStore(db)
        lock = sqlite3.connect(db, isolation_level=None, timeout=60)
        try:
            lock.execute("BEGIN IMMEDIATE")
            if store.entity_type_counts("p").get("file", 0) > 300:
                lock.rollback()
                out, err = ingest.communicate(timeout=300)
                assert ingest.returncode == 0, (out, err)  # it finished before any forget
                return None
            forget = threading.Thread(
                target=lambda: codes.append(main([*base, "forget", "--repo", "big"]))
            )
            forget.start()
            time.sleep(0.5)
        finally:
            if lock.in_transaction:
                lock.rollback()
            lock.close()
            store.close()
        forget.join(120)
        assert codes == [0]
        out, err = ingest.communicate(timeout=300)
    finally:
        if ingest.poll() is None:
            ingest.kill()
            ingest.wait()
    return db, word, out, err, ingest.returncode


def _files_written(db: str, repo: str) -> bool:
    store = SQLiteStore(db)
    try:
        return bool(store.repo_entity_ids("p", [repo]))
    finally:
        store.close()
