"""``attest training summary`` and ``attest training report``: a TrainingMonitor's log."""

from __future__ import annotations

from pathlib import Path

import click

from attest.cli.output import echo_json
from attest.errors import AttestError

_log_path = click.Path(exists=True, dir_okay=False, path_type=Path)
_run_id = click.option("--run-id", default=None, help="Which run of the log (default: the last).")


@click.group("training")
def training() -> None:
    """Summarise and report a training log (run.jsonl of attest.TrainingMonitor)."""


@training.command("summary")
@click.argument("log", type=_log_path)
@_run_id
@click.option("--json", "as_json", is_flag=True, help="Print the whole summary as JSON.")
def summary(log: Path, run_id: str | None, as_json: bool) -> None:
    """Fidelity half-life, memory-delta consistency, first non-finite step, gradient-norm trends."""
    from attest.core.text import safe_text
    from attest.evidence.training_log import read_training_log
    from attest.evidence.training_summary import summarize_training_log

    result = summarize_training_log(read_training_log(log), run_id)
    if as_json:
        echo_json(result.model_dump(mode="json"))
        return
    rsd = result.memory.rsd_pct
    lines = [
        f"run {safe_text(result.run_id, 200)}: {result.samples} samples, steps "
        f"{result.first_step}-{result.last_step}, epochs {result.first_epoch}-{result.last_epoch}",
        f"fidelity half-life:        {result.fidelity.text()}",
        f"memory-delta consistency:  {'n/a (one epoch)' if rsd is None else f'{rsd:.3g} % RSD'}",
        f"first non-finite step:     {result.first_nonfinite_step if result.first_nonfinite_step is not None else 'none'}",
        f"lowest bit-exact rate:     {result.min_bit_exact_rate}",
        f"grad-norm growth / epoch:  {result.grad_norm_trend.growth_per_epoch}",
    ]
    click.echo("\n".join(lines))


@training.command("report")
@click.argument("log", type=_log_path)
@click.option(
    "-o",
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="Where to write the HTML report.",
)
@_run_id
def report(log: Path, out: Path, run_id: str | None) -> None:
    """Write a self-contained HTML report with charts over steps and epochs."""
    try:
        from attest.report.training_log import write_training_report
    except ModuleNotFoundError as exc:  # matplotlib/numpy are the report extra
        raise AttestError(
            f"attest training report needs {exc.name}, which is not installed",
            hint="pip install 'gradient-attest[report]'",
        ) from None
    click.echo(f"wrote {write_training_report(log, out, run_id)}")
