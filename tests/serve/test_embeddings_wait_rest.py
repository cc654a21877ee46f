"""Waiting for vectors over REST and the SDK: the answer says the project's backlog, and the
SDK's wait shows the bar and says what is left on timeout as the embedded wait does."""

from __future__ import annotations

import asyncio
import logging
import re
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from live_server import Live

import ctxbase
from ctxbase import ContextBase
from ctxbase.retrieve.embed.base import FloatMatrix
from ctxbase.retrieve.embed.hashing import HashingEmbedder
from ctxbase.serve.server import BackgroundServer
from ctxbase.serve.settings import ServerSettings

WAIT_LOGGER = "ctxbase.embedding_wait"


class HeldEmbedder(HashingEmbedder):
    """Hashing vectors that wait, each call, until released (or `pause` seconds)."""

    def __init__(self, pause: float) -> None:
        super().__init__()
        self.pause = pause
        self.released = threading.Event()

    def embed_documents(self, texts: Sequence[str]) -> FloatMatrix:
        if not self.released.is_set():
            self.released.wait(self.pause)
        return super().embed_documents(texts)


@pytest.fixture
def held(tmp_path: Path) -> Iterator[tuple[Live, HeldEmbedder]]:
    embedder = HeldEmbedder(pause=60.0)
    db = str(tmp_path / "wait.db")
    cb = ContextBase(db, project="default", embedder=embedder)
    settings = ServerSettings(db=db, port=0, embedder="hash", rate_limit_per_s=0)
    server = BackgroundServer(settings, cb).start()
    try:
        yield Live(server.url, db, server), embedder
    finally:
        embedder.released.set()
        server.stop()
        cb.close()


def _capture(live: Live, project: str, n: int) -> str:
    key = live.key(project)
    with ctxbase.connect(live.url, api_key=key, project=project) as client:
        for i in range(n):
            client.capture("tool_result", session_id="s", text=f"line {i} of a long build log")
        client.flush()
    return key


def test_the_rest_answer_says_the_projects_backlog(held: tuple[Live, HeldEmbedder]) -> None:
    live, embedder = held
    key = _capture(live, "p", 30)
    c = live.client(key)
    named = c.post("/v1/embeddings/wait", params={"timeout": 0.2, "project": "p"}).json()
    assert named["idle"] is False and named["project"] == "p"
    assert named["model"] == embedder.name and 0 < named["pending_vectors"] <= 30
    # without a project: the key's one project
    assert c.post("/v1/embeddings/wait", params={"timeout": 0}).json()["project"] == "p"
    # a project the key does not see is not answered for
    assert c.post("/v1/embeddings/wait", params={"project": "q"}).status_code in (403, 404)
    embedder.released.set()
    done = c.post("/v1/embeddings/wait", params={"timeout": 30, "project": "p"}).json()
    assert (done["idle"], done["pending_vectors"]) == (True, 0)


def test_the_sdk_wait_warns_and_shows_progress_as_embedded(
    held: tuple[Live, HeldEmbedder],
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    live, embedder = held
    key = _capture(live, "p", 30)
    with ctxbase.connect(live.url, api_key=key, project="p") as client:
        with caplog.at_level(logging.WARNING, logger=WAIT_LOGGER):
            assert client.wait_for_embeddings(0.5, warn=False) is False
            assert not [r for r in caplog.records if r.name == WAIT_LOGGER]
            assert client.wait_for_embeddings(0.5) is False
        (record,) = [r for r in caplog.records if r.name == WAIT_LOGGER]
        message = record.getMessage()
        assert "timed out" in message and "of project 'p'" in message
        assert re.search(r"with \d+ item\(s\)", message) and embedder.name in message
        capsys.readouterr()
        threading.Timer(1.5, embedder.released.set).start()
        assert client.wait_for_embeddings(60, progress=True) is True
    err = capsys.readouterr().err  # not a terminal: one plain line when it ends
    done = re.search(r"embedding: (\d+)/(\d+) vectors, done in", err)
    assert done is not None and done.group(1) == done.group(2) != "0", err


def test_the_async_sdk_waits_past_one_server_wait(held: tuple[Live, HeldEmbedder]) -> None:
    live, embedder = held
    key = _capture(live, "p", 5)

    async def scenario() -> tuple[bool, bool]:
        async with ctxbase.connect_async(live.url, api_key=key, project="p") as client:
            early = await client.wait_for_embeddings(0.3, warn=False)
            threading.Timer(12.0, embedder.released.set).start()  # after one 10 s server wait
            return early, await client.wait_for_embeddings(60)

    assert asyncio.run(scenario()) == (False, True)


def test_a_wait_for_all_projects_counts_every_projects_backlog(
    held: tuple[Live, HeldEmbedder], caplog: pytest.LogCaptureFixture
) -> None:
    live, embedder = held
    key_p = _capture(live, "p", 10)
    _capture(live, "q", 10)
    c = live.client(key_p)
    # a key that sees one project does not wait for (nor count) the others
    refused = c.post("/v1/embeddings/wait", params={"timeout": 0, "all_projects": "true"})
    assert refused.status_code == 403, refused.text
    every = live.key("*", role="read")
    c = live.client(every)
    both = c.post(
        "/v1/embeddings/wait", params={"timeout": 0, "all_projects": "true", "project": "p"}
    )
    assert both.status_code == 422, both.text
    answer = c.post("/v1/embeddings/wait", params={"timeout": 0.2, "all_projects": "true"}).json()
    one = c.post("/v1/embeddings/wait", params={"timeout": 0, "project": "p"}).json()
    assert answer["idle"] is False and answer["project"] is None
    assert answer["pending_vectors"] > one["pending_vectors"] > 0, (answer, one)
    with ctxbase.connect(live.url, api_key=every, project="p") as client:
        with caplog.at_level(logging.WARNING, logger=WAIT_LOGGER):
            assert client.wait_for_embeddings(0.3, all_projects=True) is False
        (record,) = [r for r in caplog.records if r.name == WAIT_LOGGER]
        assert "of every project" in record.getMessage()
        embedder.released.set()
        assert client.wait_for_embeddings(60, all_projects=True) is True
    done = c.post("/v1/embeddings/wait", params={"timeout": 0, "all_projects": "true"}).json()
    assert (done["idle"], done["pending_vectors"]) == (True, 0)
