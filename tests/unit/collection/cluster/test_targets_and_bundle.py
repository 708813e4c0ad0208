"""targets.yaml validation and the spec bundle's digests (no Ray needed)."""

from __future__ import annotations

import dataclasses
import stat
from pathlib import Path
from typing import Any

import pytest
from _collect_models import make_spec

from attest.collection.cluster.bundle import pack_spec, unpack_spec
from attest.collection.cluster.targets import load_targets, parse_targets
from attest.errors import InputError


def test_targets_become_ray_options_and_node_resources() -> None:
    targets = parse_targets(
        {
            "cpu-avx512": {"num_cpus": 2, "resources": {"avx512": 1}},
            "gpu-a100": {"num_gpus": 1, "accelerator_type": "A100", "max_retries": 0},
        }
    )
    assert targets["cpu-avx512"].ray_options() == {
        "num_cpus": 2.0,
        "num_gpus": 0.0,
        "max_retries": 2,
        "retry_exceptions": False,
        "resources": {"avx512": 1.0},
    }
    assert targets["gpu-a100"].node_resources() == {
        "CPU": 1.0,
        "GPU": 1.0,
        "accelerator_type:A100": 0.001,
    }


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({}, "at least one target"),
        ([], "at least one target"),
        ({"bad name!": {}}, "not usable"),
        ({"a": {"num_cpus": 0}}, "num_cpus"),
        ({"a": {"num_gpu": 1}}, "unknown key"),
        ({"a": {"resources": {"avx512": -1}}}, "positive"),
        ({"a": {"max_retries": 99}}, "max_retries"),
        ({"a": "fast"}, "target a"),
    ],
)
def test_bad_targets_are_refused(data: Any, message: str) -> None:
    with pytest.raises(InputError, match=message):
        parse_targets(data)


def test_a_targets_file_that_is_not_yaml_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "targets.yaml"
    path.write_text("a: [unclosed\n")
    with pytest.raises(InputError, match="targets file"):
        load_targets(path)


def test_the_bundle_round_trips_and_refuses_other_bytes(tmp_path: Path) -> None:
    spec = make_spec(tmp_path / "m")
    (tmp_path / "m" / "__pycache__").mkdir()
    (tmp_path / "m" / "__pycache__" / "x.pyc").write_bytes(b"cache")
    bundle = pack_spec(spec)
    assert set(bundle.files) == {
        "attest.yaml",
        "model.py",
        "weights.safetensors",
        "probe.safetensors",
    }
    assert set(bundle.roles) == {"spec", "weights", "probe"}
    folder, unpacked = unpack_spec(bundle)
    assert unpacked.read_bytes() == spec.read_bytes()
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    changed = dict(bundle.files, **{"weights.safetensors": b"other weights"})
    with pytest.raises(InputError, match="other bytes"):
        unpack_spec(dataclasses.replace(bundle, files=changed))
    escaping = {"../evil.py": b"x"}
    with pytest.raises(InputError, match="outside its folder"):
        unpack_spec(dataclasses.replace(bundle, files=escaping, digests={"../evil.py": "0"}))


def test_weights_outside_the_spec_folder_are_refused(tmp_path: Path) -> None:
    spec = make_spec(tmp_path / "m")
    (tmp_path / "m" / "weights.safetensors").rename(tmp_path / "weights.safetensors")
    spec.write_text(
        spec.read_text().replace("weights: weights.safetensors", "weights: ../weights.safetensors")
    )
    with pytest.raises(InputError, match="outside the spec's folder"):
        pack_spec(spec)
