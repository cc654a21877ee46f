"""A varied corpus for the index-terms check: Chinese, English, code, mixed, edge cases.

The texts come from the memory benchmark sets (bench/data) plus the samples below; long
texts are made by joining consecutive benchmark turns, so that whole-text indexing, the
context suffix an event lends to the next one and chunking are all exercised.
"""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["SAMPLES", "corpus", "long_texts"]

_DATA = Path(__file__).resolve().parents[2] / "bench" / "data"

SAMPLES = [
    # code
    "def load_config(path: str) -> Config:\n    return yaml.safe_load(open(path))",
    "class HTTPServer(BaseServer):\n"
    "    def handleRequest(self, req): return self.router.get(req.url)",
    "SELECT o.order_id, u.user_name FROM orders o JOIN users u ON u.id = o.user_id "
    "WHERE o.created_at >= '2024-01-01' AND o.status IN ('paid', 'shipped') LIMIT 50;",
    "const fetchUserById = async (userId) => await db.users.findOne({ _id: userId });",
    'Traceback (most recent call last):\n  File "/srv/app/main.py", line 42, in <module>\n'
    "    raise KeyError('budget_limit')\nKeyError: 'budget_limit'",
    "$ pip install -e '.[dev]' && python -m pytest -q -x tests/core --maxfail=1",
    '{"tool": "run_sql", "args": {"query": "SELECT * FROM orders", "timeout_ms": 5000}}',
    "git commit -m 'fix: base64Encode of utf-8 strings' && git push origin feature/cache-v2",
    "https://example.com/api/v1/orders?id=42&sort=-created_at#section-3 user@example.com",
    "x = a_b.c-d.e__f --flag -- __init__ _ __ ___ a.b.c a..b a--b v1.2.3-rc.1 0x1F 3.14e-10",
    "IDs URLs APIs HTTPRequest XMLHttpRequest getHTTPResponseCode iOS macOS utf8Decode",
    # Chinese and mixed
    "把预算控制在5万以内，订单查询加Redis缓存",
    "上次那个SQL为什么跑了30秒？是不是order_items表没有建索引",
    "缓存没生效查下原因：命中率只有3%，TTL设置成了0",
    "中华人民共和国成立于1949年，首都是北京。",
    "我们用Redis缓存用户表以加速查询，订单服务在周五晚上迁移数据库",
    "用户说：“别再用MySQL了，换成PostgreSQL 16”。",
    "接口 /api/v2/orders 返回 500，日志里有 NullPointerException at OrderService.java:128",
    # full-width, compatibility and other scripts
    "ＡＢＣ１２３ 端口８０８０ ｈｔｔｐｓ：／／ｅｘａｍｐｌｅ．ｃｏｍ ﬁle ﬂow Ⅻ ①②③ ㎏ ㈱",
    "カタカナとひらがなの混じった文章です。東京タワー",
    "한국어 텍스트도 들어갑니다 데이터베이스",
    "Ελληνικά κείμενα και русский текст с кириллицей, naïve café résumé Straße",
    "e\u0301 combining acute, a\u0308 umlaut, \u212b angstrom, \u00c5 ring",
    "emoji 😀🚀 mixed with text ✅ done — em dash … ellipsis «quotes» ¿qué?",
    "tabs\tand\nnewlines\r\nand   many    spaces",
    "!!! ... 😀 —— 。。",
    "",
    "a" * 70 + " " + "b_" * 40 + " " + "QmFzZTY0" * 12,
    "The Users are Caching the queries; running, runs, ran, easily, fairly, generously",
]


def _benchmark_texts() -> list[str]:
    out: list[str] = []
    for name in ("zh_memory.json", "en_memory.json"):
        data = json.loads((_DATA / name).read_text(encoding="utf-8"))
        for conversation in data["conversations"]:
            out.extend(event["text"] for event in conversation["events"])
            out.extend(query["query"] for query in conversation["queries"])
    return out


def long_texts() -> list[str]:
    """Texts of about 700, 1,100, 1,500 and 4,000 characters joined from benchmark turns."""
    turns = _benchmark_texts()
    out: list[str] = []
    for target, start in ((700, 0), (1100, 40), (1500, 200), (4000, 300), (700, 450)):
        parts: list[str] = []
        i = start
        while sum(len(p) + 1 for p in parts) < target:
            parts.append(turns[i % len(turns)])
            i += 1
        out.append("\n".join(parts))
    return out


def corpus() -> list[str]:
    return [*_benchmark_texts(), *SAMPLES, *long_texts()]
