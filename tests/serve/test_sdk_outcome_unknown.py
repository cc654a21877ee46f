"""A write the server may have done before its answer was lost says so, with the id that
makes sending it again safe; a server that could not be reached at all is `unreachable`.
Real sockets: one that accepts and never answers (a stalled server), one that refuses."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

import ctxbase
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
