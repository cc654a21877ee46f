"""What every request handler shares: settings, the ContextBase, limits, metrics, cache."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from ..contextbase import ContextBase
from .auth import RateLimiter
from .cache import AssembleCache
from .metrics import Metrics
from .settings import ServerSettings

__all__ = ["COUNTER_HELP", "Runtime"]

COUNTER_HELP = {
    "ctxbase_rate_limited_total": "Requests refused by the per-key rate limit.",
    "ctxbase_auth_failures_total": "Requests refused for a missing, invalid or revoked key.",
    "ctxbase_assemble_cache_hits_total": "Assemblies answered from the cache.",
    "ctxbase_assemble_total": "Assemblies computed.",
    "ctxbase_assemble_memory_hits_total": "Computed assemblies that injected retrieved memory.",
    "ctxbase_assemble_fallbacks_total": "Computed assemblies with no memory above the floor.",
    "ctxbase_assemble_memory_tokens_total": "Tokens of retrieved memory injected.",
    "ctxbase_assemble_prompt_tokens_total": "Tokens of the assembled prompts.",
    "ctxbase_assemble_retrieval_seconds_total": "Time the assembly strategies spent retrieving.",
}


@dataclass
class Runtime:
    settings: ServerSettings
    cb: ContextBase
    limiter: RateLimiter
    cache: AssembleCache
    metrics: Metrics = field(default_factory=Metrics)
    # How many assemblies may run at once in this process. Over a store whose reads never
    # wait, an assembly is pure CPU under the GIL: run side by side they only slow each
    # other down (measured: 10 threads gave 40/s against 60/s one at a time), so one at a
    # time; other stores wait on the network, where overlapping pays.
    assemble_slots: threading.BoundedSemaphore = field(init=False)

    def __post_init__(self) -> None:
        self.assemble_slots = threading.BoundedSemaphore(1 if self.cb.store.reads_never_wait else 8)
