"""A small classifier of CT patches in Hounsfield units, deployed in float16, whose
hand-written LayerNorm loses its gradients to rounding.

``FastLayerNorm`` computes the variance in one pass as ``E[x^2] - E[x]^2``, in whatever
precision the model runs in. On raw contrast-enhanced CT intensities (enhancing liver sits
near +110 HU with noise of about 12 HU, so ``E[x^2]`` is near 12,000 while the variance is
near 150) that subtraction cancels catastrophically in float16, whose spacing at 12,000 is 8. The trained model still
classifies well, but its gradients (and so its saliency maps) are not what float64 says
they are. ``attest certify`` under clinical-strict fails it on fidelity, and local
fidelity points at the subtraction inside ``norm``. Replacing ``FastLayerNorm`` with
``nn.LayerNorm`` (which keeps its statistics in float32) fixes it.

The class carries ``@attest.unstable_grad``: the developer's own note that its gradients are
known to be unstable, which a policy may accept as a waiver (research does; clinical-strict
does not).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import attest

PATCH = 12


@attest.unstable_grad(
    reason="one-pass variance E[x^2]-E[x]^2 in the deployed precision; accepted for research use only",
    checks=("fidelity",),
)
class FastLayerNorm(nn.Module):
    """LayerNorm over the last dimension with a one-pass variance (the defect)."""

    def __init__(self, features: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(features))
        self.bias = nn.Parameter(torch.zeros(features))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mean = x.mean(dim=-1, keepdim=True)
        var = (x * x).mean(dim=-1, keepdim=True) - mean * mean  # cancels in low precision
        return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias


class PatchClassifier(nn.Module):
    """Input (N, 1, 12, 12) CT intensities in HU; output (N, 2) logits (1 = lesion)."""

    def __init__(self, hidden: int = 32) -> None:
        super().__init__()
        self.flatten = nn.Flatten()
        self.norm = FastLayerNorm(PATCH * PATCH)
        self.fc1 = nn.Linear(PATCH * PATCH, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(self.norm(self.flatten(x)))))


def build() -> nn.Module:
    """The factory named in attest.yaml (``model:build``)."""
    return PatchClassifier()


def loss(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over the batch (the training loss)."""
    return F.cross_entropy(output, target.long())
