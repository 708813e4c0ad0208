"""In-code annotations a policy may accept as waivers.

``@attest.unstable_grad(reason=...)`` marks a module class (or one instance) whose gradients
are known to be unstable for a documented reason. The collector records each annotated
module path in the evidence; a policy whose rule sets ``accept_annotations: true`` lists the
affected findings as ``waived`` (never drops them).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["ANNOTATION_ATTR", "annotation_of", "unstable_grad"]

ANNOTATION_ATTR = "__attest_unstable_grad__"
T = TypeVar("T")


def unstable_grad(*, reason: str, checks: tuple[str, ...] | None = None) -> Callable[[T], T]:
    """Mark a module class (or instance) as having known-unstable gradients.

    ``reason`` is required and is copied into the evidence and any waived finding;
    ``checks`` limits the annotation to some check ids (default: all).
    """
    if not isinstance(reason, str) or not reason.strip():
        raise ValueError(
            "unstable_grad needs a non-empty reason= saying why the gradient is unstable"
        )

    def mark(target: T) -> T:
        setattr(
            target,
            ANNOTATION_ATTR,
            {"reason": reason.strip(), "checks": list(checks) if checks else None},
        )
        return target

    return mark


def annotation_of(module: Any) -> dict[str, Any] | None:
    """The annotation on a module instance or its class, if any."""
    value = getattr(module, ANNOTATION_ATTR, None)
    return dict(value) if isinstance(value, dict) else None
