"""The training monitor (``attest.TrainingMonitor``): assurance figures sampled during training."""

from attest.collection.monitor.monitor import DEFAULT_EVERY, TrainingMonitor, probe_pair

__all__ = ["DEFAULT_EVERY", "TrainingMonitor", "probe_pair"]
