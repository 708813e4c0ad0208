"""No false alarms on published architectures: collect + evaluate under clinical-strict.

Each model is a small instance of an architecture from the literature (ResNet, ViT, MONAI's
UNet, DenseNet and SegResNet, a MobileNet) that the project was not
tuned on. A clean model must pass every
check of clinical-strict at float32 on the CPU; a failing finding here is a false alarm, except
the true findings TRUE_FINDINGS documents (each must still be found).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

torch = pytest.importorskip("torch")
safetensors_torch = pytest.importorskip("safetensors.torch")

from attest.collection import collect  # noqa: E402
from attest.pipeline import check_settings  # noqa: E402
from attest.policy.engine import evaluate  # noqa: E402
from attest.policy.model import load_policy  # noqa: E402

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
    # Its skip path re-registers the encoder's modules: shared parameters in the state dict.
    "monai-dynunet": (
        "monai.networks.nets:DynUNet",
        {
            "spatial_dims": 2,
            "in_channels": 1,
            "out_channels": 2,
            "kernel_size": [3, 3, 3],
            "strides": [1, 2, 2],
            "upsample_kernel_size": [2, 2],
            "filters": [4, 8, 16],
        },
        (1, 16, 16),
        1,
    ),
    # A tuple output (logits, hidden states), and modules it builds but never calls.
    "monai-vit": (
        "monai.networks.nets:ViT",
        {
            "in_channels": 1,
            "img_size": [16, 16],
            "patch_size": [4, 4],
            "hidden_size": 16,
            "mlp_dim": 32,
            "num_layers": 2,
            "num_heads": 2,
            "spatial_dims": 2,
            "classification": True,
            "num_classes": 3,
        },
        (1, 16, 16),
        "argmax",
    ),
    # Returns (segmentation, None) in eval; its VAE branch runs in training only.
    "monai-segresnetvae": (
        "monai.networks.nets:SegResNetVAE",
        {
            "input_image_size": [16, 16],
            "spatial_dims": 2,
            "init_filters": 4,
            "in_channels": 1,
            "out_channels": 2,
            "vae_nz": 8,
            "norm": ["GROUP", {"num_groups": 2}],
            "blocks_down": [1, 1],
            "blocks_up": [1],
        },
        (1, 16, 16),
        1,
    ),
    # Complex parameters and FFTs; a float64 instance still runs its spectra in complex64.
    "fno": ("published_models:tiny_fno", {}, (1, 16, 16), 1),
    # Causal attention masked with -inf before the softmax.
    "mingpt": ("published_models:tiny_gpt", {}, (6, 4), "argmax"),
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
BASELINES: dict[str, str] = {
    "monai-segresnet-3d": "blur",
    "monai-dynunet": "blur",
    "monai-segresnetvae": "blur",
}

# Clean architectures with true findings under clinical-strict: check -> a pattern each of its
# failing findings matches (subject and message), and why the finding is right. Each of these
# models once made a check crash or raise a false alarm; everything else must pass.
TRUE_FINDINGS: dict[str, dict[str, tuple[str, str]]] = {
    # MONAI's TransformerBlock builds norm_cross_attn (and its cross-attention) whatever
    # with_cross_attention says, and calls it only when it is set: trainable parameters that
    # receive no gradient, as reported (freeze them or waive the finding).
    "monai-vit": {
        "gradient_flow": (r"norm_cross_attn.*never called", "unused trainable parameters"),
    },
    # Its VAE branch runs in training only (a warning, not a failure), but vae_fc2, the
    # standard-deviation head, is built whatever vae_estimate_std says and used only when it
    # is set: unused trainable parameters, as reported.
    "monai-segresnetvae": {
        "gradient_flow": (r"'vae_fc2'.*never called", "unused trainable parameters"),
    },
    # Two Fourier layers at initialization with a whole-channel target: the attributions are
    # the input times nearly the same factor whatever the weights (Spearman 0.9 after every
    # layer is randomized), which is what the randomization test exists to report.
    "fno": {"ig_randomization": (r"barely change", "attributions reflect the input")},
    # Trained briefly, it reads the zero sequence as one probe input's class (p near 1): the
    # zero baseline is not neutral for that input.
    "mingpt": {"ig_baseline": (r"reads the baseline as the target class", "not neutral")},
}

# Models trained briefly before their weights are written. An untrained GRU's attributions
# are dominated by its recency structure (the last time steps), so any two random GRUs agree
# and the randomization test (Adebayo et al.) rightly finds nothing learned to lose; after
# training on a task that depends on the whole sequence, it does.
TRAINED = {"gru", "mingpt"}


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
    if name in TRAINED:  # on one thread: the trained weights must not depend on the test order
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            _train_briefly(model, shape)
        finally:
            torch.set_num_threads(threads)
    if factory.startswith("published_models:"):
        (folder / "published_models.py").write_text((HERE / "published_models.py").read_text())
    weights = "weights.safetensors"
    safetensors_torch.save_file(
        # clone: modules registered twice (DynUNet) share storage, which safetensors refuses
        {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()},
        str(folder / weights),
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
            "weights": weights,
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


# clinical-strict's evidence floors (at least 100 repeats and 8 probe examples) judge how much
# evidence a release rests on, not whether a check raises a false alarm; these small instances
# run with 3 repeats and 3 inputs to stay fast, so they are held to every other rule
# (tests/unit/policy/test_evidence_floors.py tests the floors).
EVIDENCE_FLOORS = {"min_repeats", "min_probe_examples", "probe_class_coverage"}


def strict_without_floors() -> Any:
    policy = load_policy(REPO / "policies" / "clinical-strict.yaml")
    rules = [r for r in policy.rules if r.id not in EVIDENCE_FLOORS]
    assert len(rules) == len(policy.rules) - len(EVIDENCE_FLOORS)
    return policy.model_copy(update={"rules": rules})


def failing(findings: Any) -> list[str]:
    return [
        f"{f.rule} {f.subject} observed={f.observed} threshold={f.threshold}: {f.message}"
        for f in findings.failed
    ]


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(ARCHITECTURES))
def test_clean_published_architecture_has_no_false_alarm(tmp_path: Path, name: str) -> None:
    spec = write_spec(tmp_path / name, name)
    policy = strict_without_floors()
    evidence = collect(spec, settings=check_settings(policy))
    findings = evaluate(evidence, policy)
    expected = TRUE_FINDINGS.get(name, {})
    problems = [
        line
        for f, line in zip(findings.failed, failing(findings), strict=True)
        if f.check not in expected or not re.search(expected[f.check][0], line)
    ]
    assert not problems, "\n".join(problems)
    missing = set(expected) - {f.check for f in findings.failed}
    assert not missing, f"documented true findings no longer found: {sorted(missing)}"


@pytest.mark.slow
def test_zero_baseline_on_a_singular_point_is_flagged(tmp_path: Path) -> None:
    """The same clean SegResNet, IG from a zero baseline: the path starts on a singular point."""
    spec = write_spec(tmp_path / "seg", "monai-segresnet-3d", baseline="zero")
    policy = strict_without_floors()
    findings = evaluate(collect(spec, settings=check_settings(policy)), policy)
    failed_checks = {f.check for f in findings.failed}
    assert failed_checks and failed_checks <= {
        "ig_completeness",
        "ig_convergence",
        "ig_monotonicity",
        "ig_baseline",
    }, failing(findings)
