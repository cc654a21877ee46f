"""A write the server may have done before its answer was lost says so, with the id that
makes sending it again safe; a server that could not be reached at all is `unreachable`.
A queued capture gives up within the client's short `capture_timeout` (all attempts
together) instead of holding the agent for (retries + 1) x timeout; other calls keep their
own `timeout`. Real sockets: one that accepts and never answers (a stalled server), one
that refuses."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator

import pytest

import ctxbase
from ctxbase.errors import ValidationError
from ctxbase.serve.errors import RemoteError
from ctxbase.serve.server import free_port


@pytest.fixture
def stalled_url() -> Iterator[str]:
    """A server that accepts connections and reads requests but never answers."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            held.append(conn)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    listener.close()


def test_a_capture_that_timed_out_names_the_event_to_send_again(stalled_url: str) -> None:
    with ctxbase.connect(stalled_url, project="p", timeout=0.3, retries=0) as client:
        with pytest.raises(RemoteError) as caught:
            client.capture("user_message", session_id="s", text="order 12 pizzas")
        assert caught.value.code == "outcome_unknown"
        message = str(caught.value)
        assert "may have done it" in message and "event_id='ev_" in message
        with pytest.raises(RemoteError) as keyed:
            client.capture("user_message", session_id="s", text="hi", idempotency_key="turn-7")
        assert "idempotency_key='turn-7'" in str(keyed.value)
        with pytest.raises(RemoteError) as searched:  # POSTed, but nothing to repeat
            client.search("pizzas")
        assert searched.value.code == "unreachable"
        with pytest.raises(RemoteError) as read:  # a read did nothing: no such hint
            client.last_events("s", 5)
        assert read.value.code == "unreachable" and "may have done" not in str(read.value)


def test_a_server_not_listening_is_unreachable_even_for_a_write() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    client = ctxbase.connect(url, project="p", timeout=0.5, retries=0)
    with client, pytest.raises(RemoteError) as caught:
        client.capture("user_message", session_id="s", text="hi")
    assert caught.value.code == "unreachable"
    assert "may have done" not in str(caught.value)


def test_capture_gives_up_at_capture_timeout_other_calls_at_timeout(stalled_url: str) -> None:
    client = ctxbase.connect(stalled_url, project="p", timeout=1.5, retries=3, capture_timeout=0.5)
    with client:
        started = time.monotonic()
        with pytest.raises(RemoteError) as caught:
            client.capture("user_message", session_id="s", text="order 12 pizzas")
        took = time.monotonic() - started
        assert caught.value.code == "outcome_unknown"
        assert "event_id='ev_" in str(caught.value)
        # 4 attempts x 1.5 s without the bound; 0.5 s with it (slack for a loaded machine)
        assert 0.4 <= took < 1.4
        client.retries = 0  # one attempt: its own 1.5 s timeout, not capture's 0.5 s
        started = time.monotonic()
        with pytest.raises(RemoteError):
            client.last_events("s", 5)
        assert time.monotonic() - started >= 1.4


def test_async_capture_gives_up_at_capture_timeout(stalled_url: str) -> None:
    async def run() -> tuple[float, float]:
        client = ctxbase.connect_async(
            stalled_url, project="p", timeout=1.5, retries=3, capture_timeout=0.5
        )
        async with client:
            started = time.monotonic()
            with pytest.raises(RemoteError) as caught:
                await client.capture("user_message", session_id="s", text="hi")
            assert caught.value.code == "outcome_unknown"
            took = time.monotonic() - started
            client.retries = 0
            started = time.monotonic()
            with pytest.raises(RemoteError):
                await client.last_events("s", 5)
            return took, time.monotonic() - started

    capture_took, read_took = asyncio.run(run())
    assert 0.4 <= capture_took < 1.4
    assert read_took >= 1.4


def test_capture_timeout_is_checked_and_is_a_remote_option() -> None:
    with pytest.raises(ValidationError) as bad:
        ctxbase.connect("http://127.0.0.1:1", project="p", capture_timeout=0)
    assert bad.value.field == "capture_timeout"
    with pytest.raises(ValidationError) as embedded:
        ctxbase.open(":memory:", capture_timeout=2.0)
    assert embedded.value.field == "capture_timeout"
