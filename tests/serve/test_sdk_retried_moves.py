"""A lifecycle move whose answer was lost is retried by the SDK; the retry finds the session
moved already (409) and returns it, as the first attempt would have. A caller's own move
to the status the session holds, on a first attempt, is still a ConflictError.

A real proxy socket in front of a real server forwards every request and drops the answer
of the moves it is told to, once, closing the connection as a failing network would."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator

import pytest
from live_server import Live

import ctxbase
from ctxbase.errors import ConflictError


class DroppingProxy:
    """Forwards HTTP/1.1 requests to `upstream`; the first answer to a POST whose path ends
    with an action in `drop` is read from the server and then thrown away."""

    def __init__(self, upstream: str) -> None:
        host, port = upstream.removeprefix("http://").rsplit(":", 1)
        self.upstream = (host, int(port))
        self.drop: set[str] = set()
        self.seen: list[str] = []  # the request lines the server got
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        self.listener.settimeout(0.1)
        while not self.stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    @staticmethod
    def _message(sock: socket.socket, buf: bytes) -> tuple[bytes, bytes] | None:
        """One HTTP message (head and Content-Length body) from `sock`, and what follows."""
        while b"\r\n\r\n" not in buf:
            chunk = sock.recv(65536)
            if not chunk:
                return None
            buf += chunk
        head, rest = buf.split(b"\r\n\r\n", 1)
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value.strip())
        while len(rest) < length:
            chunk = sock.recv(65536)
            if not chunk:
                return None
            rest += chunk
        return head + b"\r\n\r\n" + rest[:length], rest[length:]

    def _serve(self, conn: socket.socket) -> None:
        upstream = socket.create_connection(self.upstream)
        buf, up_buf = b"", b""
        try:
            while True:
                got = self._message(conn, buf)
                if got is None:
                    return
                request, buf = got
                line = request.split(b"\r\n", 1)[0].decode()
                self.seen.append(line)
                upstream.sendall(request)
                answer = self._message(upstream, up_buf)
                if answer is None:
                    return
                response, up_buf = answer
                method, path = line.split(" ")[:2]
                action = path.rsplit("/", 1)[-1]
                if method == "POST" and action in self.drop:
                    self.drop.discard(action)
                    return  # done on the server; its answer lost
                conn.sendall(response)
        finally:
            upstream.close()
            conn.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        self.listener.close()


@pytest.fixture
def proxy(live: Live) -> Iterator[DroppingProxy]:
    p = DroppingProxy(live.url)
    yield p
    p.close()


def _moves(proxy: DroppingProxy, action: str) -> int:
    return sum(1 for line in proxy.seen if line.split(" ")[1].endswith("/" + action))


def test_a_retried_move_whose_answer_was_lost_returns_the_session(
    live: Live, proxy: DroppingProxy, pid: str
) -> None:
    key = live.key(pid, role="write")
    with ctxbase.connect(proxy.url, api_key=key, project=pid, backoff=0.01) as client:
        cm = client.context_manager()
        sid = cm.create_session("u_1")
        proxy.drop.add("suspend")
        moved = cm.suspend_session(sid)
        assert moved.status == "suspended" and moved.id == sid
        assert _moves(proxy, "suspend") == 2  # made by the first, refused to the retry
        # the caller's own second suspend is the library's error, as embedded
        with pytest.raises(ConflictError, match="suspended -> suspended"):
            cm.suspend_session(sid)
        for action, status in (("resume", "active"), ("expire", "expired")):
            proxy.drop.add(action)
            assert getattr(client, f"{action}_session")(sid).status == status
            assert _moves(proxy, action) == 2
        proxy.drop.add("archive")
        assert client.archive_session(sid).status == "archived"
        assert _moves(proxy, "archive") == 2
        log = [e["to"] for e in client.get_session(sid).metadata["status_log"]]
        assert log.count("suspended") == 1 and log.count("archived") == 1


def test_the_async_client_settles_a_retried_move_the_same_way(
    live: Live, proxy: DroppingProxy, pid: str
) -> None:
    key = live.key(pid, role="write")

    async def run() -> str:
        client = ctxbase.connect_async(proxy.url, api_key=key, project=pid, backoff=0.01)
        async with client:
            cm = client.context_manager()
            sid = await cm.create_session("u_2")
            proxy.drop.add("suspend")
            moved = await cm.suspend_session(sid)
            with pytest.raises(ConflictError):
                await cm.suspend_session(sid)
            return moved.status

    assert asyncio.run(run()) == "suspended"
    assert _moves(proxy, "suspend") == 3
