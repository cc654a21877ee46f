"""Assembly: the context layers, policies, budgets, traces and the closed loop.

from ctxbase.assemble import Assembler, ContextManager, record_outcome
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy_names import lazy_names

if TYPE_CHECKING:
    from .assembler import Assembler
    from .loop import Outcome, Produced, record_outcome
    from .manager import ContextManager
    from .memory_section import memory_section_for
    from .state import LLMConfig
    from .trace import AssembledContext, diff_contexts, explain_trace, get_trace

__all__ = [
    "AssembledContext",
    "Assembler",
    "ContextManager",
    "LLMConfig",
    "Outcome",
    "Produced",
    "diff_contexts",
    "explain_trace",
    "get_trace",
    "memory_section_for",
    "record_outcome",
]

# Each name is imported from its module on first use: sessions.py reads the lifecycle rules
# without loading policies, fact extraction and the assembler.
_LAZY = {
    "Assembler": "assembler",
    "memory_section_for": "memory_section",
    "Outcome": "loop",
    "Produced": "loop",
    "record_outcome": "loop",
    "ContextManager": "manager",
    "LLMConfig": "state",
    "AssembledContext": "trace",
    "diff_contexts": "trace",
    "explain_trace": "trace",
    "get_trace": "trace",
}


if not TYPE_CHECKING:  # mypy reads the imports above; an unknown name stays an error
    __getattr__, __dir__ = lazy_names(__name__, globals(), _LAZY)
