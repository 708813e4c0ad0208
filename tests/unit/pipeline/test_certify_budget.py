"""certify --budget: the policy's evidence floors bound the plan, a budget under them is
refused at the start naming the smallest that meets them, and an overrun is said on stderr."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from _collect_models import MLP, make_spec

import attest.collection as collection
from attest.certificate.signing import generate_keypair
from attest.cli.budget_report import say_overrun
from attest.collection.budget_calibration import Calibration
from attest.errors import InputError
from attest.evidence.model import BudgetRecord, Evidence
from attest.pipeline import certify

REPO = Path(__file__).resolve().parents[3]
CLINICAL = REPO / "policies" / "clinical-strict.yaml"


def test_clinical_strict_budget_under_its_100_repeats_is_refused_before_any_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a repeat of 0.5 s: clinical-strict's 100 runs need 50 s at the least
    def half_second(ctx: object, *, capture_s: float, float64_s: float) -> Calibration:
        return Calibration(0.4, 0.5, capture_s, 0.8, 0.0)

    monkeypatch.setattr(collection, "calibrate", half_second)
    spec = make_spec(tmp_path / "spec", MLP, spec_extra="repeats: 100\nthreads: 1\n")
    key, _, _ = generate_keypair(tmp_path / "keys" / "release", passphrase=None)
    out = tmp_path / "out" / "cert.json"
    out.parent.mkdir()
    with pytest.raises(InputError) as info:
        certify(spec, policy=CLINICAL, key=key, out=out, budget="20s")
    text = str(info.value)
    named = re.search(r"smallest budget that meets them is (\d+) s", text)
    assert named is not None and float(named.group(1)) > 99 * 0.5
    assert "repeats 100" in text and "ig_tolerance 0.01" in text
    assert not any(out.parent.iterdir())  # refused before anything was written


def test_an_overrun_is_printed_on_stderr_in_plain_words(capsys: pytest.CaptureFixture[str]) -> None:
    record = BudgetRecord(
        limit_s=300.0, unit_s=1.0, estimate_full_s=900.0, estimate_planned_s=280.0,
        elapsed_s=733.0, full_work=False,
    )  # fmt: skip
    say_overrun(Evidence.model_construct(budget=record))
    err = capsys.readouterr().err
    assert "733 s" in err and "budget of 300 s" in err and "2.44x" in err
    held = record.model_copy(update={"elapsed_s": 290.0})
    say_overrun(Evidence.model_construct(budget=held))
    assert capsys.readouterr().err == ""
