"""The ``kinks`` check: probe values that land exactly on a non-differentiable point.

For every captured operator with non-differentiable points (see
:mod:`attest.collect.kink_detectors` for the families and the counting rule), the values the
probe run gave it, in the deployed precision, are scanned for exact hits. The derivative
autograd returns there is a convention of the program (``relu'(0) = 0``, but
``relu(-t) + t`` gives 1), not a property of the function, so a gradient or saliency map
computed there depends on how the model happens to be written.

To tell genuine kinks from locally constant values (ReLU zeros tying in a max-pool window),
the model runs once more under the operator capture in float64 with the probe inputs and
trainable parameters moved by a tiny seeded random perturbation (relative size
``KINK_PERTURBATION``). A hit counts only if that run moves it off the kink. The perturbed
run is aligned with the probe run operator by operator (by name, with ``difflib`` when a
float64 run issues extra casts); unaligned operators count every hit, and the item says so.

One item per operator that has non-differentiable points: ``count`` (hits that matter),
``locally_constant_hits`` (hits that stay put), ``first_indices`` (up to 5, in the index space
the item names). The item fails when ``count > 0``.
"""

from __future__ import annotations

import difflib
from typing import Any

import torch

from attest.collect.aten_args import bind_schema, op_short_name
from attest.collect.capture import capture_operators
from attest.collect.context import CollectContext, OpRecord
from attest.collect.kink_detectors import DETECTORS, scan_kinks
from attest.evidence import CheckItem, CheckResult, Subject

__all__ = ["KINK_PERTURBATION", "perturbed_records", "run"]

KINK_PERTURBATION = 1e-6


def perturbed_records(ctx: CollectContext) -> tuple[dict[int, OpRecord], str]:
    """The float64 perturbed run's records, keyed by the probe run's operator ids, and a note."""
    assert ctx.operators is not None
    seed = ctx.settings.seed
    generator = torch.Generator().manual_seed(seed + 5)
    model = ctx.fresh_model(torch.float64)
    with torch.no_grad():
        for p in model.parameters():
            if p.requires_grad and p.numel():
                rms = float(p.pow(2).mean().sqrt())
                noise = torch.randn(p.shape, generator=generator, dtype=torch.float64).to(p.device)
                p.add_(noise * KINK_PERTURBATION * (rms if rms > 0 else 1.0))
    x = ctx.spec.inputs
    if x.is_floating_point():
        x = ctx.inputs(torch.float64)
        rms = float(x.pow(2).mean().sqrt()) if x.numel() else 0.0
        noise = torch.randn(x.shape, generator=generator, dtype=torch.float64).to(x.device)
        x = x + noise * KINK_PERTURBATION * (rms if rms > 0 else 1.0)
    else:
        x = x.to(ctx.spec.device)
    records, outcome = capture_operators(
        model, x, ctx.spec, labels=ctx.spec.labels, backward=False, seed=seed
    )
    if outcome.failure is not None:
        return {}, f"the perturbed run raised ({outcome.failure.describe()}): every hit counted"
    probe = [(r.op, r.module) for r in ctx.operators]
    other = [(r.op, r.module) for r in records]
    if probe == other:
        return {r.id: p for r, p in zip(ctx.operators, records, strict=True)}, "aligned one to one"
    matched: dict[int, OpRecord] = {}
    matcher = difflib.SequenceMatcher(a=probe, b=other, autojunk=False)
    for block in matcher.get_matching_blocks():
        for k in range(block.size):
            matched[ctx.operators[block.a + k].id] = records[block.b + k]
    return matched, f"aligned by operator sequence ({len(matched)} of {len(probe)} operators)"


def run(ctx: CollectContext) -> CheckResult:
    """The ``kinks`` result: one item per captured operator that has non-differentiable points."""
    parameters: dict[str, Any] = {
        "perturbation": KINK_PERTURBATION,
        "perturbation_dtype": "float64",
        "seed": ctx.settings.seed,
        "rule": "a hit counts when a random perturbation of the inputs and parameters moves it off the kink",
    }
    if ctx.operators is None:
        return CheckResult(
            check="kinks",
            status="not_computed",
            parameters=parameters,
            reason="the operator capture did not run, so there are no operator inputs to scan",
        )
    candidates = [r for r in ctx.operators if op_short_name(r.op) in DETECTORS]
    # First every hit, counted or not; the perturbed run is only needed to judge hits.
    raw = {
        r.id: scan_kinks(op_short_name(r.op), bind_schema(r.func, r.args, r.kwargs))
        for r in candidates
    }
    perturbed: dict[int, OpRecord] = {}
    note = "no operator with non-differentiable points"
    if candidates:
        note = "no exact hit: the perturbed run was not needed"
    if any(scan is not None and scan.raw_hits > 0 for scan in raw.values()):
        try:
            perturbed, note = perturbed_records(ctx)
        except Exception as exc:  # liveness is a refinement; without it every hit counts
            note = f"the perturbed run failed ({type(exc).__name__}: {exc}): every hit counted"
    parameters["alignment"] = note
    items: list[CheckItem] = []
    for record in candidates:
        scan = raw[record.id]
        if scan is None:
            continue
        twin = perturbed.get(record.id)
        twin_bound = None if twin is None else bind_schema(twin.func, twin.args, twin.kwargs)
        if scan.raw_hits and twin_bound is not None:
            bound = bind_schema(record.func, record.args, record.kwargs)
            scan = scan_kinks(op_short_name(record.op), bound, twin_bound) or scan
        first = scan.first_indices
        subject = Subject(
            kind="operator",
            operator_id=record.id,
            op=record.op,
            module=record.module,
            indices=first[0] if first else None,
        )
        metrics: dict[str, Any] = {
            "count": scan.count,
            "locally_constant_hits": scan.constant_hits,
            "kind": scan.kind,
            "index_space": scan.index_space,
            "first_index": ",".join(str(i) for i in first[0]) if first else None,
            "perturbation_aligned": twin_bound is not None,
        }
        if scan.count:
            message = (
                f"{scan.count} probe value(s) exactly on a non-differentiable point ({scan.kind}); "
                f"first at {[tuple(i) for i in first]} ({scan.index_space}): the derivative returned "
                "there is a convention of the program, not of the function"
            )
        elif scan.constant_hits:
            message = (
                f"{scan.constant_hits} hit(s) on {scan.kind} stay put when inputs and parameters move "
                "(locally constant), so both one-sided derivatives agree: not counted"
            )
        else:
            message = ""
        if twin_bound is None and scan.raw_hits:
            message += "; no aligned perturbed run for this operator, so every hit was counted"
        items.append(
            CheckItem(
                subject=subject,
                status="fail" if scan.count else "pass",
                metrics=metrics,
                message=message,
                details={"first_indices": first},
            )
        )
    summary: dict[str, Any] = {
        "operators_scanned": len(items),
        "operators_with_kinks": sum(1 for i in items if i.status == "fail"),
        "total_count": sum(int(i.metrics["count"] or 0) for i in items),
        "locally_constant_hits": sum(int(i.metrics["locally_constant_hits"] or 0) for i in items),
    }
    return CheckResult(
        check="kinks", status="computed", parameters=parameters, summary=summary, items=items
    )
