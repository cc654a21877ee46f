"""HTTP load benchmark of `POST /v1/context/assemble`, next to seed 000's published table.

Run: PYTHONPATH=src python bench/http_load.py [--clients 10,50,100] [--requests 2000]
                                               [--intents 8] [--workers 1] [--json OUT]

Starts `ctxbase serve` in a subprocess on 127.0.0.1 (API keys on, hash embedder), seeds a
small project (documents, code, requirements, relations, a session of events) through the
SDK, then for each concurrency level runs that many asyncio clients (each a minimal HTTP/1.1
keep-alive client with its own connection, so the load generator spends little of the CPU
it shares with the server) until `--requests` assemblies are done, and reports mean and
p95 latency, throughput and error rate. Requests cycle through `--intents` different
intents (agents re-ask the same few things); `--intents 0` makes every request unique,
so no assembly is served from the cache.

Reference (seed 000, single machine, 16 cores / 32 GB, its own stack):
10 clients p95 480 ms, 50 -> 620 ms, 100 -> 1,250 ms (3.7% errors).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

import ctxbase
from ctxbase.progress import Progress
from ctxbase.serve.keys import create_key
from ctxbase.serve.server import free_port
from ctxbase.store import open_store

__all__ = ["main"]

SEED_000 = {10: (320, 480, 0.0), 50: (410, 620, 0.2), 100: (680, 1250, 3.7)}  # mean, p95, err%
PROJECT = "ecommerce_backend_v2"
INTENTS = [
    "给订单查询接口加上 Redis 缓存，缓存 5 分钟",
    "生成分页版订单查询接口，用 FastAPI",
    "为刚写的分页接口写测试用例",
    "缓存没生效，查下原因",
    "add pagination to the order list endpoint",
    "which Redis rules apply to order caching?",
    "把 SQL 改成支持分页",
    "review the orders module for missing cache expiry",
]


def start_server(db: str, port: int, workers: int, cache_ttl: float) -> subprocess.Popen[bytes]:
    code = (
        "from ctxbase.serve.server import run_server; "
        f"run_server({db!r}, port={port}, workers={workers}, embedder='hash', "
        f"rate_limit_per_s=0, log_level='warning', assemble_cache_ttl_s={cache_ttl})"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen([sys.executable, "-c", code], env=env)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200:
                return proc
        except httpx.TransportError:
            pass
        if proc.poll() is not None:
            raise RuntimeError("the server exited during startup")
        time.sleep(0.2)
    proc.terminate()
    raise TimeoutError("the server did not become ready in 60 s")


def seed(url: str, key: str) -> None:
    """A small project: 12 documents, 12 code units, 6 requirements, edges, 40 events."""
    with ctxbase.connect(url, api_key=key, project=PROJECT) as cb:
        docs = [
            cb.upsert_entity(
                "document",
                f"Redis 规范 V3.{i}",
                f"第{i}条：缓存必须设置过期时间，"
                f"键名带业务前缀 orders:{i}；分页大小不超过 {50 + i}。",
            )
            for i in range(12)
        ]
        code = [
            cb.upsert_entity(
                "code",
                f"orders.py#handler_{i}",
                f"def handler_{i}(user_id, page):"
                f"\n    return db.query(Order).filter_by(user_id=user_id).limit({i})",
            )
            for i in range(12)
        ]
        reqs = [
            cb.upsert_entity(
                "requirement", f"requirement_{i}", f"订单接口需求 {i}：分页 + 缓存 5 分钟"
            )
            for i in range(6)
        ]
        for i, c in enumerate(code):
            cb.create_edge(docs[i].id, "REFERENCES", c.id, source="human", confidence=0.9)
            cb.create_edge(reqs[i % 6].id, "GENERATES", c.id, source="auto:bench")
        prev = None
        for i in range(40):
            kind = "user_message" if i % 2 == 0 else "assistant_message"
            ev = cb.record(
                kind,
                session_id="day1",
                text=f"第{i}轮：订单查询缓存与分页的讨论 {i}",
                parent_event_ids=[prev] if prev else [],
            )
            prev = ev.id
        cb.wait_for_embeddings(60)


class _Http11:
    """One keep-alive HTTP/1.1 connection: POST a JSON body, read the status and body.

    Bodies are sent with Content-Length; responses may use Content-Length or chunked
    transfer encoding. Any failure closes the connection; the next request reconnects."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        parts = urlsplit(url)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        fixed = {"Host": f"{self.host}:{self.port}", "Content-Type": "application/json"}
        self.head = "".join(f"{k}: {v}\r\n" for k, v in {**fixed, **headers}.items())
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        if self.writer is None or self.reader is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        request = f"POST {path} HTTP/1.1\r\n{self.head}Content-Length: {len(body)}\r\n\r\n"
        self.writer.write(request.encode("latin-1") + body)
        head = await self.reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        fields: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if sep:
                fields[name.strip().lower()] = value.strip()
        if "content-length" in fields:
            data = await self.reader.readexactly(int(fields["content-length"]))
        elif fields.get("transfer-encoding", "").lower() == "chunked":
            data = await self._chunked(self.reader)
        else:
            data = await self.reader.read()  # the body runs until the server closes
            fields["connection"] = "close"
        if fields.get("connection", "").lower() == "close":
            await self.close()
        return status, data

    @staticmethod
    async def _chunked(reader: asyncio.StreamReader) -> bytes:
        out = bytearray()
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            if size == 0:
                while (await reader.readuntil(b"\r\n")) != b"\r\n":
                    pass  # trailers
                return bytes(out)
            out += await reader.readexactly(size)
            await reader.readexactly(2)

    async def close(self) -> None:
        writer, self.reader, self.writer = self.writer, None, None
        if writer is not None:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()


async def run_level(url: str, key: str, clients: int, total: int, intents: int) -> dict[str, Any]:
    latencies: list[float] = []
    errors = 0
    next_index = 0
    headers = {"Authorization": f"Bearer {key}"}

    async def client() -> None:
        # One connection per simulated client, spoken to by a minimal HTTP/1.1 client: a
        # full-featured client costs the load generator more CPU than the server spends.
        nonlocal next_index, errors
        http = _Http11(url, headers)
        try:
            while next_index < total:
                i = next_index
                next_index += 1
                intent = INTENTS[i % intents] if intents else f"{INTENTS[i % 8]} #{i}"
                body = {"project_id": PROJECT, "agent_role": "code_gen", "user_intent": intent}
                raw = json.dumps(body, ensure_ascii=False).encode("utf-8")
                t0 = time.perf_counter()
                try:
                    async with asyncio.timeout(30):
                        status, data = await http.post("/v1/context/assemble", raw)
                    ok = status == 200 and "context_id" in json.loads(data)
                except (OSError, TimeoutError, ValueError, IndexError, asyncio.IncompleteReadError):
                    await http.close()
                    ok = False
                latencies.append(time.perf_counter() - t0)
                errors += 0 if ok else 1
        finally:
            await http.close()

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    elapsed = time.perf_counter() - started
    latencies.sort()
    return {
        "clients": clients,
        "requests": total,
        "mean_ms": round(statistics.fmean(latencies) * 1000, 1),
        "p50_ms": round(latencies[len(latencies) // 2] * 1000, 1),
        "p95_ms": round(latencies[int(len(latencies) * 0.95) - 1] * 1000, 1),
        "throughput_rps": round(total / elapsed, 1),
        "error_rate_pct": round(100 * errors / total, 2),
    }


def render(rows: Sequence[dict[str, Any]]) -> str:
    lines = [
        f"{'clients':>7} | {'mean ms':>8} {'p95 ms':>8} {'req/s':>8} {'errors':>7} |"
        f" {'seed 000 mean':>13} {'p95':>6} {'errors':>6}",
        "-" * 80,
    ]
    for r in rows:
        ref = SEED_000.get(r["clients"])
        ref_txt = (
            f"{ref[0]:>13} {ref[1]:>6} {ref[2]:>5}%" if ref else f"{'-':>13} {'-':>6} {'-':>6}"
        )
        lines.append(
            f"{r['clients']:>7} | {r['mean_ms']:>8} {r['p95_ms']:>8} {r['throughput_rps']:>8}"
            f" {r['error_rate_pct']:>6}% | {ref_txt}"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", default="10,50,100")
    parser.add_argument("--requests", type=int, default=2000, help="requests per level")
    parser.add_argument("--intents", type=int, default=8, help="distinct intents (0: all unique)")
    parser.add_argument("--workers", type=int, default=1, help="server worker processes")
    parser.add_argument("--cache-ttl", type=float, default=2.0, help="assemble cache TTL (0: off)")
    parser.add_argument("--json", metavar="OUT", help="also write the figures as JSON here")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    args = parser.parse_args(argv)
    progress = Progress(quiet=args.quiet)
    levels = [int(x) for x in args.clients.split(",")]
    with tempfile.TemporaryDirectory(prefix="ctxbase-http-") as tmp:
        db = str(Path(tmp) / "bench.db")
        store = open_store(db)
        key = create_key(store, projects=[PROJECT], role="write", name="bench").key
        store.close()
        port = free_port()
        proc = start_server(db, port, args.workers, args.cache_ttl)
        url = f"http://127.0.0.1:{port}"
        try:
            seed(url, key)
            asyncio.run(run_level(url, key, 10, 200, args.intents))  # warm-up
            rows = [  # one bar over the levels: nothing runs in the timed loop itself
                asyncio.run(run_level(url, key, c, args.requests, args.intents))
                for c in progress.iterate("load levels", levels, "level")
            ]
        finally:
            proc.terminate()
            proc.wait(30)
    print(
        f"POST /v1/context/assemble, {args.requests} requests per level, intents="
        f"{args.intents or 'all unique'}, server workers={args.workers}, cache ttl="
        f"{args.cache_ttl}s, {os.cpu_count()} cores ({platform.processor() or platform.machine()})"
    )
    print(render(rows))
    target = next((r for r in rows if r["clients"] == 100), None)
    if target is not None:
        met = target["p95_ms"] <= 125 and target["error_rate_pct"] == 0
        print(f"target (100 clients: p95 <= 125 ms, 0 errors): {'met' if met else 'MISSED'}")
    if args.json:
        out = {
            "endpoint": "POST /v1/context/assemble",
            "requests_per_level": args.requests,
            "intents": args.intents,
            "workers": args.workers,
            "cache_ttl_s": args.cache_ttl,
            "cores": os.cpu_count(),
            "rows": rows,
            "seed_000": {
                str(k): dict(zip(("mean_ms", "p95_ms", "error_pct"), v, strict=True))
                for k, v in SEED_000.items()
            },
        }
        Path(args.json).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
