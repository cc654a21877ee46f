"""What every request handler shares: settings, the ContextBase, limits, metrics, cache."""

from __future__ import annotations

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
}


@dataclass
class Runtime:
    settings: ServerSettings
    cb: ContextBase
    limiter: RateLimiter
    cache: AssembleCache
    metrics: Metrics = field(default_factory=Metrics)
