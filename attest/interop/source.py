"""A certificate's statement for an export: verified first, against a trust store.

An export restates what a certificate says (its subjects, verdict, findings and figures) in
another format, sometimes signed by another key: it must restate a certificate that verifies,
not whatever a file claims. :func:`verified_statement` runs the offline verifier (signatures,
payload, validity window, verdict; no artifacts at hand) and returns the statement it vouched
for, or refuses with the verifier's reason codes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from attest.core.io import sha256_file
from attest.errors import InputError

__all__ = ["VerifiedCertificate", "verified_statement"]


@dataclass(frozen=True)
class VerifiedCertificate:
    """A certificate that verified: its file digest, statement and subjects."""

    path: Path
    sha256: str
    statement: dict[str, Any]

    @property
    def predicate(self) -> dict[str, Any]:
        return dict(self.statement["predicate"])

    @property
    def subjects(self) -> dict[str, str]:
        """``{name: sha256}`` of the certificate's subjects."""
        return {s["name"]: s["digest"]["sha256"] for s in self.statement["subject"]}


def verified_statement(
    certificate: str | Path,
    trust: Any,
    *,
    at: datetime | None = None,
    revocations: list[tuple[str, bytes]] | None = None,
) -> VerifiedCertificate:
    """Verify ``certificate`` (native or Sigstore bundle form) against ``trust`` (a trust
    store or its path), as of ``at`` (default now) and honouring ``revocations``, and return
    what it says."""
    from attest.verification.verifier import verify

    path = Path(certificate)
    report = verify(
        path,
        trust=trust,
        artifacts=[],
        at=at,
        require_artifacts=False,
        record_state=False,
        revocations=revocations or [],
    )
    if not report.verified or report.statement is None:
        reasons = "; ".join(f"{code}: {message}" for code, message in report.reasons)
        raise InputError(
            f"certificate {path} does not verify ({reasons})",
            hint="export only a certificate that verifies against your trust store",
        )
    return VerifiedCertificate(path=path, sha256=sha256_file(path), statement=report.statement)
