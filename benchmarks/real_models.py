"""The real-size MONAI architectures issues #18 and #38 measure, shared by bench_certify.py,
bench_gradients_real.py and bench_ig_real.py (one definition, so the scripts measure the same
models): the network as MONAI builds it and its probe batch shape; ``quick=True`` builds each
at a tiny size (the same layers, few channels, a small input) for a smoke run."""

from __future__ import annotations

import torch

__all__ = ["PROBE_SHAPES", "QUICK_PROBE_SHAPES", "build"]

PROBE_SHAPES: dict[str, tuple[int, ...]] = {
    "resnet18": (4, 3, 224, 224),
    "segresnet": (1, 1, 64, 64, 64),
    "vit": (2, 3, 224, 224),  # 2D: spatial_dims=2 below
    "swinunetr": (1, 1, 64, 64, 64),
    "unetr": (1, 1, 96, 96, 96),  # img_size=96 below
}

# Tiny sizes for `bench_certify.py --quick`: SwinUNETR needs sides divisible by 32, UNETR's
# patches are 16 voxels.
QUICK_PROBE_SHAPES: dict[str, tuple[int, ...]] = {
    "resnet18": (2, 3, 32, 32),
    "segresnet": (1, 1, 16, 16, 16),
    "vit": (2, 3, 32, 32),
    "swinunetr": (1, 1, 32, 32, 32),
    "unetr": (1, 1, 32, 32, 32),
}


def build(name: str, quick: bool = False) -> torch.nn.Module:
    """``resnet18``, ``segresnet``, ``vit``, ``swinunetr`` or ``unetr`` with MONAI's own
    initialisation (seed it first); the ViT returns (logits, hidden states), as MONAI's does.
    ``quick``: the same architecture at the sizes of :data:`QUICK_PROBE_SHAPES`."""
    from monai.networks import nets

    if name == "resnet18":
        return nets.resnet18(spatial_dims=2, n_input_channels=3, num_classes=2)
    if name == "segresnet":
        # quick: 8 initial filters, the fewest its group norm (8 groups) accepts
        return nets.SegResNet(
            spatial_dims=3, in_channels=1, out_channels=2, init_filters=8 if quick else 16
        )
    if name == "vit":
        return nets.ViT(
            in_channels=3,
            img_size=32 if quick else 224,
            patch_size=16,
            hidden_size=48 if quick else 384,
            mlp_dim=96 if quick else 1536,
            num_layers=2 if quick else 6,
            num_heads=6,
            classification=True,
            num_classes=2,
            spatial_dims=2,
        )
    if name == "swinunetr":
        # MONAI 1.6 derives the size from the input: img_size is no longer an argument.
        return nets.SwinUNETR(in_channels=1, out_channels=2, feature_size=12 if quick else 24)
    if name == "unetr":
        if quick:
            return nets.UNETR(
                in_channels=1, out_channels=2, img_size=32, feature_size=4,
                hidden_size=48, mlp_dim=96, num_heads=4,
            )  # fmt: skip
        return nets.UNETR(in_channels=1, out_channels=2, img_size=96, feature_size=16)
    raise ValueError(f"unknown model {name!r}; choose from {sorted(PROBE_SHAPES)}")
