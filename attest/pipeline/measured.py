"""The certify-side guard: evidence that measured nothing is never signed, under any policy.

A policy decides what a measured figure is worth (``research`` only warns); it cannot make a
certificate of evidence where the model's reference run raised (``Evidence.model_failure``) or
where every check errored on every item: there is then no figure for any verdict to rest on. The
collect preflight stops most such models first; this guard holds for ``certify --evidence``
too, whatever the evidence file's statuses say.
"""

from __future__ import annotations

from attest.errors import EvidenceError
from attest.evidence.model import CheckResult, Evidence

__all__ = ["nothing_measured", "require_measured"]

_MEASURED = ("pass", "fail", "warn")  # item statuses that rest on a figure


def _all_errored(result: CheckResult) -> bool:
    """The check errored as a whole, or every one of its items errored."""
    if result.status == "error":
        return True
    return bool(result.items) and all(i.status == "error" for i in result.items)


def nothing_measured(evidence: Evidence) -> str | None:
    """Why ``evidence`` holds no measurement to certify (``None`` when it holds some)."""
    failure = evidence.model_failure
    if failure is not None:
        where = failure.module or (f"operator {failure.op}" if failure.op else "the model")
        return (
            f"the model's reference run raised in the {failure.phase} pass at {where} "
            f"({failure.error_type}: {failure.message[:300]})"
        )
    attempted = {
        name: r for name, r in evidence.checks.items() if r.status in ("computed", "error")
    }
    if not attempted:
        return None
    if any(i.status in _MEASURED for r in attempted.values() for i in r.items):
        return None
    if all(_all_errored(r) for r in attempted.values()):
        return f"every check errored on every item ({', '.join(sorted(attempted))})"
    return None


def require_measured(evidence: Evidence, source: str = "the evidence") -> None:
    """Raise an :class:`EvidenceError` (exit 2) when ``evidence`` measured nothing."""
    why = nothing_measured(evidence)
    if why is not None:
        raise EvidenceError(
            f"refusing to sign: {source} measured nothing: {why}",
            hint="fix the model so that its forward and backward run (attest collect shows "
            "where it raised), collect again, then certify; no policy can certify this",
        )
