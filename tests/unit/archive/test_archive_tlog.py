"""The audit archive carries the certificate's offline ledger proof (a C2SP tlog-proof, issue
37): given with ``ledger_proof`` or found beside the certificate, checked when archiving (this
certificate's issue, under the checkpoint it carries), and by verify-archive under the
auditor's own ledger key and witness quorum."""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from _archive_kit import Release, make_release, members
from _certfactory import NOW, iso, new_key
from _cli_run import run

from attest.archive import verify_archive
from attest.archive.tlog import TLOG_MEMBER
from attest.certificate.note_keys import SIGNATURE_TYPE_COSIGNATURE, NoteKey
from attest.errors import InputError
from attest.ledger.tlog_proof_build import build_tlog_proof
from attest.verification.trust import TrustedWitness, load_trust_store, save_trust_store


@pytest.fixture
def release(tmp_path: Path) -> Release:
    return make_release(tmp_path)


def _proof(r: Release) -> Path:
    digest = hashlib.sha256(r.cert.read_bytes()).hexdigest()
    path = r.root / "given.tlog-proof"
    path.write_text(build_tlog_proof(str(r.ledger), digest))
    return path


def test_a_given_proof_is_archived_and_verified_under_the_auditors_key(release: Release) -> None:
    archive = release.build(ledger=None, ledger_key=None, ledger_proof=_proof(release))
    assert TLOG_MEMBER in members(archive)
    result = verify_archive(archive, trust=release.auditor)
    assert result.verified, result.reasons
    assert any("offline ledger proof" in note for note in result.notes)
    # an auditor without the ledger key proves nothing from it
    only_archivist = load_trust_store(release.auditor)
    keys = tuple(k for k in only_archivist.keys if "ledger" not in k.roles)
    stranger = save_trust_store(replace(only_archivist, keys=keys), release.root / "a.yaml")
    result = verify_archive(archive, trust=stranger)
    assert not result.verified and "LEDGER_PROOF_INVALID" in [c for c, _ in result.reasons]
    # an auditor who requires a witness's cosignature: the log's own signature is not enough
    witness = NoteKey("w.example/w1", new_key().public_key, SIGNATURE_TYPE_COSIGNATURE)
    store = replace(
        load_trust_store(release.auditor), witnesses=(TrustedWitness("w1", witness),),
        witness_quorum=1,
    )  # fmt: skip
    result = verify_archive(archive, trust=save_trust_store(store, release.root / "q.yaml"))
    assert "WITNESS_QUORUM_NOT_MET" in [c for c, _ in result.reasons], result.reasons


def test_a_proof_beside_the_certificate_is_found(release: Release) -> None:
    assert TLOG_MEMBER not in members(release.build("none.zip"))
    shutil.copy(_proof(release), release.cert.with_suffix(".tlog-proof"))
    archive = release.build("beside.zip")
    assert TLOG_MEMBER in members(archive)
    assert verify_archive(archive, trust=release.auditor).verified


def test_a_proof_that_is_not_this_certificates_issue_is_refused(release: Release) -> None:
    proof = _proof(release)
    lines = proof.read_text().splitlines(keepends=True)
    edited = release.root / "edited.tlog-proof"
    edited.write_text("".join("index 7\n" if x.startswith("index ") else x for x in lines))
    with pytest.raises(InputError, match="does not lead from entry 7"):
        release.build(ledger_proof=edited)
    other = release.root / "other.tlog-proof"
    other.write_text("not a proof\n")
    with pytest.raises(InputError, match="refusing to archive the ledger proof"):
        release.build(ledger_proof=other)


def test_archive_cli_takes_ledger_proof(
    release: Release, capsys: pytest.CaptureFixture[str]
) -> None:
    out = release.root / "cli.zip"
    code, _, err = run(
        capsys, "archive", release.cert, "-o", out, "--trust", release.trust,
        "--ledger-proof", _proof(release), "--at", iso(NOW),
    )  # fmt: skip
    assert code == 0, err
    assert TLOG_MEMBER in members(out)
