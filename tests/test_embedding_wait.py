"""Waiting for vectors: a wait that runs out says how much is left; a bar if asked."""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from ctxbase import ContextBase
from ctxbase.errors import ValidationError
from ctxbase.retrieve.embed.base import FloatMatrix
from ctxbase.retrieve.embed.hashing import HashingEmbedder

WAIT_LOGGER = "ctxbase.embedding_wait"


class SlowEmbedder(HashingEmbedder):
    """Hashing vectors at the pace of a model on a loaded CPU: until released, each call
    takes `pause` seconds."""

    def __init__(self, pause: float) -> None:
        super().__init__()
        self.pause = pause
        self.released = threading.Event()

    def embed_documents(self, texts: Sequence[str]) -> FloatMatrix:
        if not self.released.is_set():
            self.released.wait(self.pause)
        return super().embed_documents(texts)


def _base(tmp_path: Path, embedder: SlowEmbedder, n: int = 200) -> ContextBase:
    cb = ContextBase(str(tmp_path / "w.db"), project="p", embedder=embedder)
    for i in range(n):
        cb.capture("tool_result", session_id="s", text=f"line {i} of a long build log")
    cb.flush()
    return cb


def test_a_wait_that_runs_out_says_how_many_items_are_left(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    embedder = SlowEmbedder(pause=30.0)
    cb = _base(tmp_path, embedder)
    try:
        started = time.monotonic()
        with caplog.at_level(logging.WARNING, logger=WAIT_LOGGER):
            assert cb.wait_for_embeddings(timeout=0.5) is False
        # one timeout for anchoring and embedding together, not one each
        assert time.monotonic() - started < 5
        (record,) = [r for r in caplog.records if r.name == WAIT_LOGGER]
        message = record.getMessage()
        assert record.levelno == logging.WARNING
        assert "timed out" in message and "'p'" in message
        left = cb.store.count_pending_embeddings(embedder.name, 1000, "p")
        assert left > 0 and f"with {left} item(s)" in message
        caplog.clear()
        embedder.released.set()
        with caplog.at_level(logging.WARNING, logger=WAIT_LOGGER):
            assert cb.wait_for_embeddings(timeout=60) is True
        assert not [r for r in caplog.records if r.name == WAIT_LOGGER]  # done: nothing said
        assert cb.store.count_pending_embeddings(embedder.name, 1000, "p") == 0
    finally:
        embedder.released.set()
        cb.close()


def test_a_quiet_wait_says_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    embedder = SlowEmbedder(pause=30.0)
    cb = _base(tmp_path, embedder, n=10)
    try:
        with caplog.at_level(logging.WARNING, logger=WAIT_LOGGER):
            assert cb.wait_for_embeddings(timeout=0.2, warn=False) is False
        assert not [r for r in caplog.records if r.name == WAIT_LOGGER]
    finally:
        embedder.released.set()
        cb.close()


def test_progress_shows_the_vectors_made_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    embedder = SlowEmbedder(pause=0.05)
    cb = _base(tmp_path, embedder)
    try:
        assert cb.store.count_pending_embeddings(embedder.name, 1000, "p") > 0
        assert cb.wait_for_embeddings(timeout=120, progress=True) is True
        err = capsys.readouterr().err  # not a terminal: one plain line when it ends
        done = re.search(r"embedding: (\d+)/(\d+) vectors, done in", err)
        assert done is not None and done.group(1) == done.group(2) != "0", err
    finally:
        cb.close()


def test_a_wait_for_another_project_counts_that_projects_backlog(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # the base's own project has nothing pending: that is no answer for project "q"
    embedder = SlowEmbedder(pause=30.0)
    cb = ContextBase(str(tmp_path / "w.db"), project="p", embedder=embedder)
    try:
        for i in range(20):
            cb.capture("tool_result", session_id="s", text=f"line {i}", project="q")
        cb.flush()
        with caplog.at_level(logging.WARNING, logger=WAIT_LOGGER):
            assert cb.wait_for_embeddings(timeout=0.5, project="q") is False
        (record,) = [r for r in caplog.records if r.name == WAIT_LOGGER]
        assert "of project 'q'" in record.getMessage()
        embedder.released.set()
        assert cb.wait_for_embeddings(timeout=60, project="q") is True
    finally:
        embedder.released.set()
        cb.close()


def test_a_wait_for_all_projects_waits_for_every_projects_backlog(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # the base's project has nothing pending, "q" and "r" do: only all_projects waits for them
    embedder = SlowEmbedder(pause=30.0)
    cb = ContextBase(str(tmp_path / "w.db"), project="p", embedder=embedder)
    try:
        for project in ("q", "r"):
            for i in range(10):
                cb.capture("tool_result", session_id="s", text=f"line {i}", project=project)
        assert cb.wait_for_embeddings(timeout=0.5) is True  # its own project: none pending
        with caplog.at_level(logging.WARNING, logger=WAIT_LOGGER):
            assert cb.wait_for_embeddings(timeout=0.5, all_projects=True) is False
        (record,) = [r for r in caplog.records if r.name == WAIT_LOGGER]
        message = record.getMessage()
        left = sum(cb.store.count_pending_embeddings(embedder.name, 1000, p) for p in "qr")
        assert left > 10 and f"with {left} item(s) of every project" in message, message
        with pytest.raises(ValidationError, match="not both"):
            cb.wait_for_embeddings(timeout=1, project="q", all_projects=True)
        embedder.released.set()
        assert cb.wait_for_embeddings(timeout=60, all_projects=True) is True
        assert cb.store.pending_projects(embedder.name) == []
    finally:
        embedder.released.set()
        cb.close()
