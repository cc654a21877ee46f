"""Realistic multi-session agent memory at scale, for the scale benchmarks.

`make_corpus(n_events)` yields sessions of agent work, Chinese and English: a user asks for
something about a service or a table, a planner splits it, a coder calls tools (SQL, code),
tools answer, a tester reports, decisions and errors are recorded. Each session names a few of
a large pool of services, tables, people and numbers, so sessions differ the way a real
project's do, and the vocabulary grows with the project. `make_intents(n)` gives questions
never repeated (a counter is part of each), phrased like an agent's turn.

`VectorCache` wraps an embedder and keeps document vectors on disk by text hash (outside
git, `~/.cache/ctxbase-bench/` by default), so the real model's vectors for a 100k store are
computed once and reused by later runs and by the 1M store.
"""

from __future__ import annotations

import hashlib
import random
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

__all__ = ["Session", "VectorCache", "make_corpus", "make_intents"]

_SERVICES = [
    "订单服务",
    "支付网关",
    "库存中心",
    "用户画像",
    "推荐引擎",
    "结算系统",
    "消息队列",
    "搜索服务",
    "order-service",
    "payment-gateway",
    "inventory",
    "user-profile",
    "recommender",
    "billing",
    "notification",
    "search-api",
    "auth-service",
    "report-builder",
]
_TABLES = [
    "orders",
    "order_items",
    "payments",
    "refunds",
    "users",
    "user_addresses",
    "inventory",
    "warehouses",
    "invoices",
    "coupons",
    "shipments",
    "audit_log",
    "sessions",
    "products",
]
_PEOPLE = ["张伟", "李娜", "王芳", "刘洋", "陈静", "Alice", "Bob", "Carol", "Dave", "Erin"]
_ZH_ASKS = [
    "{svc}的{tbl}查询太慢了，帮我看看怎么加缓存",
    "把{svc}的预算控制在{num}万以内，{tbl}表要加索引",
    "{person}说{svc}昨天部署后一直超时，查下日志",
    "给{tbl}写一个按日期汇总的报表，{person}周{day}要用",
    "{svc}的重试策略改成最多{small}次，间隔指数退避",
    "检查{tbl}的外键约束，迁移脚本在{svc}仓库里",
]
_EN_ASKS = [
    "the {tbl} query in {svc} is slow, add a cache with a {small} minute TTL",
    "{person} wants the {svc} budget capped at {num}k, and an index on {tbl}",
    "{svc} times out since yesterday's deploy, check the logs around {tbl}",
    "write a daily rollup report over {tbl} for {person} by {dayname}",
    "set the {svc} retry policy to at most {small} attempts with exponential backoff",
    "review the foreign keys of {tbl}; the migration lives in the {svc} repo",
]
_ZH_STEPS = [
    ("assistant_message", "planner", "拆成三步：先看{tbl}的执行计划，再给{svc}加缓存，最后补测试"),
    ("tool_invocation", "coder", "run_sql(EXPLAIN SELECT * FROM {tbl} WHERE user_id = {num})"),
    ("tool_result", "coder", "Seq Scan on {tbl}，耗时 {num} ms，缺少 user_id 索引"),
    (
        "assistant_message",
        "coder",
        "在{tbl}(user_id)上建索引，并在{svc}里加 Redis 缓存，TTL {small} 分钟",
    ),
    (
        "tool_invocation",
        "coder",
        "write_file(src/{svc_slug}/cache.py, def get_{tbl}(user_id): ...)",
    ),
    ("tool_result", "tester", "pytest tests/test_{tbl}.py: {small} passed, 1 failed (缓存未失效)"),
    ("tool_result", "tester", "AssertionError: 更新{tbl}后缓存没有失效，读到旧数据"),
    ("assistant_message", "coder", "写入{tbl}时删除缓存键，{person}确认了这个方案"),
    ("assistant_message", "planner", "决定：{svc}的缓存键按 user_id 划分，写后删除，预算{num}万"),
    ("user_message", "user", "好的，{person}下周{day}再看一下{svc}的监控"),
]
_EN_STEPS = [
    (
        "assistant_message",
        "planner",
        "three steps: read the plan for {tbl}, cache {svc}, add tests",
    ),
    ("tool_invocation", "coder", "run_sql(EXPLAIN SELECT * FROM {tbl} WHERE user_id = {num})"),
    ("tool_result", "coder", "Seq Scan on {tbl}, {num} ms, no index on user_id"),
    (
        "assistant_message",
        "coder",
        "index {tbl}(user_id) and cache reads in {svc} for {small} minutes",
    ),
    (
        "tool_invocation",
        "coder",
        "write_file(src/{svc_slug}/cache.py, def get_{tbl}(user_id): ...)",
    ),
    ("tool_result", "tester", "pytest tests/test_{tbl}.py: {small} passed, 1 failed (stale cache)"),
    ("tool_result", "tester", "AssertionError: reading {tbl} after an update returned stale data"),
    ("assistant_message", "coder", "delete the cache key on writes to {tbl}; {person} agreed"),
    (
        "assistant_message",
        "planner",
        "decision: {svc} cache keys per user_id, invalidate on write, budget {num}k",
    ),
    ("user_message", "user", "thanks, {person} will check the {svc} dashboards on {dayname}"),
]
_ZH_INTENTS = [
    "{svc}的{tbl}缓存为什么没生效",
    "上次{person}说的{svc}预算是多少",
    "{tbl}的索引加了吗，执行计划怎么样",
    "{svc}部署后超时的问题最后怎么解决的",
    "{tbl}相关的测试失败原因是什么",
]
_EN_INTENTS = [
    "why is the {tbl} cache in {svc} not working",
    "what budget did {person} set for {svc}",
    "did we add the index on {tbl}, what did the plan show",
    "how was the {svc} timeout after the deploy resolved",
    "why did the {tbl} tests fail",
]
_DAYS_ZH = "一二三四五"
_DAYS_EN = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]


@dataclass
class Session:
    session_id: str
    events: list[tuple[str, str, str]] = field(default_factory=list)  # (type, agent, text)


def _slots(rng: random.Random, n_services: int) -> dict[str, str]:
    # Numbered variants grow the vocabulary with the project, as real projects do.
    svc = rng.choice(_SERVICES)
    variant = rng.randrange(n_services)
    svc = f"{svc}{variant}" if variant else svc
    return {
        "svc": svc,
        "svc_slug": f"svc{variant}",
        "tbl": f"{rng.choice(_TABLES)}{'_' + str(rng.randrange(50)) if rng.random() < 0.5 else ''}",
        "person": rng.choice(_PEOPLE),
        "num": str(rng.randrange(2, 500)),
        "small": str(rng.randrange(2, 30)),
        "day": rng.choice(_DAYS_ZH),
        "dayname": rng.choice(_DAYS_EN),
    }


def make_corpus(n_events: int, seed: int = 7, per_session: int = 20) -> Iterator[Session]:
    """Sessions of `per_session` events (the last one shorter) until `n_events`."""
    rng = random.Random(seed)
    n_services = 50  # fixed: the first n events are the same whatever the total
    made = 0
    s = 0
    while made < n_events:
        zh = rng.random() < 0.5
        slots = _slots(rng, n_services)
        session = Session(f"sess-{s:07d}")
        asks, steps = (_ZH_ASKS, _ZH_STEPS) if zh else (_EN_ASKS, _EN_STEPS)
        session.events.append(("user_message", "user", rng.choice(asks).format(**slots)))
        size = min(per_session, n_events - made)
        while len(session.events) < size:
            if rng.random() < 0.2:  # the conversation moves to another table or person
                slots.update({k: v for k, v in _slots(rng, n_services).items() if k != "svc"})
            etype, agent, template = steps[(len(session.events) - 1) % len(steps)]
            session.events.append((etype, agent, template.format(**slots)))
        made += len(session.events)
        s += 1
        yield session


def make_intents(n: int, seed: int = 99) -> list[str]:
    """`n` distinct questions (never repeated, so no answer cache can serve them)."""
    rng = random.Random(seed)
    out: list[str] = []
    seen: set[str] = set()
    while len(out) < n:
        zh = rng.random() < 0.5
        text = rng.choice(_ZH_INTENTS if zh else _EN_INTENTS).format(**_slots(rng, 50))
        if text not in seen:
            seen.add(text)
            out.append(text)
    return out


class VectorCache:
    """An embedder whose document vectors are kept on disk by (model, text) hash."""

    def __init__(self, inner: object, path: Path) -> None:
        self.inner = inner
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path), check_same_thread=False)
        self._db.execute("CREATE TABLE IF NOT EXISTS v (k BLOB PRIMARY KEY, vec BLOB)")
        self._lock = threading.Lock()
        self.hits = 0
        self.computed = 0

    @property
    def name(self) -> str:
        return str(self.inner.name)  # type: ignore[attr-defined]

    @property
    def dim(self) -> int:
        return int(self.inner.dim)  # type: ignore[attr-defined]

    def _key(self, text: str) -> bytes:
        return hashlib.sha1(f"{self.name}\0{text}".encode()).digest()

    def cached(self, keys: Sequence[bytes]) -> dict[bytes, npt.NDArray[np.float32]]:
        """The vectors stored for these keys (missing keys are left out)."""
        found: dict[bytes, npt.NDArray[np.float32]] = {}
        with self._lock:
            for start in range(0, len(keys), 500):
                chunk = keys[start : start + 500]
                marks = ",".join("?" * len(chunk))
                for k, blob in self._db.execute(
                    f"SELECT k, vec FROM v WHERE k IN ({marks})", chunk
                ):
                    found[bytes(k)] = np.frombuffer(blob, dtype=np.float32)
        return found

    def embed_documents(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        keys = [self._key(t) for t in texts]
        found = self.cached(keys)
        missing = [i for i, k in enumerate(keys) if k not in found]
        if missing:
            computed = self.inner.embed_documents([texts[i] for i in missing])  # type: ignore[attr-defined]
            with self._lock:
                self._db.executemany(
                    "INSERT OR REPLACE INTO v VALUES (?, ?)",
                    [
                        (keys[i], np.asarray(computed[j], np.float32).tobytes())
                        for j, i in enumerate(missing)
                    ],
                )
                self._db.commit()
            for j, i in enumerate(missing):
                found[keys[i]] = np.asarray(computed[j], np.float32)
        self.hits += len(keys) - len(missing)
        self.computed += len(missing)
        if not keys:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([found[k] for k in keys]).astype(np.float32)

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        return np.asarray(self.inner.embed_query(text), dtype=np.float32)  # type: ignore[attr-defined]

    def count(self) -> int:
        with self._lock:
            row = self._db.execute("SELECT count(*) FROM v").fetchone()
        return int(row[0])
