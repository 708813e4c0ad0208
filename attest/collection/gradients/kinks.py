"""The ``kinks`` check: probe values that land exactly on a non-differentiable point.

For every captured operator with non-differentiable points (see
:mod:`attest.collection.gradients.kink_detectors` for the families and the counting rule), the values the
probe run gave it, in the deployed precision, are scanned for exact hits. The derivative
autograd returns there is a convention of the program (``relu'(0) = 0``, but
``relu(-t) + t`` gives 1), not a property of the function, so a gradient or saliency map
computed there depends on how the model happens to be written.

To tell genuine kinks from locally constant values (ReLU zeros tying in a max-pool window),
the model runs once more under the operator capture in float64 with the probe inputs moved
by a tiny seeded random perturbation (relative size ``KINK_PERTURBATION``). A hit counts only
if that run moves it off the kink: the probe input itself put the value there.

Hits that stay put when only the inputs move get a second run with the trainable parameters
moved as well. A hit that moves only then sits on the kink because of the current parameter
values (a freshly initialized BatchNorm with weight 1 and bias 0 passes a ReLU's exact zeros
on to the next ReLU): the derivative convention there decides what those parameters'
gradients are, so it is reported, but as a warning, since no probe input caused it and a
trained model will not usually have it. The perturbed runs are aligned with the probe run
operator by operator (by name, with ``difflib`` when a float64 run issues extra casts);
unaligned operators count every hit, and the item says so.

One item per operator that has non-differentiable points: ``count`` (hits the inputs put
there), ``parameter_hits`` (hits only the parameter values put there),
``locally_constant_hits`` (hits that stay put), ``first_indices`` (up to 5, in the index space
the item names). The item fails when ``count > 0`` and warns when only ``parameter_hits > 0``.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Any

import torch

from attest.collection.capture.aten_args import bind_schema, op_short_name
from attest.collection.capture.run import capture_operators
from attest.collection.context import CollectContext, OpRecord
from attest.collection.gradients.kink_detectors import DETECTORS, KinkScan, scan_kinks
from attest.collection.gradients.kink_noise import tie_to_ids
from attest.evidence.model import CheckItem, CheckResult, Subject

__all__ = ["KINK_PERTURBATION", "perturbed_records", "run"]

KINK_PERTURBATION = 1e-6


def _dropped(tensor: torch.Tensor) -> None:
    """A saved-tensor pack hook that keeps nothing (no backward will read it)."""


def _never_read(packed: None) -> torch.Tensor:
    raise RuntimeError("kinks' perturbed run has no backward: its saved tensors were dropped")


def perturbed_records(
    ctx: CollectContext, *, parameters: bool = True, ops: frozenset[str] | None = None
) -> tuple[dict[int, OpRecord], str]:
    """The float64 perturbed run's records, keyed by the probe run's operator ids, and a note.

    The probe inputs are always perturbed; the trainable parameters only with ``parameters``.
    ``ops``: the only operators (ATen overload names) whose arguments the records keep; every
    operator is still named and placed, which the alignment needs. Keeping every operator's
    float64 arguments held the whole float64 forward (a 64^3 SwinUNETR: the collect's peak,
    4.6x the bare process) when only the hit operators' are read.
    """
    assert ctx.operators is not None
    seed = ctx.settings.seed
    generator = torch.Generator().manual_seed(seed + 5)
    model = ctx.fresh_model(torch.float64)
    with torch.no_grad():
        for p in model.parameters():
            if parameters and p.requires_grad and p.numel():
                rms = float(p.pow(2).mean().sqrt())
                noise = torch.randn(p.shape, generator=generator, dtype=torch.float64).to(p.device)
                p.add_(noise * KINK_PERTURBATION * (rms if rms > 0 else 1.0))
    x = ctx.spec.inputs
    if x.is_floating_point():
        x = ctx.inputs(torch.float64)
        rms = float(x.pow(2).mean().sqrt()) if x.numel() else 0.0
        noise = torch.randn(x.shape, generator=generator, dtype=torch.float64).to(x.device)
        noise = tie_to_ids(ctx.spec.call, x, noise, generator)  # embedded inputs: per id
        x = x + noise * KINK_PERTURBATION * (rms if rms > 0 else 1.0)
    else:
        x = x.to(ctx.spec.device)
    keep = None if ops is None else ops.__contains__

    def forward() -> tuple[list[OpRecord], Any]:
        return capture_operators(
            model, x, ctx.spec, labels=ctx.spec.labels, backward=False, seed=seed, keep=keep
        )

    # The run has no backward, but it runs with autograd on, as the probe run did (a model
    # may take another path without it: nn.MultiheadAttention's fast path), so autograd saves
    # every float64 activation for a backward that never comes. The hooks drop them instead;
    # a model that differentiates inside its own forward needs them and runs again without.
    with torch.autograd.graph.saved_tensors_hooks(_dropped, _never_read):
        records, outcome = forward()
    if outcome.failure is not None:
        records, outcome = forward()
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
        "rule": "a hit counts when a random perturbation of the probe inputs moves it off the kink; "
        "one that moves only when the parameters move too is a warning (parameter_hits)",
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
        for r in ctx.paged(candidates)
    }
    hits: dict[int, tuple[OpRecord, KinkScan]] = {}
    for record in candidates:
        found = raw[record.id]
        if found is not None and found.raw_hits > 0:
            hits[record.id] = (record, found)
    judged = _Judged()
    if candidates:
        judged.note = "no exact hit: the perturbed run was not needed"
    if hits:
        judged = _judge_hits(ctx, hits)
    parameters["alignment"] = judged.note
    items: list[CheckItem] = []
    for record in candidates:
        scan = raw[record.id]
        if scan is not None:
            items.append(_item(record, scan, judged))
    summary: dict[str, Any] = {
        "operators_scanned": len(items),
        "operators_with_kinks": sum(1 for i in items if i.status == "fail"),
        "total_count": sum(int(i.metrics["count"] or 0) for i in items),
        "parameter_hits": sum(int(i.metrics["parameter_hits"] or 0) for i in items),
        "locally_constant_hits": sum(int(i.metrics["locally_constant_hits"] or 0) for i in items),
    }
    return CheckResult(
        check="kinks", status="computed", parameters=parameters, summary=summary, items=items
    )


@dataclass
class _Judged:
    """The perturbed runs' verdicts on the hits: each operator's scan with only the inputs
    moved (``input_scans``) and with the parameters moved too (``both_scans``), the
    ids of the operators the deciding run aligned (``aligned``; its records themselves, every
    operator's float64 arguments, are not kept) and how the runs were aligned (``note``)."""

    input_scans: dict[int, KinkScan | None] = field(default_factory=dict)
    both_scans: dict[int, KinkScan | None] = field(default_factory=dict)
    aligned: set[int] = field(default_factory=set)
    note: str = "no operator with non-differentiable points"


def _rescan(record: OpRecord, twin: OpRecord | None, scan: KinkScan) -> KinkScan | None:
    """``scan``'s hits judged against ``twin``, the operator's call in a perturbed run."""
    if twin is None:
        return None
    if scan.judge is not None:  # judged from the probe scan's hits, without rescanning
        return scan.judge(bind_schema(twin.func, twin.args, twin.kwargs))
    bound = bind_schema(record.func, record.args, record.kwargs)
    return scan_kinks(
        op_short_name(record.op), bound, bind_schema(twin.func, twin.args, twin.kwargs)
    )


def _judge_hits(ctx: CollectContext, hits: dict[int, tuple[OpRecord, KinkScan]]) -> _Judged:
    """Run the perturbed runs the hits need and judge every hit against them.

    The run that moves inputs and parameters together comes first: a hit it leaves in place
    is locally constant, and (generically) so it is when only the inputs move. When it moves
    none (a clean ReLU network: only zeros tying in max-pool windows), the inputs-only run
    cannot count anything and is not needed."""
    judged = _Judged()
    ops = frozenset(record.op for record, _ in hits.values())
    try:
        with_parameters, joint_note = perturbed_records(ctx, parameters=True, ops=ops)
    except Exception:  # without it, fall back to the inputs-only run alone
        with_parameters, joint_note = {}, ""
    judged.both_scans = {i: _rescan(r, with_parameters.get(i), sc) for i, (r, sc) in hits.items()}
    # The records (every operator's float64 arguments) are let go as soon as the hits are
    # judged, before a second run captures its own.
    aligned = set(with_parameters)
    del with_parameters
    if joint_note and all(s is not None and s.count == 0 for s in judged.both_scans.values()):
        judged.input_scans, judged.aligned = dict(judged.both_scans), aligned
        judged.note = f"{joint_note}; inputs and parameters moved together and no hit moved off its kink, so no inputs-only run was needed"
        return judged
    try:
        perturbed, judged.note = perturbed_records(ctx, parameters=False, ops=ops)
    except Exception as exc:  # liveness is a refinement; without it every hit counts
        perturbed = {}
        judged.note = f"the perturbed run failed ({type(exc).__name__}: {exc}): every hit counted"
    judged.aligned = set(perturbed)
    judged.input_scans = {i: _rescan(r, perturbed.get(i), sc) for i, (r, sc) in hits.items()}
    return judged


def _item(record: OpRecord, scan: KinkScan, judged: _Judged) -> CheckItem:
    """One operator's item: its hits, counted as the perturbed runs judged them."""
    aligned = record.id in judged.aligned
    parameter_hits = 0
    input_scan = judged.input_scans.get(record.id)
    if input_scan is not None:
        both = judged.both_scans.get(record.id)
        if both is not None and input_scan.count == 0 and both.count:
            # Only the parameter values hold these on the kink (generically, a hit the
            # inputs move also moves when the parameters move too).
            parameter_hits = both.count
            scan = both
        else:
            scan = input_scan
    count = scan.count - parameter_hits
    first = scan.first_indices
    subject = Subject(
        kind="operator",
        operator_id=record.id,
        op=record.op,
        module=record.module,
        indices=first[0] if first else None,
    )
    metrics: dict[str, Any] = {
        "count": count,
        "parameter_hits": parameter_hits,
        "locally_constant_hits": scan.constant_hits,
        "kind": scan.kind,
        "index_space": scan.index_space,
        "first_index": ",".join(str(i) for i in first[0]) if first else None,
        "perturbation_aligned": aligned,
    }
    message = _message(scan, count, parameter_hits)
    if not aligned and scan.raw_hits:
        message += "; no aligned perturbed run for this operator, so every hit was counted"
    return CheckItem(
        subject=subject,
        status="fail" if count else ("warn" if parameter_hits else "pass"),
        metrics=metrics,
        message=message,
        details={"first_indices": first},
    )


def _message(scan: KinkScan, count: int, parameter_hits: int) -> str:
    first = scan.first_indices
    if count:
        return (
            f"{count} probe value(s) exactly on a non-differentiable point ({scan.kind}); "
            f"first at {[tuple(i) for i in first]} ({scan.index_space}): the derivative returned "
            "there is a convention of the program, not of the function"
        )
    if parameter_hits:
        return (
            f"{parameter_hits} value(s) exactly on a non-differentiable point ({scan.kind}) "
            f"because of the current parameter values, not the probe inputs; first at "
            f"{[tuple(i) for i in first]} ({scan.index_space}): the derivative convention "
            "decides those parameters' gradients (typical of an untrained normalization "
            "layer passing exact zeros on)"
        )
    if scan.constant_hits:
        return (
            f"{scan.constant_hits} hit(s) on {scan.kind} stay put when inputs and parameters move "
            "(locally constant), so both one-sided derivatives agree: not counted"
        )
    return ""
