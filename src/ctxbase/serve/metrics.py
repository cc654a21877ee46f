"""Prometheus metrics through prometheus_client.

Request counts and latency histograms are kept per (method, route template, status);
counters are named in COUNTER_HELP (serve/runtime.py); the gauges (capture queue depth,
dropped low-priority events, embedding backlog, cached assemblies) are read from the
running service when /metrics is scraped.

One process: each app has a registry of its own, so several apps in one process (tests,
benchmarks) do not add up each other's requests. Several workers (`ctxbase serve
--workers N`): `run_server` points $PROMETHEUS_MULTIPROC_DIR at a temporary directory it
owns; every worker's counters and histograms are written there, and /metrics, whichever
worker answers it, sums them all. The scrape-time gauges are the answering worker's own
(the embedding backlog is the store's, the same for every worker).

Cost, measured against the hand-written exposition this replaced (2 busy cores): one
request's observation 6 us either way in one process (the labelled series is looked up
once, not per request), 13 us with shared files under several workers; a request on the
fastest path (a cached assembly) takes about 300 us, so neither argues against the switch.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest, values
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

__all__ = ["LATENCY_BUCKETS", "MULTIPROCESS_ENV", "Metrics"]

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

# prometheus_client's switch to multi-process mode; read when it is first imported.
MULTIPROCESS_ENV = "PROMETHEUS_MULTIPROC_DIR"


class _ScrapeGauges(Collector):
    """Gauges whose value is read when /metrics is scraped."""

    def __init__(self) -> None:
        self.readers: dict[str, tuple[str, Callable[[], float]]] = {}

    def collect(self) -> Iterator[Metric]:
        for name, (help_text, read) in sorted(self.readers.items()):
            try:
                value = float(read())
            except Exception:  # a gauge that cannot be read is skipped, not fatal
                continue
            yield GaugeMetricFamily(name, help_text, value=value)


def _shared_dir() -> str | None:
    """The directory every worker writes its values to, when prometheus_client was
    imported in multi-process mode (the variable set before the import)."""
    if values.ValueClass is values.MutexValue:
        return None
    return os.environ.get(MULTIPROCESS_ENV) or None


class Metrics:
    def __init__(self, counter_help: Mapping[str, str] | None = None) -> None:
        self._multiprocess_dir = _shared_dir()
        self._lock = threading.Lock()  # one Counter per name, however many threads ask
        self._registry = CollectorRegistry()
        self._latency = Histogram(
            "ctxbase_http_request_duration_seconds",
            "HTTP request latency.",
            ("method", "route", "status"),
            buckets=LATENCY_BUCKETS,
            registry=self._registry,
        )
        self._series: dict[tuple[str, str, int], Histogram] = {}
        self._counters: dict[str, Counter] = {}
        self._gauges = _ScrapeGauges()
        # Every counter exists (at 0) from the start: a dashboard sees it before it moves.
        for name, help_text in (counter_help or {}).items():
            self._counter(name, help_text)

    def _counter(self, name: str, help_text: str | None = None) -> Counter:
        counter = self._counters.get(name)
        if counter is None:
            with self._lock:
                counter = self._counters.get(name)
                if counter is None:
                    counter = Counter(name, help_text or name, registry=self._registry)
                    self._counters[name] = counter
        return counter

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        key = (method, route, status)
        series = self._series.get(key)
        if series is None:  # labels() checks and locks each time: done once per series
            series = self._series.setdefault(key, self._latency.labels(method, route, str(status)))
        series.observe(seconds)

    def inc(self, name: str, by: float = 1.0) -> None:
        self._counter(name).inc(by)

    def gauge(self, name: str, help_text: str, read: Callable[[], float]) -> None:
        """Register a gauge read at scrape time."""
        self._gauges.readers[name] = (help_text, read)

    def render(self, counter_help: Mapping[str, str] | None = None) -> str:
        """The text exposition format: this process's metrics, or with several workers,
        every worker's counters and histograms summed."""
        for name, help_text in (counter_help or {}).items():
            self._counter(name, help_text)
        if self._multiprocess_dir is None:
            counted = generate_latest(self._registry)
        else:
            merged = CollectorRegistry()
            MultiProcessCollector(merged, path=self._multiprocess_dir)  # type: ignore[no-untyped-call]
            counted = generate_latest(merged)
        gauges = CollectorRegistry()
        gauges.register(self._gauges)
        return (counted + generate_latest(gauges)).decode("utf-8")
