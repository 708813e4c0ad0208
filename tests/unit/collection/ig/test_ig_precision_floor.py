"""Completeness is not judged finer than F's own rounding in the deployed precision."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from attest.collection.ig.adaptive import completeness_scale
from attest.collection.ig.attribution import integrated_gradients


def test_scale_is_the_difference_unless_rounding_is_larger() -> None:
    eps16 = float(torch.finfo(torch.float16).eps)
    f_x, f_b = np.array([1.0, 0.0757]), np.array([0.0, 0.0757 + 1e-5])
    scale = completeness_scale(f_x, f_b, eps16)
    assert scale[0] == 1.0  # a real difference: relative to it
    assert scale[1] == pytest.approx(8 * eps16 * (0.0757 + 0.0757 + 1e-5))  # below rounding


def test_float16_model_whose_output_barely_moves_is_not_a_completeness_failure() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 4), nn.Tanh(), nn.Linear(4, 2)).half().eval()
    with torch.no_grad():
        model[2].bias.fill_(4.0)  # F near 4 everywhere; the path moves it by ~1e-3
        model[2].weight.mul_(1e-3)
    x = torch.randn(3, 6).half()
    result = integrated_gradients(model, x, target=0, tolerance=1e-2, max_steps=256)
    assert result.error_scale is not None
    assert np.all(result.error_scale >= np.abs(result.f_input - result.f_baseline))
    assert np.all(result.completeness_rel_error <= 1e-2), result.completeness_rel_error
    # float64 is judged against the true difference: the same model stays exact there
    exact = integrated_gradients(model.double(), x.double(), target=0, tolerance=1e-6)
    assert np.all(exact.completeness_rel_error <= 1e-6)


def test_checks_tolerance_is_floored_at_the_deployed_precision() -> None:
    from attest.collection.ig.checks import effective_tolerance

    assert effective_tolerance(1e-3, "float32") == 1e-3
    assert effective_tolerance(1e-3, "bfloat16") == 2 * 2.0**-7
    assert effective_tolerance(0.05, "bfloat16") == 0.05
