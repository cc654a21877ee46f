"""bench/http_load.py's unique mode: no intent is asked twice in a run, over real HTTP."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("httpx")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import http_load


async def _serve_and_load(source: http_load.IntentSource, levels: list[int]) -> list[str]:
    """A local HTTP/1.1 server that records every intent it is asked, then the warm-up and
    the levels, as the benchmark runs them."""
    seen: list[str] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                )
                body: dict[str, Any] = json.loads(await reader.readexactly(length))
                seen.append(body["user_intent"])
                reply = b'{"context_id": "ctx"}'
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(reply), reply)
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    try:
        await http_load.run_level(url, "k", "p", 4, 20, source, True)  # warm-up
        for clients in levels:
            row = await http_load.run_level(url, "k", "p", clients, 30, source, True)
            assert row["error_rate_pct"] == 0
    finally:
        server.close()
        await server.wait_closed()
    return seen


@pytest.mark.parametrize("scale", [False, True])
def test_unique_intents_never_repeat_across_warmup_and_levels(scale: bool) -> None:
    source = http_load.IntentSource(scale=scale, recurring=8)
    seen = asyncio.run(_serve_and_load(source, [3, 10]))
    assert len(seen) == 20 + 2 * 30
    assert len(set(seen)) == len(seen)
    assert source.given() == len(seen)


def test_recurring_intents_repeat() -> None:
    source = http_load.IntentSource(scale=False, recurring=3)
    asked = [source.take(False) for _ in range(9)]
    assert len(set(asked)) == 3
