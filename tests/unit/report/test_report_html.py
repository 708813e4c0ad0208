"""The HTML report: every section present, every operator listed, findings ordered and linked,
self-contained (nothing fetched), tolerant of missing sections, verified or marked unverified."""

from __future__ import annotations

import json
import re
import time
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from _report_samples import CNN_OPS, findings_for, make_evidence, write_evidence

from attest.errors import AttestError, InputError
from attest.evidence.model import Evidence
from attest.report.html import write_report

SECTIONS = (
    "summary",
    "findings",
    "checks",
    "operators",
    "modules",
    "ig",
    "gradient-checks",
    "training",
    "other-checks",
)


class _Page(HTMLParser):
    """Collects element ids, links, scripts and the attributes that could fetch something."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: dict[str, dict[str, str | None]] = {}
        self.hrefs: list[str] = []
        self.fetching: list[str] = []
        self.scripts = 0
        self.svgs = 0
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("id"):
            assert a["id"] not in self.ids, f"duplicate id {a['id']}"
            self.ids[str(a["id"])] = a
        if tag == "a" and a.get("href"):
            self.hrefs.append(str(a["href"]))
        if tag == "script":
            self.scripts += 1
            if a.get("src"):
                self.fetching.append(f"script src={a['src']}")
        if tag == "svg":
            self.svgs += 1
        if tag in ("link", "iframe", "object", "embed"):
            self.fetching.append(tag)
        for key in ("src", "href", "xlink:href"):
            value = a.get(key) or ""
            if tag != "a" and value and not value.startswith(("data:", "#")):
                self.fetching.append(f"{tag} {key}={value}")
            if tag == "a" and value and not value.startswith("#"):
                self.fetching.append(f"a href={value}")

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse(path: Path) -> tuple[_Page, str]:
    text = path.read_text(encoding="utf-8")
    page = _Page()
    page.feed(text)
    return page, text


@pytest.fixture
def failed_evaluation(tmp_path: Path) -> tuple[Path, Path, Evidence]:
    evidence = make_evidence(drop={9: 99.5})
    ev = write_evidence(tmp_path / "evidence.json", evidence)
    findings = tmp_path / "findings.json"
    findings.write_text(json.dumps(findings_for(evidence, fail_op=9)), encoding="utf-8")
    return ev, findings, evidence


def test_failed_evaluation_report_has_every_section_and_operator(
    tmp_path: Path, failed_evaluation: tuple[Path, Path, Evidence]
) -> None:
    ev, findings, evidence = failed_evaluation
    result = write_report(ev, tmp_path / "report.html", findings=findings)
    assert not result.certified
    assert result.verification.status == "unsigned"
    page, text = parse(result.path)
    for section in SECTIONS:
        assert section in page.ids, f"section {section} missing"
    for row in evidence.operators:
        assert f"op-{row['id']}" in page.ids
    # the module roll-up has a row per module
    for module, _ in CNN_OPS:
        assert f"mod-{module}" in page.ids
    assert "NOT CERTIFIED" in text and "UNVERIFIED" in text
    assert "Verified by signature:</b> nothing" in text
    assert page.svgs >= 2  # operator profile and randomization curve


def test_findings_failures_first_and_linked_to_their_operator(
    tmp_path: Path, failed_evaluation: tuple[Path, Path, Evidence]
) -> None:
    ev, findings, _ = failed_evaluation
    page, text = parse(write_report(ev, tmp_path / "r.html", findings=findings).path)
    findings_html = text[text.index('id="findings"') : text.index('id="checks"')]
    first_fail = findings_html.index("b-fail")
    first_waived = findings_html.index("b-waived")
    first_pass = findings_html.index("b-pass")
    assert first_fail < first_waived < first_pass
    assert '<a href="#op-9">' in findings_html
    assert '<a href="#mod-features.1">' in findings_html  # the waived module-level finding
    assert (
        "waived by norm-waiver, approved by J. Doe, ref HAZ-12, until 2027-01-01" in findings_html
    )
    assert "flag" in str(page.ids["op-9"].get("class"))
    assert "flag" not in str(page.ids["op-8"].get("class"))
    # every internal link points at an element of the page
    for href in page.hrefs:
        assert href.startswith("#") and href[1:] in page.ids, href


def test_report_is_self_contained(
    tmp_path: Path, failed_evaluation: tuple[Path, Path, Evidence]
) -> None:
    ev, findings, _ = failed_evaluation
    page, text = parse(write_report(ev, tmp_path / "r.html", findings=findings).path)
    assert page.fetching == []
    assert page.scripts == 1
    assert "@import" not in text
    assert re.search(r"url\((?!#)", text) is None  # only in-document references (SVG clip paths)
    assert re.search(r"https?://(?!www\.w3\.org/)", text) is None  # SVG namespaces only
    assert "default-src 'none'" in text  # the page itself forbids fetching


def test_gradient_checks_state_their_scope(
    tmp_path: Path, failed_evaluation: tuple[Path, Path, Evidence]
) -> None:
    ev, findings, _ = failed_evaluation
    _, text = parse(write_report(ev, tmp_path / "r.html", findings=findings).path)
    section = text[text.index('id="gradient-checks"') : text.index('id="other-checks"')]
    for fact in ("eps", "1.0000e-06", "directions", "atol", "rtol", "seed", "second_order"):
        assert fact in section, fact


def test_fidelity_is_shown_with_its_shortfall(
    tmp_path: Path, failed_evaluation: tuple[Path, Path, Evidence]
) -> None:
    ev, _, _ = failed_evaluation
    _, text = parse(write_report(ev, tmp_path / "r.html").path)
    assert "99.9999900" in text  # 100 - 1e-5 is not rounded to 100


def test_empty_evidence_renders_and_says_not_available(tmp_path: Path) -> None:
    ev = write_evidence(
        tmp_path / "e.json", Evidence(tool_version="0.1.0", created_at="2026-01-01T00:00:00Z")
    )
    page, text = parse(write_report(ev, tmp_path / "r.html").path)
    for section in ("summary", "findings", "checks", "operators", "ig", "gradient-checks"):
        assert section in page.ids
    assert text.count("not available") >= 5
    assert "not evaluated against a policy" in text


def test_error_and_unreadable_checks_are_shown_not_dropped(tmp_path: Path) -> None:
    evidence = make_evidence()
    doc = evidence.model_dump(mode="json")
    doc["checks"]["numerics"] = {
        "check": "numerics",
        "status": "error",
        "reason": "RuntimeError in forward at features.2",
    }
    path = tmp_path / "e.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    page, text = parse(write_report(path, tmp_path / "r.html").path)
    assert "check-numerics" in page.ids
    assert "RuntimeError in forward at features.2" in text


def test_large_model_charts_aggregate_per_module_and_table_lists_all(tmp_path: Path) -> None:
    ops = [
        (f"blocks.{i // 6}.{['conv', 'norm', 'act'][i % 3]}", "aten.add.Tensor")
        for i in range(1200)
    ]
    ev = write_evidence(tmp_path / "e.json", make_evidence(ops=ops))
    start = time.perf_counter()
    result = write_report(ev, tmp_path / "r.html")
    elapsed = time.perf_counter() - start
    page, text = parse(result.path)
    assert all(f"op-{i}" in page.ids for i in range(1200))
    assert "charts show one point per module-path prefix of depth 2" in text
    assert elapsed < 20, f"report took {elapsed:.1f} s"


def test_malformed_inputs_are_attest_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(InputError, match="not valid JSON"):
        write_report(bad, tmp_path / "r.html")
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"hello": 1}), encoding="utf-8")
    with pytest.raises(InputError, match="neither a certificate"):
        write_report(other, tmp_path / "r.html")
    broken_ev = tmp_path / "ev.json"
    broken_ev.write_text(
        json.dumps({"tool_version": "0.1", "created_at": "x", "checks": 3}), encoding="utf-8"
    )
    with pytest.raises(AttestError, match="not a valid evidence file"):
        write_report(broken_ev, tmp_path / "r.html")
    with pytest.raises(InputError):
        write_report(tmp_path / "missing.json", tmp_path / "r.html")


def test_evidence_option_needs_a_certificate(tmp_path: Path) -> None:
    ev = write_evidence(tmp_path / "e.json", make_evidence())
    with pytest.raises(InputError, match="already evidence"):
        write_report(ev, tmp_path / "r.html", evidence=ev)


def _subject_anchor_cases() -> list[tuple[dict[str, Any], str]]:
    return [
        ({"kind": "operator", "operator_id": 3, "module": "features.3"}, "#op-3"),
        ({"kind": "module", "module": "classifier.1"}, "#mod-classifier.1"),
        ({"kind": "parameter", "name": "features.0.weight"}, "#mod-features.0"),
        ({"kind": "input", "input_index": 1}, "#check-ig_completeness"),
    ]


@pytest.mark.parametrize(("subject", "anchor"), _subject_anchor_cases())
def test_each_finding_links_to_its_row(
    tmp_path: Path, subject: dict[str, Any], anchor: str
) -> None:
    ev = write_evidence(tmp_path / "e.json", make_evidence())
    findings = tmp_path / "f.json"
    findings.write_text(
        json.dumps(
            {
                "verdict": "fail",
                "findings": [
                    {
                        "rule": "r",
                        "check": "ig_completeness",
                        "subject": subject,
                        "verdict": "fail",
                        "observed": 1.0,
                        "threshold": 0.5,
                        "message": "m",
                    }
                ],
            }
        ),
        encoding="utf-8",
    )
    page, text = parse(write_report(ev, tmp_path / "r.html", findings=findings).path)
    assert f'<a href="{anchor}">' in text
    assert anchor[1:] in page.ids


# ------------------------------------------------------------------ certificates and signatures


def _certificate(
    tmp_path: Path, evidence: Evidence, *, evidence_path: Path | None = None, **validity: Any
) -> tuple[Path, Path]:
    """A signed certificate of ``evidence`` and a trust store holding its key."""
    from attest.certificate.signing import generate_keypair, load_private_key
    from attest.certificate.statement import build_statement, sign_statement, write_certificate
    from attest.core.io import sha256_file
    from attest.verification.trust import add_key, empty_trust_store, save_trust_store

    key_path, pub_path, _ = generate_keypair(tmp_path / "release", passphrase=None)
    doc = evidence.model_dump(mode="json")
    sections = {k: doc[k] for k in ("operators", "modules", "checks", "model_metrics")}
    if evidence_path is not None:
        sections["evidence_digest"] = {"sha256": sha256_file(evidence_path)}
    statement = build_statement(
        subjects={"weights.safetensors": "ab" * 32},
        model={"name": "digits-cnn", "version": "1.0.0"},
        policy={"id": "clinical-strict", "version": "1", "digest": {"sha256": "ef" * 32}},
        verdict="pass",
        environment=doc["environment"],
        findings=findings_for(evidence)["findings"],
        **validity,
        **sections,
    )
    cert = write_certificate(
        tmp_path / "cert.json", sign_statement(statement, [load_private_key(key_path)])
    )
    store, _ = add_key(
        empty_trust_store(str(tmp_path / "trust.yaml")), pub_path.read_text(), name="release"
    )
    trust = save_trust_store(store, tmp_path / "trust.yaml")
    return cert, trust


def test_certificate_verified_with_trust(tmp_path: Path) -> None:
    evidence = make_evidence()
    cert, trust = _certificate(tmp_path, evidence)
    result = write_report(cert, tmp_path / "r.html", trust=trust)
    assert result.verification.status == "verified", result.verification
    assert result.certified
    page, text = parse(result.path)
    assert "SIGNATURE VERIFIED" in text and ">CERTIFIED<" in text
    verified_part = text[text.index("Verified by signature:") : text.index('<nav class="toc">')]
    assert "read from the signed statement" in verified_part
    for row in evidence.operators:
        assert f"op-{row['id']}" in page.ids
    # each signature as "name (role), meaning, time" with its verification status
    assert re.search(
        r"signature 0: [^<]+ \(release-engineer\), authorship, \d{4}-[^<]+key release \([0-9a-f]{16}\): counted",
        text,
    ), text[text.index("signatures") : text.index("signatures") + 400]


def test_certificate_without_trust_is_marked_unverified(tmp_path: Path) -> None:
    cert, _ = _certificate(tmp_path, make_evidence())
    result = write_report(cert, tmp_path / "r.html")
    assert result.verification.status == "not_checked"
    _, text = parse(result.path)
    assert "CERTIFIED AS CLAIMED" in text and "UNVERIFIED" in text
    assert "Verified by signature:</b> nothing" in text


def test_tampered_certificate_fails_verification(tmp_path: Path) -> None:
    import base64

    cert, trust = _certificate(tmp_path, make_evidence())
    envelope = json.loads(cert.read_text())
    statement = json.loads(base64.b64decode(envelope["payload"]))
    statement["predicate"]["operators"][9]["fidelity_pct"] = 100.0
    envelope["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
    cert.write_text(json.dumps(envelope))
    result = write_report(cert, tmp_path / "r.html", trust=trust)
    assert result.verification.status == "failed"
    assert "SIGNATURE_INVALID" in [code for code, _ in result.verification.reasons]
    _, text = parse(result.path)
    assert "NOT TRUSTED" in text and "SIGNATURE VERIFICATION FAILED" in text
    assert "Verified by signature:</b> nothing" in text


def test_ig_heatmaps_beside_inputs_from_bound_evidence(tmp_path: Path) -> None:
    np = pytest.importorskip("numpy")
    ig = pytest.importorskip("attest.collection.ig.attribution")
    rng = np.random.default_rng(0)
    inputs = rng.random((3, 1, 8, 8))
    evidence = make_evidence()
    evidence.attributions = ig.encode_attributions(inputs * 0.1 - 0.05, inputs)
    ev_path = write_evidence(tmp_path / "evidence.json", evidence)
    cert, trust = _certificate(tmp_path, evidence, evidence_path=ev_path)
    result = write_report(cert, tmp_path / "r.html", trust=trust, evidence=ev_path)
    _, text = parse(result.path)
    ig_section = text[text.index('id="ig"') : text.index('id="check-ig_completeness"')]
    assert 'aria-label="ig-heatmaps"' in ig_section
    assert ig_section.count("<image") == 2 * 3  # each input beside its attribution map
    assert "input 2" in ig_section and "completeness error 3.0e-06" in ig_section
    assert "whose digest the certificate names" in text
    # the same evidence unbound (no digest in the certificate) is reported as not verified
    (tmp_path / "other").mkdir()
    cert2, trust2 = _certificate(tmp_path / "other", evidence)
    _, text2 = parse(write_report(cert2, tmp_path / "r2.html", trust=trust2, evidence=ev_path).path)
    assert "which the certificate does not name" in text2


def test_model_failure_is_named_in_the_summary(tmp_path: Path) -> None:
    from attest.evidence.model import ModelFailure

    evidence = make_evidence()
    evidence.model_failure = ModelFailure(
        phase="backward",
        module="features.4",
        op="aten.convolution.default",
        error_type="RuntimeError",
        message="one of the variables needed for gradient computation has been modified",
    )
    _, text = parse(
        write_report(write_evidence(tmp_path / "e.json", evidence), tmp_path / "r.html").path
    )
    summary = text[text.index('id="summary"') : text.index('id="findings"')]
    assert "The model raised in backward at aten.convolution.default features.4" in summary
    assert "has been modified" in summary


def test_compile_settings_are_shown_in_the_summary(tmp_path: Path) -> None:
    from attest.evidence.model import CompileRecord

    evidence = make_evidence()
    evidence.compile = CompileRecord(
        compiled=True,
        modules=[""],
        backend="inductor",
        mode="max-autotune",
        note="torch.compile'd (the model; backend=inductor, mode=max-autotune): the checks ran "
        "the original eager module (_orig_mod) with the same weights",
    )
    _, text = parse(
        write_report(write_evidence(tmp_path / "e.json", evidence), tmp_path / "r.html").path
    )
    summary = text[text.index('id="summary"') : text.index('id="findings"')]
    assert "The model is compiled (torch.compile)" in summary
    assert "backend=inductor, mode=max-autotune" in summary


def test_bare_statement_is_unsigned(tmp_path: Path) -> None:
    import base64

    cert, _ = _certificate(tmp_path, make_evidence())
    statement = base64.b64decode(json.loads(cert.read_text())["payload"])
    path = tmp_path / "statement.json"
    path.write_bytes(statement)
    result = write_report(path, tmp_path / "r.html")
    assert result.verification.status == "unsigned" and not result.certified
    _, text = parse(result.path)
    assert "NOT CERTIFIED" in text and "UNVERIFIED" in text


def test_unusable_trust_store_or_lone_artifact_is_an_input_error(tmp_path: Path) -> None:
    cert, _ = _certificate(tmp_path, make_evidence())
    bad_trust = tmp_path / "bad-trust.yaml"
    bad_trust.write_text("keys: [", encoding="utf-8")
    with pytest.raises(AttestError):
        write_report(cert, tmp_path / "r.html", trust=bad_trust)
    with pytest.raises(InputError, match="only with --trust"):
        write_report(cert, tmp_path / "r.html", artifacts=[cert])
    assert not (tmp_path / "r.html").exists()


def test_expired_certificate_is_authentic_but_not_valid(tmp_path: Path) -> None:
    from datetime import datetime, timedelta, timezone

    issued = datetime(2024, 1, 1, tzinfo=timezone.utc)
    cert, trust = _certificate(
        tmp_path, make_evidence(), issued_at=issued, expires_in=timedelta(days=30)
    )
    result = write_report(cert, tmp_path / "r.html", trust=trust)
    assert result.verification.status == "signature_valid"
    assert [code for code, _ in result.verification.reasons] == ["EXPIRED"]
    assert not result.certified
    _, text = parse(result.path)
    assert ">NOT VALID<" in text and "authentic, but the verifier rejects it: EXPIRED" in text
    assert '<span class="badge b-fail">expired</span>' in text
    assert "read from the signed statement" in text  # the numbers are still authentic
