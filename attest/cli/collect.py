"""``attest collect``: profile a model and run every check, or merge evidence of several targets.

    attest collect attest.yaml -o evidence.json [--json]
    attest collect --merge cpu.json cuda.json -o all.json [--json]

Exit codes: 0 when evidence was written (whatever it shows), 2 on bad input. Progress goes
to stderr on a terminal only (attest.core.progress), never with --json or --quiet. torch is imported only when the command runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from attest.errors import InputError

if TYPE_CHECKING:  # pragma: no cover
    from attest.evidence.model import Evidence


def _summary_lines(evidence: Evidence, out: Path) -> list[str]:
    model = evidence.model
    lines = [
        f"evidence for {model.get('name')} {model.get('version')} "
        f"({', '.join(evidence.targets) or 'unknown target'}) written to {out}"
    ]
    if evidence.model_failure is not None:
        f = evidence.model_failure
        where = f"module {f.module or '<root>'!r}" + (
            f", operator {f.operator_id} {f.op}" if f.op else ""
        )
        lines.append(f"  model raised {f.error_type} in {f.phase} at {where}: {f.message}")
    metrics = evidence.model_metrics
    lines.append(
        f"  {metrics.get('operators')} operators; bit-exact reproducibility "
        f"{metrics.get('bit_exact_reproducibility')}; min stability {metrics.get('min_stability_score')}; "
        f"min fidelity {metrics.get('min_fidelity_pct')}"
    )
    for check_id, result in evidence.checks.items():
        fails = sum(1 for i in result.items if i.status == "fail")
        warns = sum(1 for i in result.items if i.status == "warn")
        note = f" ({fails} fail, {warns} warn)" if result.status == "computed" else ""
        reason = f": {result.reason}" if result.reason and result.status != "computed" else ""
        lines.append(f"  {check_id:<18} {result.status}{note}{reason}")
    return lines


def _json_summary(evidence: Evidence, out: Path) -> dict[str, Any]:
    return {
        "evidence": str(out),
        "model": {k: evidence.model.get(k) for k in ("name", "version", "digest")},
        "targets": evidence.targets,
        "model_failure": evidence.model_failure.model_dump() if evidence.model_failure else None,
        "model_metrics": evidence.model_metrics,
        "checks": {
            check_id: {
                "status": r.status,
                "reason": r.reason,
                "fail": sum(1 for i in r.items if i.status == "fail"),
                "warn": sum(1 for i in r.items if i.status == "warn"),
            }
            for check_id, r in evidence.checks.items()
        },
    }


@click.command("collect")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path, dir_okay=False))
@click.option(
    "-o",
    "--out",
    required=True,
    type=click.Path(path_type=Path, dir_okay=False),
    help="Where to write evidence.json.",
)
@click.option(
    "--merge", is_flag=True, help="Merge the evidence files given (one model, several targets)."
)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary on stdout.")
@click.option(
    "-q", "--quiet", is_flag=True, help="No progress display on stderr (shown on a terminal only)."
)
@click.option(
    "--budget",
    default=None,
    metavar="DURATION",
    help="Plan the work to fit this time (e.g. 30m, 2h); the evidence says what was reduced. "
    "Default: the spec's budget:, else the full work.",
)
def collect(
    paths: tuple[Path, ...],
    out: Path,
    merge: bool,
    as_json: bool,
    quiet: bool,
    budget: str | None,
) -> None:
    """Profile the model of SPEC (attest.yaml) and run every check; write evidence.

    The exported model.onnx and probe bundle (when the spec exports) are written next to
    the evidence file. With --merge, PATHS are evidence files of the same model from
    different hardware targets, merged into one.
    """
    from attest.core.io import atomic_write_json

    if merge:
        if budget is not None:
            raise InputError("--budget applies to collecting, not to --merge")
        if len(paths) < 2:
            raise InputError(
                "--merge needs at least two evidence files",
                hint="attest collect --merge a.json b.json -o all.json",
            )
        from attest.evidence.merge import load_evidence, merge_evidence

        evidence = merge_evidence([load_evidence(p) for p in paths], [str(p) for p in paths])
        atomic_write_json(out, evidence.model_dump(mode="json"))
    else:
        if len(paths) != 1:
            raise InputError(
                f"attest collect takes one spec file, got {len(paths)}",
                hint="attest collect attest.yaml -o evidence.json (or --merge a.json b.json -o all.json)",
            )
        from attest.collection import collect as run_collect
        from attest.core.progress import terminal_progress
        from attest.spec.model import parse_budget

        budget_s = parse_budget(budget)  # a bad --budget is refused before any work
        with terminal_progress(quiet=quiet, as_json=as_json) as progress:
            # The export check's model.onnx and probe bundle go next to the evidence file, so the
            # folder is what `attest certify --evidence` needs from this machine.
            out.resolve().parent.mkdir(parents=True, exist_ok=True)
            evidence = run_collect(
                paths[0],
                out=out,
                progress=progress,
                budget_s=budget_s,
                output_dir=out.resolve().parent,
            )
    if as_json:
        click.echo(json.dumps(_json_summary(evidence, out), indent=2))
    else:
        for line in _summary_lines(evidence, out):
            click.echo(line)
