"""How ``gradcheck`` turns a captured operator into a float64 case: which inputs to
differentiate (:func:`prepare_case`), captured values on or next to a kink nudged off it
(:func:`nudge_off_kinks`), the representative slice of a large pointwise operator
(:func:`slice_pointwise`, keyed by :func:`signature`), and which operators are random as
called (:func:`is_random`). Shared with ``second_order``, which re-runs the same cases.
"""

from __future__ import annotations

import re
from typing import Any

import torch
from torch.utils._pytree import tree_flatten, tree_map

from attest.collection.capture.aten_args import BoundCall, bind_schema, floating, op_short_name
from attest.collection.capture.records import OpRecord
from attest.collection.gradients.domains import DOMAINS, domain_nudges
from attest.collection.gradients.finite_differences import rms_or_one
from attest.collection.gradients.kink_detectors import DETECTORS, SEAMS, scan_kinks

__all__ = [
    "KINK_NUDGE",
    "KINK_REACH",
    "NOT_IMPLEMENTED",
    "SLICE_NUMEL",
    "CaseSkipped",
    "is_random",
    "nudge_off_kinks",
    "prepare_case",
    "signature",
    "slice_pointwise",
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
# What autograd says when an argument has no derivative formula (batch-norm running stats).
NOT_IMPLEMENTED = re.compile(
    r"derivative for '?([A-Za-z_0-9.]+)'? is not implemented"
    r"|not differentiable with respect to argument '([A-Za-z_0-9.]+)'"
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
            match = NOT_IMPLEMENTED.search(str(exc))
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
    if (name not in DETECTORS and name not in SEAMS and name not in DOMAINS) or not use:
        return 0  # no non-differentiable points nor domain edges: nothing to scan
    generator = torch.Generator().manual_seed(seed + 7919)
    moved = 0
    # Reach and nudge sizes from the captured values' RMS, once: a nudge moves the RMS by a
    # negligible amount, and each RMS is a pass over the whole input.
    rms = {i: rms_or_one(call.tensors[i]) for i in use}
    reach = KINK_REACH * max(rms.values())
    if name in DOMAINS:
        return _into_domain(name, call, use, rms, reach, generator)
    for _ in range(4):
        bound = _bound_now(call)
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


def _bound_now(call: BoundCall) -> dict[str, Any]:
    """The call's arguments by schema name, with the (possibly nudged) tensors it holds now."""
    bound = bind_schema(call.func, call.args, call.kwargs)
    for i in range(len(call.tensors)):
        _replace_bound(bound, call.names[i], call.tensors, i)
    return bound


def _into_domain(
    name: str,
    call: BoundCall,
    use: list[int],
    rms: dict[int, float],
    reach: float,
    generator: torch.Generator,
) -> int:
    """Values within ``reach`` of a pole or a domain edge of operator ``name`` moved into the
    domain (:mod:`~attest.collection.gradients.domains`); the count."""
    index = {call.names[i]: i for i in use}
    sizes = {arg: KINK_NUDGE * rms[i] for arg, i in index.items()}
    moved = domain_nudges(name, _bound_now(call), reach, sizes, generator)
    count = 0
    for arg, nudged in moved.items():
        i = index[arg]
        if nudged.shape == call.tensors[i].shape:
            count += int((nudged != call.tensors[i]).sum())
            call.tensors[i] = nudged
    return count


def _replace_bound(bound: dict[str, Any], name: str, tensors: list[torch.Tensor], i: int) -> None:
    value = bound.get(name)
    if isinstance(value, torch.Tensor) and value.shape == tensors[i].shape:
        bound[name] = tensors[i]


def slice_pointwise(call: BoundCall, use: list[int], budget: int) -> BoundCall | None:
    """The leading block of a pointwise operator's inputs, at most ``budget`` elements each.
    Every tensor argument is cut to the same block, floating or not (a ``masked_fill``'s bool
    mask broadcast against its scores), so the sliced call's shapes still broadcast."""
    others = [
        leaf
        for leaf in tree_flatten((call.args, call.kwargs))[0]
        if isinstance(leaf, torch.Tensor) and not floating(leaf)
    ]
    shapes = [tuple(t.shape) for t in [*call.tensors, *others]]
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

    def cut(t: Any) -> Any:
        if not isinstance(t, torch.Tensor) or t.dim() == 0:
            return t
        index = tuple(
            slice(0, 1 if size == 1 else keep[ndim - t.dim() + k]) for k, size in enumerate(t.shape)
        )
        return t[index].clone()

    args, kwargs = tree_map(cut, (call.args, call.kwargs))
    small = BoundCall.of(call.func, args, kwargs)
    # the call's own floating tensors, cut: they may differ from its arguments (kinks nudged)
    small.tensors = [cut(t) for t in call.tensors]
    # Non-tensor arguments that encode sizes would make a slice wrong; pointwise ops have none.
    return small


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


def signature(record: OpRecord) -> str:
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
