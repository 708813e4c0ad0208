"""Signing evidence on a node (:func:`attest.collection.provenance.sign_evidence`) and what
certify checks of the statement that the command-line tests cannot reach
(tests/cli/test_certify_provenance.py has the end-to-end cases)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from _report_samples import make_evidence

from attest.certificate.evidence_statement import statement_path
from attest.certificate.signing import generate_keypair, load_private_key
from attest.collection.provenance import dispatch_of, sign_evidence, spec_files
from attest.core.io import sha256_file
from attest.errors import InputError
from attest.evidence.model import DispatchRecord
from attest.pipeline.provenance import (
    EvidenceProvenanceError,
    ReleaseFiles,
    check_provenance,
    local_provenance,
)
from attest.policy.model import load_policy
from attest.verification.trust import add_key, empty_trust_store

REPO = Path(__file__).resolve().parents[3]
SPEC = REPO / "examples" / "digits" / "attest.yaml"
NOW = datetime(2026, 6, 1, 12, tzinfo=timezone.utc)


@pytest.fixture
def signed(tmp_path: Path) -> tuple[Path, object]:
    """A small evidence file of the digits model signed by a collector, and a trust store."""
    evidence = make_evidence()
    evidence.artifacts = {}  # nothing recorded: any spec file is "the one collected from"
    path = tmp_path / "evidence.json"
    path.write_text(json.dumps(evidence.model_dump(mode="json")))
    key_path, pub, _ = generate_keypair(tmp_path / "node", passphrase=None)
    sign_evidence(path, SPEC, load_private_key(key_path), started_at=NOW - timedelta(hours=1),
                  finished_at=NOW, name="node", target="cpu-a", host="node-1")  # fmt: skip
    store, _ = add_key(
        empty_trust_store("t"), Path(pub).read_bytes(), name="n", roles=("collector",)
    )
    return path, store


def _release(model: tuple[str, str] = ("digits-cnn", "1.0.0")) -> ReleaseFiles:
    return ReleaseFiles({r: (p, sha256_file(p)) for r, p in spec_files(SPEC).items()}, model)


def test_a_signed_statement_is_recorded_with_its_collector_host_and_times(
    signed: tuple[Path, object],
) -> None:
    path, store = signed
    record = check_provenance(
        path, make_evidence(), sha256_file(path), target="cpu-a", release=_release(),
        policy=load_policy("clinical-strict"), trust=store, at=NOW,  # type: ignore[arg-type]
    )  # fmt: skip
    assert record.signed and record.collector is not None
    assert (record.collector.name, record.host) == ("node", "node-1")
    assert (
        record.started_at == "2026-06-01T11:00:00Z" and record.finished_at == "2026-06-01T12:00:00Z"
    )
    assert record.statement_digest is not None
    assert record.statement_digest.sha256 == sha256_file(statement_path(path))


def test_a_statement_for_another_model_version_is_refused(signed: tuple[Path, object]) -> None:
    path, store = signed
    with pytest.raises(EvidenceProvenanceError) as info:
        check_provenance(
            path, make_evidence(), sha256_file(path), target="cpu-a",
            release=_release(("digits-cnn", "2.0.0")), policy=load_policy("research"),
            trust=store, at=NOW,  # type: ignore[arg-type]
        )  # fmt: skip
    assert info.value.code == "EVIDENCE_MODEL_MISMATCH" and "2.0.0" in info.value.message
    assert info.value.exit_code == 2


def test_sign_evidence_refuses_files_that_changed_during_the_collect(tmp_path: Path) -> None:
    evidence = make_evidence()
    evidence.artifacts = {"weights": {"sha256": "0" * 64}}
    path = tmp_path / "evidence.json"
    path.write_text(json.dumps(evidence.model_dump(mode="json")))
    key_path, _, _ = generate_keypair(tmp_path / "node", passphrase=None)
    with pytest.raises(InputError) as info:
        sign_evidence(path, SPEC, load_private_key(key_path), started_at=NOW, name="node")
    assert "changed during the collect" in info.value.message
    assert not statement_path(path).exists()


def test_dispatch_says_how_the_collect_ran() -> None:
    evidence = make_evidence()
    assert dispatch_of(evidence, 1, None).engine == "local"
    local = dispatch_of(evidence, 3, None)
    assert (local.engine, local.workers) == ("processes", 3)
    evidence.dispatch = [DispatchRecord(target="a", engine="ray", engine_version="2.9",
                                        address="auto", attempts=1, node="n1")]  # fmt: skip
    ray = dispatch_of(evidence, 1, "auto")
    assert (ray.engine, ray.address, ray.nodes[0]["node"]) == ("ray", "auto", "n1")


def test_local_provenance_is_the_certify_run_s_own() -> None:
    record = local_provenance("a" * 64, NOW - timedelta(minutes=2), NOW)
    assert (record.collected_by, record.signed) == ("certify", False)
    assert record.finished_at == "2026-06-01T12:00:00Z" and record.host


def test_a_statement_naming_another_key_than_its_signer_is_refused(
    signed: tuple[Path, object], tmp_path: Path
) -> None:
    import base64

    from attest.certificate.format import PAYLOAD_TYPE
    from attest.certificate.signing import canonical_json, dsse_envelope

    path, store = signed
    where = statement_path(path)
    payload = json.loads(base64.b64decode(json.loads(where.read_text())["payload"]))
    payload["predicate"]["collector"]["keyid"] = "b" * 64  # claims to be another collector
    key = load_private_key(tmp_path / "node.key")  # the trusted collector signs the claim
    where.write_text(json.dumps(dsse_envelope(canonical_json(payload), PAYLOAD_TYPE, [key])))
    with pytest.raises(EvidenceProvenanceError) as info:
        check_provenance(
            path, make_evidence(), sha256_file(path), target="cpu-a", release=_release(),
            policy=load_policy("research"), trust=store, at=NOW,  # type: ignore[arg-type]
        )  # fmt: skip
    assert info.value.code == "EVIDENCE_SIGNATURE_INVALID" and "names collector key bbbb" in str(
        info.value.message
    )
