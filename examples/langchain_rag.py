"""LangChain over ctxbase: a retriever feeding a chain, and the chat history captured into
the same memory (offline: scripted model).

    pip install -e '.[langchain]' && python examples/langchain_rag.py
"""

from __future__ import annotations

import sys
import tempfile
import warnings
from pathlib import Path

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableLambda

sys.path.insert(0, str(Path(__file__).parent))
from scripted_model import ScriptedChatModel

import ctxbase
from ctxbase.integrations.langchain import CtxbaseChatHistory, CtxbaseRetriever


def main(db: str) -> str:
    cb = ctxbase.open(db, project="shop", embedder="hash")
    cb.anchor_document(
        "# Orders cache\n\nThe orders query is cached in Redis for 60 seconds; the key is "
        "order:{user_id}:{page}.",
        path="docs/cache.md",
    )
    retriever = CtxbaseRetriever(cb=cb, k=3)
    model = ScriptedChatModel(
        steps=[
            lambda messages: AIMessage(
                "The cache key is order:{user_id}:{page} (from "
                + messages[0].content.split("]")[0].strip("[")
                + ")."
            )
        ]
    )

    def prompt(question: str) -> list:
        docs = retriever.invoke(question)
        context = "\n".join(f"[{d.id}] {d.page_content}" for d in docs)
        return [SystemMessage(context), HumanMessage(question)]

    chain = RunnableLambda(prompt) | model
    question = "what is the cache key of the orders query?"
    answer = chain.invoke(question)
    with warnings.catch_warnings():  # BaseChatMessageHistory is deprecated in langchain-core
        warnings.simplefilter("ignore", DeprecationWarning)
        history = CtxbaseChatHistory(cb, session_id="support-1", agent_id="rag-bot")
        history.add_messages([HumanMessage(question), answer])
        print("answer:", answer.content)
        print("history:", [m.type for m in history.messages])
    # The conversation is now memory too: the next search finds it.
    print("search:", [h.item.type for h in cb.search("cache key orders").results][:4])
    cb.close()
    return str(answer.content)


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        main(sys.argv[1] if len(sys.argv) > 1 else str(Path(tmp) / "memory.db"))
