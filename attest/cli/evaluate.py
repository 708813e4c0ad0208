"""``attest evaluate``: hold evidence against a policy and write the findings; and the lines
that summarise findings, which ``attest certify`` prints too.

Only click is imported at module level; the policy engine when the command runs. Exit codes:
0 pass, 1 policy failed, 2 bad input (evidence whose claims disagree with its figures
included: verdict INCONSISTENT).
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from attest.cli.output import echo_json
from attest.errors import EXIT_NEGATIVE

if TYPE_CHECKING:  # pragma: no cover
    from attest.policy.model import Findings

__all__ = ["evaluate", "findings_summary", "parse_at"]

_SHOWN = 12  # failing or waived findings listed before "... and N more"


def parse_at(text: str | None) -> datetime | None:
    """The ``--at`` reference time (a date or an RFC 3339 time; UTC when it has no zone)."""
    from attest.core.times import parse_moment

    return None if text is None else parse_moment(text, option="--at", assume_utc=True)


def findings_summary(findings: Findings) -> list[str]:
    """Human-readable lines: the verdict, the counts, then failing, warning and waived findings."""
    counts = findings.counts
    lines = [
        f"policy {findings.policy.id} {findings.policy.version}: {findings.verdict.upper()}"
        f"  ({counts['pass']} pass, {counts['fail']} fail, {counts['warn']} warn, "
        f"{counts['waived']} waived, {counts['not_computed']} not computed)"
    ]
    for verdict, title in (("fail", "failing"), ("warn", "warnings"), ("waived", "waived")):
        chosen = [f for f in findings.findings if f.verdict == verdict]
        if not chosen:
            continue
        lines.append(f"{title}:")
        for f in chosen[:_SHOWN]:
            label = f.subject.label()
            text = f.message if f.message.startswith(label) else f"{label}: {f.message}"
            lines.append(f"  [{f.rule}] {text}")
        if len(chosen) > _SHOWN:
            rules = sorted({f.rule for f in chosen[_SHOWN:]})
            lines.append(f"  ... and {len(chosen) - _SHOWN} more ({', '.join(rules)})")
    if findings.expired_waivers:
        lines.append("expired waivers (waive nothing): " + ", ".join(findings.expired_waivers))
    return lines


@click.command("evaluate")
@click.argument("evidence", type=click.Path(path_type=Path, dir_okay=False))
@click.option(
    "--policy",
    "policy_path",
    required=True,
    type=click.Path(path_type=Path, dir_okay=False),
    help="Policy YAML, or a shipped policy by name: clinical-strict, research.",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Write findings.json here.",
)
@click.option(
    "--at", "at_text", default=None, help="Reference time for waiver expiry (default: now)."
)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary instead of text.")
@click.pass_context
def evaluate(
    ctx: click.Context,
    evidence: Path,
    policy_path: Path,
    output: Path | None,
    at_text: str | None,
    as_json: bool,
) -> None:
    """Hold EVIDENCE (evidence.json) against a policy and write the findings.

    Exit 0 if the policy passes, 1 if it fails, 2 on bad input, including evidence whose
    statuses or counts disagree with its own figures (verdict INCONSISTENT, each disagreement
    listed).
    """
    from attest.core.io import atomic_write_text, dumps_pretty
    from attest.policy.engine import evaluate as evaluate_evidence
    from attest.policy.model import load_evidence, load_policy

    policy = load_policy(policy_path)
    loaded = load_evidence(evidence)
    _report_inconsistent(loaded, evidence, as_json)
    findings = evaluate_evidence(loaded, policy, at=parse_at(at_text))
    if output is not None:
        atomic_write_text(output, dumps_pretty(findings.model_dump(mode="json")))
    if as_json:
        echo_json(
            {
                "verdict": findings.verdict,
                "counts": findings.counts,
                "policy": findings.policy.model_dump(mode="json"),
                "findings_file": str(output) if output else None,
                "failed": [f.model_dump(mode="json") for f in findings.failed],
            }
        )
    else:
        for line in findings_summary(findings):
            click.echo(line)
        if output is not None:
            click.echo(f"findings: {output}")
    if not findings.passed:
        ctx.exit(EXIT_NEGATIVE)


def _report_inconsistent(loaded: Any, path: Path, as_json: bool) -> None:
    """Evidence whose claims disagree with its figures: verdict INCONSISTENT, each
    disagreement listed, then refused (exit 2) like any bad evidence."""
    from attest.evidence.consistency import InconsistentEvidence, inconsistencies

    found = inconsistencies(loaded)
    if not found:
        return
    if as_json:
        echo_json(
            {
                "verdict": "INCONSISTENT",
                "inconsistencies": [
                    {
                        "check": f.check,
                        "item": f.item,
                        "figure": f.figure,
                        "claim": f.claim,
                        "rule": f.why,
                    }
                    for f in found
                ],
            }
        )
    else:
        click.echo(f"verdict: INCONSISTENT ({len(found)} claim(s) disagree with the figures)")
        for f in found:
            click.echo(f"  {f.describe()}")
    raise InconsistentEvidence(str(path), found)
