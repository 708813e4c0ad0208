"""``attest cosign`` and ``attest revoke``: a signature added later, a certificate withdrawn.

Also the signer options (``--name --role --meaning --comment --tsa``) that ``attest certify``
and ``attest sign`` share with ``attest cosign``.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from attest.core.text import safe_text
from attest.errors import CertificateRejected, InputError

F = TypeVar("F", bound=Callable[..., Any])
MEANING_CHOICES = ("authorship", "review", "approval", "responsibility")  # certificate.signers


def signer_options(default_meaning: str | None) -> Callable[[F], F]:
    """The options that state who signs and what the signature means (21 CFR 11.50)."""

    def decorate(func: F) -> F:
        options = [
            click.option(
                "--name",
                "signer_name",
                default=None,
                help="The signer's printed name (default: ATTEST_ACTOR, else the account name).",
            ),
            click.option(
                "--role",
                "signer_role",
                default="release-engineer",
                show_default=True,
                help="The signer's role, as the trust store lists it for the key.",
            ),
            click.option(
                "--meaning",
                type=click.Choice(MEANING_CHOICES),
                default=default_meaning,
                required=default_meaning is None,
                show_default=default_meaning is not None,
                help="What the signature means.",
            ),
            click.option("--comment", default="", help="An optional comment, signed with it."),
            click.option(
                "--tsa",
                default=None,
                metavar="URL",
                help="RFC 3161 timestamp authority: embed a trusted time with the signature.",
            ),
        ]
        for option in reversed(options):
            func = option(func)
        return func

    return decorate


def identity(name: str | None, role: str, meaning: str, comment: str) -> Any:
    """A :class:`~attest.certificate.signers.SignerIdentity` from the options."""
    from attest.certificate.signers import SignerIdentity, default_identity

    who = default_identity(meaning, role)
    return SignerIdentity(name if name is not None else who.name, role, meaning, comment)


def _summary(cert: Path, report: Any) -> list[str]:
    from attest.verification.signatures import signature_line

    statement = report.statement or {}
    predicate = statement.get("predicate", {})
    model = predicate.get("model", {})
    counts = Counter(
        str(f.get("verdict")) for f in predicate.get("findings") or [] if isinstance(f, dict)
    )
    shown = ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none"
    lines = [
        f"certificate: {safe_text(cert)} ({safe_text(predicate.get('certificate_id'), 200)})",
        f"  model:    {safe_text(model.get('name'), 200)} {safe_text(model.get('version'), 64)}",
        f"  verdict:  {safe_text(predicate.get('verdict'), 32)}; findings: {safe_text(shown)}",
        f"  policy:   {safe_text((predicate.get('policy') or {}).get('id'), 200)}",
    ]
    lines += [f"  {signature_line(s)}" for s in report.signatures]
    return lines


def _verified_for_cosigning(certificate: Path, trust_path: Path) -> Any:
    """The certificate verified as it stands, except for the signatures still to come: the
    threshold and the role requirements are what co-signing is for."""
    from dataclasses import replace

    from attest.verification.trust import load_trust_store
    from attest.verification.verifier import verify

    store = load_trust_store(trust_path)
    report = verify(
        certificate,
        trust=replace(store, threshold=1, requirements=()),
        artifacts=[],
        require_artifacts=False,
        state_file=None,
    )
    if not report.verified:
        reasons = "; ".join(f"{c}: {m}" for c, m in report.reasons)
        raise CertificateRejected(
            f"refusing to co-sign {safe_text(certificate)}: it does not verify "
            f"({safe_text(reasons, 1500)})",
            hint="co-sign only a certificate that attest verify accepts",
        )
    return report


@click.command("cosign")
@click.argument("certificate", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--key", "key_path", required=True, type=click.Path(dir_okay=False, path_type=Path))
@signer_options(default_meaning=None)
@click.option(
    "--trust",
    "trust_path",
    required=True,
    envvar="ATTEST_TRUST",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Trust store to check the certificate against first (env ATTEST_TRUST).",
)
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--yes", is_flag=True, help="Do not ask for confirmation (scripts).")
def cosign(
    certificate: Path,
    key_path: Path,
    signer_name: str | None,
    signer_role: str,
    meaning: str,
    comment: str,
    tsa: str | None,
    trust_path: Path,
    output: Path,
    yes: bool,
) -> None:
    """Add your signature to a certificate, later and on another machine, without re-running
    anything. Shows what you sign and asks for confirmation (--yes for scripts)."""
    from attest.certificate.signers import add_signature
    from attest.certificate.signing import load_private_key, pae, verify_signature
    from attest.certificate.statement import write_certificate
    from attest.certificate.timestamp import timestamper
    from attest.core.io import read_json_file
    from attest.verification.envelope import parse_envelope, read_certificate

    who = identity(signer_name, signer_role, meaning, comment)
    key = load_private_key(key_path)
    report = _verified_for_cosigning(certificate, trust_path)
    envelope = parse_envelope(read_certificate(certificate))
    message = pae(envelope.payload_type, envelope.payload)
    if any(
        s.hint == key.keyid or verify_signature(key.public_key, s.sig, message)
        for s in envelope.signatures
    ):
        raise InputError(
            f"{safe_text(certificate)} is already signed by key {key.keyid[:16]}",
            hint="a key counts once; co-sign with another person's key",
        )
    for line in _summary(certificate, report):
        click.echo(line)
    click.echo(f"you sign as: {safe_text(who.name)} ({safe_text(who.role)}), {who.meaning}")
    if not yes:
        if not sys.stdin.isatty():
            raise InputError(
                "not on a terminal: confirm with --yes", hint="attest cosign ... --yes"
            )
        click.confirm("Add this signature?", abort=True)
    data = read_json_file(certificate, what="certificate")
    signed = add_signature(data, key, who, timestamper=timestamper(tsa))
    write_certificate(output, signed)
    click.echo(f"co-signed: {output} ({len(signed['signatures'])} signatures)")


@click.command("revoke")
@click.argument("certificate", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--key", "key_path", required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--reason", required=True, help="Why the certificate is withdrawn.")
@click.option("--name", "revoker", default=None, help="Your printed name (default: account name).")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--ledger",
    default=None,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also append the signed revocation to this audit ledger.",
)
@click.option(
    "--tsa",
    default=None,
    metavar="URL",
    help="RFC 3161 timestamp authority: the revocation then counts as of the token's time.",
)
@click.option(
    "--role",
    "revoker_role",
    default="release-engineer",
    show_default=True,
    help="Your role, stated in the signer attestation (with --tsa).",
)
def revoke(
    certificate: Path,
    key_path: Path,
    reason: str,
    revoker: str | None,
    output: Path,
    ledger: Path | None,
    tsa: str | None,
    revoker_role: str,
) -> None:
    """Withdraw one certificate: write a signed revocation statement (and record it in the
    ledger). `attest verify --revocations FILE` or `--ledger LEDGER` then rejects the
    certificate with CERTIFICATE_REVOKED."""
    from attest.certificate.revocation import revocation_envelope
    from attest.certificate.signers import default_identity
    from attest.certificate.signing import load_private_key
    from attest.core.io import atomic_write_json, read_json_file

    key = load_private_key(key_path)
    data = read_json_file(certificate, what="certificate")
    name = revoker if revoker is not None else default_identity().name
    from attest.certificate.timestamp import timestamper

    envelope = revocation_envelope(
        data, key, reason=reason, revoked_by=name, role=revoker_role, timestamper=timestamper(tsa)
    )
    written = atomic_write_json(output, envelope)
    click.echo(f"revocation: {written}")
    if ledger is not None:
        from attest.ledger import append_certificate

        result = append_certificate(
            ledger, certificate, event="revoked", revocation=written.read_bytes()
        )
        click.echo(f"ledger: entry {result.index} (revoked) in {ledger}")
