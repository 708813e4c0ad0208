"""Zero vectors against reference tokens as the IG baseline of clean text models.

The third clean sweep (docs/architectures.md) found ``ig_baseline`` failing under clinical-strict
on nearly every clean text model: with every token embedding zero the model still predicts the
class. This script builds the sweep's text models (tests/integration/test_clean_sweep.py's
cases and builder, and two more models of the sweep it holds: BERT in the team's own module
and the events model with ``nn.MultiheadAttention``), trained as the sweep
trained them, and collects each under clinical-strict without its evidence floors once per
baseline of its embedded input: ``zero``, ``pad`` and, where ``pad`` keeps no special token the
model has, ``{token: PAD, keep: [CLS]}``. Per baseline it prints each probe example's target
probability (or ``|F(b)| / |F(x)|``) at the baseline, every ``ig_*`` status and every failing
check; then, outside attest, the model's softmax at each example's reference-token sequence
(a forward hook replacing the embedding module's output with the module's own output for the
reference ids, the model called with the real ids and fixed inputs, as IG's path does), which
must agree with attest's reading.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_text_baseline.py [CASE ...]

Each collect takes 10-60 s on a 2-core CPU. The figures are the model's outputs, not timings,
so a shared machine changes nothing but the wall time.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "unit")]  # as pytest puts them

from integration.test_clean_sweep import (  # noqa: E402
    BERT_OWN,
    BERT_OWN_SPEC,
    BERT_OWN_TRAIN,
    CASES,
    MHA_EVENTS,
    MHA_EVENTS_SPEC,
    MHA_EVENTS_TRAIN,
    Case,
    write_case,
)
from integration.test_published_architectures import (  # noqa: E402
    failing,
    strict_without_floors,
)

from attest.collection import collect  # noqa: E402
from attest.pipeline import check_settings  # noqa: E402
from attest.policy.engine import evaluate  # noqa: E402
from attest.spec import load_spec  # noqa: E402

# name -> (case, the embedded input, the baselines measured besides zero and pad)
MODELS: dict[str, tuple[Case, str, list[str]]] = {
    "bert-own-module": (
        Case(BERT_OWN, BERT_OWN_TRAIN, BERT_OWN_SPEC, examples=4, needs="transformers"),
        "input_ids",
        # pad keeps nothing here (the model has no HF config): [CLS] = 1 kept; and token 2, an
        # id the training never used (an [UNK] or [MASK] of a model trained without them)
        ["{token: 0, keep: [1]}", "{token: 2, keep: [1]}"],
    ),
    # ids 1 and 2 never occur in training (it draws ids from 3)
    "distilbert-folder": (CASES["distilbert-folder"], "input_ids", ["{token: 1}"]),
    # <s> = 0 and </s> = 2 kept (pad keeps them from the config); 3 never occurs in training
    "roberta-folder": (CASES["roberta-folder"], "input_ids", ["{token: 3, keep: [0, 2]}"]),
    "embedding-bag-codes": (CASES["embedding-bag-codes"], "codes", []),
    "mha-events": (Case(MHA_EVENTS, MHA_EVENTS_TRAIN, MHA_EVENTS_SPEC, examples=4), "ids", []),
}


def with_baseline(spec: Path, name: str, baseline: str) -> Path:
    """A copy of ``spec`` whose embedded input ``name`` has ``baseline:``."""
    text = spec.read_text(encoding="utf-8")
    line = next(x for x in text.splitlines() if x.strip().startswith(f"{name}: {{role: embedded"))
    written = line.rstrip("}") + f", baseline: {baseline}}}"
    out = spec.with_name(f"attest-{len(list(spec.parent.glob('attest-*.yaml')))}.yaml")
    out.write_text(text.replace(line, written), encoding="utf-8")
    return out


def by_hand(spec: Path, name: str) -> list[float]:
    """The target's softmax probability at each example's reference-token sequence, outside
    attest: the model built from its folder or factory, the embedding module's output replaced
    by its own output for the reference ids (forward hook), called with the probe's real ids
    and fixed inputs, and any attributed input at zero (its baseline in these specs)."""
    loaded = load_spec(spec)  # only for the rule attest resolved, recorded in the evidence
    assert loaded.call is not None
    part = next(p for p in loaded.call.parts if p.name == name)
    assert part.reference_rule is not None and part.embedding is not None
    token, keep = part.reference_rule["token"], part.reference_rule["keep"]
    folder = spec.parent
    probe = load_file(str(folder / "probe.safetensors"))
    if (folder / "tiny").exists():
        from transformers import AutoModelForSequenceClassification

        model = AutoModelForSequenceClassification.from_pretrained(folder / "tiny")
    else:
        namespace: dict[str, Any] = {}
        exec((folder / "model.py").read_text(encoding="utf-8"), namespace)
        model = namespace["build"]()
        model.load_state_dict(load_file(str(folder / "weights.safetensors")))
    model.eval()
    ids = probe[part.key]
    reference = torch.where(torch.isin(ids, torch.tensor(keep, dtype=ids.dtype)), ids, token)
    module = model.get_submodule(part.embedding)
    if isinstance(module, torch.nn.EmbeddingBag):  # its mean over the real codes, by hand
        table = module.weight[reference]
        real = (ids != module.padding_idx).unsqueeze(-1).float()
        replaced = (table * real).sum(1) / real.sum(1).clamp(min=1)
    else:
        replaced = module(reference)
    handle = module.register_forward_hook(lambda _m, _a, _o: replaced)
    try:
        with torch.no_grad():
            # the other differentiated inputs at their baseline (zero here), as on IG's path
            args = {
                p.name: torch.zeros_like(probe[p.key]) if p.role == "attributed" else probe[p.key]
                for p in loaded.call.parts
            }
            positional = [
                args[p.name] for p in sorted(loaded.call.parts, key=_place) if p.arg is not None
            ]
            keywords = {p.kwarg: args[p.name] for p in loaded.call.parts if p.kwarg is not None}
            out = model(*positional, **keywords)
    finally:
        handle.remove()
    logits = out.logits if hasattr(out, "logits") else out
    p = torch.softmax(logits.double(), dim=-1)
    return p.gather(1, probe["target"].long().view(-1, 1))[:, 0].tolist()


def _place(part: Any) -> int:
    return part.arg if part.arg is not None else 1 << 30


def measure(name: str, root: Path) -> None:
    case, embedded, extra = MODELS[name]
    spec = write_case(root / name, case)
    policy = strict_without_floors()
    print(f"== {name}", flush=True)
    for baseline in ["zero", "pad", *extra]:
        path = spec if baseline == "zero" else with_baseline(spec, embedded, baseline)
        evidence = collect(path, settings=check_settings(policy))
        findings = evaluate(evidence, policy)
        result = evidence.checks["ig_baseline"]
        ig = {c: r.status for c, r in evidence.checks.items() if c.startswith("ig_")}
        failed = sorted({f.check for f in findings.failed})
        print(f"  baseline {baseline}: failing {failed or 'none'}")
        print(f"    ig statuses: {ig}")
        for item in result.items:
            m = item.metrics
            p = m.get("baseline_target_probability")
            ratio = m.get("baseline_output_ratio")
            shown = f"p(target) = {p:.4f}" if p is not None else f"|F(b)|/|F(x)| = {ratio:.4g}"
            print(
                f"    {item.subject.name or item.subject.kind}: {item.status} {shown}, "
                f"F(b) = {m.get('f_baseline'):.4g}, F(x) = {m.get('f_input'):.4g}"
            )
        rule = (evidence.model.get("call") or {}).get("inputs", [{}])
        print(
            f"    reference rule: {[i.get('reference_token') for i in rule if i.get('reference_token')]}"
        )
        print(
            "    summary: "
            + ", ".join(f"{k} = {v}" for k, v in result.summary.items() if "probability" in k)
        )
        for line in failing(findings):
            print(f"    FAIL {line[:400]}")
        if baseline != "zero":
            print(
                f"    by hand p(target) at the reference: {[round(v, 4) for v in by_hand(path, embedded)]}"
            )
        sys.stdout.flush()


def main(argv: list[str]) -> None:
    names = argv or list(MODELS)
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            measure(name, Path(tmp))


if __name__ == "__main__":
    main(sys.argv[1:])
