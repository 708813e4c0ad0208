"""A table of attacks on the audit archive (issue 33, item 6), each reproduced first and then
refused with its reason code, through :func:`attest.archive.verify_archive` and through
``attest verify-archive`` (exit 1, the code in ``--json``, no traceback).

"Reproduced" means that what the archive says about itself, the check verify-archive made
before the manifest was signed (:func:`_archive_kit.archive_alone_says`: the zip against its
own manifest.json, the certificate against its own snapshot and revocations, the ledger proof
against its own key), still says VERIFIED for the tampered archive.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from _archive_kit import (
    Release,
    archive_alone_says,
    auditor_store,
    make_release,
    members,
    relist,
    resign,
    rezip,
)
from _certfactory import NOW, iso, new_key, sign_as, sign_raw
from _cli_run import run
from _signer_cases import RE

from attest.archive import ARCHIVIST_ROLE, LEDGER_ROLE, verify_archive
from attest.certificate.note_keys import SIGNATURE_TYPE_COSIGNATURE, NoteKey
from attest.certificate.revocation import revocation_envelope
from attest.certificate.signing import public_key_pem
from attest.verification.trust import (
    TrustedWitness,
    load_trust_store,
    revoke_key,
    save_trust_store,
)

LATER = NOW + timedelta(days=30)  # after the scheduled withdrawal below


@dataclass
class Attack:
    path: Path
    trust: Path | None
    at: datetime | None = None


def _withdrawn(r: Release) -> Path:
    """A genuine archive holding a revocation of its own certificate from NOW + 10 days: as of
    LATER it is REJECTED (CERTIFICATE_REVOKED)."""
    own = revocation_envelope(
        json.loads(r.cert.read_text()), r.world.key, reason="wrong weights", revoked_by="Dr Test",
        revoked_at=NOW + timedelta(days=10),
    )  # fmt: skip
    path = r.build(
        "withdrawn.zip", revocations=[*r.revocations, ("own.json", json.dumps(own).encode())]
    )
    result = verify_archive(path, trust=r.auditor, at=LATER)
    assert [c for c, _ in result.reasons] == ["CERTIFICATE_REVOKED"]  # the honest verdict
    return path


def _drop_revocation(r: Release) -> dict[str, bytes]:
    files = members(_withdrawn(r))
    del files["revocations/1.json"]
    return relist(files)


def revocation_removed(r: Release) -> Attack:
    return Attack(rezip(r.root / "a.zip", _drop_revocation(r)), r.auditor, LATER)


def revocation_removed_resigned_by_attacker(r: Release) -> Attack:
    files = resign(_drop_revocation(r), r.world.attacker)
    return Attack(rezip(r.root / "a.zip", files), r.auditor, LATER)


def revocation_removed_resigned_by_release_key(r: Release) -> Attack:
    """Re-signed by a key the auditor trusts, but for releases, not archives."""
    files = resign(_drop_revocation(r), r.world.key)
    store = auditor_store(
        [
            (r.archivist, "archivist", (ARCHIVIST_ROLE,)),
            (r.log, "fleet-log", (LEDGER_ROLE,)),
            (r.world.key, "release", ("release-engineer",)),
        ]
    )
    return Attack(rezip(r.root / "a.zip", files), save_trust_store(store, r.root / "t.yaml"), LATER)


def revocation_removed_and_unsigned(r: Release) -> Attack:
    files = _drop_revocation(r)
    del files["manifest.dsse.json"]
    return Attack(rezip(r.root / "a.zip", files), r.auditor, LATER)


def _attacker_ledger(r: Release) -> tuple[Path, Path]:
    """The attacker's own log holding the certificate, under the attacker's checkpoint key."""
    from attest.ledger import append_certificate, open_ledger

    ledger = r.root / "evil.sqlite"
    append_certificate(ledger, r.cert)
    with open_ledger(ledger) as log:
        log.sign_checkpoint(r.world.attacker)
    key = r.root / "evil.pub"
    key.write_text(public_key_pem(r.world.attacker.public_key))
    return ledger, key


def _swap_ledger(r: Release) -> dict[str, bytes]:
    ledger, key = _attacker_ledger(r)
    theirs = members(r.build("evil.zip", key=None, ledger=ledger, ledger_key=key))
    files = members(r.build())
    for name in ("ledger/inclusion-proof.json", "ledger/ledger-key.pub"):
        files[name] = theirs[name]
    return relist(files)


def ledger_swapped(r: Release) -> Attack:
    return Attack(rezip(r.root / "a.zip", _swap_ledger(r)), r.auditor)


def ledger_swapped_resigned_by_attacker(r: Release) -> Attack:
    return Attack(rezip(r.root / "a.zip", resign(_swap_ledger(r), r.world.attacker)), r.auditor)


def ledger_of_attacker_signed_by_archivist(r: Release) -> Attack:
    """The archivist was handed the attacker's log and key: the key must come from the
    auditor's store, so the proof fails there."""
    ledger, key = _attacker_ledger(r)
    return Attack(r.build("a.zip", ledger=ledger, ledger_key=key), r.auditor)


def ledger_key_not_in_auditor_store(r: Release) -> Attack:
    store = auditor_store([(r.archivist, "archivist", (ARCHIVIST_ROLE,))])
    return Attack(r.build(), save_trust_store(store, r.root / "t.yaml"))


def _edit(r: Release, change: Callable[[dict[str, bytes]], None]) -> Attack:
    files = members(r.build())
    change(files)
    return Attack(rezip(r.root / "a.zip", relist(files)), r.auditor)


def member_added(r: Release) -> Attack:
    return _edit(r, lambda f: f.update({"notes/addendum.json": b'{"waiver": true}\n'}))


def member_removed(r: Release) -> Attack:
    return _edit(r, lambda f: f.pop("findings.json"))


def member_changed(r: Release) -> Attack:
    return _edit(r, lambda f: f.update({"findings.json": b'{"verdict": "pass", "edited": 1}\n'}))


def member_renamed(r: Release) -> Attack:
    return _edit(r, lambda f: f.update({"findings-old.json": f.pop("findings.json")}))


def whole_release_forged(r: Release) -> Attack:
    """The certificate re-signed by the attacker and the snapshot made to trust the attacker."""
    w = r.world
    forged = sign_as(w.statement(), [(w.attacker, RE, "authorship")])

    def change(files: dict[str, bytes]) -> None:
        store = w.with_keys(w.attacker)
        files["trust.yaml"] = save_trust_store(store, r.root / "forged.yaml").read_bytes()
        files["certificate.json"] = json.dumps(forged).encode()
        files.pop("evidence.json")
        files.pop("timestamps/sig-0.tsr", None)
        files.pop("ledger/inclusion-proof.json")
        files.pop("ledger/ledger-key.pub")

    return _edit(r, change)


def unsigned_archive(r: Release) -> Attack:
    return Attack(r.build(key=None), r.auditor)


def archivist_key_revoked(r: Release) -> Attack:
    store = auditor_store(
        [(r.archivist, "archivist", (ARCHIVIST_ROLE,)), (r.log, "fleet-log", (LEDGER_ROLE,))]
    )
    store = revoke_key(store, r.archivist.keyid, reason="stolen", at=NOW - timedelta(days=1))
    return Attack(r.build(), save_trust_store(store, r.root / "t.yaml"))


def archivist_key_outside_window(r: Release) -> Attack:
    """The archivist key's window ended 100 days before the (signed) archive time."""
    expired = auditor_store(
        [(r.archivist, "archivist", (ARCHIVIST_ROLE,))], not_after=NOW - timedelta(days=100)
    )
    log = auditor_store([(r.log, "fleet-log", (LEDGER_ROLE,))])
    store = replace(expired, keys=(*expired.keys, *log.keys))
    return Attack(r.build(), save_trust_store(store, r.root / "t.yaml"))


def archivist_without_role(r: Release) -> Attack:
    store = auditor_store([(r.archivist, "archivist", ()), (r.log, "fleet-log", (LEDGER_ROLE,))])
    return Attack(r.build(), save_trust_store(store, r.root / "t.yaml"))


def signature_flipped(r: Release) -> Attack:
    files = members(r.build())
    envelope = json.loads(files["manifest.dsse.json"])
    sig = bytearray(base64.b64decode(envelope["signatures"][0]["sig"]))
    sig[10] ^= 0x01
    envelope["signatures"][0]["sig"] = base64.b64encode(bytes(sig)).decode()
    files["manifest.dsse.json"] = json.dumps(envelope).encode()
    return Attack(rezip(r.root / "a.zip", files), r.auditor)


def signed_time_moved(r: Release) -> Attack:
    """The archive time moved in both manifests, the signature left as it was."""
    files = members(r.build())
    moved = iso(NOW - timedelta(hours=12))
    listing = json.loads(files["manifest.json"])
    listing["archived_at"] = moved
    files["manifest.json"] = json.dumps(listing).encode()
    envelope = json.loads(files["manifest.dsse.json"])
    statement = json.loads(base64.b64decode(envelope["payload"]))
    statement["predicate"]["archived_at"] = moved
    for subject in statement["subject"]:
        if subject["name"] == "manifest.json":
            subject["digest"]["sha256"] = hashlib.sha256(files["manifest.json"]).hexdigest()
    envelope["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
    files["manifest.dsse.json"] = json.dumps(envelope).encode()
    return Attack(rezip(r.root / "a.zip", files), r.auditor)


def certificate_envelope_as_manifest(r: Release) -> Attack:
    """Another statement the archivist's key signed (a certificate-shaped one) in its place."""
    files = members(r.build())
    other = sign_raw(r.world.statement(), [r.archivist])
    files["manifest.dsse.json"] = json.dumps(other).encode()
    return Attack(rezip(r.root / "a.zip", files), r.auditor)


def witness_quorum_unmet(r: Release) -> Attack:
    """The auditor requires a witness's cosignature on the log's checkpoint (issue 37); the
    archived proof's checkpoint carries none."""
    witness = NoteKey("w.example/w1", new_key().public_key, SIGNATURE_TYPE_COSIGNATURE)
    store = replace(
        load_trust_store(r.auditor), witnesses=(TrustedWitness("w1", witness),), witness_quorum=1
    )
    return Attack(r.build(), save_trust_store(store, r.root / "t.yaml"))


def no_trust_store(r: Release) -> Attack:
    return Attack(r.build(), None)


ROWS: list[tuple[Callable[[Release], Attack], str, str]] = [
    (revocation_removed, "ARCHIVE_INVALID", "lacks revocations/1.json"),
    (revocation_removed_resigned_by_attacker, "ARCHIVE_UNTRUSTED", "not in the trust store"),
    (
        revocation_removed_resigned_by_release_key,
        "ARCHIVE_UNTRUSTED",
        "does not give the archivist role",
    ),
    (revocation_removed_and_unsigned, "ARCHIVE_UNSIGNED", "no manifest.dsse.json"),
    (ledger_swapped, "ARCHIVE_INVALID", "ledger/inclusion-proof.json does not match"),
    (ledger_swapped_resigned_by_attacker, "ARCHIVE_UNTRUSTED", "not in the trust store"),
    (ledger_of_attacker_signed_by_archivist, "LEDGER_PROOF_INVALID", "fleet-log"),
    (ledger_key_not_in_auditor_store, "LEDGER_PROOF_INVALID", "no valid key with the ledger role"),
    (member_added, "ARCHIVE_INVALID", "holds notes/addendum.json"),
    (member_removed, "ARCHIVE_INVALID", "lacks findings.json"),
    (member_changed, "ARCHIVE_INVALID", "findings.json does not match"),
    (member_renamed, "ARCHIVE_INVALID", "lacks findings.json"),
    (whole_release_forged, "ARCHIVE_INVALID", "lacks evidence.json"),
    (unsigned_archive, "ARCHIVE_UNSIGNED", "no manifest.dsse.json"),
    (archivist_key_revoked, "ARCHIVE_UNTRUSTED", "KEY_REVOKED"),
    (archivist_key_outside_window, "ARCHIVE_UNTRUSTED", "was valid only until"),
    (archivist_without_role, "ARCHIVE_UNTRUSTED", "does not give the archivist role"),
    (signature_flipped, "ARCHIVE_UNTRUSTED", "SIGNATURE_INVALID"),
    (signed_time_moved, "ARCHIVE_UNTRUSTED", "SIGNATURE_INVALID"),
    (certificate_envelope_as_manifest, "ARCHIVE_INVALID", "predicateType"),
    (witness_quorum_unmet, "WITNESS_QUORUM_NOT_MET", "cosigned by 0 of the 1"),
    (no_trust_store, "TRUST_REQUIRED", "--trust"),
]


@pytest.mark.parametrize(("attack", "code", "says"), ROWS, ids=[a.__name__ for a, _, _ in ROWS])
def test_attack_is_reproduced_then_refused(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    attack: Callable[[Release], Attack],
    code: str,
    says: str,
) -> None:
    r = make_release(tmp_path)
    a = attack(r)
    assert archive_alone_says(a.path, a.at), "the attack does not reproduce"
    result = verify_archive(a.path, trust=a.trust, at=a.at)
    assert not result.verified and result.reasons[0][0] == code, result.reasons
    assert says in result.reasons[0][1], result.reasons
    args: list[object] = ["verify-archive", a.path, "--json"]
    args += ["--trust", a.trust] if a.trust is not None else []
    args += ["--at", iso(a.at)] if a.at is not None else []
    exit_code, out, _ = run(capsys, *args)
    shown = json.loads(out)
    assert exit_code == 1 and shown["verified"] is False and shown["reasons"][0]["code"] == code
    exit_code, out, _ = run(capsys, *[x for x in args if x != "--json"])
    assert exit_code == 1 and "VERIFIED" not in out.splitlines()[0]


def test_the_genuine_archive_verifies_under_every_store_of_the_table(tmp_path: Path) -> None:
    """No false alarm: the untouched archive is VERIFIED against the auditor's store, also
    when the store holds further keys and roles."""
    r = make_release(tmp_path)
    path = r.build()
    assert verify_archive(path, trust=r.auditor).verified
    store = auditor_store(
        [
            (r.world.key, "release", ("release-engineer",)),
            (r.archivist, "archivist", (ARCHIVIST_ROLE, "clinical-safety")),
            (r.log, "fleet-log", (LEDGER_ROLE,)),
        ]
    )
    result = verify_archive(path, trust=save_trust_store(store, tmp_path / "wide.yaml"))
    assert result.verified, result.reasons
    assert verify_archive(r.build("later.zip"), trust=r.auditor, at=LATER).verified


def _envelope(payload: object, sigs: object = None) -> bytes:
    raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    signatures = sigs if sigs is not None else [{"keyid": "", "sig": "AAAA"}]
    return json.dumps(
        {
            "payload": base64.b64encode(raw).decode(),
            "payloadType": "application/vnd.in-toto+json",
            "signatures": signatures,
        }
    ).encode()


HOSTILE_MANIFESTS: list[bytes] = [
    b"",
    b"not json",
    b"[]",
    b'{"payload": 1}',
    b'{"a": 1, "a": 2}',
    b"1e999",
    _envelope({}, sigs=[]),
    _envelope(b"\xff\xfe"),
    _envelope({"_type": "https://in-toto.io/Statement/v1"}),
    _envelope(
        {
            "_type": "https://in-toto.io/Statement/v1",
            "subject": [{"name": "../x", "digest": {"sha256": "0" * 64}}],
            "predicateType": "https://gradient-attest.dev/archive-manifest/v1",
            "predicate": {"archived_at": "yesterday"},
        }
    ),
    _envelope(
        {
            "_type": "https://in-toto.io/Statement/v1",
            "subject": [{"name": f"m{i}", "digest": {"sha256": "0" * 64}} for i in range(1100)],
            "predicateType": "https://gradient-attest.dev/archive-manifest/v1",
            "predicate": {},
        }
    ),
    _envelope({"x": 1}, sigs=[{"keyid": "k", "sig": "!!", "signer": {"attestation": 1}}]),
]


@pytest.mark.parametrize("raw", HOSTILE_MANIFESTS)
def test_hostile_signed_manifest_is_refused_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], raw: bytes
) -> None:
    r = make_release(tmp_path)
    files = members(r.build())
    files["manifest.dsse.json"] = raw
    path = rezip(tmp_path / "hostile.zip", files)
    result = verify_archive(path, trust=r.auditor)
    assert not result.verified
    assert result.reasons[0][0] in ("ARCHIVE_INVALID", "ARCHIVE_UNTRUSTED"), result.reasons
    code, out, _ = run(capsys, "verify-archive", path, "--trust", r.auditor, "--json")
    assert code == 1 and json.loads(out)["reasons"][0]["code"] == result.reasons[0][0]
