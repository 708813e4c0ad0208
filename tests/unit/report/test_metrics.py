"""attest metrics: valid OpenMetrics (parsed by prometheus_client's strict parser), escaped
label values, per-operator figures, and verification outcomes counted from the ledger."""

from __future__ import annotations

from pathlib import Path

import pytest
from _report_samples import make_evidence, write_evidence

from attest.report.metrics import escape_label_value, format_value, openmetrics_text

parser = pytest.importorskip("prometheus_client.openmetrics.parser")


def _families(text: str) -> dict[str, object]:
    return {f.name: f for f in parser.text_string_to_metric_families(text)}


def _samples(text: str, family: str) -> list[tuple[dict[str, str], float]]:
    fam = _families(text)[family]
    return [(dict(s.labels), s.value) for s in fam.samples]  # type: ignore[attr-defined]


def test_output_parses_and_ends_with_eof(tmp_path: Path) -> None:
    ev = write_evidence(tmp_path / "e.json", make_evidence(drop={9: 99.5}))
    text = openmetrics_text(ev)
    assert text.endswith("# EOF\n")
    fams = _families(text)
    for name in (
        "attest_certificate",
        "attest_operator_fidelity_percent",
        "attest_operator_stability_score",
        "attest_operator_bit_exact_ratio",
        "attest_model_bit_exact_ratio",
        "attest_ig_completeness_error_ratio",
        "attest_check_status",
    ):
        assert name in fams, name
    fidelity = _samples(text, "attest_operator_fidelity_percent")
    planted = [
        v
        for labels, v in fidelity
        if labels["operator_id"] == "9" and labels["kind"] == "accumulated"
    ]
    assert planted == [99.5]
    assert len(fidelity) == 2 * 12
    errors = {
        labels["input_index"]: v
        for labels, v in _samples(text, "attest_ig_completeness_error_ratio")
    }
    assert errors == {"0": 1e-6, "1": 2e-6, "2": 3e-6}


def test_label_values_are_escaped_and_survive_a_round_trip(tmp_path: Path) -> None:
    evidence = make_evidence()
    evidence.operators[0].module = 'odd\\name "quoted"\nnext'
    evidence.model["name"] = 'model "x"'
    text = openmetrics_text(write_evidence(tmp_path / "e.json", evidence))
    labels = [lab for lab, _ in _samples(text, "attest_operator_stability_score")]
    assert labels[0]["module"] == 'odd\\name "quoted"\nnext'
    assert labels[0]["model"] == 'model "x"'


def test_escaping_and_value_rules() -> None:
    assert escape_label_value('a\\b"c\nd') == 'a\\\\b\\"c\\nd'
    assert format_value(float("nan")) == "NaN"
    assert format_value(float("inf")) == "+Inf"
    assert format_value(float("-inf")) == "-Inf"
    assert format_value(3) == "3"
    assert format_value(True) == "1"


def test_ledger_outcomes_are_counted(tmp_path: Path) -> None:
    ledger_mod = pytest.importorskip("attest.ledger.log")
    from attest.ledger.entries import LedgerEntry, utc_now

    ev_path = write_evidence(tmp_path / "e.json", make_evidence())
    from attest.core.io import sha256_file

    digest = sha256_file(ev_path)
    db = tmp_path / "ledger.sqlite"
    with ledger_mod.open_ledger(db, create=True) as ledger:
        for event, codes in (
            ("verified", []),
            ("verified", []),
            ("rejected", ["EXPIRED"]),
            ("issued", []),
        ):
            ledger.append(
                LedgerEntry(
                    event=event,
                    time=utc_now(),
                    certificate={"sha256": digest},
                    model={"name": "digits-cnn", "version": "1.0.0"},
                    result="pass" if event != "rejected" else "fail",
                    reason_codes=codes,
                    certificate_checked=event != "issued",
                )
            )
    text = openmetrics_text(ev_path, ledger=db)
    outcomes = {lab["outcome"]: v for lab, v in _samples(text, "attest_verifications")}
    assert outcomes == {"verified": 2.0, "rejected": 1.0}
    reasons = {lab["reason"]: v for lab, v in _samples(text, "attest_verification_rejections")}
    assert reasons == {"EXPIRED": 1.0}
    events = {lab["event"]: v for lab, v in _samples(text, "attest_ledger_entries")}
    assert events == {"issued": 1.0, "rejected": 1.0, "verified": 2.0}


def test_missing_ledger_is_an_error(tmp_path: Path) -> None:
    from attest.errors import InputError

    ev = write_evidence(tmp_path / "e.json", make_evidence())
    with pytest.raises(InputError, match="does not exist"):
        openmetrics_text(ev, ledger=tmp_path / "nope.sqlite")


def test_certificate_metrics_carry_identity_and_validity(tmp_path: Path) -> None:
    from test_report_html import _certificate

    cert, _ = _certificate(tmp_path, make_evidence())
    text = openmetrics_text(cert)
    (info,) = _samples(text, "attest_certificate")
    labels = info[0]
    assert labels["kind"] == "certificate" and labels["verdict"] == "pass"
    assert labels["policy"] == "clinical-strict" and len(labels["certificate_id"]) > 8
    (issued,) = _samples(text, "attest_certificate_issued_timestamp_seconds")
    (expiry,) = _samples(text, "attest_certificate_expiry_timestamp_seconds")
    assert expiry[1] - issued[1] == pytest.approx(365 * 86400)
    findings = {lab["verdict"]: v for lab, v in _samples(text, "attest_findings")}
    assert findings["pass"] == 12 and findings["waived"] == 1


def test_diff_and_metrics_import_neither_torch_numpy_nor_matplotlib() -> None:
    """They run on monitoring and CI machines that only have the core install."""
    import subprocess
    import sys

    code = (
        "import sys, attest.report.diff, attest.report.metrics, attest.report\n"
        "print([m for m in ('torch', 'numpy', 'matplotlib') if m in sys.modules])"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_operator_time_spread_is_exported_in_seconds(tmp_path: Path) -> None:
    from _training_samples import with_training

    ev = write_evidence(tmp_path / "e.json", with_training(make_evidence()))
    text = openmetrics_text(ev)
    assert "# UNIT attest_operator_time_seconds seconds" in text
    times = {
        (lab["operator_id"], lab["phase"], lab["statistic"]): v
        for lab, v in _samples(text, "attest_operator_time_seconds")
    }
    assert len(times) == 12 * 2 * 3  # every operator: forward and backward, three statistics
    # operator 3: forward median 1,800 ns, IQR 10,003 ns, p95 3,600 ns; backward 3,600 ns...
    assert times[("3", "forward", "median")] == pytest.approx(1.8e-6)
    assert times[("3", "forward", "iqr")] == pytest.approx(10_003e-9)
    assert times[("3", "forward", "p95")] == pytest.approx(3.6e-6)
    assert times[("3", "backward", "iqr")] == pytest.approx(20_003e-9)
    assert times[("3", "backward", "p95")] == pytest.approx(7.2e-6)


def test_operator_time_without_spread_exports_only_the_median(tmp_path: Path) -> None:
    ev = write_evidence(tmp_path / "e.json", make_evidence())  # no spread: repeats 1
    stats = {
        lab["statistic"]
        for lab, _ in _samples(openmetrics_text(ev), "attest_operator_time_seconds")
    }
    assert stats == {"median"}


def test_training_check_summaries_are_exported(tmp_path: Path) -> None:
    from _training_samples import MiB, with_training

    ev = write_evidence(tmp_path / "e.json", with_training(make_evidence()))
    figures = {
        (lab["check"], lab["name"]): v
        for lab, v in _samples(openmetrics_text(ev), "attest_training_check_metric")
    }
    assert figures[("mixed_precision", "max_grad_rel_error")] == 1.25e-3
    assert figures[("mixed_precision", "failed")] == 1
    assert figures[("recompute", "saved_bytes_freed")] == 4 * MiB
    assert figures[("recompute", "grad_bit_exact")] == 1  # yes/no as 1/0
    assert figures[("resume", "losses_equal")] == 1
    assert figures[("resume", "unrestored_state")] == 0
    assert {check for check, _ in figures} == {"mixed_precision", "recompute", "resume"}
    statuses = {
        lab["check"]: lab["status"]
        for lab, _ in _samples(openmetrics_text(ev), "attest_check_status")
    }
    assert statuses["batch_invariance"] == "not_applicable"
