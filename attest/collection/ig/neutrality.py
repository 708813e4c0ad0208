"""``ig_baseline``'s rule for one input: how much the model's output at the baseline already
says (a classifier: the target's softmax probability and the entropy at the baseline; any
other output: ``|F(b)| / |F(x)|``), and the same rule applied head by head when ``heads:``
gives the model several outputs (docs/spec.md): each head is judged as the output it is (a
classification head by its softmax, a regression head by its ratio, a head with a target
function by the ratio of that function's F), not their sum. :func:`baseline_check` is the
check: the path's own baseline judged per input, beside the readings of the other baselines
(the four of an attributed input, zero and the reference tokens of an embedded one), so the
evidence shows which of them is neutral.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from attest.collection.capture.run import model_output_tensor
from attest.collection.context import CheckSettings, CollectContext
from attest.collection.ig.attribution import IGResult
from attest.collection.ig.baselines import REFERENCE_TOKEN, call_baseline, compared_baselines
from attest.collection.ig.path_checks import finite_or_none, input_subject, status_counts
from attest.collection.ig.readings import read_output, target_reading
from attest.collection.nonfinite import nonfinite
from attest.evidence.model import CheckItem, CheckResult, ItemStatus, Metric
from attest.spec.model_call import ModelCall

__all__ = ["baseline_check", "head_judgements", "judge_neutrality", "target_probability_limit"]

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


_READINGS = ("baseline_entropy_ratio", "baseline_target_probability", "baseline_output_ratio")


def _embedded_note(call: ModelCall | None, readings: dict[str, dict[str, Any]], i: int) -> str:
    """What a failing item adds for embedded inputs: from zero vectors, the reference-token
    forms to write (and how the model reads pad's, when computed); from the reference tokens,
    how the model reads zero vectors."""
    embedded = [] if call is None else [p for p in call.differentiated if p.role == "embedded"]
    if not embedded:
        return ""
    key = "baseline_target_probability"
    if key not in readings["zero"]:
        key = "baseline_output_ratio"
    what = "p" if key == "baseline_target_probability" else "|F(b)| / |F(x)|"

    def reading(kind: str) -> str | None:
        values = readings.get(kind, {}).get(key)
        return None if values is None else f"{what} = {float(values[i]):.3f}"

    zeroed = [
        p.name for p in embedded if p.reference_rule and p.reference_rule["token_embedding_zero"]
    ]
    trained = (
        f"; the reference token of {', '.join(repr(n) for n in zeroed)} embeds to the zero "
        "vector (a padding_idx row, zeroed and never trained), so it starts where zero vectors "
        "do: name a trained token, baseline: {token: ID, keep: [ID, ...]} (e.g. [MASK] or [UNK])"
        if zeroed
        else ""
    )
    zero = [p.name for p in embedded if p.baseline == "zero"]
    if not zero:
        return (
            "; the reference-token baseline is not neutral for this model either (at zero "
            f"vectors {reading('zero')})" + trained
        )
    at_pad = reading(REFERENCE_TOKEN)
    return (
        f"; embedded input {', '.join(repr(n) for n in zero)} starts from zero vectors, no "
        "text the model was trained on: give it baseline: pad (every token the padding "
        "token, special tokens kept) or baseline: {token: ID, keep: [ID, ...]} (docs/spec.md)"
        + (f"; at its pad reference tokens {at_pad}" if at_pad else "")
        + trained
    )


def baseline_check(
    ctx: CollectContext,
    model: torch.nn.Module,
    inputs: torch.Tensor,
    main: IGResult,
    params: dict[str, Any],
) -> CheckResult:
    """``ig_baseline``: each input's own baseline judged (:func:`judge_neutrality`, or
    :func:`head_judgements` with heads); the summary gives the mean readings of every
    compared baseline (:func:`~attest.collection.ig.baselines.compared_baselines`) and, with
    embedded inputs, each item its readings at zero vectors and at the reference tokens."""
    settings = ctx.settings
    classes = None if main.target_classes is None else torch.from_numpy(main.target_classes)
    read_as = target_reading(ctx.spec.labels)  # softmax, a label's sigmoid, or a value
    call = ctx.spec.call
    computed = call is not None and call.computes_f
    if computed:  # the output's column 0 is F itself (heads, a target function)
        classes = None

    def output(x: torch.Tensor) -> torch.Tensor:
        out = model_output_tensor(model(x))
        return out[:, :1] if computed else out

    chosen_input = main.baseline.to(inputs.dtype)
    compared = compared_baselines(call)
    out_b: torch.Tensor | None = None
    readings = {}
    with torch.no_grad():
        out_x = output(inputs)
        for kind in compared:
            start = call_baseline(call, kind, inputs, seed=settings.seed).to(inputs.dtype)
            out = output(start)
            if out_b is None and torch.equal(start, chosen_input):
                out_b = out  # the path's own baseline is one of these: one forward less
            readings[kind] = read_output(out, out_x, classes, read_as)[0]
        if out_b is None:
            out_b = output(chosen_input)
        chosen, count = read_output(out_b, out_x, classes, read_as)
    if computed and call is not None and call.heads:  # each head judged as the output it is
        with torch.no_grad():
            rows = call.unpack(inputs)[1]
            assert rows is not None
            judged = head_judgements(
                call,
                settings,
                model_output_tensor(model(main.baseline.to(inputs.dtype))),
                model_output_tensor(model(inputs)),
                rows,
            )
    else:
        judged = [judge_neutrality(settings, chosen, i, count) for i in range(inputs.shape[0])]
    for i, (status, message, metrics) in enumerate(judged):
        if REFERENCE_TOKEN in readings:  # zero vectors against the reference tokens, per item
            for kind in ("zero", REFERENCE_TOKEN):
                for key in _READINGS:
                    values = readings[kind].get(key)
                    if isinstance(values, np.ndarray) and values.size:
                        metrics[f"{kind}_{key}"] = finite_or_none(float(values[i]))
        # a NaN probability compares False with both limits: ask about the outputs first
        sides = nonfinite({"output at the baseline": out_b[i], "output at the input": out_x[i]})
        if sides is not None:
            judged[i] = (
                "fail",
                f"baseline neutrality cannot be judged: {sides.describe()}",
                metrics,
            )
        elif status == "fail":
            judged[i] = (status, message + _embedded_note(call, readings, i), metrics)
    items = [
        CheckItem(subject=input_subject(i), status=status, metrics=metrics, message=message)
        for i, (status, message, metrics) in enumerate(judged)
    ]
    summary: dict[str, Metric] = {**status_counts(items), "classifier": bool(chosen["classifier"])}
    for kind, reading in readings.items():
        for key in _READINGS:
            values = reading.get(key)
            if isinstance(values, np.ndarray) and values.size:
                summary[f"{kind}_{key}_mean"] = finite_or_none(float(np.mean(values)))
    return CheckResult(
        check="ig_baseline",
        status="computed",
        parameters={
            **params,
            "max_target_probability": settings.ig_baseline_max_target_probability,
            "target_probability_rule": "fail when p_target(baseline) >= 1/C + share * (1 - 1/C), "
            "share = max_target_probability",
            "min_entropy_ratio": settings.ig_baseline_min_entropy_ratio,
            "max_output_ratio": settings.ig_baseline_max_output_ratio,
            "baselines_compared": list(compared),
        },
        summary=summary,
        items=items,
    )
