"""Key figures of a certificate (or evidence) in OpenMetrics text format, for Prometheus-style
monitoring dashboards (``attest metrics CERT --format openmetrics [--ledger PATH]``).

Families (every sample carries ``model`` and ``version`` labels):

- ``attest_certificate_info``: certificate id, verdict, policy, kind of input (value 1);
- ``attest_certificate_expiry_timestamp_seconds`` / ``..._issued_timestamp_seconds``;
- ``attest_operator_fidelity_percent{kind="accumulated"|"local"}``,
  ``attest_operator_stability_score``, ``attest_operator_bit_exact_ratio``,
  ``attest_operator_time_seconds{phase="forward"|"backward",statistic="median"|"iqr"|"p95"}``
  (the kernel time of one call and its spread across the repeated runs)
  (per operator: ``operator_id``, ``op``, ``module``);
- ``attest_model_bit_exact_ratio`` and every other numeric model-level measurement as
  ``attest_model_metric{name}``;
- ``attest_ig_completeness_error_ratio{input_index}``;
- ``attest_training_check_metric{check,name}``: every numeric (and yes/no, as 1/0) summary
  figure of the training checks (``mixed_precision``, ``recompute``, ``batch_invariance``,
  ``resume``);
- ``attest_check_status{check,status}``, ``attest_check_items{check,status}``,
  ``attest_findings{verdict}``;
- with a training log (``--training-log run.jsonl``, or the evidence's log after
  ``certify --training-log``): ``attest_training_log_info{run_id,log}``,
  ``attest_training_latest{run_id,name}`` (the last sample's figures: step, epoch, loss,
  fidelity, bit-exact rate, gradient norm, memory delta...) and
  ``attest_training_summary{run_id,name}`` (half-life, memory-delta RSD, first non-finite
  step...; yes/no as 1/0);
- with a ledger: ``attest_verifications_total{outcome}``,
  ``attest_verification_rejections_total{reason}`` for this certificate, and
  ``attest_ledger_entries{event}`` for the model line.

The text format is written by hand (it is a few lines of escaping rules) so that the
collect-free install needs no client library; tests parse it with ``prometheus_client``'s
strict OpenMetrics parser.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attest.core.times import parse_timestamp
from attest.errors import AttestError, InputError
from attest.evidence.model import TRAINING_CHECKS
from attest.evidence.training_log import read_training_log
from attest.evidence.training_summary import TrainingSummary, summarize_training_log
from attest.report._rows import numeric_metric
from attest.report._source import ReportSource, load_source

__all__ = ["openmetrics_text", "render_openmetrics", "training_log_families"]

Labels = dict[str, str]


def escape_label_value(value: str) -> str:
    """OpenMetrics label-value escaping: backslash, double quote and line feed."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def format_value(value: float | int) -> str:
    """A sample value: integers as is, floats in Python's shortest repr, NaN and +-Inf spelled."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


@dataclass
class _Family:
    name: str
    kind: str  # gauge | counter | info
    help: str
    unit: str | None = None
    samples: list[tuple[Labels, float | int]] = field(default_factory=list)

    def render(self) -> list[str]:
        lines = [f"# TYPE {self.name} {self.kind}", f"# HELP {self.name} {self.help}"]
        if self.unit:
            lines.append(f"# UNIT {self.name} {self.unit}")
        suffix = {"counter": "_total", "info": "_info"}.get(self.kind, "")
        for labels, value in self.samples:
            text = ",".join(f'{k}="{escape_label_value(v)}"' for k, v in labels.items())
            lines.append(f"{self.name}{suffix}{{{text}}} {format_value(value)}")
        return lines


def _num(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def _metric_name(text: str) -> str:
    return "".join(c if c.isalnum() or c == "_" else "_" for c in text)


def _timestamp_seconds(text: str | None) -> float | None:
    if not text:
        return None
    try:
        return parse_timestamp(text).timestamp()
    except (ValueError, AttestError):
        return None


def _operator_families(src: ReportSource, base: Labels) -> Iterable[_Family]:
    fid = _Family(
        "attest_operator_fidelity_percent",
        "gauge",
        "Fidelity of the operator's output and gradient against float64 (100 = identical).",
    )
    stab = _Family(
        "attest_operator_stability_score",
        "gauge",
        "Stability score 0-100 over repeated runs (100 = bit-exact in every run).",
    )
    bit = _Family(
        "attest_operator_bit_exact_ratio",
        "gauge",
        "Fraction of repeated runs whose output and gradient bytes equal run 0's.",
        "ratio",
    )
    time = _Family(
        "attest_operator_time_seconds",
        "gauge",
        "Kernel time of one call across the repeated runs: median, interquartile range, p95.",
        "seconds",
    )
    for row in src.operators:
        labels = {
            **base,
            "operator_id": str(row.get("id")),
            "op": str(row.get("op") or ""),
            "module": str(row.get("module") or ""),
        }
        for key, kind in (("fidelity_pct", "accumulated"), ("local_fidelity_pct", "local")):
            value = _num(row.get(key))
            if value is not None:
                fid.samples.append(({**labels, "kind": kind}, value))
        if (value := _num(row.get("stability_score"))) is not None:
            stab.samples.append((labels, value))
        if (value := _num(row.get("bit_exact_rate"))) is not None:
            bit.samples.append((labels, value))
        for phase in ("forward", "backward"):
            for suffix, statistic in _TIME_STATISTICS:
                if (value := _num(row.get(f"{phase}_ns{suffix}"))) is not None:
                    sample = {**labels, "phase": phase, "statistic": statistic}
                    time.samples.append((sample, value / 1e9))
    return (fid, stab, bit, time)


# (suffix of the operator row's ``forward_ns``/``backward_ns`` field, statistic label)
_TIME_STATISTICS = (("", "median"), ("_iqr", "iqr"), ("_p95", "p95"))


def _training_family(src: ReportSource, base: Labels) -> _Family:
    fam = _Family(
        "attest_training_check_metric",
        "gauge",
        "Summary figures of the training checks, by check and name (yes/no as 1/0).",
    )
    for cid in TRAINING_CHECKS:
        res = src.checks.get(cid)
        for key, value in (res.summary if res is not None else {}).items():
            number = 1 if value is True else 0 if value is False else _num(value)
            if number is not None:
                fam.samples.append(({**base, "check": cid, "name": _metric_name(key)}, number))
    return fam


def training_log_families(summary: TrainingSummary, log: str, base: Labels) -> list[_Family]:
    """The latest sample's figures and the summary of one training-log run."""
    run = {**base, "run_id": summary.run_id}
    info = _Family("attest_training_log", "info", "The training log the figures come from.")
    info.samples.append(({**run, "log": log}, 1))
    latest = _Family(
        "attest_training_latest", "gauge", "The last sample point of the training log, by name."
    )
    overall = _Family(
        "attest_training_summary", "gauge", "The training log's summary figures (yes/no as 1/0)."
    )
    for fam, values in ((latest, summary.latest), (overall, summary.metrics())):
        for key, value in values.items():
            number = 1 if value is True else 0 if value is False else _num(value)
            if number is not None:
                fam.samples.append(({**run, "name": _metric_name(key)}, number))
    return [info, latest, overall]


def _ledger_families(path: Path, src: ReportSource, base: Labels) -> Iterable[_Family]:
    from attest.ledger.log import open_ledger
    from attest.ledger.writers import entry_of_leaf

    if not path.exists():
        raise InputError(f"ledger {path} does not exist", hint="check --ledger PATH")
    outcomes: Counter[str] = Counter()
    rejections: Counter[str] = Counter()
    events: Counter[str] = Counter()
    with open_ledger(path) as ledger:
        for leaf in ledger.storage.iter_leaves():
            entry = entry_of_leaf(leaf.data)
            if entry.model.name == src.model.get("name"):
                events[entry.event] += 1
            same = (
                src.certificate_id is not None and entry.certificate.id == src.certificate_id
            ) or (entry.certificate.sha256 == src.file_sha256)
            if same and entry.event in ("verified", "rejected"):
                outcomes[entry.event] += 1
                for code in entry.reason_codes:
                    rejections[code] += 1 if entry.event == "rejected" else 0
    ver = _Family(
        "attest_verifications",
        "counter",
        "Verifications of this certificate recorded in the audit ledger, by outcome.",
    )
    for outcome in ("verified", "rejected"):
        ver.samples.append(({**base, "outcome": outcome}, outcomes[outcome]))
    rej = _Family(
        "attest_verification_rejections",
        "counter",
        "Rejections of this certificate in the audit ledger, by reason code.",
    )
    rej.samples.extend(({**base, "reason": code}, n) for code, n in sorted(rejections.items()) if n)
    ent = _Family(
        "attest_ledger_entries", "gauge", "Audit ledger entries for this model line, by event."
    )
    ent.samples.extend(({**base, "event": e}, n) for e, n in sorted(events.items()))
    return (ver, rej, ent)


def render_openmetrics(src: ReportSource, *, ledger: str | Path | None = None) -> str:
    """The OpenMetrics exposition of one loaded source (ends with ``# EOF``)."""
    base: Labels = {
        "model": str(src.model.get("name") or ""),
        "version": str(src.model.get("version") or ""),
    }
    policy = src.policy or {}
    info = _Family("attest_certificate", "info", "What the figures describe (1 per input).")
    info.samples.append(
        (
            {
                **base,
                "kind": src.kind,
                "certificate_id": str(src.certificate_id or ""),
                "verdict": str(src.verdict or "not_evaluated"),
                "policy": str(policy.get("id") or ""),
                "policy_version": str(policy.get("version") or ""),
                "sha256": src.file_sha256,
            },
            1,
        )
    )
    families: list[_Family] = [info]
    for name, when, what in (
        ("issued", src.issued_at or src.created_at, "issued (or evidence written)"),
        ("expiry", src.expires_at, "expires"),
    ):
        seconds = _timestamp_seconds(when)
        if seconds is not None:
            fam = _Family(
                f"attest_certificate_{name}_timestamp_seconds",
                "gauge",
                f"When the certificate {what}, Unix time.",
                "seconds",
            )
            fam.samples.append((base, seconds))
            families.append(fam)
    families.extend(_operator_families(src, base))
    model_bit = _Family(
        "attest_model_bit_exact_ratio",
        "gauge",
        "Model-level bit-exact reproducibility rate over repeated runs.",
        "ratio",
    )
    model_other = _Family(
        "attest_model_metric", "gauge", "Other numeric model-level measurements, by name."
    )
    for key, value in src.model_metrics.items():
        number = _num(value)
        if number is None:
            continue
        if "bit_exact" in key and not model_bit.samples:
            model_bit.samples.append((base, number))
        else:
            model_other.samples.append(({**base, "name": _metric_name(key)}, number))
    families += [model_bit, model_other]
    ig = _Family(
        "attest_ig_completeness_error_ratio",
        "gauge",
        "Integrated-gradients completeness error |sum(attr) - (F(x)-F(b))| / |F(x)-F(b)| per probe input.",
        "ratio",
    )
    check = src.checks.get("ig_completeness")
    for item in check.items if check else []:
        err = numeric_metric(item.metrics, "completeness_rel_error", "relative", "error")
        if err is not None:
            ig.samples.append(({**base, "input_index": str(item.subject.input_index)}, err))
    families.append(ig)
    families.append(_training_family(src, base))
    status = _Family(
        "attest_check_status", "gauge", "Status of each check (1 for the status it has)."
    )
    items = _Family("attest_check_items", "gauge", "Items of each check by item status.")
    for cid, res in src.checks.items():
        status.samples.append(({**base, "check": cid, "status": res.status}, 1))
        tally = Counter(i.status for i in res.items)
        items.samples.extend(
            ({**base, "check": cid, "status": s}, n) for s, n in sorted(tally.items())
        )
    families += [status, items]
    fnd = _Family("attest_findings", "gauge", "Policy findings by verdict.")
    fnd.samples.extend(
        ({**base, "verdict": str(v)}, n)
        for v, n in sorted(Counter(str(f.get("verdict")) for f in src.findings).items())
    )
    families.append(fnd)
    if src.training_log:
        record = src.training_log
        summary = TrainingSummary.model_validate(record["summary"])
        families.extend(training_log_families(summary, str(record.get("log")), base))
    if ledger is not None:
        families.extend(_ledger_families(Path(ledger), src, base))
    lines: list[str] = []
    for fam in families:
        lines.extend(fam.render())
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


def openmetrics_text(
    path: str | Path | None,
    *,
    ledger: str | Path | None = None,
    training_log: str | Path | None = None,
) -> str:
    """Load a certificate or evidence file (and/or a training log) and render its OpenMetrics
    exposition."""
    if path is None and training_log is None:
        raise InputError(
            "attest metrics needs a certificate, an evidence file or --training-log",
            hint="attest metrics gradient_certificate.json, or --training-log run.jsonl",
        )
    if path is None:
        if ledger is not None:
            raise InputError("--ledger counts a certificate's verifications: give the certificate")
        log = read_training_log(training_log)  # type: ignore[arg-type]
        families = training_log_families(summarize_training_log(log), log.path.name, {})
        lines = [line for fam in families for line in fam.render()]
        return "\n".join([*lines, "# EOF"]) + "\n"
    src = load_source(path)
    if training_log is not None:
        log = read_training_log(training_log)
        record = {"summary": summarize_training_log(log).model_dump(), "log": log.path.name}
        src.training_log = record
    return render_openmetrics(src, ledger=ledger)
