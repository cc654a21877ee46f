"""A small OpenAI-compatible chat-completions server on a free local port: the model of the
LLM extraction tests. Its answers are deterministic, chosen by the message it is sent: a good
extraction for a text naming billing-service, text that is not JSON for "[garbage]", an
HTTP 500 for "[500]", an answer past the client's timeout for "[slow]", and an answer held
until `gate` is set for "[hold]". Asked to rewrite a search query (the query rewrite's
system prompt), it answers the wordings REWRITES holds for the query, and for "[drip]" a
well-formed answer sent a byte every 0.2 s (no read of it ever waits long)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["GOOD", "REWRITES", "TEXT", "ChatServer", "running_chat_server"]

GOOD = {
    "entities": [
        {"name": "billing-service", "type": "service"},
        {"name": "orders", "type": "table"},
        {"name": "Alice", "type": "person"},
        {"name": "We must refund within 7 days", "type": "requirement"},
        {"type": "person"},  # no name: left out
    ],
    "relations": [
        {"from": "Alice", "to": "billing-service", "type": "owns", "confidence": 0.9},
        {"from": "billing-service", "to": "orders", "type": "READS", "confidence": 1.7},
        {"from": "billing-service", "to": "Alice", "type": "depends on", "confidence": -0.3},
        {"from": "billing-service", "to": "Bob", "type": "USES", "confidence": 0.9},
        {"from": "Alice", "to": "orders", "type": "WRITES", "confidence": "high"},
    ],
}
TEXT = "Alice owns billing-service, which reads the orders 表。\nWe must refund within 7 days."
# the query rewrite's model: a question -> the words of the turn that answers it
REWRITES = {
    "上次那个慢查询后来怎么解决的": ["给 orders 表的 user_id 加了索引", "慢查询 索引"],
    "[drip] how was the slow query fixed": ["index on orders.user_id"],
}


@dataclass
class ChatServer:
    """What the server was asked, and a gate holding back answers to "[hold]" messages."""

    url: str
    requests: list[dict[str, Any]] = field(default_factory=list)
    auth: list[str | None] = field(default_factory=list)
    gate: threading.Event = field(default_factory=threading.Event)
    received: threading.Event = field(default_factory=threading.Event)
    released: threading.Event = field(default_factory=threading.Event)  # a held answer went


def _answer(text: str, server: ChatServer) -> tuple[int, str | None]:
    """(status, the completion's content) for the message sent: the fake model."""
    if "[500]" in text:
        return 500, None
    if "[slow]" in text:
        time.sleep(2.0)  # past the client's timeout
    if "[hold]" in text:
        server.gate.wait(300)  # the test opens it (or the fixture, when it ends)
        server.released.set()
    if "[garbage]" in text:
        return 200, "Sure! The entities are Alice and billing-service."
    if "billing-service" in text:
        return 200, "```json\n" + json.dumps(GOOD) + "\n```"
    return 200, json.dumps({"entities": [], "relations": []})


@contextmanager
def running_chat_server() -> Iterator[ChatServer]:
    state: ChatServer | None = None

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            assert state is not None
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            state.requests.append({"path": self.path, **body})
            state.auth.append(self.headers.get("Authorization"))
            state.received.set()
            first = body["messages"][0]["content"]
            if "search query" in first:  # retrieve/query_rewrite.py's prompt
                self._rewrite(body["messages"][-1]["content"])
                return
            status, content = _answer(body["messages"][-1]["content"], state)
            payload = (
                {"choices": [{"message": {"role": "assistant", "content": content}}]}
                if content is not None
                else {"error": "boom"}
            )
            raw = json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)
            except OSError:
                pass  # the client gave up (timeout)

        def _rewrite(self, query: str) -> None:
            status, content = (
                200,
                json.dumps({"queries": REWRITES.get(query, [])}, ensure_ascii=False),
            )
            if "[500]" in query:
                status, content = 500, None
            elif "[slow]" in query:
                time.sleep(2.0)  # past the client's timeout
            elif "[garbage]" in query:
                content = json.dumps({"entities": []})  # JSON, but no queries
            payload = {"choices": [{"message": {"role": "assistant", "content": content}}]}
            raw = json.dumps(payload if content is not None else {"error": "boom"}).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                for i in range(len(raw)):  # "[drip]": a byte at a time
                    if "[drip]" in query:
                        time.sleep(0.2)
                    self.wfile.write(raw[i : i + 1])
                    self.wfile.flush()
            except OSError:
                pass  # the client gave up

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    state = ChatServer(url=f"http://127.0.0.1:{httpd.server_address[1]}/v1")
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state.gate.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)
