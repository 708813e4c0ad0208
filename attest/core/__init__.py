"""Foundations every stage shares: atomic files and strict JSON, strict YAML, safe text, times and durations, progress."""
