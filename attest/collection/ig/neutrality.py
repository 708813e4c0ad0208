"""``ig_baseline``'s rule for one input: how much the model's output at the baseline already
says (a classifier: the target's softmax probability and the entropy at the baseline; any
other output: ``|F(b)| / |F(x)|``), and the same rule applied head by head when ``heads:``
gives the model several outputs (docs/spec.md): each head is judged as the output it is (a
classification head by its softmax, a regression head by its ratio, a head with a target
function by the ratio of that function's F), not their sum.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from attest.collection.context import CheckSettings
from attest.collection.ig.path_checks import finite_or_none
from attest.collection.ig.readings import read_output, target_reading
from attest.evidence.model import ItemStatus
from attest.spec.model_call import ModelCall

__all__ = ["head_judgements", "judge_neutrality", "target_probability_limit"]

Judgement = tuple[ItemStatus, str, dict[str, Any]]
_ORDER: dict[str, int] = {"pass": 0, "warn": 1, "fail": 2}


def target_probability_limit(share: float, classes: int) -> float:
    """The baseline's target probability at which ``ig_baseline`` fails: ``share`` of the way
    from uniform (``1/C``) to certain (1). With the default share 0.5 it is ``(1 + 1/C) / 2``:
    0.75 for a binary classifier (0.5 is its decision boundary, where a neutral baseline
    sits), 0.55 for ten classes."""
    uniform = 1.0 / max(1, classes)
    return uniform + float(share) * (1.0 - uniform)


def judge_neutrality(
    settings: CheckSettings, chosen: dict[str, Any], i: int, classes: int
) -> Judgement:
    """Input ``i``'s status, message and metrics from :func:`baseline_neutrality`'s readings
    of an output with ``classes`` classes."""
    metrics = {
        k: finite_or_none(v[i]) if isinstance(v, np.ndarray) else v for k, v in chosen.items()
    }
    if chosen["classifier"]:
        p_b = chosen["baseline_target_probability"][i]
        entropy = chosen["baseline_entropy_ratio"][i]
        limit = target_probability_limit(settings.ig_baseline_max_target_probability, classes)
        metrics["target_probability_limit"] = limit
        if p_b >= limit:
            return (
                "fail",
                (
                    f"the model reads the baseline as the target class (p = {p_b:.3f} >= "
                    f"{limit:.3f}, {settings.ig_baseline_max_target_probability:g} of the way "
                    f"from uniform 1/{classes} to certain)"
                ),
                metrics,
            )
        if entropy < settings.ig_baseline_min_entropy_ratio:
            return (
                "warn",
                (f"softmax at the baseline is far from uniform (entropy ratio {entropy:.3f})"),
                metrics,
            )
        return "pass", f"baseline near uniform (entropy ratio {entropy:.3f})", metrics
    ratio = chosen["baseline_output_ratio"][i]
    status: ItemStatus = (
        "fail"
        if not np.isfinite(ratio) or ratio > settings.ig_baseline_max_output_ratio
        else "pass"
    )
    f_b, f_x = chosen["f_baseline"][i], chosen["f_input"][i]
    message = f"|F(baseline)| is {ratio:.3g} of |F(x)| (F(baseline) = {f_b:.3g}, F(x) = {f_x:.3g})"
    if status == "fail":
        # the rule reads F = 0 as "no evidence": say so, since a target function whose neutral
        # value is not 0 (a log-probability's is log(1/C)) fails it by construction
        message += (
            "; the rule takes F = 0 as the neutral output: write F to be 0 where the model has "
            "no preference (a log-probability: add log C; a score defined up to a constant, "
            "such as a Cox log-hazard: subtract its mean over the training data)"
        )
    return status, message, metrics


def head_judgements(
    call: ModelCall,
    settings: CheckSettings,
    out_baseline: torch.Tensor,
    out_input: torch.Tensor,
    rows: torch.Tensor,
) -> list[Judgement]:
    """Per input, each head judged on its own output (``[F | heads]`` split back), the worst
    status of the heads, their messages named, and their metrics prefixed by the head."""
    per_head = []
    for head, b, x in zip(call.heads, call.split(out_baseline), call.split(out_input), strict=True):
        if head.target_fn is not None:
            # judged on the F its target function reads, not on the whole output it reads it
            # from (a causal LM's logits at every position, summed, say nothing of F)
            b, x = call.head_value(head, b, rows)[:, None], call.head_value(head, x, rows)[:, None]
        classes = call.head_classes(head, rows)
        labels = None if head.labels is None else call.probe.get(head.labels)
        reading, count = read_output(b, x, classes, target_reading(labels))
        per_head.append((head.name, reading, count))
    judged: list[Judgement] = []
    for i in range(int(rows.shape[0])):
        parts = [(name, judge_neutrality(settings, r, i, c)) for name, r, c in per_head]
        status = max((j[0] for _, j in parts), key=lambda s: _ORDER.get(s, 2))
        message = "; ".join(f"{name}: {j[1]}" for name, j in parts)
        metrics = {f"{name}.{k}": v for name, j in parts for k, v in j[2].items()}
        judged.append((status, message, metrics))
    return judged
