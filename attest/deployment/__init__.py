"""Deployment: what the release side hands the clinical server, as both sides read it.

The contract between :mod:`attest.collection.export` (release side, with torch: it exports
``model.onnx`` and writes ``probe.npz``) and :mod:`attest.verification` (server side, never
torch): the certified onnxruntime session settings (:mod:`~attest.deployment.runtime`), the
probe bundle format (:mod:`~attest.deployment.probe_bundle`), the runtime environment and its
comparison (:mod:`~attest.deployment.environment`), and the external data an ONNX model refers
to (:mod:`~attest.deployment.onnx_refs`). The probe that runs the model on the server is
:mod:`attest.verification.probe`.

This package module imports nothing, so importing a server-side module never pulls torch.
"""
