"""Operator capture: every ATen call of a run, attributed to its module, with its values."""
