"""``attest export``: the certificate in the supply chain's formats (docs/interop.md).

    attest export bundle CERT -o cert.sigstore.json
    attest export test-result CERT --trust trust.yaml --key release.key -o test-result.json
    attest export cyclonedx CERT --trust trust.yaml -o bom.cdx.json
    attest export verify FILE --trust trust.yaml [--certificate CERT]

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
@click.pass_context
def verify_export(
    ctx: click.Context, file: Path, trust_path: Path, certificate: Path | None
) -> None:
    """Check an export (bundle, test result, BOM) and tie it back to its certificate."""
    from attest.interop.check import check_export

    cert = _verified(certificate, trust_path) if certificate is not None else None
    kind, reasons = check_export(file, trust_path, cert)
    if reasons:
        click.echo(f"REJECTED ({kind}): {safe_text(file)}")
        for reason in reasons:
            click.echo(f"  {safe_text(reason, 2000)}")
        ctx.exit(EXIT_NEGATIVE)
    tied = " and restates the certificate" if cert is not None else ""
    click.echo(f"OK ({kind}): {safe_text(file)} holds{tied}")
