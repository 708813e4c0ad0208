"""The ``topology`` check: is the operator sequence the same for every probe input?

Each probe example runs alone (batch of one) under the operator capture, forward only; the
sequences of ``(operator, module)`` are compared with the first example's. Data-dependent
Python control flow shows up as a different sequence: the check reports, per diverging
example, the first diverging operator and the module whose code branched (the deepest module
containing both diverging operators).

A model with fixed inputs (masks, lengths, the ids of an embedded input) may branch on them by
design: transformers drops the attention mask of an example that has no padding, so that
example takes another path. The checks hold those inputs fixed, so a path they alone set never
changes under the checks' perturbations. A diverging example is therefore run twice more with
the fixed inputs swapped (the row column of ``x``: attest/spec/model_call.py): its
differentiated values with its reference's fixed inputs, and the reference's with its own.
When the first takes the reference's path and the second the example's, the path follows the
fixed inputs alone, and the item passes with both swaps recorded (``swap_to_reference``,
``swap_from_reference``: each swap's first divergence, None when it takes the expected path);
otherwise the differentiated input changes the path and it fails.

A failed topology check sets ``ctx.topology_ok`` to
False; the other checks then mark their per-operator results, which assume one alignment of
operators across inputs, as not computed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from attest.collection.capture.run import run_model
from attest.collection.context import CollectContext
from attest.evidence.model import CheckItem, CheckResult, Metric, Subject

__all__ = ["common_module", "first_divergence", "run"]

Sequence_ = list[tuple[str, str]]


def first_divergence(a: Sequence_, b: Sequence_) -> int | None:
    """Index of the first position where two operator sequences differ (None if equal)."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    if len(a) != len(b):
        return min(len(a), len(b))
    return None


def common_module(a: str | None, b: str | None) -> str:
    """The deepest module path containing both ``a`` and ``b`` ("" is the root)."""
    if a is None or b is None:
        return a if b is None and a is not None else (b or "")
    parts_a, parts_b = a.split(".") if a else [], b.split(".") if b else []
    common: list[str] = []
    for x, y in zip(parts_a, parts_b, strict=False):
        if x != y:
            break
        common.append(x)
    return ".".join(common)


def _at(seq: Sequence_, i: int) -> dict[str, str | None]:
    if i < len(seq):
        return {"op": seq[i][0], "module": seq[i][1]}
    return {"op": None, "module": None}


def _class_coverage(spec: Any, classes: int | None) -> dict[str, Metric]:
    """For ``target: label``: how many of the model's output classes the probe's labels cover
    (``probe_classes_missing``, which the ``probe_class_coverage`` rule holds at 0). Nothing
    for other targets: the rule then does not apply."""
    if spec.target != "label" or spec.labels is None or classes is None:
        return {}
    present = {int(v) for v in spec.labels.reshape(-1).tolist() if 0 <= int(v) < classes}
    return {
        "model_classes": classes,
        "probe_classes": len(present),
        "probe_classes_missing": classes - len(present),
    }


def _signature(spec: Any, signature: int) -> dict[str, Metric]:
    """The item metrics naming an example's shape signature (``dynamic:`` only)."""
    if not spec.signatures:
        return {}
    return {"shape_signature": spec.signature_labels[signature]}


# (example, its reference) -> each swap's first divergence (:func:`_swap_divergences`), or None
# when the spec has no fixed inputs to swap
Swapper = Callable[[int, int], tuple[int | None, int | None] | None]


def _swap_divergences(
    ctx: CollectContext, model: Any, x: Any, sequences: list[Sequence_ | None]
) -> Swapper:
    """The swap runs of the module docstring, for a spec whose call has fixed inputs."""
    call = ctx.spec.call
    fixed = call is not None and call.rows and any(p.role != "attributed" for p in call.parts)

    def path(i: int, row: int) -> Sequence_ | None:
        xi = x[i : i + 1].clone()
        xi[:, -1] = row  # the row column: the fixed inputs of probe example ``row``
        outcome = run_model(model, xi, ctx.spec, (), backward=False, seed=ctx.settings.seed)
        return None if outcome.failure is not None else outcome.ops

    def swaps(i: int, ref: int) -> tuple[int | None, int | None] | None:
        if not fixed:
            return None
        own, reference = sequences[i], sequences[ref]
        to_ref, from_ref = path(i, ref), path(ref, i)
        if own is None or reference is None or to_ref is None or from_ref is None:
            return None
        return first_divergence(reference, to_ref), first_divergence(own, from_ref)

    return swaps


def _compare(
    spec: Any, sequences: list[Sequence_ | None], items: list[CheckItem], swaps: Swapper
) -> tuple[list[int], Sequence_ | None, int, int]:
    """Each example's sequence against its reference; appends the items and returns the
    diverging examples, the first sequence, the number of shape signatures and the number of
    examples whose path follows their fixed inputs alone."""
    n = len(sequences)
    # ``dynamic:``: each example is compared with the first of its shape signature (the same
    # lengths), since examples of different lengths take different paths by design
    signatures = spec.signatures or [0] * n
    references: dict[int, int] = {}
    for i, seq in enumerate(sequences):
        if seq is not None:
            references.setdefault(signatures[i], i)
    reference = next((s for s in sequences if s is not None), None)
    diverging: list[int] = []
    by_fixed = 0
    for i, seq in enumerate(sequences):
        if seq is None:
            continue
        ref_index = references[signatures[i]]
        own = sequences[ref_index]
        assert own is not None
        k = first_divergence(own, seq)
        if k is None:
            items.append(
                CheckItem(
                    subject=Subject(kind="input", input_index=i),
                    status="pass",
                    metrics={
                        "operators": len(seq),
                        "first_divergence": None,
                        **_signature(spec, signatures[i]),
                    },
                )
            )
            continue
        ref_at, this_at = _at(own, k), _at(seq, k)
        module = common_module(ref_at["module"], this_at["module"])
        swapped = swaps(i, ref_index)
        if swapped == (None, None):
            by_fixed += 1
            items.append(
                CheckItem(
                    subject=Subject(kind="input", input_index=i, module=module),
                    status="pass",
                    metrics={
                        "operators": len(seq),
                        "first_divergence": k,
                        "swap_to_reference": None,
                        "swap_from_reference": None,
                        **_signature(spec, signatures[i]),
                    },
                    message=(
                        f"input {i} takes a different path from input {ref_index} at operator "
                        f"{k} in module {module or '<root>'!r}, set by the fixed inputs alone: "
                        f"with input {ref_index}'s fixed inputs it takes input {ref_index}'s "
                        f"path, and input {ref_index} with its fixed inputs takes its path"
                    ),
                    details={"reference_input": ref_index, "reference": ref_at, "this": this_at},
                )
            )
            continue
        diverging.append(i)
        swap_metrics: dict[str, Metric] = (
            {}
            if swapped is None
            else {"swap_to_reference": swapped[0], "swap_from_reference": swapped[1]}
        )
        items.append(
            CheckItem(
                subject=Subject(
                    kind="input", input_index=i, module=module, operator_id=k, op=this_at["op"]
                ),
                status="fail",
                metrics={
                    "operators": len(seq),
                    "first_divergence": k,
                    **swap_metrics,
                    **_signature(spec, signatures[i]),
                },
                message=(
                    f"input {i} takes a different path from input {ref_index} at operator {k}: "
                    f"{this_at['op']} @ {this_at['module'] or '<root>'} instead of "
                    f"{ref_at['op']} @ {ref_at['module'] or '<root>'} (data-dependent control flow "
                    f"in module {module or '<root>'!r})"
                ),
                details={"reference_input": ref_index, "reference": ref_at, "this": this_at},
            )
        )
    return diverging, reference, len(references), by_fixed


def run(ctx: CollectContext) -> list[CheckResult]:
    """Check runner for ``topology``."""
    started = time.perf_counter()
    spec = ctx.spec
    failure = ctx.profiler.failure
    if failure is not None:
        ctx.topology_ok = False
        ctx.topology_reason = f"not computed: {failure.describe()}"
        return [CheckResult(check="topology", status="error", reason=failure.describe())]
    model = ctx.fresh_model()
    x = ctx.inputs()
    n = int(x.shape[0])
    sequences: list[Sequence_ | None] = []
    items: list[CheckItem] = []
    classes: int | None = None  # the model's class dimension (output dim 1), once seen
    for i in range(n):
        labels = spec.labels[i : i + 1] if spec.labels is not None else None
        outcome = run_model(
            model, x[i : i + 1], spec, (), labels=labels, backward=False, seed=ctx.settings.seed
        )
        if outcome.failure is not None:
            sequences.append(None)
            items.append(
                CheckItem(
                    subject=Subject(kind="input", input_index=i, module=outcome.failure.module),
                    status="error",
                    metrics={"operators": len(outcome.ops)},
                    message=outcome.failure.describe(),
                )
            )
            continue
        sequences.append(outcome.ops)
        if classes is None and outcome.output is not None and outcome.output.dim() >= 2:
            classes = int(outcome.output.shape[1])
    swaps = _swap_divergences(ctx, model, x, sequences)
    diverging, reference, signature_count, by_fixed = _compare(spec, sequences, items, swaps)
    items.sort(key=lambda item: item.subject.input_index or 0)
    errors = [item for item in items if item.status == "error"]
    batch = [(r.op, r.module) for r in ctx.operators or []]
    batch_k = first_divergence(batch, reference) if reference is not None and batch else None
    summary: dict[str, Metric] = {
        "inputs": n,
        "diverging_inputs": len(diverging),
        "failed_inputs": len(errors),
        "operators_per_input": len(reference) if reference is not None else None,
        "batch_matches_inputs": batch_k is None if reference is not None else None,
        **_class_coverage(spec, classes),
        **({"shape_signatures": signature_count} if spec.signatures else {}),
        **({"paths_set_by_fixed_inputs": by_fixed} if by_fixed else {}),
    }
    if diverging or errors or reference is None:
        ctx.topology_ok = False
        first = next(item for item in items if item.status in ("fail", "error"))
        ctx.topology_reason = (
            f"topology failed: {len(diverging)} of {n} probe inputs take a different operator "
            f"path, {len(errors)} raise; first: {first.message}"
        )
    else:
        ctx.topology_ok = True
        ctx.topology_reason = None
    return [
        CheckResult(
            check="topology",
            status="computed",
            reason=ctx.topology_reason,
            parameters={
                "mode": "each probe input alone, forward pass",
                "compared": "(operator, module) sequence"
                + (", within each shape signature (dynamic:)" if spec.signatures else ""),
            },
            summary=summary,
            items=items,
            duration_s=round(time.perf_counter() - started, 6),
        )
    ]
