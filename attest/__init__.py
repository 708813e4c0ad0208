"""gradient-attest: certify the gradients of trained PyTorch models for clinical use.

Typical use on the release machine::

    import attest
    result = attest.certify("examples/digits/attest.yaml",
                            policy="policies/clinical-strict.yaml",
                            key="keys/release.key",
                            out="gradient_certificate.json")
    print(result.verdict)

and on the deployment server (no torch needed)::

    report = attest.verify("gradient_certificate.json", trust="trust.yaml",
                           artifacts=["model.onnx"])
    assert report.verified, report.reasons

Names are re-exported lazily (PEP 562), so ``import attest`` stays free of torch and numpy;
only the collect side imports torch, when it is used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from attest._version import __version__
from attest.errors import AttestError

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from attest.annotations import unstable_grad
    from attest.collection import collect
    from attest.collection.gradients.custom_ops import register_custom_op
    from attest.collection.ig.attribution import integrated_gradients
    from attest.collection.monitor import TrainingMonitor
    from attest.pipeline import certify
    from attest.policy.engine import evaluate
    from attest.verification.verifier import verify

__all__ = [
    "AttestError",
    "TrainingMonitor",
    "__version__",
    "certify",
    "collect",
    "evaluate",
    "integrated_gradients",
    "register_custom_op",
    "unstable_grad",
    "verify",
]

_LAZY: dict[str, str] = {
    "certify": "attest.pipeline",
    "collect": "attest.collection",
    "evaluate": "attest.policy.engine",
    "verify": "attest.verification.verifier",
    "integrated_gradients": "attest.collection.ig.attribution",
    "register_custom_op": "attest.collection.gradients.custom_ops",
    "unstable_grad": "attest.annotations",
    "TrainingMonitor": "attest.collection.monitor",
}


def __getattr__(name: str) -> Any:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'attest' has no attribute {name!r}")
    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
