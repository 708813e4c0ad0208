"""Evidence floors of clinical-strict (issue 21): at least 100 repeats, at least 8 probe
examples, and for target: label every class the model outputs in the probe. Ordinary rules:
a site policy changes them, and research.yaml mirrors them as warnings."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from attest.collection.profile.topology import _class_coverage
from attest.evidence.model import Evidence
from attest.policy.engine import evaluate
from attest.policy.model import load_policy

REPO = Path(__file__).resolve().parents[3]
FLOORS = ("min_repeats", "min_probe_examples", "probe_class_coverage")


def _evidence(runs: int, inputs: int, coverage: dict[str, Any]) -> Evidence:
    check = {"status": "computed", "items": []}
    return Evidence.model_validate(
        {
            "tool_version": "0.1.0",
            "created_at": "2026-05-01T00:00:00Z",
            "model": {"name": "toy", "version": "1.0.0", "precision": "float32"},
            "checks": {
                "determinism": {"check": "determinism", **check, "summary": {"runs": runs}},
                "topology": {
                    "check": "topology",
                    "status": "computed",
                    # one passing item per probe input, as the collector writes them: the
                    # evidence must be consistent (attest.evidence.consistency)
                    "items": [
                        {
                            "subject": {"kind": "input", "input_index": i},
                            "status": "pass",
                            "metrics": {"operators": 3, "first_divergence": None},
                        }
                        for i in range(inputs)
                    ],
                    "summary": {"inputs": inputs, **coverage},
                },
            },
        }
    )


def _floors(evidence: Evidence, policy: str = "clinical-strict") -> dict[str, str]:
    findings = evaluate(evidence, load_policy(REPO / "policies" / f"{policy}.yaml"))
    return {f.rule: f.verdict for f in findings.findings if f.rule in FLOORS}


@pytest.mark.parametrize(
    ("runs", "inputs", "missing", "expected"),
    [
        (100, 8, 0, {"min_repeats": "pass", "min_probe_examples": "pass"}),
        (2, 8, 0, {"min_repeats": "fail", "min_probe_examples": "pass"}),
        (100, 1, 0, {"min_repeats": "pass", "min_probe_examples": "fail"}),
        (100, 10, 2, {"probe_class_coverage": "fail"}),
    ],
)
def test_clinical_strict_floors(
    runs: int, inputs: int, missing: int, expected: dict[str, str]
) -> None:
    coverage = {
        "model_classes": 10,
        "probe_classes": 10 - missing,
        "probe_classes_missing": missing,
    }
    got = _floors(_evidence(runs, inputs, coverage))
    assert {k: got[k] for k in expected} == expected
    research = _floors(_evidence(runs, inputs, coverage), "research")
    assert set(research.values()) <= {"pass", "warn"}


def test_class_coverage_applies_to_label_targets_only() -> None:
    labels = torch.tensor([0, 1, 2, 2, 7, 1, 0, 3])
    spec = SimpleNamespace(target="label", labels=labels)
    assert _class_coverage(spec, 10) == {
        "model_classes": 10,
        "probe_classes": 5,
        "probe_classes_missing": 5,
    }
    assert _class_coverage(SimpleNamespace(target="argmax", labels=labels), 10) == {}
    assert _class_coverage(SimpleNamespace(target=1, labels=None), 2) == {}
    # no coverage figures (another target): the rule does not apply and does not fail
    assert _floors(_evidence(100, 8, {}))["probe_class_coverage"] == "not_computed"
