"""The exports, read by the other projects' own libraries and tied back to the certificate.

Sigstore bundle: parsed with sigstore-models (the Sigstore project's pydantic models of the
protobuf specs), its envelope verified with securesystemslib, and verified by ours as the
certificate. Test result: parsed into in-toto-attestation's TestResult protobuf, its signature
verified with securesystemslib. CycloneDX: validated by cyclonedx-python-lib's strict validator.
Each is tampered once and refused.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from _certfactory import World, make_world, sign_raw

from attest.certificate.bundle import BUNDLE_MEDIA_TYPE
from attest.certificate.signing import generate_keypair, load_private_key
from attest.cli import main
from attest.verification.trust import add_key, save_trust_store

sigstore_bundle = pytest.importorskip("sigstore_models.bundle.v1")
dsse = pytest.importorskip("securesystemslib.dsse")
sslib_signer = pytest.importorskip("securesystemslib.signer")
sslib_exceptions = pytest.importorskip("securesystemslib.exceptions")
test_result_pb2 = pytest.importorskip(
    "in_toto_attestation.predicates.test_result.v0.test_result_pb2"
)

FINDINGS = [
    {"rule": "fidelity.local", "check": "fidelity", "verdict": "pass", "message": "ok",
     "subject": {"kind": "model"}, "severity": "fail"},
    {"rule": "ig.baseline", "check": "ig_baseline", "verdict": "warn", "message": "near",
     "subject": {"kind": "model"}, "severity": "warn"},
    {"rule": "determinism.stability", "check": "determinism", "verdict": "waived",
     "message": "op 7 below 92", "subject": {"kind": "operator"}, "severity": "fail",
     "waiver": {"kind": "policy", "label": "W-1", "approved_by": "Dr. Chen",
                "justification": "sampler is seeded", "reference": "HAZ-12"}},
]  # fmt: skip
PREDICATE = {
    "findings": FINDINGS,
    "model_metrics": {"bit_exact_reproducibility": 1.0, "min_stability_score": 91.0,
                      "min_fidelity_pct": 99.97},
    "environment": {"precision": "float32"},
    "checks": {"ig_completeness": {"status": "computed", "summary": {"max_rel_error": 0.0004}},
               "ig_randomization": {"status": "computed", "summary": {"max_spearman": 0.12}}},
}  # fmt: skip


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as info:
        main(args)
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    code = info.value.code
    return (code if isinstance(code, int) else 0), out + err


@pytest.fixture
def world(tmp_path: Path) -> tuple[World, Path, Path]:
    w = make_world(tmp_path)
    cert = w.write(sign_raw(w.statement(**PREDICATE), [w.key]), "gradient_certificate.json")
    trust = save_trust_store(w.trust, tmp_path / "trust.yaml")
    return w, cert, trust


def _copy(data: Any) -> Any:  # securesystemslib's from_dict rewrites the dict it is given
    return json.loads(json.dumps(data))


def _sslib_key(w: World) -> Any:
    return sslib_signer.SSlibKey.from_crypto(w.key.public_key, keyid=w.key.keyid)


def test_the_bundle_is_a_sigstore_bundle_and_verifies_as_the_certificate(
    world: tuple[World, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    w, cert, trust = world
    out = w.root / "cert.sigstore.json"
    code, text = run(["export", "bundle", str(cert), "-o", str(out)], capsys)
    assert code == 0, text
    doc = json.loads(out.read_text())
    parsed = sigstore_bundle.Bundle.from_json(out.read_bytes())
    assert parsed.media_type == BUNDLE_MEDIA_TYPE
    assert parsed.verification_material.public_key.hint == w.key.keyid
    envelope = dsse.Envelope.from_dict(_copy(doc["dsseEnvelope"]))
    assert list(envelope.verify([_sslib_key(w)], 1)) == [w.key.keyid]
    # ours: the bundle verifies as the certificate does, and the same payload is inside
    report = w.verify(out)
    assert report.verified, report.reasons
    assert doc["dsseEnvelope"]["payload"] == json.loads(cert.read_text())["payload"]
    code, text = run(["export", "verify", str(out), "--trust", str(trust), "--certificate",
                      str(cert)], capsys)  # fmt: skip
    assert code == 0 and "OK (sigstore-bundle)" in text


@pytest.mark.parametrize(
    ("change", "code"),
    [
        (
            lambda d: d["dsseEnvelope"].update(payload=base64.b64encode(b"{}").decode()),
            "SIGNATURE_INVALID",
        ),
        (
            lambda d: d.update(mediaType="application/vnd.dev.sigstore.bundle.v0.2+json"),
            "MALFORMED",
        ),
        (lambda d: d["verificationMaterial"].update(tlogEntries=[{"logIndex": "1"}]), "MALFORMED"),
        (lambda d: d["dsseEnvelope"]["signatures"][0].update(extra="x"), "MALFORMED"),
    ],
)
def test_a_tampered_bundle_is_refused(
    world: tuple[World, Path, Path], change: Any, code: str
) -> None:
    w, cert, _ = world
    from attest.certificate.bundle import to_bundle

    doc = to_bundle(json.loads(cert.read_text()))
    change(doc)
    report = w.verify(w.write(doc, "tampered.sigstore.json"))
    assert not report.verified
    assert report.codes == [code]


def test_the_test_result_is_in_toto_s_and_tied_to_the_certificate(
    world: tuple[World, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    w, cert, trust = world
    key_path, _, _ = generate_keypair(w.root / "qa", passphrase=None)
    store = add_key(w.trust, (w.root / "qa.pub").read_bytes(), name="qa")[0]
    save_trust_store(store, trust)
    out = w.root / "test-result.json"
    code, text = run(["export", "test-result", str(cert), "--trust", str(trust), "--key",
                      str(key_path), "-o", str(out)], capsys)  # fmt: skip
    assert code == 0, text
    envelope = json.loads(out.read_text())
    qa = load_private_key(key_path, prompt=False)
    theirs = dsse.Envelope.from_dict(_copy(envelope))
    public = sslib_signer.SSlibKey.from_crypto(qa.public_key, keyid=qa.keyid)
    assert list(theirs.verify([public], 1)) == [qa.keyid]
    statement = json.loads(theirs.payload)
    assert statement["predicateType"] == "https://in-toto.io/attestation/test-result/v0.1"
    from google.protobuf import json_format

    message = json_format.ParseDict(statement["predicate"], test_result_pb2.TestResult())
    assert message.result == "WARNED"
    assert "rule:fidelity.local" in message.passed_tests
    assert {"rule:ig.baseline", "rule:determinism.stability"} <= set(message.warned_tests)
    assert list(message.failed_tests) == []
    certified = {s["name"]: s["digest"]["sha256"] for s in w.statement()["subject"]}
    assert {s["name"]: s["digest"]["sha256"] for s in statement["subject"]} == certified
    code, text = run(["export", "verify", str(out), "--trust", str(trust), "--certificate",
                      str(cert)], capsys)  # fmt: skip
    assert code == 0, text
    # a subject digest changed (and re-signed by the same key) no longer ties back
    statement["subject"][0]["digest"]["sha256"] = "0" * 64
    resigned = sign_raw(statement, [qa], payload_type="application/vnd.in-toto+json")
    code, text = run(["export", "verify", str(w.write(resigned, "tr2.json")), "--trust",
                      str(trust), "--certificate", str(cert)], capsys)  # fmt: skip
    assert code == 1 and "subjects" in text
    # the signature moved onto another payload: securesystemslib and ours refuse it
    moved = dict(envelope, payload=resigned["payload"])
    with pytest.raises(sslib_exceptions.VerificationError):
        dsse.Envelope.from_dict(_copy(moved)).verify([public], 1)
    code, text = run(["export", "verify", str(w.write(moved, "tr3.json")), "--trust",
                      str(trust)], capsys)  # fmt: skip
    assert code == 1 and "SIGNATURE_INVALID" in text


def test_a_certificate_that_does_not_verify_is_not_exported(
    world: tuple[World, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    w, _, trust = world
    forged = w.write(sign_raw(w.statement(**PREDICATE), [w.attacker]), "forged.json")
    code, text = run(["export", "cyclonedx", str(forged), "--trust", str(trust), "-o",
                      str(w.root / "bom.json")], capsys)  # fmt: skip
    assert code == 2 and "does not verify" in text
    assert not (w.root / "bom.json").exists()


def test_the_bom_validates_and_carries_the_certificate_s_figures(
    world: tuple[World, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    w, cert, trust = world
    out = w.root / "bom.cdx.json"
    code, text = run(["export", "cyclonedx", str(cert), "--trust", str(trust), "-o", str(out)],
                     capsys)  # fmt: skip
    assert code == 0, text
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(out.read_text()) is None
    bom = json.loads(out.read_text())
    models = [c for c in bom["components"] if c["type"] == "machine-learning-model"]
    assert sorted(c["name"] for c in models) == ["model.onnx", "weights.safetensors"]
    certified = {s["name"]: s["digest"]["sha256"] for s in w.statement()["subject"]}
    assert {c["name"]: c["hashes"][0]["content"] for c in bom["components"]} == certified
    metrics = {
        m["type"]: m for m in models[0]["modelCard"]["quantitativeAnalysis"]["performanceMetrics"]
    }
    assert float(metrics["min_stability_score"]["value"]) == 91.0
    assert metrics["min_fidelity_pct_vs_float64"]["slice"] == "float32"
    assert metrics["ig_randomization.max_spearman"]["value"] == "0.12"
    limitations = models[0]["modelCard"]["considerations"]["technicalLimitations"]
    assert any("Dr. Chen" in x and "HAZ-12" in x for x in limitations)
    code, text = run(["export", "verify", str(out), "--trust", str(trust), "--certificate",
                      str(cert)], capsys)  # fmt: skip
    assert code == 0, text
    bom["components"][0]["hashes"][0]["content"] = "1" * 64
    tampered = w.write(bom, "bom2.json")
    code, text = run(["export", "verify", str(tampered), "--trust", str(trust), "--certificate",
                      str(cert)], capsys)  # fmt: skip
    assert code == 1 and "SHA-256" in text


def test_certify_format_rewrites_the_certificate_as_a_bundle_that_verifies(
    world: tuple[World, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    from attest.cli.certify import _rewrite_as_bundle

    w, cert, _ = world
    native = cert.read_bytes()
    _rewrite_as_bundle(cert)
    assert json.loads(cert.read_text())["mediaType"] == BUNDLE_MEDIA_TYPE
    assert json.loads(cert.read_text())["dsseEnvelope"]["payload"] == json.loads(native)["payload"]
    assert w.verify(cert).verified


def test_the_spdx_document_has_an_ai_package_per_model_with_the_certificate_s_digests(
    world: tuple[World, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    import io

    spdx = pytest.importorskip("spdx_python_model").v3_0_1
    w, cert, trust = world
    out = w.root / "model.spdx.json"
    code, text = run(["export", "cyclonedx", str(cert), "--trust", str(trust), "--format", "spdx",
                      "-o", str(out)], capsys)  # fmt: skip
    assert code == 0, text
    objects = spdx.SHACLObjectSet()
    spdx.JSONLDDeserializer().read(io.BytesIO(out.read_bytes()), objects)
    packages = {p.name: p for p in objects.foreach_type(spdx.ai_AIPackage)}
    assert sorted(packages) == ["model.onnx", "weights.safetensors"]
    certified = {s["name"]: s["digest"]["sha256"] for s in w.statement()["subject"]}
    for name, package in packages.items():
        assert [h.hashValue for h in package.verifiedUsing] == [certified[name]]
        metrics = {e.key: e.value for e in package.ai_metric}
        assert float(metrics["min_stability_score"]) == 91.0
        assert "HAZ-12" in package.ai_limitation
    relations = list(objects.foreach_type(spdx.Relationship))
    assert {r.relationshipType for r in relations} == {spdx.RelationshipType.hasEvidence}
    files = {f.name: f for f in objects.foreach_type(spdx.software_File)}
    assert [h.hashValue for h in files[cert.name].verifiedUsing] == [
        __import__("hashlib").sha256(cert.read_bytes()).hexdigest()
    ]


def test_model_signing_signs_the_directory_and_its_own_verifier_accepts_it(tmp_path: Path) -> None:
    pytest.importorskip("model_signing")
    from _certfactory import new_key
    from model_signing import verifying

    from attest.certificate.model_signing import sign_model_directory
    from attest.certificate.signing import public_key_pem
    from attest.errors import InputError

    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "weights.safetensors").write_bytes(b"weights" * 64)
    (folder / "attest.yaml").write_text("model: {}\n")
    key = new_key("ecdsa-p256")
    signature = sign_model_directory(folder, key)
    assert signature == folder / "model.sig"
    public = tmp_path / "release.pub"
    public.write_text(public_key_pem(key.public_key))
    verifier = verifying.Config().use_elliptic_key_verifier(public_key=public)
    verifier.verify(folder, signature)  # model-signing's own verification
    (folder / "weights.safetensors").write_bytes(b"other weights")
    with pytest.raises(Exception, match=r"(?i)mismatch|digest|hash|verif"):
        verifier.verify(folder, signature)
    with pytest.raises(InputError, match="ECDSA P-256"):
        sign_model_directory(folder, new_key("ed25519"))


def test_inspect_report_and_the_ledger_read_the_bundle_form(
    world: tuple[World, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    from attest.certificate.bundle import to_bundle

    w, cert, trust = world
    bundle = w.write(to_bundle(json.loads(cert.read_text())), "cert.sigstore.json")
    code, text = run(["inspect", str(bundle), "--json"], capsys)
    assert code == 0 and '"digits-cnn"' in text
    code, text = run(["report", str(bundle), "--trust", str(trust), "-o", str(w.root / "r.html")],
                     capsys)  # fmt: skip
    assert code == 0, text
    assert "cert-0001" in (w.root / "r.html").read_text()
    code, text = run(["ledger", "append", str(bundle), "--ledger", str(w.root / "l.sqlite"),
                      "--json"], capsys)  # fmt: skip
    assert code == 0, text
    code, text = run(["diff", str(cert), str(bundle)], capsys)
    assert code == 0, text
