"""OpenMetrics for ``GET /metrics`` (``prometheus_client``, one registry per service)."""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.openmetrics.exposition import CONTENT_TYPE_LATEST, generate_latest

__all__ = ["CONTENT_TYPE", "ServiceMetrics"]

CONTENT_TYPE = CONTENT_TYPE_LATEST
_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class ServiceMetrics:
    """Entries, append latency, checkpoint age, submissions by outcome, batches."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.checkpoint_time = time.time()
        self.entries = Gauge(
            "attest_ledger_entries", "Entries in the served checkpoint.", registry=self.registry
        )
        self.append_latency = Histogram(
            "attest_ledger_append_latency_seconds",
            "From a write being queued to its batch being committed.",
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        age = Gauge(
            "attest_ledger_checkpoint_age_seconds",
            "Seconds since the served checkpoint was signed.",
            registry=self.registry,
        )
        age.set_function(lambda: time.time() - self.checkpoint_time)
        self.submissions = Counter(
            "attest_ledger_submissions",
            "Write requests by outcome.",
            ["outcome"],
            registry=self.registry,
        )
        self.batches = Counter(
            "attest_ledger_batches", "Committed append batches.", registry=self.registry
        )
        self.failures = Counter(
            "attest_ledger_append_failures",
            "Writes that failed to commit (answered 503).",
            registry=self.registry,
        )

    def render(self) -> bytes:
        """The OpenMetrics text exposition (ends in ``# EOF``)."""
        return bytes(generate_latest(self.registry))  # type: ignore[no-untyped-call]
