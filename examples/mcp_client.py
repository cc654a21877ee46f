"""Drive `ctxbase mcp` the way an MCP host (Claude Desktop, Cursor, an agent) does: start it
over stdio, list its tools, remember something and search for it.

    pip install -e '.[mcp]' && python examples/mcp_client.py
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client


async def session_demo(db: str) -> str:
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "ctxbase", "--db", db, "--project", "shop", "--embedder", "hash", "mcp",
              "--agent", "planner"],
        env=dict(os.environ),
    )  # fmt: skip
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = await session.list_tools()
        print("tools:", [t.name for t in tools.tools])
        await session.call_tool(
            "remember", {"text": "the release freezes on Friday", "session_id": "plan"}
        )
        found = await session.call_tool("search_memory", {"query": "when is the freeze"})
        hit = json.loads(found.content[0].text)["results"][0]
        print("found:", hit["text"], "by", hit["agent_id"])
        return str(hit["text"])


def main(db: str) -> str:
    return anyio.run(session_demo, db)


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        main(sys.argv[1] if len(sys.argv) > 1 else str(Path(tmp) / "memory.db"))
