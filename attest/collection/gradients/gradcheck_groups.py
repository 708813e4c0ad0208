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

from attest.collection.capture.aten_args import floating
from attest.collection.capture.records import OpRecord
from attest.collection.capture.tensors import flat_tensors
from attest.collection.context import CollectContext
from attest.collection.pieces import piece_seed

__all__ = ["GROUPS", "group_key", "group_seed", "operator_groups", "operator_work"]

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


def operator_groups(ctx: CollectContext) -> list[list[OpRecord]]:
    """The captured operators in at most :data:`GROUPS` contiguous groups of about equal
    estimated work (none when there was no capture)."""
    records = list(ctx.operators or [])
    if not records:
        return []
    cached = ctx.extras.get("gradcheck_groups")
    if cached is not None and cached[0] is ctx.operators:
        return list(cached[1])
    work = [operator_work(r) for r in records]
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
