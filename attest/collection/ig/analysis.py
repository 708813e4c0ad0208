"""Readings behind the IG sanity checks: path behaviour, baseline neutrality, Spearman and the
layer cascade of the randomization test. Small pure functions; the checks decide statuses."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from torch import nn

from attest.collection.ig.attribution import PanelLayout, PathSamples

__all__ = ["baseline_neutrality", "cascade_layers", "path_behaviour", "randomize_layer", "spearman"]

_TINY = 1e-300


# ----------------------------------------------------------------------------- Spearman


def _average_ranks(values: np.ndarray) -> np.ndarray:
    """Ranks 1..n with ties given their average rank (as ``scipy.stats.rankdata``); numpy only
    so that the collect side needs no scipy."""
    order = np.argsort(values, kind="mergesort")
    ordered = values[order]
    boundaries = np.flatnonzero(np.diff(ordered) != 0) + 1
    starts = np.concatenate(([0], boundaries))
    ends = np.concatenate((boundaries, [len(values)]))
    # One average per run of equal values, spread over the run with np.repeat: a Python loop
    # over the runs cost 0.35 s per map of 150,528 distinct values (a 3x224x224 input).
    ranks = np.empty(len(values), dtype=np.float64)
    ranks[order] = np.repeat(0.5 * (starts + ends - 1) + 1.0, ends - starts)
    return ranks


def spearman(a: np.ndarray, b: np.ndarray) -> float | None:
    """Spearman rank correlation of two flat arrays; None when either is constant or not finite."""
    x, y = np.asarray(a, dtype=np.float64).ravel(), np.asarray(b, dtype=np.float64).ravel()
    if x.size != y.size or x.size < 2 or not (np.isfinite(x).all() and np.isfinite(y).all()):
        return None
    rx, ry = _average_ranks(x), _average_ranks(y)
    rx -= rx.mean()
    ry -= ry.mean()
    denominator = math.sqrt(float(rx @ rx) * float(ry @ ry))
    if denominator == 0.0:
        return None
    return float(np.clip((rx @ ry) / denominator, -1.0, 1.0))


# ----------------------------------------------------------------------------- the path


def path_behaviour(samples: PathSamples, *, flip_tolerance: float) -> dict[str, Any]:
    """Jumps of F, spikes and sign flips of the integrand ``s = dF/dt`` along one path.

    Scale: the path's variation ``V = max(integral |s| dt, |F(x) - F(b)|)``.

    - ``max_jump_ratio``: over adjacent samples (F(b) and F(x) included), how far the observed
      ``F(t2) - F(t1)`` lies outside ``[min(s1, s2), max(s1, s2)] * (t2 - t1)``, over V. A kink
      (ReLU) between two samples stays inside that range; a discontinuity of F does not, and
      no gradient sees it, so the quadrature cannot integrate it.
    - ``max_spike_ratio`` / ``max_spike_share``: a sample whose integrand lies outside the range
      of its neighbours' integrands and of the secant slopes of F on both sides, by that
      excess over V / times its cell width over V (the share of the integral that rests on a
      value F itself does not support).
    - ``sign_flips``: adjacent samples of opposite sign (both above 1e-9 V); those whose
      smaller magnitude exceeds ``flip_tolerance * V`` are ``sign_flips_beyond_tolerance``.
    - ``nonmonotone_fraction``: ``(integral |s| - |integral s|) / integral |s|``, 0 for a
      monotone F along the path.
    """
    t, f, s = samples.t, samples.f, samples.slope
    bad = ~(np.isfinite(f) & np.isfinite(s))
    out: dict[str, Any] = {
        "samples": int(t.size),
        "nonfinite_nodes": int(bad.sum()),
        "first_nonfinite_t": float(t[np.argmax(bad)]) if bad.any() else None,
    }
    defaults = {
        "max_jump_ratio": 0.0,
        "max_spike_ratio": 0.0,
        "max_spike_share": 0.0,
        "sign_flips": 0,
        "sign_flips_beyond_tolerance": 0,
        "nonmonotone_fraction": 0.0,
        "path_variation": 0.0,
    }
    if (
        bad.any()
        or t.size == 0
        or not (math.isfinite(samples.f_start) and math.isfinite(samples.f_end))
    ):
        out.update(defaults)
        if not (math.isfinite(samples.f_start) and math.isfinite(samples.f_end)):
            out["nonfinite_nodes"] = int(out["nonfinite_nodes"]) + 1
            out["first_nonfinite_t"] = 0.0 if not math.isfinite(samples.f_start) else 1.0
        return out
    # Samples with the endpoints added; an endpoint's slope is its neighbour's (one-sided).
    tt, ff, ss, sampled = t, f, s, np.ones(t.size, dtype=bool)
    if tt[0] > 0.0:
        tt, ff, ss = (
            np.concatenate(([0.0], tt)),
            np.concatenate(([samples.f_start], ff)),
            np.concatenate(([s[0]], ss)),
        )
        sampled = np.concatenate(([False], sampled))
    if tt[-1] < 1.0:
        tt, ff, ss = (
            np.concatenate((tt, [1.0])),
            np.concatenate((ff, [samples.f_end])),
            np.concatenate((ss, [s[-1]])),
        )
        sampled = np.concatenate((sampled, [False]))
    dt = np.diff(tt)
    abs_integral = float(np.sum(0.5 * (np.abs(ss[:-1]) + np.abs(ss[1:])) * dt))
    signed_integral = float(np.sum(0.5 * (ss[:-1] + ss[1:]) * dt))
    scale = max(abs_integral, abs(samples.f_end - samples.f_start), _TINY)
    out["path_variation"] = scale
    out["nonmonotone_fraction"] = (
        float((abs_integral - abs(signed_integral)) / abs_integral) if abs_integral > 0 else 0.0
    )

    observed = np.diff(ff)
    panels = samples.panels
    if panels is not None and panels.a.size:
        out.update(_panel_jumps(panels, scale))
    else:
        low = np.minimum(ss[:-1], ss[1:]) * dt
        high = np.maximum(ss[:-1], ss[1:]) * dt
        excess = np.maximum(0.0, np.maximum(observed - high, low - observed)) / scale
        k = int(np.argmax(excess))
        out["max_jump_ratio"] = float(excess[k])
        out["jump_interval"] = [float(tt[k]), float(tt[k + 1])]

    spike_ratio, spike_share, spike_at = 0.0, 0.0, -1
    with np.errstate(divide="ignore", invalid="ignore"):
        secant = np.where(dt > 0, observed / dt, 0.0)
    supported = _panel_support(panels, tt, scale) if panels is not None else None
    for j in range(1, len(tt) - 1):
        if not sampled[j]:  # an added endpoint carries no integrand sample of its own
            continue
        neighbours = (ss[j - 1], ss[j + 1], secant[j - 1], secant[j])
        beyond = max(0.0, ss[j] - max(neighbours), min(neighbours) - ss[j])
        share = beyond * 0.5 * (tt[j + 1] - tt[j - 1]) / scale
        if supported is not None:
            share = min(share, float(supported[j]))
        if share > spike_share:
            spike_ratio, spike_share, spike_at = beyond / scale, share, j
    out["max_spike_ratio"] = float(spike_ratio)
    out["max_spike_share"] = float(spike_share)
    out["spike_t"] = float(tt[spike_at]) if spike_at >= 0 else None
    out["spike_step"] = int(np.searchsorted(t, tt[spike_at])) if spike_at >= 0 else None

    floor = 1e-9 * scale
    flips = (s[:-1] * s[1:] < 0) & (np.minimum(np.abs(s[:-1]), np.abs(s[1:])) > floor)
    strong = flips & (np.minimum(np.abs(s[:-1]), np.abs(s[1:])) > flip_tolerance * scale)
    out["sign_flips"] = int(flips.sum())
    out["sign_flips_beyond_tolerance"] = int(strong.sum())
    out["first_flip_t"] = float(t[np.argmax(strong)]) if strong.any() else None
    return out


def _panel_support(panels: PanelLayout, t: np.ndarray, scale: float) -> np.ndarray:
    """Adaptive rule: for each sample t, the local errors (beyond F's rounding) of the panels
    it is a node of, over the path variation. A panel's error is exact (its integral of the
    integrand against F's change across it), so a sample whose panels meet F is supported by
    F, however far it lies above its neighbours: a smooth peak of the integrand between
    coarse samples, not a spike. A value F does not show keeps its panels' errors up."""
    excess = np.maximum(0.0, panels.error - panels.noise) / scale
    out = np.zeros(t.size)
    first = np.searchsorted(panels.b, t, side="left")  # the first panel ending at or after t
    for j, k in enumerate(first):
        for m in (k, k + 1):
            if m < panels.a.size and panels.a[m] <= t[j] <= panels.b[m]:
                out[j] += excess[m]
    return out


def _panel_jumps(panels: PanelLayout, scale: float) -> dict[str, Any]:
    """The adaptive rule's jump reading of :func:`path_behaviour`, from its final panels."""
    found: dict[str, Any] = {}
    # Adaptive rule: judged on the refined panels. A panel's local error is the change of F
    # its gradient samples do not account for. Smooth but steep stretches lose it as their
    # panels halve; a discontinuity keeps it down to the narrowest panel allowed. Only
    # panels refined to that width count as jumps; a large error on a wider panel (budget
    # spent first) is reported as unresolved and left to ig_completeness.
    local = np.maximum(0.0, panels.error - panels.noise) / scale
    floor = (panels.b - panels.a) <= 2.0 * panels.min_width
    jumps = np.where(floor, local, 0.0)
    k = int(np.argmax(jumps))
    found["max_jump_ratio"] = float(jumps[k])
    found["jump_interval"] = [float(panels.a[k]), float(panels.b[k])]
    if panels.located is not None:
        # The search stopped early and followed F alone into its worst panel
        # (attest.collection.ig.stall): an interval that narrow across which F still
        # changes is a jump, whatever width its panel had.
        low, high, change = panels.located
        ratio = max(0.0, change - float(np.max(panels.noise, initial=0.0))) / scale
        if high - low <= 2.0 * panels.min_width and ratio > found["max_jump_ratio"]:
            found["max_jump_ratio"] = ratio
            found["jump_interval"] = [low, high]
    u = int(np.argmax(np.where(floor, 0.0, local)))
    found["max_unresolved_panel_error_ratio"] = float(0.0 if floor[u] else local[u])
    found["panel_summary"] = panels.summary()
    return found


# ----------------------------------------------------------------------------- the baseline


def _probabilities(output: torch.Tensor) -> torch.Tensor:
    """Class probabilities along dim 1 from logits, probabilities or log-probabilities."""
    out = output.detach().to(torch.float64)
    total = out.sum(dim=1)
    if (out >= 0).all() and torch.allclose(total, torch.ones_like(total), atol=1e-3):
        return out
    if (out <= 0).all() and torch.allclose(out.exp().sum(dim=1), torch.ones_like(total), atol=1e-3):
        return out.exp()
    return out.softmax(dim=1)


def baseline_neutrality(
    out_baseline: torch.Tensor,
    out_input: torch.Tensor,
    classes: torch.Tensor | None,
    scores: bool = True,
) -> dict[str, Any]:
    """Per input: how much the model's output at the baseline already says.

    ``classes``: the index F reads along dim 1 (a class, or with ``scores`` False a column of
    an output that is not class scores, such as a regressor's mean beside its log-variance).

    Classifiers (an output with a class dim of 2 or more, a class target and ``scores``): the softmax
    entropy at the baseline over ``log C`` (1 = uniform), and the target's probability at the
    baseline and at the input, averaged over any further dims (segmentation: per pixel).
    Always: ``|F(b)| / |F(x)|`` (``baseline_output_ratio``), and F(b) and F(x) themselves
    (``f_baseline``, ``f_input``).
    """
    n = out_input.shape[0]
    readings: dict[str, Any] = {}
    if classes is not None and out_input.dim() >= 2:
        flat_b = out_baseline.reshape(n, out_baseline.shape[1], -1).to(torch.float64)
        flat_x = out_input.reshape(n, out_input.shape[1], -1).to(torch.float64)
        f_b = flat_b.gather(1, classes.view(n, 1, 1).expand(n, 1, flat_b.shape[2])).sum(dim=(1, 2))
        f_x = flat_x.gather(1, classes.view(n, 1, 1).expand(n, 1, flat_x.shape[2])).sum(dim=(1, 2))
    else:
        f_b = out_baseline.reshape(n, -1).to(torch.float64).sum(dim=1)
        f_x = out_input.reshape(n, -1).to(torch.float64).sum(dim=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        readings["baseline_output_ratio"] = np.abs(f_b.cpu().numpy()) / np.abs(f_x.cpu().numpy())
    readings["f_baseline"], readings["f_input"] = f_b.cpu().numpy(), f_x.cpu().numpy()
    c = out_input.shape[1] if out_input.dim() >= 2 else 1
    readings["classifier"] = bool(scores and classes is not None and c >= 2)
    if not readings["classifier"]:
        return readings
    assert classes is not None
    p_b, p_x = _probabilities(flat_b), _probabilities(flat_x)
    entropy = -(p_b * p_b.clamp_min(_TINY).log()).sum(dim=1).mean(dim=1) / math.log(c)
    index = classes.view(n, 1, 1).expand(n, 1, p_b.shape[2])
    readings["baseline_entropy_ratio"] = entropy.cpu().numpy()
    readings["baseline_target_probability"] = p_b.gather(1, index).mean(dim=(1, 2)).cpu().numpy()
    readings["input_target_probability"] = p_x.gather(1, index).mean(dim=(1, 2)).cpu().numpy()
    return readings


# ----------------------------------------------------------------------------- the cascade


def cascade_layers(model: nn.Module, example: torch.Tensor) -> list[tuple[str, nn.Module]]:
    """Modules that own parameters, from the top (last to run in forward) down, found with
    forward hooks during one forward pass of ``example``."""
    owners = {
        name: module
        for name, module in model.named_modules()
        if any(True for _ in module.parameters(recurse=False))
    }
    order: list[str] = []
    handles = []
    for name, module in owners.items():

        def hook(_module: nn.Module, _args: Any, _output: Any, name: str = name) -> None:
            if name not in order:
                order.append(name)

        handles.append(module.register_forward_hook(hook))
    try:
        with torch.no_grad():
            model(example)
    finally:
        for handle in handles:
            handle.remove()
    # Owners whose parameters are used without calling the module (``self.layer.weight`` in a
    # parent's forward) count as run last, with the root: the top of the cascade.
    order += [name for name in owners if name not in order]
    return [(name or "<root>", owners[name]) for name in reversed(order)]


def randomize_layer(module: nn.Module, *, seed: int) -> None:
    """Re-initialize one module's own parameters, seeded: its ``reset_parameters()`` when it has
    one (the architecture's own initialization, as Adebayo et al.), else a normal draw with each
    tensor's standard deviation (1 for a scalar)."""
    devices = sorted(
        {p.device.index or 0 for p in module.parameters(recurse=False) if p.device.type == "cuda"}
    )
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        reset = getattr(module, "reset_parameters", None)
        if callable(reset):
            reset()
            return
        with torch.no_grad():
            for parameter in module.parameters(recurse=False):
                std = float(parameter.std()) if parameter.numel() > 1 else 1.0
                parameter.normal_(0.0, std if math.isfinite(std) and std > 0 else 1.0)
