"""Pieces of the certify pipeline that need no model: expiry, policy settings, subjects."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from attest.core.io import sha256_file
from attest.errors import InputError, PolicyError
from attest.evidence.model import Evidence
from attest.pipeline import certificate_subjects, check_settings, parse_expiry
from attest.policy.model import parse_policy

RULES = [{"id": "r", "check": "fidelity"}]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("365d", timedelta(days=365)),
        ("2w", timedelta(days=14)),
        ("1y", timedelta(days=365)),
        ("12h", timedelta(hours=12)),
    ],
)
def test_parse_expiry(text: str, expected: timedelta) -> None:
    assert parse_expiry(text) == expected


@pytest.mark.parametrize("text", ["0d", "-1d", "soon", "1.5d", "365", ""])
def test_bad_expiry(text: str) -> None:
    with pytest.raises(InputError, match="not a positive duration"):
        parse_expiry(text)


def test_policy_settings_become_check_settings() -> None:
    policy = parse_policy(
        {
            "id": "p",
            "version": "1",
            "rules": RULES,
            "settings": {
                "ig_tolerance": 0.01,
                "ig_max_steps": 2048,
                "accumulation_microbatches": [2, 3],
            },
        }
    )
    settings = check_settings(policy)
    assert (settings.ig_tolerance, settings.ig_max_steps, settings.accumulation_microbatches) == (
        0.01,
        2048,
        (2, 3),
    )
    assert settings.seed == 0  # everything else at its default


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"ig_tolerence": 0.01}, "settings.ig_tolerence is not a check setting"),
        ({"ig_max_steps": 10.5}, "settings.ig_max_steps is 10.5, expected a int"),
        ({"ig_method": 3}, "settings.ig_method is 3, expected a str"),
        ({"ig_steps": True}, "settings.ig_steps is True"),
    ],
)
def test_bad_policy_settings(settings: dict[str, Any], message: str) -> None:
    policy = parse_policy({"id": "p", "version": "1", "rules": RULES, "settings": settings})
    with pytest.raises(PolicyError, match=message):
        check_settings(policy)


def stub_spec(folder: Path) -> Path:
    """A spec folder with placeholder weights and probe: enough for the certify paths that
    read files and digests, never a model."""
    (folder / "weights.safetensors").write_bytes(b"weights")
    (folder / "probe.safetensors").write_bytes(b"probe")
    spec = folder / "attest.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "model": {
                    "name": "m",
                    "version": "1.0.0",
                    "factory": "model:build",
                    "weights": "weights.safetensors",
                },
                "inputs": {"probe": "probe.safetensors"},
            }
        )
    )
    return spec


def _evidence(spec: Path, **artifacts: Any) -> Evidence:
    recorded = {
        role: {"sha256": sha256_file(spec.parent / name)}
        for role, name in (
            ("spec", "attest.yaml"),
            ("weights", "weights.safetensors"),
            ("probe", "probe.safetensors"),
        )
    }
    recorded.update(artifacts)
    return Evidence(tool_version="0", created_at="2026-01-01T00:00:00Z", artifacts=recorded)


def test_subjects_are_the_spec_weights_and_probe(tmp_path: Path) -> None:
    spec = stub_spec(tmp_path)
    subjects = certificate_subjects(_evidence(spec), spec, tmp_path / "out")
    assert subjects == {
        "attest.yaml": sha256_file(spec),
        "weights.safetensors": sha256_file(tmp_path / "weights.safetensors"),
        "probe.safetensors": sha256_file(tmp_path / "probe.safetensors"),
    }


def test_a_file_changed_after_collection_is_refused(tmp_path: Path) -> None:
    spec = stub_spec(tmp_path)
    evidence = _evidence(spec)
    (tmp_path / "weights.safetensors").write_bytes(b"retrained")
    with pytest.raises(InputError, match="changed after its evidence was collected"):
        certificate_subjects(evidence, spec, tmp_path / "out")


def test_exported_files_are_placed_next_to_the_certificate(tmp_path: Path) -> None:
    spec = stub_spec(tmp_path)
    elsewhere = tmp_path / "export-tmp"
    elsewhere.mkdir()
    (elsewhere / "model.onnx").write_bytes(b"onnx")
    (elsewhere / "probe.npz").write_bytes(b"npz")
    export = {
        **{
            role: {
                "name": name,
                "path": str(elsewhere / name),
                "sha256": sha256_file(elsewhere / name),
            }
            for role, name in (("onnx", "model.onnx"), ("probe_bundle", "probe.npz"))
        },
        "deployment": {},
        "onnx_mapping": {"file": "model.onnx", "sha256": "0" * 64, "probe": "probe.npz"},
    }
    evidence = Evidence.model_validate({**_evidence(spec).model_dump(), "export": export})
    out = tmp_path / "release"
    subjects = certificate_subjects(evidence, spec, out)
    assert subjects["model.onnx"] == sha256_file(out / "model.onnx")
    assert subjects["probe.npz"] == sha256_file(out / "probe.npz")
    (elsewhere / "model.onnx").write_bytes(b"swapped")
    with pytest.raises(InputError, match="does not have the digest the export check recorded"):
        certificate_subjects(evidence, spec, tmp_path / "release2")
