"""Collecting one spec on several hardware targets of a cluster (``attest collect --ray``).

``targets`` reads targets.yaml (target name -> Ray resource requirements), ``bundle`` packs
the spec's folder into bytes with their digests and unpacks them, checked, on the worker, and
``ray_dispatch`` runs one Ray task per target and brings the evidence back (docs/scale.md).
Ray is an optional dependency (the ``ray`` extra); nothing here imports it at module level.
"""
