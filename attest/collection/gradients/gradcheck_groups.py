"""``gradcheck``'s operators in independent groups: the pieces a collect split over workers
spreads (:mod:`attest.collection.pieces`), and the unit a single process checks them in.

The captured operators are cut, in their order, into at most :data:`GROUPS` contiguous groups
of about equal estimated work (:func:`operator_work`, from the captured shapes only, so every
process cuts the same groups). Each group is checked as a run of its own: its own Gaussian
directions (seeded from the collect's seed and the group's key, :func:`group_seed`), its
own record of which pointwise signatures already had a sliced full Jacobian and which
arguments have no derivative formula. So a group's items are the same whichever process
checks it, and whatever was checked before it.
"""

from __future__ import annotations

import math

import torch
from torch.utils._pytree import tree_flatten

from attest.collection.capture.aten_args import floating
from attest.collection.capture.records import OpRecord
from attest.collection.capture.tensors import flat_tensors
from attest.collection.context import CollectContext
from attest.collection.pieces import piece_seed

__all__ = [
    "GROUPS",
    "case_signature",
    "group_key",
    "group_seed",
    "identical_cases",
    "operator_groups",
    "operator_work",
]

# At most this many groups: enough to spread over the workers of one machine, few enough that
# each keeps sharing its directions' buffer over many small operators.
GROUPS = 16


def group_key(index: int) -> str:
    """The piece key of group ``index`` (sorts in operator order)."""
    return f"gradcheck/{index:03d}"


def group_seed(seed: int, index: int) -> int:
    """The seed of group ``index``'s directions: from the collect's seed and the group's key."""
    return piece_seed(seed, group_key(index))


_INNER_DIM_OPS = ("aten.mm.", "aten.addmm.", "aten.bmm.", "aten.baddbmm.", "aten.matmul.")


def operator_work(record: OpRecord) -> float:
    """A rough, shape-only estimate of what checking ``record`` costs (its evaluations touch
    every input and output element; a convolution or matrix product does that many
    multiply-adds per output element). Only balances the groups, never judges anything."""
    tensors = [t for t in flat_tensors((record.args, record.kwargs)) if floating(t)]
    elements = sum(t.numel() for t in tensors)
    outputs = sum(math.prod(shape) for shape in record.output_shapes)
    work = float(elements + outputs)
    if "convolution" in record.op and len(tensors) >= 2 and tensors[1].dim() >= 3:
        weight = tensors[1]
        work += float(outputs) * math.prod(weight.shape[1:])
    elif record.op.startswith(_INNER_DIM_OPS) and tensors:
        work += float(outputs) * float(tensors[-1].shape[0] if tensors[-1].dim() else 1)
    return work


def case_signature(record: OpRecord) -> tuple[object, ...] | None:
    """What an ATen operator's check depends on besides the values: the overload, and every
    argument's structure, tensors by dtype, shape and strides, the rest by value. None for
    an operator outside ``aten`` (a custom op's backward is the user's code: each call is
    checked on its own)."""
    if not record.op.startswith("aten."):
        return None
    leaves, spec = tree_flatten((record.args, record.kwargs))
    described: list[object] = []
    for leaf in leaves:
        if isinstance(leaf, torch.Tensor):
            described.append((leaf.dtype, tuple(leaf.shape), tuple(leaf.stride())))
        else:
            described.append(repr(leaf))
    return (record.op, str(spec), tuple(described))


def identical_cases(ctx: CollectContext) -> dict[int, int]:
    """For each captured ATen call whose :func:`case_signature` an earlier call already has,
    that earlier call's id (its first one).

    Such a call is not checked again: its backward is the same derivative formula, run by
    the same kernel on inputs of the same dtypes, shapes and strides, with the same
    non-tensor arguments, so a finite-difference check of it asks what the first call's
    check answered (the repeated blocks of a network: six transformer layers of a ViT-S, the
    same-resolution convolutions of a U-Net's encoder and decoder). What does depend on the
    values, an input on a kink, is the ``kinks`` check's, which scans every call. Decided
    from the captured shapes alone, so every process decides the same."""
    cached = ctx.extras.get("gradcheck_identical")
    if cached is not None and cached[0] is ctx.operators:
        return dict(cached[1])
    first: dict[tuple[object, ...], int] = {}
    same: dict[int, int] = {}
    for record in ctx.operators or []:
        key = case_signature(record)
        if key is None:
            continue
        if key in first:
            same[record.id] = first[key]
        else:
            first[key] = record.id
    ctx.extras["gradcheck_identical"] = (ctx.operators, same)
    return dict(same)


def operator_groups(ctx: CollectContext) -> list[list[OpRecord]]:
    """The captured operators in at most :data:`GROUPS` contiguous groups of about equal
    estimated work (none when there was no capture; a call :func:`identical_cases` leaves
    unchecked weighs nothing)."""
    records = list(ctx.operators or [])
    if not records:
        return []
    cached = ctx.extras.get("gradcheck_groups")
    if cached is not None and cached[0] is ctx.operators:
        return list(cached[1])
    same = identical_cases(ctx)
    work = [0.0 if r.id in same else operator_work(r) for r in records]
    count = min(GROUPS, len(records))
    total = sum(work) or 1.0
    groups: list[list[OpRecord]] = [[]]
    done = 0.0
    for record, w in zip(records, work, strict=True):
        # a new group once the finished ones hold their share of the work (never empty)
        if groups[-1] and len(groups) < count and done >= total * len(groups) / count:
            groups.append([])
        groups[-1].append(record)
        done += w
    ctx.extras["gradcheck_groups"] = (ctx.operators, groups)
    return list(groups)
