"""The audit archive: deterministic bytes, the verdict reproduced from the archive and proven
against the auditor's trust store, and every tampering (a byte changed, a file missing, the
trust snapshot replaced) rejected with its reason code and no traceback. The attacks on the
signed manifest and the ledger proof are in test_archive_table.py, the zip bombs in
test_archive_bombs.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _archive_kit import Release, make_release, members, relist, rezip
from _certfactory import NOW, World, iso, sign_as
from _cli_run import run
from _signer_cases import RE
from _tsa import make_tsa, needs_openssl

from attest.archive import build_archive, verify_archive
from attest.errors import CertificateRejected


@pytest.fixture
def release(tmp_path: Path) -> Release:
    return make_release(tmp_path)


@needs_openssl
def test_archive_is_deterministic_and_verifies_from_itself(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    r = make_release(tmp_path, tsa=make_tsa(tmp_path / "tsa"))
    first = r.build()
    again = r.build("again.zip")
    assert first.read_bytes() == again.read_bytes()
    assert {
        "manifest.json",
        "manifest.dsse.json",
        "certificate.json",
        "trust.yaml",
        "verification.json",
        "evidence.json",
        "findings.json",
        "timestamps/sig-0.tsr",
        "revocations/0.json",
        "ledger/inclusion-proof.json",
        "ledger/ledger-key.pub",
    } == set(members(first))
    # nothing but the zip and the auditor's own trust store: the originals are gone
    for name in ("cert.json", "trust.yaml", "evidence.json", "ledger.sqlite", "ledger.pub"):
        (r.root / name).unlink()
    result = verify_archive(first, trust=r.auditor)
    assert result.verified, result.reasons
    assert any("ledger inclusion proof verified against fleet-log" in n for n in result.notes)
    assert result.signed_by and "archivist" in result.signed_by[0]
    code, out, _ = run(capsys, "verify-archive", first, "--trust", r.auditor)
    assert code == 0 and "VERIFIED" in out and "timestamped" in out and "by test-tsa" in out
    assert "archive signed by archivist" in out
    # years later the archive time still judges; a later time is the user's explicit question
    code, out, _ = run(
        capsys, "verify-archive", first, "--trust", r.auditor, "--at", "2040-01-01T00:00:00Z",
        "--json",
    )  # fmt: skip
    assert code == 1 and json.loads(out)["reasons"][0]["code"] == "EXPIRED"


def test_without_a_trust_store_nothing_is_verified(
    release: Release, capsys: pytest.CaptureFixture[str]
) -> None:
    path = release.build()
    result = verify_archive(path)
    assert not result.verified and [c for c, _ in result.reasons] == ["TRUST_REQUIRED"]
    code, out, _ = run(capsys, "verify-archive", path)
    assert code == 1 and out.startswith("UNPROVEN") and "VERIFIED" not in out
    assert "--trust" in out
    code, out, _ = run(capsys, "verify-archive", path, "--json")
    assert code == 1 and json.loads(out)["verified"] is False


def _tamper_byte(path: Path) -> Path:
    files = members(path)
    data = bytearray(files["evidence.json"])
    data[2] ^= 0x01
    files["evidence.json"] = bytes(data)
    return rezip(path, files)


def _tamper_missing(path: Path) -> Path:
    files = members(path)
    del files["findings.json"]
    return rezip(path, files)


def _tamper_certificate_byte(path: Path) -> Path:
    files = members(path)
    data = bytearray(files["certificate.json"])
    data[len(data) // 2] ^= 0x01
    files["certificate.json"] = bytes(data)
    return rezip(path, files)


def _tamper_trust_snapshot(path: Path) -> Path:
    files = members(path)
    files["trust.yaml"] = files["trust.yaml"].replace(b"threshold: 1", b"threshold: 2")
    return rezip(path, files)


def _tamper_trust_and_manifest(path: Path) -> Path:
    """The snapshot replaced by one without the signer, and manifest.json made to match."""
    files = members(path)
    text = files["trust.yaml"].decode()
    cut = text.index("- keyid:")
    second = text.index("- keyid:", cut + 1)
    files["trust.yaml"] = (text[:cut] + text[second:]).encode()
    return rezip(path, relist(files))


def _tamper_evidence_and_manifest(path: Path) -> Path:
    files = members(path)
    files["evidence.json"] = b'{"checks": {"forged": true}}\n'
    return rezip(path, relist(files))


@pytest.mark.parametrize(
    ("tamper", "code"),
    [
        (_tamper_byte, "ARCHIVE_INVALID"),
        (_tamper_missing, "ARCHIVE_INVALID"),
        (_tamper_certificate_byte, "ARCHIVE_INVALID"),
        (_tamper_trust_snapshot, "ARCHIVE_INVALID"),
        (_tamper_trust_and_manifest, "ARCHIVE_INVALID"),
        (_tamper_evidence_and_manifest, "ARCHIVE_INVALID"),
    ],
)
def test_tampered_archive_is_rejected(
    release: Release, capsys: pytest.CaptureFixture[str], tamper: Any, code: str
) -> None:
    path = tamper(release.build())
    result = verify_archive(path, trust=release.auditor)
    assert not result.verified and result.reasons[0][0] == code, result.reasons
    exit_code, out, _ = run(capsys, "verify-archive", path, "--trust", release.auditor, "--json")
    assert exit_code == 1 and json.loads(out)["reasons"][0]["code"] == code


def test_replaced_snapshot_with_matching_manifest_is_caught_by_the_signature(
    release: Release, capsys: pytest.CaptureFixture[str]
) -> None:
    files = members(release.build())
    files["trust.yaml"] += b"# edited\n"
    path = rezip(release.root / "edited.zip", relist(files))
    result = verify_archive(path, trust=release.auditor)
    assert result.reasons[0][0] == "ARCHIVE_INVALID" and "trust.yaml" in result.reasons[0][1]
    assert "signed manifest.dsse.json" in result.reasons[0][1]
    code, _, _ = run(capsys, "verify-archive", path, "--trust", release.auditor)
    assert code == 1


def test_not_a_zip_and_a_rejected_certificate(
    release: Release, capsys: pytest.CaptureFixture[str]
) -> None:
    junk = release.root / "junk.zip"
    junk.write_bytes(b"PK\x03\x04 not really")
    assert verify_archive(junk, trust=release.auditor).reasons[0][0] == "ARCHIVE_INVALID"
    w: World = release.world
    forged = w.write(sign_as(w.statement(), [(w.attacker, RE, "authorship")]), "forged.json")
    with pytest.raises(CertificateRejected):
        build_archive(forged, release.root / "x.zip", trust=release.trust, at=NOW)
    code, _, err = run(
        capsys, "archive", forged, "-o", release.root / "x.zip", "--trust", release.trust,
        "--at", iso(NOW),
    )  # fmt: skip
    assert code == 1 and "does not verify" in err
