"""Reliability gauntlet: what a memory system must never do silently, counted.

Run: PYTHONPATH=src python bench/reliability.py [--runs 5] [--postgres] [--json OUT]

Each part attacks the real thing (a SQLite file, a real HTTP server on loopback, child
processes killed with real signals) and counts the failures that must stay at zero:

- kill -9 during capture: a child captures and flushes in a loop, printing how many events
  each `flush()` made durable; it is killed at a random moment. Acknowledged events missing
  afterwards: lost (must be 0).
- SIGTERM with a full queue: a child captures events without flushing and is sent SIGTERM
  (what `kill`, `docker stop` and systemd send). Events missing afterwards: lost (must be 0).
- forget, then a raw scan: a unique marker is captured, searched, assembled into a context
  (whose trace stores it), then the session is forgotten; the SQLite file's bytes after a
  checkpoint and VACUUM (with --postgres: every text column) are scanned. Copies left: 0.
- cross-project probes over REST: a key for project A asks for project B's data through
  every read route (and with B named in bodies and options). Answers carrying B's marker:
  leaks (must be 0).
- tamper cases: signed entities and relations changed behind ctxbase's back (the entity row,
  the served search unit and its keyword row, a replayed older version); with
  require_signature, tampered text served: 0.
- bad inputs: nesting, non-finite numbers, huge integers, lone surrogates, empty text,
  forbidden options; answers with a 5xx: 0.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

import ctxbase
from ctxbase.model import Relation
from ctxbase.serve.keys import create_key
from ctxbase.serve.server import BackgroundServer
from ctxbase.serve.settings import ServerSettings
from ctxbase.store import open_store

__all__ = ["main"]

ROOT = Path(__file__).resolve().parents[1]
SRC = str(ROOT / "src")
sys.path.insert(0, str(ROOT / "tests"))  # the residue scan and tamper helpers the tests use

from pg_server import pg_url  # noqa: E402
from residue import postgres_copies, sqlite_file_copies  # noqa: E402
from signing_helpers import tamper_relation_confidence, tamper_unit  # noqa: E402


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = SRC + os.pathsep + env.get("PYTHONPATH", "")
    return env


# -- kill -9 during capture ------------------------------------------------------------------
_KILL9_CHILD = textwrap.dedent(
    """
    import sys, ctxbase
    cb = ctxbase.open(sys.argv[1], project="rel", embedder="none")
    i = 0
    while True:
        for _ in range(50):
            cb.capture("user_message", session_id="k9", text=f"kill9 event {i}")
            i += 1
        cb.flush()
        print(f"acked {i}", flush=True)
    """
)


def _stored_texts(db: str, session_id: str) -> set[str]:
    cb = ctxbase.open(db, project="rel", embedder="none")
    try:
        return {e.text or "" for e in cb.last_events(session_id, n=1_000_000)}
    finally:
        cb.close()


def kill9_during_capture(tmp: Path, runs: int) -> dict[str, Any]:
    acked_total = lost_total = 0
    for run in range(runs):
        db = str(tmp / f"kill9-{run}.db")
        child = subprocess.Popen(
            [sys.executable, "-c", _KILL9_CHILD, db],
            stdout=subprocess.PIPE,
            text=True,
            env=_child_env(),
        )
        acked = 0
        assert child.stdout is not None
        stdout = child.stdout

        def read(out: Any = stdout) -> None:
            nonlocal acked
            for line in out:
                if line.startswith("acked "):
                    acked = int(line.split()[1])

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        deadline = time.monotonic() + 60
        while acked == 0 and time.monotonic() < deadline and child.poll() is None:
            time.sleep(0.05)
        time.sleep(random.uniform(0.1, 1.0))
        child.send_signal(signal.SIGKILL)
        child.wait(30)
        reader.join(5)
        stored = _stored_texts(db, "k9")
        lost = sum(1 for i in range(acked) if f"kill9 event {i}" not in stored)
        acked_total += acked
        lost_total += lost
    return {"runs": runs, "acknowledged": acked_total, "acknowledged_lost": lost_total}


# -- SIGTERM with a full queue -----------------------------------------------------------------
_SIGTERM_CHILD = textwrap.dedent(
    """
    import sys, time, ctxbase
    from ctxbase.capture.bus import BusConfig
    # a long linger keeps what was captured in the queue until something flushes it
    cb = ctxbase.open(sys.argv[1], project="rel", embedder="none",
                      bus_config=BusConfig(linger_s=30.0, batch_size=100000, max_queue=100000))
    n = int(sys.argv[2])
    for i in range(n):
        cb.capture("user_message", session_id="term", text=f"term event {i}")
    print("captured", flush=True)
    time.sleep(120)
    """
)


def sigterm_with_full_queue(tmp: Path, runs: int, events: int) -> dict[str, Any]:
    lost_total = 0
    per_run: list[int] = []
    for run in range(runs):
        db = str(tmp / f"term-{run}.db")
        child = subprocess.Popen(
            [sys.executable, "-c", _SIGTERM_CHILD, db, str(events)],
            stdout=subprocess.PIPE,
            text=True,
            env=_child_env(),
        )
        assert child.stdout is not None
        line = child.stdout.readline()
        if line.strip() != "captured":
            child.kill()
            raise RuntimeError(f"the SIGTERM child did not start: {line!r}")
        child.send_signal(signal.SIGTERM)
        try:
            child.wait(60)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait(10)
        stored = _stored_texts(db, "term")
        lost = sum(1 for i in range(events) if f"term event {i}" not in stored)
        per_run.append(lost)
        lost_total += lost
    return {"runs": runs, "events_per_run": events, "lost": lost_total, "lost_per_run": per_run}


# -- forget, then a raw scan -----------------------------------------------------------------
def _seed_and_forget(cb: Any, marker_en: str, marker_zh: str) -> list[str]:
    """Capture the markers in one session, use them (search, assembly with a trace, a task
    fact), forget the session; the forgotten events' ids."""
    first = cb.record(
        "user_message", session_id="doomed", agent_id="u", text=f"remember {marker_en} 订单表"
    )
    second = cb.record(
        "assistant_message",
        session_id="doomed",
        agent_id="coder",
        text=f"{marker_zh} 会议决定 {marker_en}",
        parent_event_ids=[first.id],
    )
    cb.record("user_message", session_id="kept", agent_id="u", text="an unrelated session")
    cb.wait_for_embeddings(timeout=60)
    cb.search(marker_en)
    # the session's own assembly (its intent quotes the marker), and another session's
    # context that retrieved the doomed events without naming them (redacted, not deleted)
    cb.assemble_context(
        agent_role="coder", user_intent=f"{marker_en} {marker_zh} 会议", session_id="doomed"
    )
    kept = cb.assemble_context(agent_role="coder", user_intent="订单表 会议决定", session_id="kept")
    assert {first.id, second.id} & set(kept.included_ids), "the other context must use them"
    cb.forget(session_id="doomed")
    return [first.id, second.id]


def forget_raw_scan_sqlite(tmp: Path) -> dict[str, Any]:
    db = tmp / "forget.db"
    marker_en = f"zqx{uuid.uuid4().hex[:10]}"
    marker_zh = "紫鹭湾暗号七号"
    cb = ctxbase.open(str(db), project="rel", embedder="hash")
    try:
        ids = _seed_and_forget(cb, marker_en, marker_zh)
    finally:
        cb.close()
    copies = sqlite_file_copies(db, [marker_en, marker_zh, *ids])
    return {"backend": "sqlite", "copies_left": sum(copies.values())}


def forget_raw_scan_postgres(url: str) -> dict[str, Any]:
    marker_en = f"zqx{uuid.uuid4().hex[:10]}"
    marker_zh = "紫鹭湾暗号八号"
    project = f"rel-{uuid.uuid4().hex[:8]}"
    cb = ctxbase.open(url, project=project, embedder="hash")
    try:
        ids = _seed_and_forget(cb, marker_en, marker_zh)
    finally:
        cb.close()
    copies = len(postgres_copies(url, [marker_en, marker_zh, *ids]))
    return {"backend": "postgres", "copies_left": copies}


# -- the service -----------------------------------------------------------------------------
@contextmanager
def _server(tmp: Path, **overrides: Any) -> Iterator[tuple[BackgroundServer, str]]:
    fields: dict[str, Any] = {
        "db": str(tmp / "serve.db"),
        "port": 0,
        "embedder": "hash",
        "rate_limit_per_s": 0,
        "assemble_cache_ttl_s": 0,
    }
    fields.update(overrides)
    server = BackgroundServer(ServerSettings.model_validate(fields)).start()
    try:
        yield server, str(fields["db"])
    finally:
        server.stop()


def _key(db: str, *projects: str, role: str = "write") -> str:
    store = open_store(db)
    try:
        return create_key(store, projects=list(projects), role=role, name="reliability").key
    finally:
        store.close()


def _client(url: str, key: str) -> httpx.Client:
    return httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=30)


def cross_project_probes(tmp: Path, rounds: int) -> dict[str, Any]:
    probes = leaks = errors = 0
    leaked: list[str] = []
    with _server(tmp) as (server, db):
        for _ in range(rounds):
            a, b = f"a-{uuid.uuid4().hex[:8]}", f"b-{uuid.uuid4().hex[:8]}"
            secret = f"secret{uuid.uuid4().hex[:12]}"
            key_a, key_b = _key(db, a), _key(db, b)
            with _client(server.url, key_b) as cb_b, _client(server.url, key_a) as cb_a:
                ev = cb_b.post(
                    f"/v1/projects/{b}/events/sync",
                    json={"type": "user_message", "session_id": "s", "text": f"{secret} 预算"},
                )
                ev_id = ev.json().get("id", "x") if ev.status_code < 300 else "x"
                cb_b.post(
                    f"/v1/projects/{b}/entities",
                    json={
                        "type": "document",
                        "id": f"doc_{secret}",
                        "name": secret,
                        "source": "reliability",
                        "properties": {"content": secret},
                    },
                )
                ctx = cb_b.post(
                    "/v1/context/assemble",
                    json={"project_id": b, "agent_role": "coder", "user_intent": secret},
                )
                ctx_id = ctx.json().get("context_id", "x") if ctx.status_code < 300 else "x"
                cb_a.post(
                    f"/v1/projects/{a}/events/sync",
                    json={"type": "user_message", "session_id": "s", "text": "mine"},
                )
                attempts: list[tuple[str, str, dict[str, Any]]] = [
                    ("POST", f"/v1/projects/{b}/search", {"json": {"query": "预算"}}),
                    ("GET", f"/v1/projects/{b}/events", {"params": {"session_id": "s"}}),
                    ("GET", f"/v1/projects/{b}/events/{ev_id}", {}),
                    ("GET", f"/v1/projects/{b}/entities", {}),
                    ("GET", f"/v1/projects/{b}/entities/doc_{secret}", {}),
                    ("GET", f"/v1/projects/{b}/sessions", {}),
                    ("GET", f"/v1/projects/{b}/state", {}),
                    ("GET", f"/v1/traces/{ctx_id}", {}),
                    ("GET", f"/v1/projects/{a}/events/{ev_id}", {}),
                    ("GET", f"/v1/projects/{a}/entities/doc_{secret}", {}),
                    (
                        "POST",
                        "/v1/context/assemble",
                        {"json": {"project_id": b, "agent_role": "coder", "user_intent": "预算"}},
                    ),
                    (
                        "POST",
                        f"/v1/projects/{a}/search",
                        {"json": {"query": "预算", "options": {"project": b}}},
                    ),
                    (
                        "POST",
                        f"/v1/projects/{a}/search",
                        {"json": {"query": "预算", "filters": {"session_ids": ["s"]}}},
                    ),
                    ("GET", "/v1/projects", {}),
                ]
                for method, path, kwargs in attempts:
                    probes += 1
                    try:
                        r = cb_a.request(method, path, **kwargs)
                    except httpx.HTTPError:
                        errors += 1
                        continue
                    errors += r.status_code >= 500
                    if r.status_code < 300 and secret in r.text:
                        leaks += 1
                        leaked.append(f"{method} {path} {kwargs}")
    return {"probes": probes, "leaks": leaks, "server_errors": errors, "leaked": leaked[:10]}


# -- bad inputs ------------------------------------------------------------------------------
def _nested(depth: int) -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = {"k": value}
    return value


def _send(c: httpx.Client, failures: list[str], method: str, path: str, body: bytes) -> None:
    """Send one raw JSON body; a 5xx or a dropped connection is a failure."""
    try:
        r = c.request(method, path, content=body, headers={"Content-Type": "application/json"})
    except httpx.HTTPError as exc:
        failures.append(f"{method} {path} {body[:60]!r} -> {type(exc).__name__}")
        return
    if r.status_code >= 500:
        failures.append(f"{method} {path} {body[:60]!r} -> {r.status_code}")


def bad_inputs(tmp: Path) -> dict[str, Any]:
    five_xx: list[str] = []
    sent = 0
    with _server(tmp) as (server, db):
        pid = f"bad-{uuid.uuid4().hex[:8]}"
        key = _key(db, pid)
        p = f"/v1/projects/{pid}"
        ev = {"type": "user_message", "session_id": "s"}
        raw_bodies: list[tuple[str, str, bytes]] = [
            ("POST", f"{p}/events/sync", b'{"type":"user_message","session_id":"s","ts":Infinity}'),
            ("POST", f"{p}/events/sync", b'{"type":"user_message","session_id":"s","ts":NaN}'),
            ("POST", f"{p}/search", b'{"query":"\\ud800 lone"}'),
            (
                "POST",
                f"{p}/events/sync",
                b'{"type":"user_message","session_id":"s","text":"\\udfff"}',
            ),
            ("POST", f"{p}/events/sync", b"not json at all"),
        ]
        json_bodies: list[tuple[str, str, Any]] = [
            ("POST", f"{p}/events/sync", {**ev, "data": _nested(300)}),
            ("POST", f"{p}/events/sync", {**ev, "text": "", "data": None}),
            ("POST", f"{p}/events/sync", {**ev, "text": "x" * 2_000_000}),
            (
                "PUT",
                f"{p}/state",
                {"scope": "session", "scope_id": "s", "key": "k", "value": _nested(300)},
            ),
            (
                "POST",
                f"{p}/entities",
                {
                    "type": "document",
                    "id": "d1",
                    "name": "d",
                    "source": "t",
                    "properties": _nested(300),
                },
            ),
            (
                "POST",
                f"{p}/entities",
                {"type": "document", "id": "d2", "name": "d", "source": "t", "version": 2**63},
            ),
            ("POST", f"{p}/search", {"query": "x", "filters": {"line_from": 2**64}}),
            ("POST", f"{p}/search", {"query": "x", "options": {"project": "other"}}),
            ("POST", f"{p}/search", {"query": "x", "options": {"preset": "keyword"}}),
            ("POST", f"{p}/search", {"query": "x", "options": {"filters": {}}}),
            ("POST", f"{p}/search", {"query": "x", "options": {"config": {}}}),
            ("POST", f"{p}/search", {"query": "x", "options": {"signing_key": "k"}}),
            ("POST", f"{p}/search", {"query": "x", "options": {"top_k": -1}}),
            ("POST", f"{p}/search", {"query": ""}),
            (
                "POST",
                "/v1/context/assemble",
                {"project_id": pid, "agent_role": "coder", "user_intent": "x", "max_tokens": 2**70},
            ),
            ("POST", f"{p}/events/batch", {"events": [{**ev, "ts": 1e308 * 10}]}),
        ]
        with _client(server.url, key) as c:
            for method, path, raw in raw_bodies:
                sent += 1
                _send(c, five_xx, method, path, raw)
            for method, path, body in json_bodies:
                sent += 1
                try:
                    payload = json.dumps(body).encode()
                except ValueError:
                    payload = json.dumps(body, allow_nan=True).encode()
                _send(c, five_xx, method, path, payload)
            # whatever was accepted must stay readable
            for path, params in (
                (f"{p}/events", {"session_id": "s"}),
                (f"{p}/entities", {}),
                (f"{p}/state", {"scope": "session", "scope_id": "s"}),
            ):
                sent += 1
                try:
                    code = c.get(path, params=params).status_code
                except httpx.HTTPError as exc:
                    five_xx.append(f"GET {path} after the bad writes -> {type(exc).__name__}")
                    continue
                if code >= 500:
                    five_xx.append(f"GET {path} after the bad writes -> {code}")
    return {"requests": sent, "server_errors": len(five_xx), "details": five_xx}


# -- tamper cases ----------------------------------------------------------------------------
def tamper_cases(tmp: Path) -> dict[str, Any]:
    """Signed memories changed behind ctxbase's back; with require_signature, what is served."""
    from ctxbase.anchor import signing
    from ctxbase.errors import ConflictError

    key = "reliability-key-0123456789abcdef"
    os.environ[signing.key_env_var("rel")] = key
    cases: dict[str, int] = {}
    cb = ctxbase.open(str(tmp / "tamper.db"), project="rel", embedder="hash")
    try:
        doc = cb.upsert_entity(
            "document", "budget rule", "the budget limit is 50000 yuan for the order service"
        )
        code = cb.upsert_entity("code", "check_budget", "def check_budget(total): ...")
        signing.sign_stored_entities(cb, [doc.id, code.id], key)
        rel = cb.store.upsert_relations(
            [
                signing.signed_relation(
                    Relation(
                        project_id="rel",
                        from_id=doc.id,
                        type="REFERENCES",
                        to_id=code.id,
                        confidence=0.5,
                        source="reliability",
                    ),
                    key,
                )
            ]
        )[0]
        cb.wait_for_embeddings(timeout=30)
        signed_v1 = cb.get_entity(doc.id)
        # 1. the served search unit and its keyword row edited, the entity row left alone
        unit = cb.search("budget limit", preset="keyword").results[0].item
        tamper_unit(cb.store, "rel", unit.item_id, "the budget limit is 99999999 yuan")
        found = cb.search("budget limit", require_signature=True)
        cases["unit_text_served"] = sum("99999999" in h.item.text for h in found.results)
        ctx = cb.assemble_context(
            agent_role="coder", user_intent="budget limit", require_signature=True
        )
        cases["unit_text_assembled"] = int("99999999" in json.dumps(ctx.messages))
        # 2. a relation's confidence raised behind its signature
        tamper_relation_confidence(cb.store, "rel", rel.id, 0.99)
        ctx = cb.assemble_context(
            agent_role="coder", user_intent="budget rule check", require_signature=True
        )
        cases["tampered_relation_served"] = sum(
            1 for r in ctx.relationships if r.get("from") == doc.id and r.get("to") == code.id
        )
        # 3. a newer signed version, then the older signed one written back (a replay)
        v2 = signing.signed_entity(
            signed_v1.model_copy(update={"version": signed_v1.version + 1, "text": "limit 40000"}),
            key,
        )
        cb.upsert_entity(
            v2.type, v2.name, v2.text, id=v2.id, properties=v2.properties, version=v2.version
        )
        try:
            cb.upsert_entity(
                signed_v1.type,
                signed_v1.name,
                signed_v1.text,
                id=signed_v1.id,
                properties=signed_v1.properties,
                version=signed_v1.version,
            )
            cases["replay_accepted"] = 1
        except ConflictError:
            cases["replay_accepted"] = 0
    finally:
        cb.close()
        os.environ.pop(signing.key_env_var("rel"), None)
    return {"cases": cases, "tampered_served": sum(cases.values())}


# -- main ------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="kill -9 and SIGTERM runs")
    parser.add_argument("--events", type=int, default=2000, help="events per SIGTERM run")
    parser.add_argument("--rounds", type=int, default=20, help="cross-project probe rounds")
    parser.add_argument("--postgres", action="store_true", help="also scan PostgreSQL")
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args(argv)

    results: dict[str, Any] = {"python": platform.python_version(), "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory(prefix="ctxbase-rel-") as tmp_name:
        tmp = Path(tmp_name)
        parts: list[tuple[str, Callable[[], dict[str, Any]]]] = [
            ("kill9_during_capture", lambda: kill9_during_capture(tmp, args.runs)),
            ("sigterm_full_queue", lambda: sigterm_with_full_queue(tmp, args.runs, args.events)),
            ("forget_raw_scan_sqlite", lambda: forget_raw_scan_sqlite(tmp)),
            ("cross_project_probes", lambda: cross_project_probes(tmp, args.rounds)),
            ("tamper", lambda: tamper_cases(tmp)),
            ("bad_inputs", lambda: bad_inputs(tmp)),
        ]
        cleanup: Callable[[], None] = lambda: None  # noqa: E731
        if args.postgres:
            url, cleanup = pg_url()
            parts.insert(3, ("forget_raw_scan_postgres", lambda: forget_raw_scan_postgres(url)))
        try:
            for name, run in parts:
                start = time.perf_counter()
                try:
                    figures = run()
                except Exception as exc:  # a part that cannot run is a finding, not a crash
                    figures = {"error": f"{type(exc).__name__}: {exc}"}
                figures["seconds"] = round(time.perf_counter() - start, 2)
                results[name] = figures
                print(f"{name}: {json.dumps(figures, ensure_ascii=False)}", flush=True)
        finally:
            cleanup()
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
