"""Prometheus metrics in the text exposition format, without a client library.

Request counts and latency histograms are kept per (method, route template, status); the
gauges (capture queue depth, dropped low-priority events, embedding backlog) are read from
the ContextBase when /metrics is scraped. Each worker process reports its own numbers.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable, Iterable

__all__ = ["LATENCY_BUCKETS", "Metrics"]

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

_Labels = tuple[str, str, str]


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _fmt(value: float) -> str:
    return repr(float(value)) if value != int(value) else f"{int(value)}"


class Metrics:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[_Labels, list[int]] = {}  # per bucket, last = +Inf
        self._sums: dict[_Labels, float] = {}
        self._counters: dict[str, float] = {}
        self._gauges: dict[str, tuple[str, Callable[[], float]]] = {}

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        labels = (method, route, str(status))
        i = bisect.bisect_left(LATENCY_BUCKETS, seconds)
        with self._lock:
            counts = self._counts.get(labels)
            if counts is None:
                counts = self._counts[labels] = [0] * (len(LATENCY_BUCKETS) + 1)
                self._sums[labels] = 0.0
            counts[i] += 1
            self._sums[labels] += seconds

    def inc(self, name: str, by: float = 1.0) -> None:
        with self._lock:
            self._counters[name] = self._counters.get(name, 0.0) + by

    def gauge(self, name: str, help_text: str, read: Callable[[], float]) -> None:
        """Register a gauge read at scrape time."""
        self._gauges[name] = (help_text, read)

    def render(self, counter_help: dict[str, str]) -> str:
        lines: list[str] = [
            "# HELP ctxbase_http_request_duration_seconds HTTP request latency.",
            "# TYPE ctxbase_http_request_duration_seconds histogram",
        ]
        with self._lock:
            snapshot = [(k, list(v), self._sums[k]) for k, v in sorted(self._counts.items())]
            counters = dict(self._counters)
        for (method, route, status), counts, total in snapshot:
            base = f'method="{_escape(method)}",route="{_escape(route)}",status="{status}"'
            running = 0
            for bound, n in zip((*LATENCY_BUCKETS, float("inf")), counts, strict=True):
                running += n
                le = "+Inf" if bound == float("inf") else _fmt(bound)
                lines.append(
                    f'ctxbase_http_request_duration_seconds_bucket{{{base},le="{le}"}} {running}'
                )
            lines.append(f"ctxbase_http_request_duration_seconds_sum{{{base}}} {total!r}")
            lines.append(f"ctxbase_http_request_duration_seconds_count{{{base}}} {running}")
        lines.extend(self._render_counters(counters, counter_help))
        for name, (help_text, read) in sorted(self._gauges.items()):
            try:
                value = float(read())
            except Exception:  # a gauge that cannot be read is skipped, not fatal
                continue
            lines += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge", f"{name} {_fmt(value)}"]
        return "\n".join(lines) + "\n"

    @staticmethod
    def _render_counters(counters: dict[str, float], helps: dict[str, str]) -> Iterable[str]:
        for name in sorted(set(counters) | set(helps)):
            yield f"# HELP {name} {helps.get(name, name)}"
            yield f"# TYPE {name} counter"
            yield f"{name} {_fmt(counters.get(name, 0.0))}"
