"""ctxbase inside agent frameworks: the agent-callable tools (`tools`), an MCP server
(`mcp_server`), a LangGraph store (`langgraph_store`), LangChain retriever and chat
history (`langchain`), an AutoGen memory (`autogen_memory`) and LlamaIndex retriever and
chat memory (`llamaindex`); the last three recall through `recall`. Each module imports its
framework only when it is imported, and says which extra to install when the framework is
missing."""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["require"]


def require(module: str, extra: str) -> ModuleType:
    """Import an optional framework, or explain which ctxbase extra provides it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"this ctxbase integration needs {module!r}, which is not installed: "
            f"pip install 'ctxbase[{extra}]'"
        ) from exc
