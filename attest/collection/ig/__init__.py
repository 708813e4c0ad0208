"""Integrated gradients and their sanity checks (docs/ig.md)."""
