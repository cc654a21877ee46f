"""Assembly: the context layers, policies, budgets, traces and the closed loop.

from ctxbase.assemble import Assembler, ContextManager, record_outcome
"""

from __future__ import annotations

from .assembler import Assembler, memory_section_for
from .loop import Outcome, Produced, record_outcome
from .manager import ContextManager
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
