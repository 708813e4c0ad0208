"""``attest report``, ``attest diff`` and ``attest metrics``: parse, call attest.report, print."""

from __future__ import annotations

from pathlib import Path

import click

from attest.cli.output import echo_json
from attest.errors import AttestError

_existing = click.Path(exists=True, dir_okay=False, path_type=Path)


@click.command("report")
@click.argument("source", type=_existing)
@click.option(
    "-o",
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="Where to write the HTML report.",
)
@click.option(
    "--findings", type=_existing, help="findings.json from attest evaluate (evidence input)."
)
@click.option(
    "--trust",
    type=_existing,
    help="Trust store: check the certificate's signature (otherwise every number is marked unverified).",
)
@click.option(
    "--evidence",
    type=_existing,
    help="evidence.json of a certificate, for what certificates do not carry (IG maps).",
)
@click.option(
    "--artifact",
    "artifacts",
    multiple=True,
    type=_existing,
    help="Artifact to check against the certificate's subjects (with --trust); repeatable.",
)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary.")
def report(
    source: Path,
    out: Path,
    findings: Path | None,
    trust: Path | None,
    evidence: Path | None,
    artifacts: tuple[Path, ...],
    as_json: bool,
) -> None:
    """Write a self-contained HTML report of a certificate or evidence file.

    SOURCE is gradient_certificate.json or evidence.json. Nothing is fetched when the report
    is opened; it states which numbers it verified by signature (with --trust) and which not.
    """
    try:
        from attest.report.html import write_report
    except ModuleNotFoundError as exc:  # matplotlib/numpy are the report extra, not the core
        raise AttestError(
            f"attest report needs {exc.name}, which is not installed",
            hint="pip install 'gradient-attest[report]'",
        ) from None

    result = write_report(
        source, out, findings=findings, trust=trust, evidence=evidence, artifacts=list(artifacts)
    )
    if as_json:
        echo_json(
            {
                "report": str(result.path),
                "certified": result.certified,
                "verification": result.verification.status,
                "reasons": [{"code": c, "message": m} for c, m in result.verification.reasons],
                "operators": result.operators,
            }
        )
    else:
        state = "CERTIFIED" if result.certified else "NOT CERTIFIED"
        click.echo(f"wrote {result.path} ({state}; signature: {result.verification.status})")


@click.command("diff")
@click.argument("old", type=_existing)
@click.argument("new", type=_existing)
@click.option(
    "--policy", type=_existing, help="Policy file whose diff: section sets the tolerances."
)
@click.option("--old-findings", type=_existing, help="findings.json of OLD (when OLD is evidence).")
@click.option("--new-findings", type=_existing, help="findings.json of NEW (when NEW is evidence).")
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
@click.pass_context
def diff(
    ctx: click.Context,
    old: Path,
    new: Path,
    policy: Path | None,
    old_findings: Path | None,
    new_findings: Path | None,
    as_json: bool,
) -> None:
    """Compare two certificates or evidence files of one model line.

    Exit 0 when nothing regressed beyond tolerance, 1 when something did (a release gate),
    2 on bad input.
    """
    from attest.core.text import safe_lines
    from attest.report.diff import diff_files, dumps

    result = diff_files(
        old, new, policy=policy, old_findings=old_findings, new_findings=new_findings
    )
    # Certificates compared may be unverified: their text is escaped line by line.
    click.echo(dumps(result) if as_json else safe_lines(result.to_text()), nl=not as_json)
    if result.regressions:
        ctx.exit(1)


@click.command("metrics")
@click.argument("source", type=_existing, required=False)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["openmetrics"]),
    default="openmetrics",
    show_default=True,
    help="Output format.",
)
@click.option(
    "--ledger",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Audit ledger (SQLite) to count this certificate's verifications from.",
)
@click.option(
    "-o",
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write to this file (atomically) instead of standard output.",
)
@click.option(
    "--training-log",
    type=_existing,
    help="run.jsonl of attest.TrainingMonitor: its latest sample and summary (with or without SOURCE).",
)
def metrics(
    source: Path | None, fmt: str, ledger: Path | None, out: Path | None, training_log: Path | None
) -> None:
    """Print a certificate's (or a training log's) key figures in OpenMetrics text format
    (ends with # EOF)."""
    from attest.core.io import atomic_write_text
    from attest.core.text import safe_lines
    from attest.report.metrics import openmetrics_text

    text = openmetrics_text(source, ledger=ledger, training_log=training_log)
    if out is not None:
        atomic_write_text(out, text)
    else:
        click.echo(safe_lines(text), nl=False)
