"""attest.yaml loading: valid specs load; every kind of bad input is a clear AttestError."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from _collect_models import LINEAR_RELU, MLP, make_spec
from safetensors.torch import save_file

from attest.errors import AttestError, ConfigError, InputError
from attest.spec import load_spec, parse_spec_file


def test_valid_spec_loads_model_weights_and_probe(tmp_path: Path) -> None:
    path = make_spec(
        tmp_path, MLP, target=torch.tensor([0, 1, 2, 0]), spec_extra="target: label\nrepeats: 5\n"
    )
    spec = load_spec(path)
    assert (spec.name, spec.version, spec.target, spec.repeats) == ("tiny", "1.0.0", "label", 5)
    assert (
        spec.inputs.shape == (4, 8) and spec.labels is not None and spec.labels.dtype == torch.long
    )
    m1, m2 = spec.build_model(), spec.build_model()
    assert m1 is not m2 and not m1.training
    assert set(spec.artifacts) == {"spec", "weights", "probe"}
    from safetensors.torch import load_file

    stored = load_file(str(tmp_path / "weights.safetensors"))
    for name, tensor in m1.state_dict().items():
        assert torch.equal(tensor, stored[name])


def test_defaults(tmp_path: Path) -> None:
    spec = load_spec(make_spec(tmp_path, spec_extra=""))
    assert (
        spec.precision,
        spec.device,
        spec.threads,
        spec.repeats,
        spec.target,
        spec.baseline,
    ) == (
        "float32",
        "cpu",
        2,
        20,
        "argmax",
        "zero",
    )


def test_two_specs_with_same_module_name_do_not_collide(tmp_path: Path) -> None:
    a = load_spec(make_spec(tmp_path / "a", MLP))
    b = load_spec(make_spec(tmp_path / "b", LINEAR_RELU, x=torch.randn(2, 4)))
    assert len(list(a.build_model().children())) == 5
    assert len(list(b.build_model().children())) == 2


def test_pt_state_dict_and_npz_probe(tmp_path: Path) -> None:
    path = make_spec(tmp_path, LINEAR_RELU, x=torch.randn(2, 4))
    torch.manual_seed(0)
    state = load_spec(path).build_model().state_dict()
    torch.save(state, tmp_path / "w.pt")
    np.savez(tmp_path / "p.npz", x=np.ones((3, 4), dtype=np.float32), target=np.array([0, 1, 2]))
    text = (
        path.read_text()
        .replace("weights.safetensors", "w.pt")
        .replace("probe.safetensors", "p.npz")
    )
    path.write_text(text)
    spec = load_spec(path)
    assert spec.inputs.shape == (3, 4) and spec.labels is not None


def _edit(path: Path, old: str, new: str) -> Path:
    path.write_text(path.read_text().replace(old, new))
    return path


BAD_SPECS = [
    (
        "unknown top-level key",
        lambda p: _edit(p, "inputs:", "colour: red\ninputs:"),
        ConfigError,
        "colour: unknown key",
    ),
    (
        "unknown nested key",
        lambda p: _edit(p, "  name: tiny", "  name: tiny\n  nmae: x"),
        ConfigError,
        "model.nmae: unknown key",
    ),
    (
        "missing weights key",
        lambda p: _edit(p, "  weights: weights.safetensors\n", ""),
        ConfigError,
        "model.weights",
    ),
    (
        "duplicate key",
        lambda p: _edit(p, "  name: tiny", "  name: tiny\n  name: other"),
        ConfigError,
        "duplicate key",
    ),
    (
        "float version",
        lambda p: _edit(p, "version: 1.0.0", "version: 1.10"),
        ConfigError,
        "quote it",
    ),
    (
        "bad precision",
        lambda p: _edit(p, "inputs:", "precision: float8\ninputs:"),
        ConfigError,
        "precision",
    ),
    ("bad device", lambda p: _edit(p, "inputs:", "device: tpu\ninputs:"), ConfigError, "device"),
    (
        "bad factory string",
        lambda p: _edit(p, "model:build", "model.build"),
        ConfigError,
        "module:callable",
    ),
    (
        "factory module missing",
        lambda p: _edit(p, "model:build", "nosuchmodule_xyz:build"),
        ConfigError,
        "nosuchmodule_xyz",
    ),
    (
        "factory attribute missing",
        lambda p: _edit(p, "model:build", "model:nope"),
        ConfigError,
        "no attribute 'nope'",
    ),
    (
        "weights file missing",
        lambda p: _edit(p, "weights.safetensors", "gone.safetensors"),
        InputError,
        "gone.safetensors",
    ),
    (
        "probe file missing",
        lambda p: _edit(p, "probe.safetensors", "gone.npz"),
        InputError,
        "gone.npz",
    ),
    ("not a mapping", lambda p: p.write_text("- a\n- b\n") and p, ConfigError, "mapping"),
    (
        "invalid yaml",
        lambda p: p.write_text("model: [unclosed\n") and p,
        ConfigError,
        "not valid YAML",
    ),
    (
        "label target without labels",
        lambda p: _edit(p, "inputs:", "target: label\ninputs:"),
        ConfigError,
        "no 'target'",
    ),
]


@pytest.mark.parametrize(
    ("case", "mutate", "error", "text"), BAD_SPECS, ids=[c[0] for c in BAD_SPECS]
)
def test_bad_spec_is_a_clear_error(
    tmp_path: Path, case: str, mutate, error: type, text: str
) -> None:
    path = mutate(make_spec(tmp_path, LINEAR_RELU, x=torch.randn(2, 4), spec_extra=""))
    with pytest.raises(error) as info:
        load_spec(path)
    message = info.value.diagnostics()
    assert text in message
    assert str(tmp_path) in message or "attest.yaml" in message


def test_missing_spec_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        parse_spec_file(tmp_path / "nope.yaml")


def _spec_with(tmp_path: Path, source: str = LINEAR_RELU) -> Path:
    return make_spec(tmp_path, source, x=torch.randn(2, 4), spec_extra="")


def test_factory_that_raises(tmp_path: Path) -> None:
    path = _spec_with(tmp_path)
    (tmp_path / "model.py").write_text("def build():\n    raise ValueError('no GPU found')\n")
    with pytest.raises(
        ConfigError, match=r"factory 'model:build'.*raised ValueError: no GPU found"
    ):
        load_spec(path)


def test_factory_not_returning_module(tmp_path: Path) -> None:
    path = _spec_with(tmp_path)
    (tmp_path / "model.py").write_text("def build():\n    return 42\n")
    with pytest.raises(ConfigError, match=r"not a torch\.nn\.Module"):
        load_spec(path)


def test_weights_that_do_not_fit(tmp_path: Path) -> None:
    path = _spec_with(tmp_path)
    save_file(
        {"0.weight": torch.zeros(5, 4), "0.bias": torch.zeros(5)},
        str(tmp_path / "weights.safetensors"),
    )
    with pytest.raises(ConfigError, match=r"do not fit.*size mismatch"):
        load_spec(path)


def test_weights_with_missing_keys(tmp_path: Path) -> None:
    path = _spec_with(tmp_path)
    save_file({"0.weight": torch.zeros(3, 4)}, str(tmp_path / "weights.safetensors"))
    with pytest.raises(ConfigError, match=r"Missing key"):
        load_spec(path)


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_nonfinite_weights(tmp_path: Path, bad: float) -> None:
    path = _spec_with(tmp_path)
    w = torch.zeros(3, 4)
    w[1, 2] = bad
    save_file({"0.weight": w, "0.bias": torch.zeros(3)}, str(tmp_path / "weights.safetensors"))
    with pytest.raises(InputError, match=r"'0.weight' holds 1 non-finite.*\(1, 2\)"):
        load_spec(path)


def test_pickled_module_is_refused(tmp_path: Path) -> None:
    path = _spec_with(tmp_path)
    torch.save(torch.nn.Linear(4, 3), tmp_path / "w.pt")
    _edit(path, "weights.safetensors", "w.pt")
    with pytest.raises(InputError, match="cannot be read"):
        load_spec(path)


PROBES = [
    ("integer inputs", {"x": torch.ones(2, 4, dtype=torch.int64)}, "expected floating point"),
    ("no x", {"y": torch.ones(2, 4)}, "no tensor 'x'"),
    ("target shape", {"x": torch.ones(2, 4), "target": torch.tensor([0, 1, 1])}, "expected (2,)"),
    (
        "float target",
        {"x": torch.ones(2, 4), "target": torch.tensor([0.0, 1.0])},
        "integer class labels",
    ),
    (
        "nan inputs",
        {"x": torch.tensor([[0.0, float("nan"), 0.0, 0.0]])},
        "non-finite values, first at index (0, 1)",
    ),
    ("scalar x", {"x": torch.tensor(1.0)}, "expected (N, ...)"),
]


@pytest.mark.parametrize(("case", "tensors", "text"), PROBES, ids=[p[0] for p in PROBES])
def test_bad_probe(tmp_path: Path, case: str, tensors: dict[str, torch.Tensor], text: str) -> None:
    path = _spec_with(tmp_path)
    save_file(tensors, str(tmp_path / "probe.safetensors"))
    with pytest.raises(InputError) as info:
        load_spec(path)
    assert text in info.value.message and "probe" in info.value.message


def test_unsupported_weights_suffix(tmp_path: Path) -> None:
    path = _spec_with(tmp_path)
    (tmp_path / "w.onnx").write_bytes(b"x")
    _edit(path, "weights.safetensors", "w.onnx")
    with pytest.raises(AttestError, match="unsupported file type"):
        load_spec(path)


# A module that converts an older state-dict layout reads its version from the state_dict's
# _metadata while loading, as torchvision's MNASNet does (found on mnasnet0_5).
VERSIONED = """
from torch import nn

class Versioned(nn.Linear):
    _version = 2

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, *args):
        if local_metadata.get("version") not in (1, 2):
            raise ValueError(f"version should be 1 or 2, not {local_metadata.get('version')}")
        super()._load_from_state_dict(state_dict, prefix, local_metadata, *args)

def build():
    return nn.Sequential(Versioned(8, 3))
"""


def test_pt_weights_keep_the_state_dict_version_metadata(tmp_path: Path) -> None:
    path = make_spec(tmp_path, VERSIONED)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 3))  # same keys and shapes
    state = model.state_dict()
    state._metadata = {"": {"version": 1}, "0": {"version": 2}}  # type: ignore[attr-defined]
    torch.save(state, tmp_path / "w.pt")
    _edit(path, "weights.safetensors", "w.pt")
    loaded = load_spec(path).build_model()
    assert torch.equal(loaded[0].weight, state["0.weight"])


def test_safetensors_without_version_metadata_is_a_config_error_saying_so(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="should be 1 or 2") as info:
        load_spec(make_spec(tmp_path, VERSIONED))
    assert info.value.hint is not None and "torch.save" in info.value.hint
