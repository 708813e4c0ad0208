"""The audit archive: deterministic bytes, the verdict reproduced from the archive alone, and
every tampering (a byte changed, a file missing, the trust snapshot replaced) rejected with its
reason code and no traceback."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import Any

import pytest
from _certfactory import NOW, World, iso, make_world, sign_as
from _cli_run import run
from _signer_cases import RE
from _tsa import make_tsa, needs_openssl

from attest.archive import build_archive, verify_archive
from attest.certificate.revocation import revocation_envelope
from attest.certificate.signing import public_key_pem
from attest.errors import CertificateRejected
from attest.verification.trust import TimestampAuthority, save_trust_store


@pytest.fixture
def release(tmp_path: Path) -> dict[str, Any]:
    """A signed, timestamped certificate with its evidence, findings, a revocation of another
    certificate, and a ledger holding it under a signed checkpoint."""
    from dataclasses import replace

    from attest.ledger import append_certificate, open_ledger

    w = make_world(tmp_path)
    evidence = tmp_path / "evidence.json"
    evidence.write_text('{"checks": {}}\n')
    from attest.core.io import sha256_file

    statement = w.statement(evidence_digest={"sha256": sha256_file(evidence)})
    tsa = make_tsa(tmp_path / "tsa")
    cert = w.write(sign_as(statement, [(w.key, RE, "authorship")], timestamper=tsa.stamp_message))
    (tmp_path / "findings.json").write_text('{"verdict": "pass"}\n')
    authorities = (TimestampAuthority("test-tsa", tsa.root_pem),)
    trust = save_trust_store(
        replace(w.trust, timestamp_authorities=authorities), tmp_path / "trust.yaml"
    )
    other = w.write(w.envelope(certificate_id="cert-0009"), "other.json")
    revocation = revocation_envelope(
        json.loads(other.read_text()), w.key, reason="other", revoked_by="Dr Test"
    )
    ledger = tmp_path / "ledger.sqlite"
    append_certificate(ledger, cert)
    with open_ledger(ledger) as log:
        log.sign_checkpoint(w.key)  # checkpoints are Ed25519 signed notes
    ledger_key = tmp_path / "ledger.pub"
    ledger_key.write_text(public_key_pem(w.key.public_key))
    return {
        "world": w,
        "cert": cert,
        "trust": trust,
        "ledger": ledger,
        "ledger_key": ledger_key,
        "revocations": [("rev.json", json.dumps(revocation).encode())],
        "root": tmp_path,
    }


def _build(r: dict[str, Any], name: str = "release.zip", **extra: Any) -> Path:
    return build_archive(
        r["cert"],
        r["root"] / name,
        trust=r["trust"],
        revocations=r["revocations"],
        ledger=r["ledger"],
        ledger_key=r["ledger_key"],
        at=NOW,
        **extra,
    )


def _members(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as z:
        return {i.filename: z.read(i) for i in z.infolist()}


def _rezip(path: Path, members: dict[str, bytes]) -> Path:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    path.write_bytes(buffer.getvalue())
    return path


def _remanifest(members: dict[str, bytes]) -> dict[str, bytes]:
    import hashlib

    manifest = json.loads(members["manifest.json"])
    for entry in manifest["files"]:
        entry["sha256"] = hashlib.sha256(members[entry["name"]]).hexdigest()
    members["manifest.json"] = json.dumps(manifest).encode()
    return members


@needs_openssl
def test_archive_is_deterministic_and_verifies_from_itself(
    release: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    first = _build(release)
    again = _build(release, "again.zip")
    assert first.read_bytes() == again.read_bytes()
    names = set(_members(first))
    assert {
        "manifest.json",
        "certificate.json",
        "trust.yaml",
        "verification.json",
        "evidence.json",
        "findings.json",
        "timestamps/sig-0.tsr",
        "revocations/0.json",
        "ledger/inclusion-proof.json",
        "ledger/ledger-key.pub",
    } == names
    # nothing but the zip: the originals are gone
    for name in ("cert.json", "trust.yaml", "evidence.json", "ledger.sqlite"):
        (release["root"] / name).unlink()
    result = verify_archive(first)
    assert result.verified, result.reasons
    assert any("ledger inclusion proof verified" in n for n in result.notes)
    code, out, _ = run(capsys, "verify-archive", first)
    assert code == 0 and "VERIFIED" in out and "timestamped" in out and "by test-tsa" in out
    # years later the archive time still judges; a later time is the user's explicit question
    code, out, _ = run(capsys, "verify-archive", first, "--at", "2040-01-01T00:00:00Z", "--json")
    assert code == 1 and json.loads(out)["reasons"][0]["code"] == "EXPIRED"


def _tamper_byte(path: Path) -> Path:
    members = _members(path)
    data = bytearray(members["evidence.json"])
    data[2] ^= 0x01
    members["evidence.json"] = bytes(data)
    return _rezip(path, members)


def _tamper_missing(path: Path) -> Path:
    members = _members(path)
    del members["findings.json"]
    return _rezip(path, members)


def _tamper_certificate_byte(path: Path) -> Path:
    members = _members(path)
    data = bytearray(members["certificate.json"])
    data[len(data) // 2] ^= 0x01
    members["certificate.json"] = bytes(data)
    return _rezip(path, members)


def _tamper_trust_snapshot(path: Path) -> Path:
    members = _members(path)
    members["trust.yaml"] = members["trust.yaml"].replace(b"threshold: 1", b"threshold: 2")
    return _rezip(path, members)


def _tamper_trust_and_manifest(path: Path) -> Path:
    """The snapshot replaced by one without the signer, and the manifest made to match: the
    certificate no longer verifies under it."""
    members = _members(path)
    text = members["trust.yaml"].decode()
    cut = text.index("- keyid:")
    second = text.index("- keyid:", cut + 1)
    members["trust.yaml"] = (text[:cut] + text[second:]).encode()
    return _rezip(path, _remanifest(members))


def _tamper_evidence_and_manifest(path: Path) -> Path:
    members = _members(path)
    members["evidence.json"] = b'{"checks": {"forged": true}}\n'
    return _rezip(path, _remanifest(members))


@needs_openssl
@pytest.mark.parametrize(
    ("tamper", "code"),
    [
        (_tamper_byte, "ARCHIVE_INVALID"),
        (_tamper_missing, "ARCHIVE_INVALID"),
        (_tamper_certificate_byte, "ARCHIVE_INVALID"),
        (_tamper_trust_snapshot, "ARCHIVE_INVALID"),
        (_tamper_trust_and_manifest, "UNTRUSTED_KEY"),
        (_tamper_evidence_and_manifest, "ARCHIVE_INVALID"),
    ],
)
def test_tampered_archive_is_rejected(
    release: dict[str, Any], capsys: pytest.CaptureFixture[str], tamper: Any, code: str
) -> None:
    path = tamper(_build(release))
    result = verify_archive(path)
    assert not result.verified and result.reasons[0][0] == code, result.reasons
    exit_code, out, _ = run(capsys, "verify-archive", path, "--json")
    assert exit_code == 1 and json.loads(out)["reasons"][0]["code"] == code


@needs_openssl
def test_replaced_snapshot_with_matching_manifest_is_caught_against_a_held_store(
    release: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    held = release["root"] / "held-trust.yaml"
    held.write_bytes(release["trust"].read_bytes())
    members = _members(_build(release))
    members["trust.yaml"] += b"# edited\n"
    path = _rezip(release["root"] / "edited.zip", _remanifest(members))
    assert verify_archive(path).verified  # the archive alone cannot tell
    result = verify_archive(path, trust=held)
    assert result.reasons[0][0] == "ARCHIVE_INVALID" and "trust snapshot" in result.reasons[0][1]
    code, _, _ = run(capsys, "verify-archive", path, "--trust", held)
    assert code == 1


def test_not_a_zip_and_a_rejected_certificate(
    release: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    junk = release["root"] / "junk.zip"
    junk.write_bytes(b"PK\x03\x04 not really")
    assert verify_archive(junk).reasons[0][0] == "ARCHIVE_INVALID"
    w: World = release["world"]
    forged = w.write(sign_as(w.statement(), [(w.attacker, RE, "authorship")]), "forged.json")
    with pytest.raises(CertificateRejected):
        build_archive(forged, release["root"] / "x.zip", trust=release["trust"], at=NOW)
    code, _, err = run(
        capsys, "archive", forged, "-o", release["root"] / "x.zip", "--trust", release["trust"],
        "--at", iso(NOW),
    )  # fmt: skip
    assert code == 1 and "does not verify" in err
