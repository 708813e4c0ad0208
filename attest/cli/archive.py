"""``attest archive`` and ``attest verify-archive``: the audit archive (attest/archive/)."""

from __future__ import annotations

from pathlib import Path

import click

from attest.core.text import printable_json, safe_text
from attest.errors import EXIT_NEGATIVE

_FILE = click.Path(dir_okay=False, path_type=Path)


@click.command("archive")
@click.argument("certificate", type=_FILE)
@click.option("-o", "--output", required=True, type=_FILE, help="The zip to write.")
@click.option("--trust", "trust_path", required=True, envvar="ATTEST_TRUST", type=_FILE,
              help="The trust store the certificate verifies against (snapshot kept).")  # fmt: skip
@click.option("--evidence", type=_FILE, default=None, help="[default: evidence.json beside CERT]")
@click.option("--findings", type=_FILE, default=None, help="[default: findings.json beside CERT]")
@click.option("--report", type=_FILE, default=None, help="The HTML report to include.")
@click.option("--revocations", "revocation_files", multiple=True, type=_FILE,
              help="Revocation statements known now (repeatable).")  # fmt: skip
@click.option("--ledger", type=_FILE, default=None, help="Include the ledger inclusion proof.")
@click.option("--ledger-key", type=_FILE, default=None, help="The ledger's checkpoint public key.")
@click.option("--ledger-proof", "ledger_proof", type=_FILE, default=None,
              help="The certificate's offline ledger proof (C2SP tlog-proof, from certify "
              "--ledger-proof-out or attest ledger proof), checked against --trust "
              "[default: NAME.tlog-proof beside NAME.json, if present].")  # fmt: skip
@click.option("--at", "at_text", default=None, help="Archive time (RFC 3339; default now).")
@click.option("--key", "key_path", type=_FILE, default=None,
              help="The archivist's private key: signs the manifest (verify-archive refuses an "
              "unsigned archive).")  # fmt: skip
def archive(
    certificate: Path,
    output: Path,
    trust_path: Path,
    evidence: Path | None,
    findings: Path | None,
    report: Path | None,
    revocation_files: tuple[Path, ...],
    ledger: Path | None,
    ledger_key: Path | None,
    ledger_proof: Path | None,
    at_text: str | None,
    key_path: Path | None,
) -> None:
    """Pack a certificate and everything needed to re-verify it offline into one zip."""
    from attest.archive import build_archive
    from attest.certificate.signing import load_private_key
    from attest.cli.verify import _at, _revocations

    key = load_private_key(key_path) if key_path is not None else None
    written = build_archive(
        certificate,
        output,
        trust=trust_path,
        key=key,
        evidence=evidence,
        findings=findings,
        report=report,
        revocations=_revocations(revocation_files, str(ledger) if ledger is not None else None),
        ledger=ledger,
        ledger_key=ledger_key,
        ledger_proof=ledger_proof,
        at=_at(at_text),
    )
    click.echo(f"archive: {written}")
    if key is None:
        click.echo(
            "note: the archive is unsigned: attest verify-archive refuses it (ARCHIVE_UNSIGNED); "
            "sign it with --key ARCHIVIST.key",
            err=True,
        )
    else:
        click.echo(
            f"signed by key {key.keyid[:16]} (give it the archivist role in auditors' stores)"
        )


@click.command("verify-archive")
@click.argument("archive_path", metavar="ARCHIVE", type=_FILE)
@click.option(
    "--at", "at_text", default=None, help="Verify as of this time [default: archive time]."
)
@click.option("--trust", "trust_path", type=_FILE, default=None,
              help="A trust store you hold, with the archivist key(s) and the ledger key: "
              "without it nothing is proven and the archive is never VERIFIED.")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_context
def verify_archive(
    ctx: click.Context,
    archive_path: Path,
    at_text: str | None,
    trust_path: Path | None,
    as_json: bool,
) -> None:
    """Reproduce an archived release's verdict, proven against a trust store you hold (exit 0
    verified, 1 not: rejected, or unproven without --trust)."""
    from attest.archive import verify_archive as run
    from attest.cli.verify import _at

    result = run(archive_path, at=_at(at_text), trust=trust_path)
    if as_json:
        click.echo(printable_json(result.to_dict()))
    else:
        cert = result.certificate or {}
        model = cert.get("model") or {}
        codes = [code for code, _ in result.reasons]
        head = "VERIFIED" if result.verified else "REJECTED"
        if codes == ["TRUST_REQUIRED"]:
            head = "UNPROVEN"
        click.echo(f"{head}: {safe_text(archive_path)} {safe_text(model.get('name'))} "
                   f"{safe_text(model.get('version'))}")  # fmt: skip
        for code, message in result.reasons:
            click.echo(f"  {code}: {safe_text(message, 2000)}")
        from attest.verification.signatures import signature_line

        for sig in cert.get("signatures") or []:
            click.echo(f"  {signature_line(sig)}")
        for signer in result.signed_by:
            click.echo(f"  {safe_text(signer, 300)}")
        click.echo(f"  trust snapshot sha256: {result.trust_sha256}")
        for note in result.notes + list(cert.get("notes") or []):
            click.echo(f"  note: {safe_text(note, 2000)}")
    if not result.verified:
        ctx.exit(EXIT_NEGATIVE)
