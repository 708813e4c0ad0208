"""Deployment: the ONNX artifact the clinical server runs, bound into the certificate.

Release side (imports torch): :mod:`attest.deploy.export` (dynamo export, ``onnx.checker``,
node -> certified operator mapping) and :mod:`attest.deploy.export_check` (the ``export``
check, which also writes ``model.onnx`` and ``probe.npz``).

Server side (numpy and onnxruntime only, never torch): :mod:`attest.deploy.probe` (the
behavioural probe behind ``attest verify --probe``), :mod:`attest.deploy.probe_bundle`,
:mod:`attest.deploy.runtime` (the certified session settings) and
:mod:`attest.deploy.environment` (``--check-environment``).

This package module imports nothing, so importing a server-side module never pulls torch.
"""
