"""Deployment: the ONNX artifact the clinical server runs, bound into the certificate.

Release side (imports torch): :mod:`attest.collection.export.onnx_export` (dynamo export, ``onnx.checker``,
node -> certified operator mapping) and :mod:`attest.collection.export.check` (the ``export``
check, which also writes ``model.onnx`` and ``probe.npz``).

Server side (numpy and onnxruntime only, never torch): :mod:`attest.verification.probe` (the
behavioural probe behind ``attest verify --probe``), :mod:`attest.deployment.probe_bundle`,
:mod:`attest.deployment.runtime` (the certified session settings) and
:mod:`attest.deployment.environment` (``--check-environment``).

This package module imports nothing, so importing a server-side module never pulls torch.
"""
