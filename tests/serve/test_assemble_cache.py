"""The assemble cache (pure, no server) and the cached-answer shortcut over real HTTP."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
from live_server import Live, start

from ctxbase.serve.cache import AssembleCache, Cached
from ctxbase.serve.keys import parse_key, revoke_key
from ctxbase.store import open_store


def _wait_until(check: object, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if callable(check) and check():
            return True
        time.sleep(0.01)
    return False


class FakeClock:
    """Time that moves only when a test says so: TTL tests never depend on the machine's load."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


# -- the cache itself ----------------------------------------------------------------------
def test_stale_entries_are_served_while_one_background_refresh_runs() -> None:
    clock = FakeClock()
    cache = AssembleCache(ttl_s=10, size=10, clock=clock)
    cache.put("p", "k", Cached("old", b"1"))
    calls: list[int] = []
    release = threading.Event()

    def refresh() -> Cached:
        calls.append(1)
        release.wait(5)
        return Cached("new", b"2")

    assert cache.lookup("p", "k", refresh) == Cached("old", b"1")  # fresh: no refresh
    assert calls == []
    clock.advance(10.5)  # past the fresh period (at most the TTL), inside the stale one
    for _ in range(20):  # stale: served at once, refreshed once
        assert cache.lookup("p", "k", refresh) == Cached("old", b"1")
    release.set()
    assert _wait_until(lambda: cache.get("p", "k") == Cached("new", b"2"))
    assert calls == [1] and cache.refreshes == 1


def test_entries_past_their_stale_period_are_misses() -> None:
    clock = FakeClock()
    cache = AssembleCache(ttl_s=10, size=10, clock=clock)
    cache.put("p", "k", Cached("old", b"1"))
    clock.advance(7.4)  # fresh for at least 75% of the TTL
    assert cache.get("p", "k") == Cached("old", b"1")
    clock.advance(12.7)  # fresh for at most 10 s, stale for 10 s more: 20.1 s is past both
    assert cache.lookup("p", "k", lambda: Cached("new", b"2")) is None


def test_an_assembly_racing_with_a_write_is_not_kept() -> None:
    cache = AssembleCache(ttl_s=10, size=10)
    started, finish = threading.Event(), threading.Event()

    def compute() -> Cached:
        started.set()
        finish.wait(5)
        return Cached("before-the-write", b"x")

    t = threading.Thread(target=cache.get_or_compute, args=("p", "k", compute))
    t.start()
    assert started.wait(5)
    cache.invalidate("p")  # a write lands while the assembly is running
    finish.set()
    t.join(5)
    assert cache.get("p", "k") is None
    value, hit = cache.get_or_compute("p", "k", lambda: Cached("after", b"y"))
    assert (value.context_id, hit) == ("after", False)


def test_a_failed_refresh_drops_the_entry_so_the_next_caller_sees_the_error() -> None:
    clock = FakeClock()
    cache = AssembleCache(ttl_s=10, size=10, clock=clock)
    cache.put("p", "k", Cached("old", b"1"))
    clock.advance(10.5)

    def broken() -> Cached:
        raise RuntimeError("project gone")

    assert cache.lookup("p", "k", broken) == Cached("old", b"1")
    assert _wait_until(lambda: len(cache) == 0)


def test_concurrent_misses_assemble_once() -> None:
    cache = AssembleCache(ttl_s=10, size=10)
    calls: list[int] = []
    gate = threading.Event()

    def compute() -> Cached:
        calls.append(1)
        gate.wait(5)
        return Cached("c", b"z")

    results: list[tuple[Cached, bool]] = []
    threads = [
        threading.Thread(target=lambda: results.append(cache.get_or_compute("p", "k", compute)))
        for _ in range(8)
    ]
    for t in threads:
        t.start()
    assert _wait_until(lambda: len(calls) == 1)
    gate.set()
    for t in threads:
        t.join(5)
    assert len(calls) == 1 and len(results) == 8
    assert sorted(hit for _, hit in results) == [False] + [True] * 7


# -- the shortcut, over HTTP ---------------------------------------------------------------
def _assemble(c: httpx.Client, pid: str, intent: str = "订单缓存怎么做") -> httpx.Response:
    return c.post(
        "/v1/context/assemble", json={"project_id": pid, "agent_role": "qa", "user_intent": intent}
    )


def _counter(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(f"{name} "):
            return float(line.split()[-1])
    return 0.0


def _seeded(live: Live, pid: str) -> httpx.Client:
    c = live.client(live.key(pid))
    r = c.post(
        f"/v1/projects/{pid}/events",
        json={"type": "user_message", "session_id": "s1", "text": "订单查询加 Redis 缓存 5 分钟"},
    )
    assert r.status_code in (200, 201), r.text
    # vectors and anchoring land in the background and move the index generation (part of
    # the cache key): wait for them, so the next assemblies see one generation
    waited = c.post("/v1/embeddings/wait", params={"timeout": 30}).json()
    assert waited["idle"] is True and waited["pending_vectors"] == 0, waited
    return c


def test_a_repeat_is_answered_from_the_cache_like_the_route_answers(live: Live, pid: str) -> None:
    c = _seeded(live, pid)
    first = _assemble(c, pid)
    assert first.status_code == 200
    hits_before = _counter(c.get("/metrics").text, "ctxbase_assemble_cache_hits_total")
    again = _assemble(c, pid)
    assert again.status_code == 200
    assert again.content == first.content
    assert again.headers["x-context-id"] == first.json()["context_id"]
    assert again.headers["content-type"] == "application/json"
    assert len(again.headers["x-request-id"]) == 32
    text = c.get("/metrics").text
    assert _counter(text, "ctxbase_assemble_cache_hits_total") == hits_before + 1
    series = 'method="POST",route="/v1/context/assemble",status="200"'
    assert f"ctxbase_http_request_duration_seconds_count{{{series}}}" in text


def test_cached_answers_still_check_every_key(live: Live, pid: str, other_pid: str) -> None:
    c = _seeded(live, pid)
    assert _assemble(c, pid).status_code == 200  # now cached
    assert _assemble(live.client(None), pid).status_code == 401
    assert _assemble(live.client("cb_0123456789abcdef_" + "x" * 43), pid).status_code == 401
    other = _assemble(live.client(live.key(other_pid)), pid)
    missing = _assemble(live.client(live.key(other_pid)), "no-such-project")
    assert other.status_code == missing.status_code == 404
    assert other.json()["error"]["code"] == missing.json()["error"]["code"] == "not_found"
    reader = live.key(pid, role="read")
    assert _assemble(live.client(reader), pid).status_code == 200
    by_header = httpx.post(
        live.url + "/v1/context/assemble",
        json={"project_id": pid, "agent_role": "qa", "user_intent": "订单缓存怎么做"},
        headers={"X-API-Key": reader},
    )
    assert by_header.status_code == 200
    store = open_store(live.db)
    try:
        parsed = parse_key(reader)
        assert parsed is not None
        revoke_key(store, parsed[0])
    finally:
        store.close()
    assert _assemble(live.client(reader), pid).status_code == 401
    bad = c.post("/v1/context/assemble", json={"project_id": pid, "user_intent": "x"})
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "agent_role"


def test_a_write_is_seen_by_the_next_assembly(live: Live, pid: str) -> None:
    c = _seeded(live, pid)
    first = _assemble(c, pid, "发票")
    r = c.post(
        f"/v1/projects/{pid}/events",
        json={"type": "user_message", "session_id": "s1", "text": "发票接口要支持批量导出"},
    )
    assert r.status_code in (200, 201)
    second = _assemble(c, pid, "发票")
    assert second.json()["context_id"] != first.json()["context_id"]
    assert "批量导出" in second.text


def test_a_streamed_body_without_length_goes_through_the_route(live: Live, pid: str) -> None:
    c = _seeded(live, pid)
    raw = json.dumps({"project_id": pid, "agent_role": "qa", "user_intent": "缓存"}).encode()

    def chunks() -> Iterator[bytes]:
        yield raw[:10]
        yield raw[10:]

    r = c.post(
        "/v1/context/assemble", content=chunks(), headers={"Content-Type": "application/json"}
    )
    assert r.status_code == 200 and r.json()["context_id"]


def test_an_expired_answer_is_served_once_more_while_it_is_refreshed(
    tmp_path: Path, pid: str
) -> None:
    server = start(tmp_path, assemble_cache_ttl_s=30)
    try:
        clock = FakeClock()
        server.app.state.runtime.cache.clock = clock
        live = Live(server.url, server.settings.db, server)
        c = _seeded(live, pid)
        first = _assemble(c, pid).json()["context_id"]
        assert _assemble(c, pid).json()["context_id"] == first  # fresh: the cached answer
        clock.advance(31)  # stale now: answered from the cache, refreshed behind it
        assert _assemble(c, pid).json()["context_id"] == first
        assert _wait_until(lambda: _assemble(c, pid).json()["context_id"] != first)
    finally:
        server.stop()


def test_the_rate_limit_applies_to_cached_answers(tmp_path: Path, pid: str) -> None:
    server = start(tmp_path, rate_limit_per_s=1.0, rate_limit_burst=3)
    try:
        live = Live(server.url, server.settings.db, server)
        live.make_project(pid)
        c = live.client(live.key(pid))
        codes = [_assemble(c, pid).status_code for _ in range(6)]
        assert codes[:3] == [200] * 3 and codes[3:] == [429] * 3
    finally:
        server.stop()


def test_assemblies_over_sqlite_run_one_at_a_time(tmp_path: Path) -> None:
    import ctxbase
    from ctxbase.serve.assembly import compute_assembly
    from ctxbase.serve.auth import RateLimiter
    from ctxbase.serve.runtime import Runtime
    from ctxbase.serve.schemas import AssembleIn
    from ctxbase.serve.settings import ServerSettings

    cb = ctxbase.open(str(tmp_path / "gate.db"), project="g", embedder="hash")
    try:
        cb.record("user_message", session_id="s", text="订单查询加缓存")
        rt = Runtime(
            ServerSettings(db=str(tmp_path / "gate.db")), cb, RateLimiter(0, 1), AssembleCache(0, 0)
        )
        inside, most = 0, 0
        guard = threading.Lock()
        real = cb.assemble_context

        def counted(**kwargs: object) -> object:
            nonlocal inside, most
            with guard:
                inside += 1
                most = max(most, inside)
            try:
                time.sleep(0.02)  # long enough for the other threads to try to enter
                return real(**kwargs)  # type: ignore[arg-type]
            finally:
                with guard:
                    inside -= 1

        cb.assemble_context = counted  # type: ignore[method-assign]
        body = AssembleIn(project_id="g", agent_role="qa", user_intent="缓存")
        threads = [threading.Thread(target=compute_assembly, args=(rt, body)) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert most == 1
    finally:
        cb.close()
