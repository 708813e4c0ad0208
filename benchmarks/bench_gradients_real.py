"""Cost of the gradient checks on three real MONAI networks, in units of F and of RSS.

F is the median of 3 float32 forward+backward passes of the probe batch (the work a user
does anyway), measured in the same process as the checks, so that on a shared machine the
ratios stay meaningful when the absolute times do not. Each model runs in two child
processes:

- ``bare``: build the model, 3 float32 forward+backward passes; its peak RSS (VmHWM) is
  the reference the collect process is compared with (target: at most 3x);
- ``checks``: the same, then the profiler's reference capture (``capture_reference``, which
  fills ``ctx.operators``) and the gradient checks (``runner.run_each``), each timed
  (wall, CPU = user+sys of every thread, CPU utilization = CPU / wall) with the peak RSS
  of the whole process and of the checks alone (VmHWM reset after the capture).

Models (random weights, ``torch.manual_seed(0)``, seeded probes):

- ``resnet18``: ``monai.networks.nets.resnet18(spatial_dims=2, n_input_channels=3,
  num_classes=2)`` on 4x3x224x224, cross-entropy on 4 labels;
- ``segresnet``: ``SegResNet(spatial_dims=3, in_channels=1, out_channels=2,
  init_filters=16)`` on 1x1x64x64x64, no loss (``sum_n F(x_n)`` of the argmax target);
- ``vit``: ``ViT(in_channels=3, img_size=224, patch_size=16, hidden_size=384, mlp_dim=1536,
  num_layers=6, num_heads=6, classification=True, num_classes=2, spatial_dims=2)`` on 2x3x224x224,
  cross-entropy on 2 labels.

    .venv/bin/python benchmarks/bench_gradients_real.py                  # all three
    .venv/bin/python benchmarks/bench_gradients_real.py --models resnet18 --json out.json

The "before" figures of docs/benchmarks.md were taken by running this script with
``PYTHONPATH`` pointing at an export of the previous commit's ``attest`` package.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import real_models  # benchmarks/real_models.py: the script's own folder is on sys.path
import torch
import torch.nn.functional as F
from torch import nn

THREADS = 2


def _build(name: str) -> nn.Module:
    torch.manual_seed(0)
    try:
        return real_models.build(name)
    except ValueError as exc:
        raise SystemExit(str(exc)) from None


def _probe(name: str) -> tuple[torch.Tensor, torch.Tensor | None]:
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(*real_models.PROBE_SHAPES[name], generator=generator)
    if name == "segresnet":
        return x, None
    return x, torch.randint(0, 2, (x.shape[0],), generator=generator)


def _loss(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(output, target.long())


def _output(out: Any) -> torch.Tensor:
    # ViT returns (logits, hidden states)
    return out[0] if isinstance(out, (tuple, list)) else out


def _vm_hwm_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def _reset_hwm() -> None:
    # Linux: writing 5 to clear_refs resets the peak RSS (VmHWM) to the current RSS.
    Path("/proc/self/clear_refs").write_text("5")


def _forward_backward_seconds(name: str, model: nn.Module, repeats: int = 3) -> list[float]:
    x, labels = _probe(name)
    times = []
    for _ in range(repeats):
        model.zero_grad(set_to_none=True)
        xr = x.clone().requires_grad_(True)
        started = time.perf_counter()
        out = _output(model(xr))
        objective = _loss(out, labels) if labels is not None else out.max(dim=1).values.sum()
        objective.backward()
        times.append(time.perf_counter() - started)
    model.zero_grad(set_to_none=True)
    return times


def child_bare(name: str) -> dict[str, Any]:
    model = _build(name).eval()
    f = statistics.median(_forward_backward_seconds(name, model))
    return {"F_s": f, "peak_rss_mib": _vm_hwm_kib() / 1024}


def _context(name: str) -> Any:
    from attest.collection.context import CheckSettings, CollectContext, LoadedSpec

    state = _build(name).state_dict()

    def build_model() -> nn.Module:
        model = _build(name)
        model.load_state_dict(state)
        return model

    x, labels = _probe(name)
    spec = LoadedSpec(
        path=Path("attest.yaml"),
        name=name,
        version="0",
        factory=f"monai:{name}",
        factory_args={},
        build_model=build_model,
        inputs=x,
        labels=labels,
        loss_fn=_loss if labels is not None else None,
        loss="bench:cross_entropy" if labels is not None else None,
        threads=THREADS,
    )
    return CollectContext(spec=spec, settings=CheckSettings())


def child_checks(name: str) -> dict[str, Any]:
    from attest.collection.gradients import runner
    from attest.collection.profile.profiler import capture_reference

    model = _build(name).eval()
    times = _forward_backward_seconds(name, model)
    ctx = _context(name)
    started = time.perf_counter()
    capture_reference(ctx)
    capture_s = time.perf_counter() - started
    rss_after_capture = _vm_hwm_kib()
    _reset_hwm()
    checks_peak = 0
    checks: dict[str, dict[str, Any]] = {}
    torch.set_num_threads(THREADS)
    last_wall, last_cpu = time.perf_counter(), time.process_time()
    for check_id, result in runner.run_each(ctx):
        wall, cpu = time.perf_counter(), time.process_time()
        checks[check_id] = {
            "status": result.status,
            "parameters": {
                k: v for k, v in result.parameters.items() if k in ("batch", "crop", "batch_note")
            },
            "model_items": [
                {k: i.metrics.get(k) for k in ("eps", "difference", "max_rel_error")}
                for i in result.items
                if i.subject.kind == "model" and check_id == "second_order"
            ],
            "failed": len(result.failed_items),
            "duration_s": result.duration_s,
            "wall_s": wall - last_wall,
            "cpu_s": cpu - last_cpu,
        }
        checks[check_id]["peak_rss_mib"] = _vm_hwm_kib() / 1024  # this check's own peak
        checks_peak = max(checks_peak, _vm_hwm_kib())
        _reset_hwm()
        last_wall, last_cpu = time.perf_counter(), time.process_time()
    operators = len(ctx.operators or [])
    del ctx
    # F again after the checks: the machine is shared, so F is the median of the passes
    # before and after them (the ratios are then against the load the checks ran under).
    times += _forward_backward_seconds(name, model)
    return {
        "F_s": statistics.median(times),
        "F_samples_s": times,
        "capture_s": capture_s,
        "operators": operators,
        "checks": checks,
        "peak_rss_mib": max(rss_after_capture, checks_peak) / 1024,
        "peak_rss_checks_mib": checks_peak / 1024,
        "peak_rss_capture_mib": rss_after_capture / 1024,
    }


def _spawn(kind: str, name: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", kind, name],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": str(THREADS)},
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def _report(name: str, bare: dict[str, Any], run: dict[str, Any]) -> None:
    f = run["F_s"]
    print(
        f"\n{name}: F = {f:.3f} s (bare process F = {bare['F_s']:.3f} s), "
        f"{run['operators']} operators, reference capture {run['capture_s'] / f:.1f} F"
    )
    print(
        f"{'check':<15}{'status':>14}{'failed':>8}{'duration_s':>12}{'/ F':>8}{'CPU util':>10}"
        f"{'peak RSS MiB':>14}"
    )
    total = 0.0
    for check_id, c in run["checks"].items():
        total += c["duration_s"]
        util = c["cpu_s"] / c["wall_s"] if c["wall_s"] > 0 else 0.0
        print(
            f"{check_id:<15}{c['status']:>14}{c['failed']:>8}{c['duration_s']:>12.2f}"
            f"{c['duration_s'] / f:>8.1f}{util:>10.2f}{c.get('peak_rss_mib', 0):>14.0f}"
        )
    so = run["checks"].get("second_order", {})
    if so.get("model_items"):
        print(f"second_order: {so['parameters']}, directions {so['model_items']}")
    print(f"{'all checks':<37}{total:>12.2f}{total / f:>8.1f}")
    print(
        f"peak RSS: bare {bare['peak_rss_mib']:.0f} MiB; reference capture "
        f"{run.get('peak_rss_capture_mib', 0):.0f} MiB; collect child "
        f"{run['peak_rss_mib']:.0f} MiB ({run['peak_rss_mib'] / bare['peak_rss_mib']:.2f}x); "
        f"during the checks {run['peak_rss_checks_mib']:.0f} MiB "
        f"({run['peak_rss_checks_mib'] / bare['peak_rss_mib']:.2f}x)"
    )


# -- detection power of second_order (--detection) ---------------------------------------------
# Planted defects of the second derivative in a small CNN (batch 4 of 1x8x8, cross-entropy):
# the model-level Hessian-vector items are read (the custom-Function probe is unchanged and
# catches a custom Function by itself anyway). Run under this tree and under an export of the
# previous commit (PYTHONPATH) to compare the sub-batch / one-sided products with the
# full-batch / central ones.


class _Softplus(torch.autograd.Function):
    """softplus; ``mode`` plants the defect in its backward (or its backward's backward)."""

    mode = "clean"
    mask: torch.Tensor | None = None  # where the defect applies (None: everywhere)

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        return F.softplus(x)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        mode, mask = _Softplus.mode, _Softplus.mask
        if mode == "no_grad":  # the backward's dependence on x is invisible to autograd
            with torch.no_grad():
                bad = grad * torch.sigmoid(x)
        elif mode.startswith("second"):  # the derivative of the backward is off
            bad = _SigmoidTimes.apply(grad, x)
        elif mode == "once":
            return _OnceSigmoidTimes.apply(grad, x)
        else:
            return grad * torch.sigmoid(x)
        good = grad * torch.sigmoid(x)
        return bad if mask is None else torch.where(mask.to(x.device), bad, good)


class _SigmoidTimes(torch.autograd.Function):
    factor = 1.0  # the planted error of the second derivative

    @staticmethod
    def forward(ctx: Any, grad: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(grad, x)
        return grad * torch.sigmoid(x)

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        grad, x = ctx.saved_tensors
        s = torch.sigmoid(x)
        return g * s, _SigmoidTimes.factor * g * grad * s * (1 - s)


class _OnceSigmoidTimes(_SigmoidTimes):
    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        raise RuntimeError("this backward is not differentiable (once_differentiable)")


class _DefectNet(nn.Module):
    """``side`` 8: the table's 8x8 images and a linear head over the 4x4 map; a larger side
    pools to 4x4 first (fully convolutional, so ``second_order`` runs on the central crop)."""

    def __init__(self, where: str, side: int = 8) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.pool = nn.AdaptiveAvgPool2d(4) if side > 8 else nn.Identity()
        self.head = nn.Linear(8 * 4 * 4, 3)
        self.where = where

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.conv1(x)
        if self.where == "channel":  # the defect in 1 of 8 channels
            _Softplus.mask = torch.zeros_like(h, dtype=torch.bool)
            _Softplus.mask[:, 3] = True
        elif self.where == "rare":  # the defect where the pre-activation exceeds 1.5 sigma
            _Softplus.mask = (h - h.mean()).abs() > 1.5 * h.std()
        else:
            _Softplus.mask = None
        h = _Softplus.apply(h)
        h = self.pool(F.max_pool2d(torch.tanh(self.conv2(h)), 2))
        return self.head(h.flatten(1))


DEFECTS = {
    "clean (false alarms)": ("clean", "all"),
    "once-differentiable backward": ("once", "all"),
    "backward under no_grad": ("no_grad", "all"),
    "second derivative 2 % off": ("second_1.02", "all"),
    "second derivative 10 % off": ("second_1.1", "all"),
    "second derivative 50 % off": ("second_1.5", "all"),
    "no_grad backward, 1 of 8 channels": ("no_grad", "channel"),
    "10 % off, 1 of 8 channels": ("second_1.1", "channel"),
    "50 % off, 1 of 8 channels": ("second_1.5", "channel"),
    "no_grad where |h| > 1.5 sigma": ("no_grad", "rare"),
    "50 % off where |h| > 1.5 sigma": ("second_1.5", "rare"),
}


def detection(
    seeds: int, overrides: dict[str, Any], only: str | None = None, side: int = 8
) -> dict[str, float]:
    """The share of seeds whose model-level HVP items flag the defect (fail, or raise)."""
    from attest.collection.context import CheckSettings, CollectContext, LoadedSpec
    from attest.collection.gradients import second_order

    torch.set_num_threads(1)
    rates: dict[str, float] = {}
    for label, (mode, where) in DEFECTS.items():
        if only is not None and only not in label:
            continue
        flagged = 0
        for seed in range(seeds):
            _Softplus.mode = mode
            _SigmoidTimes.factor = float(mode.split("_")[1]) if mode.startswith("second") else 1.0
            torch.manual_seed(seed)
            state = _DefectNet(where, side).state_dict()

            def build(state: dict[str, Any] = state, where: str = where) -> nn.Module:
                model = _DefectNet(where, side)
                model.load_state_dict(state)
                return model

            generator = torch.Generator().manual_seed(1000 + seed)
            spec = LoadedSpec(
                path=Path("attest.yaml"),
                name="defect",
                version="0",
                factory="bench:defect",
                factory_args={},
                build_model=build,
                inputs=torch.randn(4, 1, side, side, generator=generator),
                labels=torch.randint(0, 3, (4,), generator=generator),
                loss_fn=_loss,
                loss="bench:cross_entropy",
                threads=1,
            )
            settings = CheckSettings(seed=seed)
            for knob, value in overrides.items():  # --set second_order_batch=2 ...
                setattr(settings, knob, value)
            ctx = CollectContext(spec=spec, settings=settings)
            result = second_order.run(ctx)
            model_items = [i for i in result.items if i.subject.kind == "model"]
            if result.status != "computed" or any(i.status != "pass" for i in model_items):
                flagged += 1
        rates[label] = flagged / seeds
        print(f"{label:<40}{rates[label]:>8.1%}", flush=True)
    return rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=["resnet18", "segresnet", "vit"])
    parser.add_argument("--json", type=Path, help="write the raw figures here")
    parser.add_argument(
        "--detection", type=int, metavar="SEEDS", help="second_order's detection table"
    )
    parser.add_argument(
        "--set", nargs="*", default=[], metavar="KNOB=VALUE", help="CheckSettings for --detection"
    )
    parser.add_argument("--only", help="--detection: the defects whose label contains this")
    parser.add_argument(
        "--side", type=int, default=8, help="--detection: image side (32+: second_order crops)"
    )
    parser.add_argument("--child", nargs=2, metavar=("KIND", "MODEL"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.set_num_threads(THREADS)
    if args.detection:
        overrides = {k: json.loads(v) for k, v in (kv.split("=", 1) for kv in args.set)}
        detection(args.detection, overrides, args.only, args.side)
        return
    if args.child:
        kind, name = args.child
        result = child_bare(name) if kind == "bare" else child_checks(name)
        print(json.dumps(result))
        return
    figures: dict[str, Any] = {}
    for name in args.models:
        bare = _spawn("bare", name)
        run = _spawn("checks", name)
        figures[name] = {"bare": bare, "checks": run}
        _report(name, bare, run)
        if args.json:
            args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
