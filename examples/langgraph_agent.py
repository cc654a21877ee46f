"""A LangGraph ReAct agent whose long-term memory is ctxbase (offline: scripted model).

    pip install -e '.[langgraph]' && python examples/langgraph_agent.py

Thread 1 saves a preference through the store; thread 2, a new conversation, recalls it
by meaning. The memory is also an ordinary ctxbase entity that `ctxbase search` finds.
"""

from __future__ import annotations

import sys
import tempfile
import uuid
import warnings
from pathlib import Path
from typing import Annotated

from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.store.base import BaseStore

sys.path.insert(0, str(Path(__file__).parent))
from scripted_model import ScriptedChatModel, last_tool_result

import ctxbase
from ctxbase.integrations.langgraph_store import CtxbaseStore

with warnings.catch_warnings():  # create_react_agent moved to langchain.agents in 1.x
    warnings.simplefilter("ignore")
    from langgraph.prebuilt import InjectedStore, create_react_agent


@tool
def save_memory(content: str, store: Annotated[BaseStore, InjectedStore()]) -> str:
    """Remember something about the user for later conversations."""
    store.put(("memories", "alice"), uuid.uuid4().hex, {"text": content})
    return "saved"


@tool
def recall(query: str, store: Annotated[BaseStore, InjectedStore()]) -> str:
    """Look up what is remembered about the user."""
    hits = store.search(("memories", "alice"), query=query, limit=3)
    return "; ".join(h.value["text"] for h in hits) or "nothing remembered"


def main(db: str) -> str:
    cb = ctxbase.open(db, project="assistant", embedder="hash")
    store = CtxbaseStore(cb)
    model = ScriptedChatModel(
        steps=[
            AIMessage("", tool_calls=[{"name": "save_memory", "id": "1", "args": {
                "content": "Alice prefers PostgreSQL 18 for new services"}}]),
            AIMessage("Noted: PostgreSQL 18 it is."),
            AIMessage("", tool_calls=[{"name": "recall", "id": "2", "args": {
                "query": "which database does Alice prefer"}}]),
            lambda messages: AIMessage(f"From memory: {last_tool_result(messages)}"),
        ]
    )  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        agent = create_react_agent(model, [save_memory, recall], store=store)
    agent.invoke({"messages": [("user", "I like PostgreSQL 18 for new services")]})
    answer = agent.invoke({"messages": [("user", "Which database should I use?")]})
    reply = str(answer["messages"][-1].content)
    print("thread 2:", reply)
    hits = cb.search("PostgreSQL", preset="keyword").results
    # An item's text is its namespace, then its value: show the value.
    print("ctxbase search:", [h.item.text.splitlines()[-1][:80] for h in hits])
    cb.close()
    return reply


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        main(sys.argv[1] if len(sys.argv) > 1 else str(Path(tmp) / "memory.db"))
