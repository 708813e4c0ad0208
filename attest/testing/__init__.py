"""Gradient checks inside a project's own test suite (the pytest plugin and what it calls)."""
