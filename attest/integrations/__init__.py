"""Adapters of the training monitor to training frameworks (optional dependencies)."""
