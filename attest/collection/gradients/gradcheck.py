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
are recorded per item. An ATen call identical to an earlier one in everything but the values
(operator, dtypes, shapes, strides, non-tensor arguments: a repeated block) is not re-run; it
takes the earlier call's verdict and says so (:func:`~attest.collection.gradients.gradcheck_groups.identical_cases`).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import torch
from torch.utils._pytree import tree_flatten

from attest.collection.capture.aten_args import BoundCall, floating, to_float64
from attest.collection.context import CollectContext, OpRecord
from attest.collection.gradients.finite_differences import (
    BackwardCheck,
    FiniteDifferenceSettings,
    GaussianPool,
    NotDifferentiable,
    check_backward,
)
from attest.collection.gradients.gradcheck_cases import (
    NOT_IMPLEMENTED,
    SLICE_NUMEL,
    CaseSkipped,
    is_random,
    nudge_off_kinks,
    prepare_case,
    signature,
    slice_pointwise,
)
from attest.collection.gradients.gradcheck_groups import (
    GROUPS,
    group_seed,
    identical_cases,
    operator_groups,
)
from attest.collection.gradients.gradcheck_items import (
    IDENTICAL_TO,
    identical_item,
    inherit_identical,
    not_rerunnable_item,
    operator_item,
    skipped_item,
)
from attest.collection.gradients.known_rules import follow_known_rules, known_rule
from attest.errors import AttestError
from attest.evidence.model import CheckItem, CheckResult, Subject

__all__ = [
    "CaseSkipped",
    "GradcheckCases",
    "check_group",
    "check_operator",
    "fd_settings",
    "is_random",
    "nudge_off_kinks",
    "prepare_case",
    "result_of",
    "run",
]


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
        one_sided=_difference(extra.get("gradcheck_difference", "forward")) == "forward",
    )


def _difference(value: object) -> str:
    if value not in ("forward", "central"):
        raise AttestError(
            f"gradcheck_difference is {value!r}: it must be 'forward' (forward differences "
            "first, central ones where they fail; the default) or 'central'"
        )
    return str(value)


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
                follow_known_rules(call, use, call.function(use))[0],
                [call.tensors[i] for i in use],
                settings,
                hold_unused=True,
                pool=pool,
            )
        except RuntimeError as exc:  # "the derivative for 'running_mean' is not implemented"
            match = NOT_IMPLEMENTED.search(str(exc))
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


def check_operator(
    record: OpRecord,
    settings: FiniteDifferenceSettings,
    sliced_done: set[str] | None = None,
    pool: GaussianPool | None = None,
    cases: dict[str, tuple[OpRecord, list[int]]] | None = None,
    underivable: dict[str, set[str]] | None = None,
) -> CheckItem:
    """Check one captured operator; never raises (an unusable case is ``not_computed``).

    ``sliced_done`` collects the signatures of pointwise operators already given a
    full-Jacobian check on a slice, so each distinct one gets it once per run; ``pool``
    shares the run's Gaussian directions; ``cases`` collects, for each distinct operator, the
    call whose float64 case was checked and the inputs it differentiates; ``underivable`` collects, per operator, the arguments it has no
    derivative formula for."""
    known = None if underivable is None else underivable.setdefault(record.op, set())
    subject = Subject(kind="operator", operator_id=record.id, op=record.op, module=record.module)
    func = record.func
    if is_random(record):
        return skipped_item(subject, "random operator (no deterministic derivative to check)")
    try:
        call = BoundCall.of(func, to_float64(record.args), to_float64(record.kwargs))
        if not call.tensors:
            raise CaseSkipped("no floating-point tensor input")
        use = list(range(len(call.tensors)))
        nudged = nudge_off_kinks(record, call, use, settings.seed)
        main, use, fixed = _check_dropping_underivable(call, use, settings, pool, known)
        if cases is not None:
            cases.setdefault(record.op, (record, use))  # second_order rebuilds the case
        checks: list[tuple[str, BackwardCheck]] = [("captured input", main)]
        sliced_note = None
        n_in = sum(call.tensors[i].numel() for i in use)
        key = ""
        if (
            n_in > settings.full_jacobian_max_numel
            and torch.Tag.pointwise in getattr(func, "tags", ())
            and (sliced_done is None or (key := signature(record)) not in sliced_done)
        ):
            if sliced_done is not None:
                sliced_done.add(key)
            budget = min(SLICE_NUMEL, settings.full_jacobian_max_numel) // max(len(use), 1)
            small = slice_pointwise(call, use, budget)
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
        return skipped_item(subject, str(exc))
    except Exception as exc:  # the operator cannot be re-run alone in float64
        why = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
        return _check_in_captured_precision(record, settings, pool, subject, why, known)
    item = operator_item(subject, checks, fixed, nudged, sliced_note, [call.names[i] for i in use])
    rule = known_rule(call, use)
    if rule is not None:
        item.metrics["known_rule"] = rule[0]
        item.message += f"; compared with {rule[1]}"
    return item


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
        return not_rerunnable_item(subject, float64_failure)
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
        return skipped_item(subject, str(exc))
    except Exception as exc:
        return not_rerunnable_item(
            subject,
            f"{float64_failure}; in {str(inner).removeprefix('torch.')} too: "
            f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}",
        )
    label = f"captured input in {str(inner).removeprefix('torch.')} (no float64 kernel)"
    item = operator_item(subject, [(label, main)], fixed, 0, None, [call.names[i] for i in use])
    item.metrics["checked_dtype"] = str(inner).removeprefix("torch.")
    item.message += f"; float64 re-run impossible ({float64_failure[:120]})"
    return item


def parameters_of(settings: FiniteDifferenceSettings) -> dict[str, Any]:
    """The ``gradcheck`` result's parameters."""
    return {
        "directions": settings.directions,
        "cotangents": settings.cotangents,
        "cotangents_per_direction_up_to_output_numel": settings.full_jacobian_max_out_numel,
        "seed": settings.seed,
        "eps": settings.eps,
        "eps_sweep": list(settings.eps_sweep),
        "difference": "forward, central where it fails" if settings.one_sided else "central",
        "atol": settings.atol,
        "rtol": settings.rtol,
        "full_jacobian_max_numel": settings.full_jacobian_max_numel,
        "dtype": "float64",
        # each group of operators draws its directions from its own seed
        "operator_groups": GROUPS,
        "group_seed": "53 bits of sha256 of (seed, 'gradcheck/NNN'), the group's key",
        "identical_calls": "an ATen call with the operator, argument structure, dtypes, "
        "shapes, strides and non-tensor arguments of an earlier call takes that call's "
        "verdict (one derivative formula, one kernel); it is not checked again",
    }


def check_group(
    ctx: CollectContext,
    index: int,
    cases: dict[str, tuple[OpRecord, list[int]]] | None = None,
) -> list[CheckItem]:
    """The items of operator group ``index`` (:mod:`~attest.collection.gradients.gradcheck_groups`),
    checked as a run of its own, its directions drawn from the group's seed; ``cases``
    collects, for each distinct operator, the call checked and the inputs it differentiates."""
    settings = fd_settings(ctx)
    sliced_done: set[str] = set()
    pool = GaussianPool(group_seed(settings.seed, index))
    underivable: dict[str, set[str]] = {}
    found: dict[str, tuple[OpRecord, list[int]]] = {} if cases is None else cases
    same = identical_cases(ctx)
    group = operator_groups(ctx)[index]
    items = {r.id: identical_item(r, same[r.id]) for r in group if r.id in same}
    for record in ctx.paged([r for r in group if r.id not in same]):
        items[record.id] = check_operator(record, settings, sliced_done, pool, found, underivable)
    return [items[r.id] for r in group]


def result_of(ctx: CollectContext, items: list[CheckItem]) -> CheckResult:
    """The ``gradcheck`` result from every group's items, in operator order."""
    parameters = parameters_of(fd_settings(ctx))
    if ctx.operators is None:
        return CheckResult(
            check="gradcheck",
            status="not_computed",
            parameters=parameters,
            reason="the operator capture did not run, so there are no operators to check",
        )
    items = inherit_identical(items)
    own = [i for i in items if IDENTICAL_TO not in i.metrics]
    checked = [i for i in own if i.status in ("pass", "fail")]
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
        "identical_calls": len(items) - len(own),
    }
    return CheckResult(
        check="gradcheck", status="computed", parameters=parameters, summary=summary, items=items
    )


class GradcheckCases(dict[str, tuple[OpRecord, list[int]]]):
    """For each distinct operator, the call whose float64 case gradcheck checked (its first
    call that got one) and the inputs it differentiates, for ``second_order`` (which rebuilds
    the case); found when first asked for, by checking that operator's calls as gradcheck
    does, so it is the same in whatever process the groups ran (``second_order`` asks only
    when it localizes a failure or probes every operator)."""

    def __init__(self, ctx: CollectContext) -> None:
        super().__init__()
        self._ctx = ctx
        self._tried: set[str] = set()

    def __contains__(self, op: object) -> bool:
        if isinstance(op, str) and op not in self._tried and not super().__contains__(op):
            self._tried.add(op)
            self._prepare(op)
        return super().__contains__(op)

    def _prepare(self, op: str) -> None:
        settings = fd_settings(self._ctx)
        for record in self._ctx.operators or []:
            if record.op == op:
                found: dict[str, tuple[OpRecord, list[int]]] = {}
                check_operator(record, settings, set(), GaussianPool(settings.seed), found)
                if op in found:
                    self[op] = found[op]
                    return


def run(ctx: CollectContext) -> CheckResult:
    """The ``gradcheck`` result for every captured operator, group by group (and each distinct
    operator's case in ``ctx.gradients.gradcheck_cases``, for ``second_order``)."""
    cases = GradcheckCases(ctx)
    items = [i for g in range(len(operator_groups(ctx))) for i in check_group(ctx, g, cases)]
    ctx.gradients.gradcheck_cases = cases
    return result_of(ctx, items)
