"""A gate for inference apps: verify a certified model folder before loading anything from it.

:func:`verify_folder` runs the whole verifier (:func:`attest.verification.verifier.verify`)
on a folder bound through its manifest (``attest certify --artifact FOLDER/``): signatures
against the trust store, validity, verdict, accepted policy, and every file of the folder
(changed: SUBJECT_MISMATCH, missing: ARTIFACT_MISSING, extra: UNEXPECTED_FILE). It returns a
:class:`FolderVerification` or raises :class:`FolderRejected` (an :class:`AttestError` with
exit code 1, carrying the report), so an app cannot forget to look at a verdict::

    from attest.verification.folder_gate import verify_folder

    verified = verify_folder("/models/spleen_ct", trust="/etc/attest/trust.yaml",
                             require_policy="clinical-strict@>=1")
    model = load_my_model(verified.folder)  # only now

No torch, no numpy: the app imports its framework after the gate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from attest.certificate.format import CERTIFICATE_NAME
from attest.errors import EXIT_NEGATIVE, AttestError, InputError
from attest.verification.outcome import VerificationReport
from attest.verification.trust import TrustStore

__all__ = ["CERTIFICATE_NAME", "FolderRejected", "FolderVerification", "verify_folder"]


class FolderRejected(AttestError):
    """The folder's certificate was rejected; ``report`` says why (``report.reasons``)."""

    exit_code = EXIT_NEGATIVE

    def __init__(self, message: str, report: VerificationReport) -> None:
        super().__init__(message, hint="do not load this model; attest verify --json shows why")
        self.report = report

    @property
    def codes(self) -> list[str]:
        """The reason codes, in the order the verifier found them."""
        return self.report.codes


@dataclass(frozen=True)
class FolderVerification:
    """A folder that verified: what was checked, against which certificate."""

    folder: Path
    certificate: Path
    name: str  # the folder's subject name in the certificate
    report: VerificationReport

    @property
    def model(self) -> dict[str, str]:
        """The certified model's name and version."""
        assert self.report.model is not None  # set on every verified report
        return self.report.model

    @property
    def policy(self) -> dict[str, Any]:
        """The policy it was certified under (id, version, digest)."""
        assert self.report.policy is not None
        return self.report.policy

    @property
    def certificate_id(self) -> str:
        assert self.report.certificate_id is not None
        return self.report.certificate_id

    @property
    def files(self) -> list[str]:
        """The folder's files whose bytes matched (relative to the folder)."""
        return sorted(self.report.folder_files.get(self.name, []))


def _certificate_for(folder: Path, certificate: str | Path | None) -> Path:
    if certificate is not None:
        return Path(certificate)
    beside, inside = folder.parent / CERTIFICATE_NAME, folder / CERTIFICATE_NAME
    found = [p for p in (beside, inside) if p.is_file()]
    if len(found) == 2:
        raise InputError(
            f"both {beside} and {inside} exist; which certifies {folder} is unclear",
            hint="pass certificate=... (attest verify: the CERT argument)",
        )
    if not found:
        raise InputError(
            f"no {CERTIFICATE_NAME} beside or inside {folder}",
            hint="pass certificate=... where the certificate is",
        )
    return found[0]


def verify_folder(
    path: str | Path,
    *,
    trust: TrustStore | str | Path,
    require_policy: str | Sequence[str] = (),
    certificate: str | Path | None = None,
    name: str | None = None,
    state_file: str | Path | None = None,
    at: datetime | None = None,
    revocations: Sequence[tuple[str, bytes]] = (),
) -> FolderVerification:
    """Verify the folder at ``path`` against its certificate and the trust store ``trust``.

    ``certificate`` defaults to ``gradient_certificate.json`` beside the folder, or inside it
    (certify leaves that name out of the folder's manifest). ``require_policy``: one or more
    ``ID[@>=VERSION]`` the certificate's policy must match (as ``attest verify
    --require-policy``). ``name`` is the folder's subject name when it is not the folder's own
    name; ``state_file`` turns on rollback protection; ``at`` verifies as of a past time;
    ``revocations`` are ``(source, bytes)`` revocation statements.

    Returns a :class:`FolderVerification`; raises :class:`FolderRejected` (exit code 1) when
    the certificate does not vouch for this folder as it is, :class:`InputError` when an input
    cannot be used.
    """
    from attest.verification.policy_accept import parse_accepted_policy
    from attest.verification.verifier import verify

    folder = Path(path)
    if not folder.is_dir():
        raise InputError(f"{folder} is not a folder", hint="pass the model folder itself")
    cert = _certificate_for(folder, certificate)
    wanted = [require_policy] if isinstance(require_policy, str) else list(require_policy)
    accepted = [parse_accepted_policy(text, "require_policy") for text in wanted]
    subject = name or folder.resolve().name
    report = verify(
        cert,
        trust=trust,
        artifacts=[(subject, folder)],
        at=at,
        state_file=state_file,
        accepted_policies=accepted,
        revocations=tuple(revocations),
    )
    if not report.verified:
        why = "; ".join(f"{code}: {message}" for code, message in report.reasons[:5])
        more = len(report.reasons) - 5
        raise FolderRejected(
            f"{folder} is not what {cert} certifies: {why}"
            + (f" (and {more} more)" if more > 0 else ""),
            report,
        )
    return FolderVerification(folder=folder, certificate=cert, name=subject, report=report)
