"""``attest export``: the certificate in the supply chain's formats (docs/interop.md).

    attest export bundle CERT -o cert.sigstore.json
    attest export test-result CERT --trust trust.yaml --key release.key -o test-result.json
    attest export cyclonedx CERT --trust trust.yaml -o bom.cdx.json
    attest export verify FILE --trust trust.yaml [--certificate CERT [--revocations R]]
                         [--at TIME] [--json]

Exit codes: 0 written (or, for verify, the export holds), 1 the export does not hold,
2 bad input (an unreadable file, a certificate that does not verify).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from attest.core.text import safe_text
from attest.errors import EXIT_NEGATIVE, InputError

_FILE = click.Path(dir_okay=False, path_type=Path)


@click.group("export")
def export() -> None:
    """Write a certificate as a Sigstore bundle, an in-toto test result or a CycloneDX ML-BOM."""


@export.command("bundle")
@click.argument("certificate", type=_FILE)
@click.option("-o", "--output", required=True, type=_FILE, help="Where to write the bundle.")
def bundle(certificate: Path, output: Path) -> None:
    """Write CERTIFICATE as a Sigstore bundle v0.3 (the same DSSE envelope inside)."""
    from attest.certificate.bundle import dropped_signer_blocks, is_bundle, to_bundle
    from attest.core.io import atomic_write_json, read_json_file

    doc = read_json_file(certificate, what="certificate")
    if is_bundle(doc):
        raise InputError(f"{safe_text(certificate)} is already a Sigstore bundle")
    if not isinstance(doc, dict) or set(doc) != {"payload", "payloadType", "signatures"}:
        raise InputError(f"{safe_text(certificate)} is not a certificate (a DSSE envelope)")
    atomic_write_json(output, to_bundle(doc))
    click.echo(f"bundle: {output}")
    dropped = dropped_signer_blocks(doc)
    if dropped:
        click.echo(
            f"note: {dropped} signer attestation(s) (name, role, meaning, timestamp) are not "
            "carried by a Sigstore bundle; keep the native certificate as the signed record",
            err=True,
        )


def _verified(certificate: Path, trust: Path) -> Any:
    from attest.interop.source import verified_statement

    return verified_statement(certificate, trust)


@export.command("test-result")
@click.argument("certificate", type=_FILE)
@click.option("--trust", "trust_path", required=True, envvar="ATTEST_TRUST", type=_FILE,
              help="Trust store the certificate must verify against first.")  # fmt: skip
@click.option("--key", "key_path", required=True, type=_FILE, help="Key that signs the statement.")
@click.option("-o", "--output", required=True, type=_FILE, help="Where to write the envelope.")
def test_result(certificate: Path, trust_path: Path, key_path: Path, output: Path) -> None:
    """Write the in-toto test-result attestation of a (verified) CERTIFICATE."""
    from attest.certificate.signing import load_private_key
    from attest.core.io import atomic_write_json
    from attest.interop.test_result import sign_test_result, test_result_statement

    cert = _verified(certificate, trust_path)
    key = load_private_key(key_path)
    atomic_write_json(output, sign_test_result(cert, key))
    result = test_result_statement(cert)["predicate"]["result"]
    click.echo(f"test-result ({result}): {output}")


@export.command("cyclonedx")
@click.argument("certificate", type=_FILE)
@click.option("--trust", "trust_path", required=True, envvar="ATTEST_TRUST", type=_FILE,
              help="Trust store the certificate must verify against first.")  # fmt: skip
@click.option("-o", "--output", required=True, type=_FILE, help="Where to write the BOM.")
@click.option("--format", "bom_format", type=click.Choice(["cyclonedx", "spdx"]),
              default="cyclonedx", show_default=True,
              help="spdx: the SPDX 3.0.1 AI profile instead (as attest export spdx).")  # fmt: skip
def cyclonedx(certificate: Path, trust_path: Path, output: Path, bom_format: str) -> None:
    """Write the CycloneDX 1.6 ML-BOM of a (verified) CERTIFICATE."""
    from attest.core.io import atomic_write_json

    cert = _verified(certificate, trust_path)
    if bom_format == "spdx":
        _write_spdx(cert, output)
        return
    from attest.interop.cyclonedx import cyclonedx_bom

    atomic_write_json(output, cyclonedx_bom(cert))
    click.echo(f"cyclonedx: {output}")


def _write_spdx(cert: Any, output: Path) -> None:
    from attest.core.io import atomic_write_bytes
    from attest.interop.spdx import spdx_document

    atomic_write_bytes(output, spdx_document(cert))
    click.echo(f"spdx: {output}")


@export.command("spdx")
@click.argument("certificate", type=_FILE)
@click.option("--trust", "trust_path", required=True, envvar="ATTEST_TRUST", type=_FILE,
              help="Trust store the certificate must verify against first.")  # fmt: skip
@click.option("-o", "--output", required=True, type=_FILE, help="Where to write the document.")
def spdx(certificate: Path, trust_path: Path, output: Path) -> None:
    """Write the SPDX 3.0.1 document (AI profile) of a (verified) CERTIFICATE."""
    _write_spdx(_verified(certificate, trust_path), output)


@export.command("verify")
@click.argument("file", type=_FILE)
@click.option("--trust", "trust_path", required=True, envvar="ATTEST_TRUST", type=_FILE,
              help="Trust store (signatures of bundles and test results).")  # fmt: skip
@click.option("--certificate", type=_FILE, default=None,
              help="Also check that FILE restates this (verified) certificate.")  # fmt: skip
@click.option("--revocations", "revocation_files", multiple=True, type=_FILE,
              help="A signed revocation of the certificate to honour (repeatable).")  # fmt: skip
@click.option("--at", "at_text", default=None,
              help="Judge keys and validity as of this time (RFC 3339; default now).")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_context
def verify_export(
    ctx: click.Context,
    file: Path,
    trust_path: Path,
    certificate: Path | None,
    revocation_files: tuple[Path, ...],
    at_text: str | None,
    as_json: bool,
) -> None:
    """Check an export (bundle, test result, BOM) and tie it back to its certificate.

    Signatures are judged exactly as attest verify judges a certificate's (threshold, key
    validity windows, revoked keys, role requirements, trusted time)."""
    from datetime import datetime, timezone

    from attest.cli.output import echo_json
    from attest.core.files import read_bytes_checked
    from attest.core.io import MAX_JSON_BYTES
    from attest.core.times import parse_moment
    from attest.interop.check import check_export
    from attest.interop.source import verified_statement
    from attest.verification.trust import load_trust_store

    at = parse_moment(at_text) if at_text else datetime.now(timezone.utc)
    store = load_trust_store(trust_path)
    revocations = [
        (safe_text(p), read_bytes_checked(p, what="revocation", max_bytes=MAX_JSON_BYTES))
        for p in revocation_files
    ]
    if revocations and certificate is None:
        raise InputError("--revocations applies to the certificate: give --certificate too")
    cert = None
    if certificate is not None:
        cert = verified_statement(certificate, store, at=at, revocations=revocations)
    result = check_export(file, store, cert, at)
    if as_json:
        echo_json(result.to_dict(file, cert is not None))
    elif result.reasons:
        click.echo(f"REJECTED ({result.kind}): {safe_text(file)}")
        for code, reason in result.reasons:
            click.echo(f"  {code}: {safe_text(reason, 2000)}")
    else:
        tied = " and restates the certificate" if cert is not None else ""
        click.echo(f"OK ({result.kind}): {safe_text(file)} holds{tied}")
    if not as_json:
        for note in result.notes:
            click.echo(f"  note: {safe_text(note, 2000)}")
    if result.reasons:
        ctx.exit(EXIT_NEGATIVE)
