"""Active memory for an OpenAI-style tool-calling loop: the tool definitions go to the
model, `handle_tool_call` runs what it asks for (offline: a scripted model that answers
like the chat completions API).

    pip install -e . && python examples/openai_tools.py

With the real API: `client.chat.completions.create(model=..., messages=..., tools=tools)`
and the same dispatch of `message.tool_calls`. With the OpenAI Agents SDK, whose
`on_invoke_tool` is awaited (a coroutine function, not a plain lambda):

    def invoker(name):
        async def invoke(ctx, args):
            return await asyncio.to_thread(handle_tool_call, scope, name, args)
        return invoke

    FunctionTool(name=t["function"]["name"], description=t["function"]["description"],
                 params_json_schema=t["function"]["parameters"], strict_json_schema=False,
                 on_invoke_tool=invoker(t["function"]["name"]))
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import ctxbase
from ctxbase.integrations.tools import ToolScope, handle_tool_call, openai_tools


def scripted_model(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    """Stands in for chat.completions.create(...).choices[0].message."""
    names = {t["function"]["name"] for t in tools}
    if messages[-1]["role"] == "user":
        assert "search_memory" in names
        call = {"query": "上次那个SQL", "top_k": 3}
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "search_memory", "arguments": json.dumps(call)},
                }
            ],
        }
    found = json.loads(messages[-1]["content"])["results"]
    return {"role": "assistant", "content": f"Last time you ran: {found[0]['text']}"}


def main(db: str) -> str:
    cb = ctxbase.open(db, project="shop", embedder="hash")
    cb.record("user_message", session_id="s0", text="帮我查一下上个月的订单")
    cb.record(
        "tool_invocation",
        session_id="s0",
        agent_id="coder",
        text="run_sql(SELECT * FROM orders WHERE month = '2026-10')",
    )
    scope = ToolScope(cb, agent_id="coder")  # the project comes from here, never the model
    tools = openai_tools()
    messages: list[dict[str, Any]] = [{"role": "user", "content": "把上次那个SQL再跑一遍"}]
    while True:
        reply = scripted_model(messages, tools)
        messages.append(reply)
        if not reply.get("tool_calls"):
            break
        for call in reply["tool_calls"]:
            result = handle_tool_call(
                scope, call["function"]["name"], call["function"]["arguments"]
            )
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
    print("assistant:", messages[-1]["content"])
    cb.close()
    return str(messages[-1]["content"])


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        main(sys.argv[1] if len(sys.argv) > 1 else str(Path(tmp) / "memory.db"))
