"""The ``gradcheck`` check: every ATen operator's backward against finite differences.

Each operator the profiler captured (``ctx.operators``) is re-run alone on its captured
arguments cast to float64, and checked by :func:`~attest.collection.gradients.finite_differences.check_backward`:
the full Jacobian with ``torch.autograd.gradcheck`` when its inputs are small, otherwise
``K`` seeded random directions on the full captured input. Large pointwise operators also get
a full-Jacobian check on a representative slice (the leading block of every input, sliced the
same way so broadcasting is preserved), and the item says so. Full Jacobians never run on a
large input.

What is differentiated: every floating-point tensor argument that autograd connects to a
floating output. Arguments autograd does not differentiate (batch-norm running statistics,
integer indices) are held fixed and named. Operators with no floating input or output
(comparisons, argmax, integer casts) and random operators are skipped with the reason, never
failed. Captured values sitting exactly on a kink (a ReLU input at 0, a max-pool window tie)
are nudged off it first (the ``kinks`` check reports them); the item records how many.

A pass is a verdict on the captured case only: the seed, step, tolerances and direction count
are recorded per item.
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any

import torch
from torch.utils._pytree import tree_flatten

from attest.collection.capture.aten_args import (
    BoundCall,
    bind_schema,
    floating,
    op_short_name,
    to_float64,
)
from attest.collection.context import CollectContext, OpRecord
from attest.collection.gradients.finite_differences import (
    BackwardCheck,
    FiniteDifferenceSettings,
    GaussianPool,
    NotDifferentiable,
    check_backward,
    describe,
    finite_or_none,
    rms_or_one,
)
from attest.collection.gradients.kink_detectors import DETECTORS, POLES, SEAMS, scan_kinks
from attest.evidence.model import CheckItem, CheckResult, Subject

__all__ = [
    "CaseSkipped",
    "check_operator",
    "fd_settings",
    "is_random",
    "nudge_off_kinks",
    "prepare_case",
    "run",
]

# Values within KINK_REACH (times the inputs' RMS) of a kink could be crossed by a
# finite-difference step of the default size (1e-6 times a Gaussian direction scaled by the
# RMS). They are nudged by KINK_NUDGE times the input's RMS: far beyond that reach, far below
# the values.
KINK_REACH = 1e-5
KINK_NUDGE = 1e-2
# Elements of the representative slice of a large pointwise operator: the operator acts on
# each element alone, so a few elements exercise its derivative formula; every element of the
# captured input is covered by the random directions anyway.
SLICE_NUMEL = 8

_NOT_IMPLEMENTED = re.compile(
    r"derivative for '?([A-Za-z_0-9.]+)'? is not implemented"
    r"|not differentiable with respect to argument '([A-Za-z_0-9.]+)'"
)


def fd_settings(ctx: CollectContext) -> FiniteDifferenceSettings:
    """The finite-difference settings of a collect run (K, seed and budgets from its settings)."""
    extra = ctx.settings.extra
    return FiniteDifferenceSettings(
        directions=ctx.settings.gradcheck_directions,
        seed=ctx.settings.seed,
        eps=float(extra.get("gradcheck_eps", 1e-6)),
        atol=float(extra.get("gradcheck_atol", 1e-6)),
        rtol=float(extra.get("gradcheck_rtol", 1e-3)),
        full_jacobian_max_numel=ctx.settings.gradcheck_full_jacobian_max_numel,
        cotangents=int(extra.get("gradcheck_cotangents", 1)),
    )


class CaseSkipped(Exception):
    """The operator has nothing to check (the message says why)."""


def prepare_case(
    call: BoundCall,
) -> tuple[list[int], list[str]]:
    """Which floating inputs to differentiate: those autograd connects to an output.

    Returns (indices into ``call.tensors``, names of the inputs held fixed). Raises
    :class:`CaseSkipped` when nothing is differentiable.
    """
    use = list(range(len(call.tensors)))
    fixed: list[str] = []
    while use:
        fn = call.function(use)
        leaves = [call.tensors[i].detach().clone().requires_grad_(True) for i in use]
        try:
            with torch.enable_grad():
                outputs = fn(*leaves)
        except RuntimeError as exc:  # "the derivative for 'running_mean' is not implemented"
            match = _NOT_IMPLEMENTED.search(str(exc))
            if match is None:
                raise
            name = match.group(1) or match.group(2)
            drop = [i for i in use if call.names[i] == name]
            if not drop:
                raise
            use = [i for i in use if i not in drop]
            fixed.append(f"{name} (no derivative formula)")
            continue
        tracked = [o for o in outputs if o.is_floating_point() and o.requires_grad]
        if not tracked:
            raise CaseSkipped("no floating output depends differentiably on the inputs")
        grads = torch.autograd.grad(
            tracked, leaves, grad_outputs=[torch.ones_like(o) for o in tracked], allow_unused=True
        )
        unused = [i for i, g in zip(use, grads, strict=True) if g is None]
        for i in unused:
            fixed.append(f"{call.names[i]} (not differentiated by autograd)")
        return [i for i in use if i not in unused], fixed
    raise CaseSkipped("no floating-point input is differentiable")


def nudge_off_kinks(record: OpRecord, call: BoundCall, use: list[int], seed: int) -> int:
    """Move captured values on or next to a kink away from it (replacing ``call.tensors``).

    "Next to" is within the reach of the default finite-difference step; the nudge is far
    larger than that reach. Ties are broken by independent random nudges, re-scanned until
    none is left (four rounds at most)."""
    name = op_short_name(record.op)
    if (name not in DETECTORS and name not in SEAMS and name not in POLES) or not use:
        return 0  # no non-differentiable points: nothing to scan
    generator = torch.Generator().manual_seed(seed + 7919)
    moved = 0
    # Reach and nudge sizes from the captured values' RMS, once: a nudge moves the RMS by a
    # negligible amount, and each RMS is a pass over the whole input.
    rms = {i: rms_or_one(call.tensors[i]) for i in use}
    reach = KINK_REACH * max(rms.values())
    for _ in range(4):
        bound = bind_schema(call.func, call.args, call.kwargs)
        for i in range(len(call.tensors)):  # the scan must see the nudged values
            _replace_bound(bound, call.names[i], call.tensors, i)
        scan = scan_kinks(name, bound, tolerance=reach, step_only=True)
        if scan is None or scan.raw_hits == 0:
            return moved
        for i in use:
            mask = scan.masks.get(call.names[i])
            x = call.tensors[i]
            if mask is None or mask.shape != x.shape or not bool(mask.any()):
                continue
            size = KINK_NUDGE * rms[i]
            where = mask.to(x.device).nonzero(as_tuple=True)
            n = where[0].numel()
            sign = torch.randint(0, 2, (n,), generator=generator) * 2 - 1
            mag = 0.5 + 0.5 * torch.rand(n, generator=generator, dtype=torch.float64)
            nudged = x.clone()
            nudged[where] += (size * sign * mag).to(device=x.device, dtype=x.dtype)
            call.tensors[i] = nudged
            moved += n
    return moved


def _replace_bound(bound: dict[str, Any], name: str, tensors: list[torch.Tensor], i: int) -> None:
    value = bound.get(name)
    if isinstance(value, torch.Tensor) and value.shape == tensors[i].shape:
        bound[name] = tensors[i]


def _slice_pointwise(call: BoundCall, use: list[int], budget: int) -> BoundCall | None:
    """The leading block of a pointwise operator's inputs, at most ``budget`` elements each."""
    tensors = [t for t in call.tensors]
    shapes = [tuple(t.shape) for t in tensors]
    ndim = max((len(s) for s in shapes), default=0)
    if ndim == 0:
        return None
    # Broadcast shape, right-aligned; keep whole trailing dims while the budget allows.
    full = [1] * ndim
    for s in shapes:
        for k, size in enumerate(s):
            d = ndim - len(s) + k
            full[d] = max(full[d], size)
    keep = [1] * ndim
    remaining = max(budget, 1)
    for d in range(ndim - 1, -1, -1):
        keep[d] = max(1, min(full[d], remaining))
        remaining = max(1, remaining // keep[d])
    sliced: list[torch.Tensor] = []
    for t in tensors:
        index = tuple(
            slice(0, 1 if size == 1 else keep[ndim - t.dim() + k]) for k, size in enumerate(t.shape)
        )
        sliced.append(t[index].clone())
    small = BoundCall.of(call.func, call.args, call.kwargs)
    small.tensors = sliced
    # Non-tensor arguments that encode sizes would make a slice wrong; pointwise ops have none.
    return small


def _check_dropping_underivable(
    call: BoundCall,
    use: list[int],
    settings: FiniteDifferenceSettings,
    pool: GaussianPool | None,
    underivable: set[str] | None = None,
) -> tuple[BackwardCheck, list[int], list[str]]:
    """Check with respect to ``use``, minus the inputs autograd refuses or ignores.

    ``underivable``: the argument names this operator is already known to have no derivative
    formula for (from an earlier call in the run), dropped up front; names found now are
    added. A missing formula is a property of the operator, not of the values, and finding
    one costs a forward that raises (two per eval-mode batch norm: its running statistics).

    Returns (check, the inputs differentiated, descriptions of those held fixed)."""
    fixed: list[str] = []
    known = underivable if underivable is not None else set()
    fixed.extend(f"{call.names[i]} (no derivative formula)" for i in use if call.names[i] in known)
    use = [i for i in use if call.names[i] not in known]
    while use:
        try:
            check = check_backward(
                call.function(use),
                [call.tensors[i] for i in use],
                settings,
                hold_unused=True,
                pool=pool,
            )
        except RuntimeError as exc:  # "the derivative for 'running_mean' is not implemented"
            match = _NOT_IMPLEMENTED.search(str(exc))
            drop = [] if match is None else [i for i in use if call.names[i] in match.groups()]
            if not drop:
                raise
            use = [i for i in use if i not in drop]
            fixed.append(f"{call.names[drop[0]]} (no derivative formula)")
            known.add(call.names[drop[0]])
            continue
        held = [use[k] for k in check.held_fixed]
        fixed.extend(f"{call.names[i]} (not differentiated by autograd)" for i in held)
        return check, [i for i in use if i not in held], fixed
    raise CaseSkipped("no floating-point input is differentiable")


def is_random(record: OpRecord) -> bool:
    """A random operator as called: tagged ``nondeterministic_seeded`` and not called with its
    randomness switched off (``dropout_p=0`` in attention, ``train=False`` in dropout)."""
    if torch.Tag.nondeterministic_seeded not in getattr(record.func, "tags", ()):
        return False
    bound = bind_schema(record.func, record.args, record.kwargs)
    if "dropout_p" in bound:
        return bool(bound["dropout_p"] != 0)
    if "train" in bound:
        return bool(bound["train"])
    return True


def _signature(record: OpRecord) -> str:
    """The operator and its non-tensor arguments: what a sliced full Jacobian depends on.

    Tensor ranks count only when the tensor inputs differ in shape (broadcasting): a pointwise
    operator whose tensor inputs all have one shape computes the same elementwise function at
    any rank, and its slice is the same contiguous block (``relu`` of a feature map and of a
    hidden layer's (N, C) output get one sliced full Jacobian, not two)."""
    shapes = {
        tuple(leaf.shape)
        for leaf in tree_flatten((record.args, record.kwargs))[0]
        if isinstance(leaf, torch.Tensor)
    }
    same_shape = len(shapes) <= 1

    def describe_arg(value: Any) -> str:
        if isinstance(value, torch.Tensor):
            return "T" if same_shape else f"T{value.dim()}"
        if isinstance(value, (list, tuple)):
            return "[" + ",".join(describe_arg(v) for v in value) + "]"
        return repr(value)

    return (
        record.op
        + "("
        + ",".join(describe_arg(a) for a in record.args)
        + repr(sorted(record.kwargs))
        + ")"
    )


def check_operator(
    record: OpRecord,
    settings: FiniteDifferenceSettings,
    sliced_done: set[str] | None = None,
    pool: GaussianPool | None = None,
    cases: dict[str, tuple[BoundCall, list[int]]] | None = None,
    underivable: dict[str, set[str]] | None = None,
) -> CheckItem:
    """Check one captured operator; never raises (an unusable case is ``not_computed``).

    ``sliced_done`` collects the signatures of pointwise operators already given a
    full-Jacobian check on a slice, so each distinct one gets it once per run; ``pool``
    shares the run's Gaussian directions; ``cases`` collects each distinct operator's
    prepared float64 case; ``underivable`` collects, per operator, the arguments it has no
    derivative formula for."""
    known = None if underivable is None else underivable.setdefault(record.op, set())
    subject = Subject(kind="operator", operator_id=record.id, op=record.op, module=record.module)
    func = record.func
    if is_random(record):
        return _skipped(subject, "random operator (no deterministic derivative to check)")
    try:
        call = BoundCall.of(func, to_float64(record.args), to_float64(record.kwargs))
        if not call.tensors:
            raise CaseSkipped("no floating-point tensor input")
        use = list(range(len(call.tensors)))
        nudged = nudge_off_kinks(record, call, use, settings.seed)
        main, use, fixed = _check_dropping_underivable(call, use, settings, pool, known)
        if cases is not None:
            cases.setdefault(record.op, (call, use))  # reused by second_order
        checks: list[tuple[str, BackwardCheck]] = [("captured input", main)]
        sliced_note = None
        n_in = sum(call.tensors[i].numel() for i in use)
        signature = ""
        if (
            n_in > settings.full_jacobian_max_numel
            and torch.Tag.pointwise in getattr(func, "tags", ())
            and (sliced_done is None or (signature := _signature(record)) not in sliced_done)
        ):
            if sliced_done is not None:
                sliced_done.add(signature)
            budget = min(SLICE_NUMEL, settings.full_jacobian_max_numel) // max(len(use), 1)
            small = _slice_pointwise(call, use, budget)
            if small is not None:
                small_fn = small.function(use)
                sliced_check = check_backward(
                    small_fn,
                    [small.tensors[i] for i in use],
                    settings,
                    mode="full_jacobian",
                    pool=pool,
                )
                checks.append(("representative slice", sliced_check))
                sliced_note = {
                    "from_shapes": [list(call.tensors[i].shape) for i in use],
                    "to_shapes": [list(small.tensors[i].shape) for i in use],
                }
    except (CaseSkipped, NotDifferentiable) as exc:
        return _skipped(subject, str(exc))
    except Exception as exc:  # the operator cannot be re-run alone in float64
        why = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
        return _check_in_captured_precision(record, settings, pool, subject, why, known)
    return _item(subject, checks, fixed, nudged, sliced_note, [call.names[i] for i in use])


# Central differences of a function that rounds to float32 inside are good to about 1e-4
# relative at the best step of the sweep; a 2 % error in a backward still stands far above.
CAPTURED_PRECISION_RTOL = 1e-2
CAPTURED_PRECISION_ATOL = 1e-4


def _check_in_captured_precision(
    record: OpRecord,
    settings: FiniteDifferenceSettings,
    pool: GaussianPool | None,
    subject: Subject,
    float64_failure: str,
    underivable: set[str] | None = None,
) -> CheckItem:
    """A kernel with no float64 implementation, checked as captured: the operator runs in its
    own precision inside a float64 shell, with tolerances for that precision. The item says
    so; if even that fails, it is ``not_computed`` with both reasons."""
    dtypes = [a.dtype for a in tree_flatten((record.args, record.kwargs))[0] if floating(a)]
    inner = dtypes[0] if dtypes else None
    if inner is None or inner == torch.float64:
        return _not_rerunnable(subject, float64_failure)
    loose = dataclasses.replace(
        settings,
        rtol=max(settings.rtol, CAPTURED_PRECISION_RTOL),
        atol=max(settings.atol, CAPTURED_PRECISION_ATOL),
    )
    try:
        call = BoundCall.of(record.func, to_float64(record.args), to_float64(record.kwargs))
        call.inner_dtype = inner
        use = list(range(len(call.tensors)))
        main, use, fixed = _check_dropping_underivable(call, use, loose, pool, underivable)
    except (CaseSkipped, NotDifferentiable) as exc:
        return _skipped(subject, str(exc))
    except Exception as exc:
        return _not_rerunnable(
            subject,
            f"{float64_failure}; in {str(inner).removeprefix('torch.')} too: "
            f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}",
        )
    label = f"captured input in {str(inner).removeprefix('torch.')} (no float64 kernel)"
    item = _item(subject, [(label, main)], fixed, 0, None, [call.names[i] for i in use])
    item.metrics["checked_dtype"] = str(inner).removeprefix("torch.")
    item.message += f"; float64 re-run impossible ({float64_failure[:120]})"
    return item


def _not_rerunnable(subject: Subject, why: str) -> CheckItem:
    return CheckItem(
        subject=subject,
        status="not_computed",
        message=f"could not re-run the operator alone in float64: {why}",
    )


def _skipped(subject: Subject, reason: str) -> CheckItem:
    """Nothing to check: not a failure, and not a measured pass either."""
    return CheckItem(
        subject=subject,
        status="not_computed",
        metrics={"skipped": True},
        message=f"skipped (not differentiable): {reason}",
    )


def _item(
    subject: Subject,
    checks: list[tuple[str, BackwardCheck]],
    fixed: list[str],
    nudged: int,
    sliced: dict[str, Any] | None,
    differentiated: list[str],
) -> CheckItem:
    passed = all(c.passed for _, c in checks)
    main = checks[0][1]
    worst = max(c.max_rel_error for _, c in checks)
    metrics = main.metrics()
    metrics["max_rel_error"] = finite_or_none(worst)
    metrics["full_jacobian_on_slice"] = sliced is not None
    metrics["kink_values_nudged"] = nudged
    details: dict[str, Any] = {
        "checks": [
            {
                "case": name,
                **c.metrics(),
                "error_curve": c.error_curve,
                "torch_gradcheck": c.torch_gradcheck,
            }
            for name, c in checks
        ],
        "differentiated_inputs": differentiated,
    }
    if fixed:
        details["fixed_inputs"] = fixed
    if sliced is not None:
        details["slice"] = sliced
    message = "; ".join(f"{name}: {describe(c)}" for name, c in checks)
    short = op_short_name(subject.op or "")
    if nudged and short in POLES:
        message += f"; {nudged} captured values next to the derivative's pole were nudged off it"
    elif nudged and short in SEAMS:
        message += (
            f"; {nudged} sampling coordinates on or next to the interpolation's seams (whole "
            "or half pixels) were nudged off them first"
        )
    elif nudged:
        message += f"; {nudged} captured values on a kink were nudged off it first (see kinks)"
    if sliced is not None:
        message += (
            f"; full Jacobian on a slice {sliced['to_shapes']} of inputs {sliced['from_shapes']}"
        )
    return CheckItem(
        subject=subject,
        status="pass" if passed else "fail",
        metrics=metrics,
        message=message,
        details=details,
    )


def run(ctx: CollectContext) -> CheckResult:
    """The ``gradcheck`` result for every captured operator."""
    settings = fd_settings(ctx)
    parameters = {
        "directions": settings.directions,
        "cotangents": settings.cotangents,
        "cotangents_per_direction_up_to_output_numel": settings.full_jacobian_max_out_numel,
        "seed": settings.seed,
        "eps": settings.eps,
        "eps_sweep": list(settings.eps_sweep),
        "atol": settings.atol,
        "rtol": settings.rtol,
        "full_jacobian_max_numel": settings.full_jacobian_max_numel,
        "dtype": "float64",
    }
    if ctx.operators is None:
        return CheckResult(
            check="gradcheck",
            status="not_computed",
            parameters=parameters,
            reason="the operator capture did not run, so there are no operators to check",
        )
    sliced_done: set[str] = set()
    pool = GaussianPool(settings.seed)
    cases: dict[str, tuple[BoundCall, list[int]]] = {}
    underivable: dict[str, set[str]] = {}
    items = [
        check_operator(record, settings, sliced_done, pool, cases, underivable)
        for record in ctx.operators
    ]
    # The float64, kink-nudged case of each distinct operator, for the second_order check.
    ctx.extras["gradcheck_cases"] = cases
    ctx.extras["gradient_pool"] = pool
    checked = [i for i in items if i.status in ("pass", "fail")]
    errors = [i.metrics.get("max_rel_error") for i in checked]
    finite = [e for e in errors if isinstance(e, float) and math.isfinite(e)]
    summary: dict[str, Any] = {
        "operators": len(items),
        "checked": len(checked),
        "skipped": sum(1 for i in items if i.metrics.get("skipped")),
        "not_computed": sum(
            1 for i in items if i.status == "not_computed" and not i.metrics.get("skipped")
        ),
        "failed": sum(1 for i in items if i.status == "fail"),
        "max_rel_error": max(finite) if finite else None,
    }
    return CheckResult(
        check="gradcheck", status="computed", parameters=parameters, summary=summary, items=items
    )
