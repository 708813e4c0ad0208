"""Policies and their evaluation of evidence into findings."""
