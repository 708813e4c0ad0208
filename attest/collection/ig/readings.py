"""How ``ig_baseline`` reads an output, from the targets it was trained on (docs/ig.md): class
scores by their softmax, one label's logit by its sigmoid, or a value by ``|F(b)| / |F(x)|``.
The probe's targets are the only statement of what an output is: its shape alone cannot tell
a three-class classifier from a heteroscedastic regressor's mean and log-variance, or from 14
independent labels' logits.
"""

from __future__ import annotations

from typing import Any, Literal

import torch

from attest.collection.ig.analysis import baseline_neutrality

__all__ = ["Reading", "read_output", "target_reading"]

Reading = Literal["softmax", "sigmoid", "value"]


def target_reading(targets: torch.Tensor | None) -> Reading:
    """How ``ig_baseline`` reads an output trained on ``targets``.

    - ``softmax``: integer labels (or none), or soft labels (one probability distribution over
      dim 1 per example; a soft mask: per pixel): the output's dim 1 is class scores;
    - ``sigmoid``: float targets that are all 0 or 1 (multi-label indicators, a binary mask
      under BCE): each column is one label's logit, a binary classifier of its own, read as
      the two-class softmax ``[0, logit]`` (its probability is the sigmoid);
    - ``value``: any other float target (a regression value, a mean beside a log-variance,
      heatmaps): the index picks a value, judged by ``|F(b)| / |F(x)|``.

    (A heteroscedastic regressor's (N, 2) mean and log-variance, read as a two-class softmax,
    failed every example at p = 0.998; a softmax across independent labels' logits is no
    reading of any of them.)"""
    if targets is None or not targets.is_floating_point():
        return "softmax"
    t = targets.detach().to(torch.float64)
    if t.dim() >= 2 and t.shape[1] >= 2 and bool((t >= 0).all()):
        total = t.sum(dim=1)
        if torch.allclose(total, torch.ones_like(total), atol=1e-3):
            return "softmax"
    if t.numel() and bool(((t == 0) | (t == 1)).all()):
        return "sigmoid"
    return "value"


def read_output(
    out_baseline: torch.Tensor,
    out_input: torch.Tensor,
    classes: torch.Tensor | None,
    reading: Reading,
) -> tuple[dict[str, Any], int]:
    """:func:`baseline_neutrality` of an output read as ``reading`` says, and the number of
    classes its judgement uses."""
    if reading == "sigmoid" and classes is not None and out_input.dim() >= 2:
        # the chosen label's logit z as the two-class softmax [0, z]: class 1 is "present"
        pairs = []
        for out in (out_baseline, out_input):
            n = out.shape[0]
            flat = out.reshape(n, out.shape[1], -1)
            z = flat.gather(1, classes.view(n, 1, 1).expand(n, 1, flat.shape[2]))
            pairs.append(torch.cat([torch.zeros_like(z), z], dim=1))
        present = torch.ones_like(classes)
        return baseline_neutrality(pairs[0], pairs[1], present), 2
    scores = reading == "softmax"
    count = int(out_input.shape[1]) if out_input.dim() >= 2 else 1
    return baseline_neutrality(out_baseline, out_input, classes, scores), count
