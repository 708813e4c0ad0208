"""torch.compile'd models: unwrapped for the checks, weights saved from a compiled module
accepted (``_orig_mod.`` stripped, with a note), the compile settings in the evidence."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch
from torch import nn

from attest.collection import collect
from attest.errors import ConfigError
from attest.spec import load_spec
from attest.spec.compiled import strip_compile_prefix, unwrap_compiled

CNN = """
import torch
from torch import nn

class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 4, 3))
        self.head = nn.Linear(4, 3)
    def forward(self, x):
        return self.head(self.features(x).mean(dim=(2, 3)))

def plain():
    return SmallCNN()

def compiled(backend="eager", mode=None):
    return torch.compile(SmallCNN(), backend=backend, mode=mode)

def compiled_inside():
    model = SmallCNN()
    model.features = torch.compile(model.features, backend="eager", fullgraph=True)
    return model

def compiled_in_place():
    model = SmallCNN()
    model.compile(backend="eager")
    return model
"""


def write(folder: Path, factory: str, weights_from: str, **factory_args: object) -> Path:
    """A spec of the small CNN built by ``factory``, its weights saved from ``weights_from``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.py").write_text(CNN)
    namespace: dict[str, object] = {}
    exec(compile(CNN, str(folder / "model.py"), "exec"), namespace)
    torch.manual_seed(0)
    saved = namespace[weights_from]()  # type: ignore[operator]
    torch.save(saved.state_dict(), folder / "weights.pt")
    torch.save({"x": torch.randn(3, 1, 8, 8)}, folder / "probe.pt")
    args = "".join(f"\n    {k}: {v}" for k, v in factory_args.items())
    (folder / "attest.yaml").write_text(
        textwrap.dedent(
            f"""\
            model:
              name: cnn
              version: 1.0.0
              factory: model:{factory}
              weights: weights.pt
            """
        )
        + (f"  factory_args:{args}\n" if args else "")
        + "inputs:\n  probe: probe.pt\ntarget: 0\nthreads: 1\nrepeats: 2\n"
    )
    return folder / "attest.yaml"


def test_weights_of_a_compiled_module_load_into_the_eager_one(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, "plain", weights_from="compiled"))
    info = spec.compiled
    assert info is not None and not info.compiled and info.stripped_keys == 6
    assert "the _orig_mod. prefix of 6 keys was removed" in info.note()
    model = spec.build_model()
    assert type(model).__name__ == "SmallCNN"
    assert all("_orig_mod" not in k for k in model.state_dict())


def test_a_compiled_factory_is_unwrapped_and_loads_plain_weights(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, "compiled", weights_from="plain"))
    info = spec.compiled
    assert info is not None and info.compiled and info.modules == ("",)
    assert (info.backend, info.stripped_keys) == ("eager", 0)
    assert type(spec.build_model()).__name__ == "SmallCNN"


# importing torch._inductor warns that torch.jit.script_method is deprecated (torch's own use)
@pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")
def test_the_default_inductor_backend_and_its_mode_are_recorded(tmp_path: Path) -> None:
    """torch.compile compiles at the first call, which the checks never make on the
    compiled module: building one costs nothing (the first inductor call on this CNN took
    44 s here)."""
    path = write(
        tmp_path, "compiled", weights_from="compiled", backend='"inductor"', mode='"max-autotune"'
    )
    info = load_spec(path).compiled
    assert info is not None and info.stripped_keys == 6
    assert (info.backend, info.mode) == ("inductor", "max-autotune")
    assert "backend=inductor, mode=max-autotune" in info.note()


def test_compiled_submodules_and_in_place_compilation_are_unwrapped() -> None:
    namespace: dict[str, object] = {}
    exec(compile(CNN, "<cnn>", "exec"), namespace)
    inside, info = unwrap_compiled(namespace["compiled_inside"]())  # type: ignore[operator]
    assert info.modules == ("features",) and info.fullgraph is True
    assert type(inside.features) is nn.Sequential
    in_place, info = unwrap_compiled(namespace["compiled_in_place"]())  # type: ignore[operator]
    assert info.modules == ("",) and in_place._compiled_call_impl is None


def test_stripping_keeps_the_version_metadata_and_leaves_plain_weights_alone() -> None:
    compiled = torch.compile(nn.Sequential(nn.BatchNorm1d(3)), backend="eager")
    state = compiled.state_dict()
    fitted, count = strip_compile_prefix(state, {"0.weight"})
    assert count == len(state) and "0.running_mean" in fitted
    assert "0" in fitted._metadata  # type: ignore[attr-defined]  # BatchNorm's version kept
    plain = nn.Sequential(nn.BatchNorm1d(3)).state_dict()
    assert strip_compile_prefix(plain, {"0.weight"}) == (plain, 0)


def test_evidence_records_the_compile_settings(tmp_path: Path) -> None:
    path = write(tmp_path, "compiled", weights_from="compiled")
    evidence = collect(path, runners=["attest.collection.profile.topology:run"])
    record = evidence.compile
    assert record is not None and record.compiled and record.backend == "eager"
    assert record.stripped_keys == 6 and "the checks ran the original eager module" in record.note
    assert evidence.checks["topology"].status == "computed"


def test_weights_of_another_model_still_do_not_fit(tmp_path: Path) -> None:
    path = write(tmp_path, "compiled", weights_from="compiled")
    torch.save({"_orig_mod.other.weight": torch.zeros(1)}, tmp_path / "weights.pt")
    with pytest.raises(ConfigError, match="do not fit"):
        load_spec(path)
