"""No false alarms on published architectures: collect + evaluate under clinical-strict.

Each model is a small instance of an architecture from the literature (ResNet, ViT, MONAI's
UNet, DenseNet and SegResNet) that the project was not tuned on. A clean model must pass every
check of clinical-strict at float32 on the CPU; a failing finding here is a false alarm.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

torch = pytest.importorskip("torch")
safetensors_torch = pytest.importorskip("safetensors.torch")

from attest.collect import collect  # noqa: E402
from attest.pipeline import check_settings  # noqa: E402
from attest.policy import evaluate, load_policy  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent

# name -> (factory, factory_args, input shape (without batch), target)
ARCHITECTURES: dict[str, tuple[str, dict[str, Any], tuple[int, ...], int | str]] = {
    "resnet": ("published_models:tiny_resnet", {}, (1, 32, 32), "argmax"),
    "vit": ("published_models:tiny_vit", {}, (1, 16, 16), "argmax"),
    "convnext": ("published_models:tiny_convnext", {}, (1, 16, 16), "argmax"),
    "mobilenet": ("published_models:tiny_mobilenet", {}, (1, 16, 16), "argmax"),
    "gru": ("published_models:gru_classifier", {}, (6, 4), "argmax"),
    "monai-attentionunet": (
        "monai.networks.nets:AttentionUnet",
        {
            "spatial_dims": 2,
            "in_channels": 1,
            "out_channels": 2,
            "channels": [4, 8, 16],
            "strides": [2, 2],
        },
        (1, 16, 16),
        1,
    ),
    "monai-unet": (
        "monai.networks.nets:UNet",
        {
            "spatial_dims": 2,
            "in_channels": 1,
            "out_channels": 2,
            "channels": [4, 8, 16],
            "strides": [2, 2],
            "num_res_units": 1,
        },
        (1, 16, 16),
        1,
    ),
    "monai-densenet": (
        "monai.networks.nets:DenseNet",
        {
            "spatial_dims": 2,
            "in_channels": 1,
            "out_channels": 3,
            "init_features": 8,
            "growth_rate": 4,
            "block_config": [2, 2],
            "bn_size": 2,
        },
        (1, 16, 16),
        "argmax",
    ),
    "monai-segresnet-3d": (
        "monai.networks.nets:SegResNet",
        {
            "spatial_dims": 3,
            "in_channels": 1,
            "out_channels": 2,
            "init_filters": 4,
            "norm": ["GROUP", {"num_groups": 2}],
            "blocks_down": [1, 1],
            "blocks_up": [1],
        },
        (1, 8, 8, 8),
        1,
    ),
}


def _build(factory: str, args: dict[str, Any]) -> Any:
    import importlib
    import sys

    module_name, _, attr = factory.partition(":")
    sys.path.insert(0, str(HERE))
    try:
        module = importlib.import_module(module_name)
    finally:
        sys.path.remove(str(HERE))
    return getattr(module, attr)(**args)


# At initialization SegResNet's GroupNorms have bias 0 and its convolutions none, so the
# network is positively homogeneous except for the norms' eps, and a zero input is a singular
# point: F(t x) moves from -209 to -14 between t = 1e-20 and 1e-12 (each GroupNorm multiplies
# a tiny signal by 1/sqrt(eps)). Integrated gradients from a zero baseline are meaningless
# there and the ig_* checks say so (test below); the clean run uses a blurred baseline.
BASELINES: dict[str, str] = {"monai-segresnet-3d": "blur"}

# Models trained briefly before their weights are written. An untrained GRU's attributions
# are dominated by its recency structure (the last time steps), so any two random GRUs agree
# and the randomization test (Adebayo et al.) rightly finds nothing learned to lose; after
# training on a task that depends on the whole sequence, it does.
TRAINED = {"gru"}


def _train_briefly(model: Any, shape: tuple[int, ...]) -> None:
    gen = torch.Generator().manual_seed(2)
    x = torch.randn((64, *shape), generator=gen)
    projection = torch.randn((x[0].numel(), 3), generator=gen)
    labels = (x.reshape(64, -1) @ projection).argmax(dim=1)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.02)
    for _ in range(60):
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x), labels).backward()
        optimizer.step()
    model.eval()


def write_spec(folder: Path, name: str, baseline: str | None = None) -> Path:
    """A spec folder for one architecture: model.py (if local), weights, probe, attest.yaml."""
    factory, args, shape, target = ARCHITECTURES[name]
    folder.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    model = _build(factory, args)
    if name in TRAINED:
        _train_briefly(model, shape)
    if factory.startswith("published_models:"):
        (folder / "published_models.py").write_text((HERE / "published_models.py").read_text())
    safetensors_torch.save_file(
        {k: v.detach().contiguous() for k, v in model.state_dict().items()},
        str(folder / "weights.safetensors"),
    )
    gen = torch.Generator().manual_seed(1)
    x = torch.randn((3, *shape), generator=gen)
    safetensors_torch.save_file({"x": x}, str(folder / "probe.safetensors"))
    spec = {
        "model": {
            "name": name,
            "version": "1.0.0",
            "factory": factory,
            "factory_args": args,
            "weights": "weights.safetensors",
        },
        "inputs": {"probe": "probe.safetensors"},
        "target": target,
        "baseline": baseline or BASELINES.get(name, "zero"),
        "precision": "float32",
        "device": "cpu",
        "threads": 1,
        "repeats": 3,
    }
    (folder / "attest.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return folder / "attest.yaml"


def failing(findings: Any) -> list[str]:
    return [
        f"{f.rule} {f.subject} observed={f.observed} threshold={f.threshold}: {f.message}"
        for f in findings.failed
    ]


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(ARCHITECTURES))
def test_clean_published_architecture_has_no_false_alarm(tmp_path: Path, name: str) -> None:
    spec = write_spec(tmp_path / name, name)
    policy = load_policy(REPO / "policies" / "clinical-strict.yaml")
    evidence = collect(spec, settings=check_settings(policy))
    findings = evaluate(evidence, policy)
    problems = failing(findings)
    assert not problems, "\n".join(problems)


@pytest.mark.slow
def test_zero_baseline_on_a_singular_point_is_flagged(tmp_path: Path) -> None:
    """The same clean SegResNet, IG from a zero baseline: the path starts on a singular point."""
    spec = write_spec(tmp_path / "seg", "monai-segresnet-3d", baseline="zero")
    policy = load_policy(REPO / "policies" / "clinical-strict.yaml")
    findings = evaluate(collect(spec, settings=check_settings(policy)), policy)
    failed_checks = {f.check for f in findings.failed}
    assert failed_checks and failed_checks <= {
        "ig_completeness",
        "ig_convergence",
        "ig_monotonicity",
        "ig_baseline",
    }, failing(findings)
