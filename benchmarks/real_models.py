"""The three real-size MONAI architectures issue #18 measures, shared by bench_certify.py,
bench_gradients_real.py and bench_ig_real.py (one definition, so the scripts measure the same
models): the network as MONAI builds it and its probe batch shape."""

from __future__ import annotations

import torch

__all__ = ["PROBE_SHAPES", "build"]

PROBE_SHAPES: dict[str, tuple[int, ...]] = {
    "resnet18": (4, 3, 224, 224),
    "segresnet": (1, 1, 64, 64, 64),
    "vit": (2, 3, 224, 224),  # 2D: spatial_dims=2 below
}


def build(name: str) -> torch.nn.Module:
    """``resnet18``, ``segresnet`` or ``vit`` with MONAI's own initialisation (seed it first);
    the ViT returns (logits, hidden states), as MONAI's does."""
    from monai.networks import nets

    if name == "resnet18":
        return nets.resnet18(spatial_dims=2, n_input_channels=3, num_classes=2)
    if name == "segresnet":
        return nets.SegResNet(spatial_dims=3, in_channels=1, out_channels=2, init_filters=16)
    if name == "vit":
        return nets.ViT(
            in_channels=3,
            img_size=224,
            patch_size=16,
            hidden_size=384,
            mlp_dim=1536,
            num_layers=6,
            num_heads=6,
            classification=True,
            num_classes=2,
            spatial_dims=2,
        )
    raise ValueError(f"unknown model {name!r}; choose from {sorted(PROBE_SHAPES)}")
