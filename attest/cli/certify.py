"""``attest evaluate`` and ``attest certify``.

Only click is imported at module level; the policy engine and (for certify) the torch-based
collect side are imported when a command runs. Exit codes: 0 pass, 1 policy failed,
2 bad input.
"""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from attest.cli.cosign import identity, signer_options
from attest.cli.output import echo_json
from attest.cli.progress_option import heartbeat_seconds, progress_option
from attest.cli.verify import is_url, remote_ledger_options
from attest.errors import EXIT_NEGATIVE, InputError

if TYPE_CHECKING:  # pragma: no cover
    from attest.pipeline import CertifyResult
    from attest.policy.model import Findings

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


def _rewrite_as_bundle(path: Path) -> None:
    """The written certificate, in the Sigstore bundle form (atomically replaced)."""
    from attest.certificate.bundle import dropped_signer_blocks, to_bundle
    from attest.core.io import atomic_write_json, read_json_file

    envelope = read_json_file(path, what="certificate")
    atomic_write_json(path, to_bundle(envelope))
    if dropped_signer_blocks(envelope):
        click.echo(
            "note: the signer attestation (name, role, meaning, timestamp) is not carried by a "
            "Sigstore bundle; certify without --format for the Part 11 record",
            err=True,
        )


def _named_evidence(text: str) -> tuple[str, Path] | Path:
    """``--evidence [NAME=]FILE``: a target name is given when the part before ``=`` is not an
    existing file (so a file name holding ``=`` still works)."""
    name, sep, path = text.partition("=")
    if sep and name and not Path(text).exists():
        return (name, Path(path))
    return Path(text)


def _record_issued(ledger: str, remote: Any, certificate: Path) -> None:
    """``certify --ledger``: an ``issued`` entry, in a local ledger or through the spool."""
    from attest.ledger import append_certificate
    from attest.ledger.entries import entry_for_certificate

    if remote is None:
        result = append_certificate(Path(ledger), certificate)
        click.echo(f"ledger: recorded as entry {result.index} of {ledger}", err=True)
        return
    from attest.cli.ledger_service import submit_remote

    submit_remote(remote, entry_for_certificate(certificate))


@click.command("certify")
@click.argument("spec", type=click.Path(path_type=Path, dir_okay=False))
@click.option(
    "--policy",
    "policy_path",
    required=True,
    type=click.Path(path_type=Path, dir_okay=False),
    help="Policy YAML, or a shipped policy by name: clinical-strict, research.",
)
@click.option(
    "--key",
    "key_path",
    required=True,
    type=click.Path(path_type=Path, dir_okay=False),
    help="Private signing key (passphrase from ATTEST_KEY_PASSPHRASE or a prompt).",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path, dir_okay=False),
    default=Path("gradient_certificate.json"),
    show_default=True,
    help="Certificate to write on pass.",
)
@click.option(
    "--evidence-out",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Evidence file [default: evidence.json next to the certificate].",
)
@click.option(
    "--findings-out",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Findings file [default: findings.json next to the certificate].",
)
@click.option(
    "--report",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Also write the HTML report here.",
)
@click.option(
    "--expires-in",
    default="365d",
    show_default=True,
    help="Certificate lifetime: 365d, 26w, 1y, 12h.",
)
@click.option(
    "--at",
    "at_text",
    default=None,
    help="Reference time for waiver expiry and issued_at (default: now).",
)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary instead of text.")
@click.option("-q", "--quiet", is_flag=True, help="No progress on stderr (as --progress none).")
@progress_option
@click.option(
    "--budget",
    default=None,
    metavar="DURATION",
    help="Plan the collect to fit this time (e.g. 30m, 2h) from a calibration on the model, "
    "never below the policy's evidence floors: a budget they cannot meet is refused at the "
    "start, naming the smallest that can. The evidence says what was reduced. Default: the "
    "spec's budget:, else the full work.",
)
@click.option(
    "--training-log",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="run.jsonl of attest.TrainingMonitor: bound as a subject, its summary in the evidence "
    "and held against the policy's training_log: thresholds.",
)
@click.option(
    "--format",
    "cert_format",
    type=click.Choice(["dsse", "sigstore-bundle"]),
    default="dsse",
    show_default=True,
    help="The certificate's form: the DSSE envelope, or a Sigstore bundle v0.3 holding it "
    "(docs/interop.md; signer attestations are not carried by a bundle).",
)
@click.option(
    "--model-signing",
    is_flag=True,
    help="Also sign the spec's folder with OpenSSF model-signing (model.sig, bound as a "
    "subject); needs an ECDSA P-256 key.",
)
@click.option(
    "--evidence",
    "evidence_files",
    multiple=True,
    metavar="[NAME=]FILE",
    help="Certify evidence collected elsewhere instead of collecting here: one file per "
    "hardware target (repeat the option); NAME names the target (default: the hardware "
    "target the evidence records).",
)
@click.option(
    "--ledger",
    default=None,
    metavar="PATH|URL",
    help="On pass, record the certificate as issued in this audit ledger: a local file, or a "
    "ledger service (https://...; with --ledger-client and --ledger-client-key; queued offline).",
)
@remote_ledger_options
@signer_options(default_meaning="authorship")
@click.pass_context
def certify(
    ctx: click.Context,
    spec: Path,
    policy_path: Path,
    key_path: Path,
    output: Path,
    evidence_out: Path | None,
    findings_out: Path | None,
    report: Path | None,
    expires_in: str,
    at_text: str | None,
    as_json: bool,
    quiet: bool,
    progress_mode: str,
    budget: str | None,
    training_log: Path | None,
    signer_name: str | None,
    signer_role: str,
    meaning: str,
    comment: str,
    tsa: str | None,
    cert_format: str,
    model_signing: bool,
    evidence_files: tuple[str, ...],
    ledger: str | None,
    ledger_client: str | None,
    ledger_client_key: Path | None,
    ledger_log_key: Path | None,
) -> None:
    """Collect evidence for SPEC (attest.yaml), evaluate it and, on pass, sign the certificate.

    On a failed policy no certificate is written; the evidence and findings are, and the
    failing rules are listed. Exit 0 pass, 1 policy failed, 2 bad input.

    With --evidence (once per hardware target), nothing is collected: each target's evidence
    is held against the policy and one certificate lists every target with its verdict; it
    is signed only if every required target (the policy's required_targets) passes.
    """
    from attest.certificate.signing import load_private_key
    from attest.cli.budget_report import say_overrun
    from attest.cli.ledger_service import remote_ledger
    from attest.core.progress_display import terminal_progress
    from attest.pipeline import certify as run_certify

    started = time.perf_counter()  # a --budget counts from here: the user waits for the start too
    if evidence_files and budget is not None:
        raise InputError("--budget applies to collecting; it cannot go with --evidence")
    signer = identity(signer_name, signer_role, meaning, comment)
    signing_key = load_private_key(key_path)  # before the display: it may ask for a passphrase
    common: dict[str, Any] = {
        "policy": policy_path,
        "key": signing_key,
        "out": output,
        "evidence_out": evidence_out,
        "findings_out": findings_out,
        "report": report,
        "expires_in": expires_in,
        "at": parse_at(at_text),
        "signer": signer,
        "tsa": tsa,
        "model_signing": model_signing,
    }
    if evidence_files and training_log is not None:
        raise InputError(
            "--training-log binds a log when certify collects; it cannot go with --evidence",
            hint="collect with the log bound, or certify the log's model without --evidence",
        )
    remote = (
        remote_ledger(str(ledger), ledger_client, ledger_client_key, ledger_log_key)
        if is_url(ledger)
        else None
    )
    heartbeat_s = heartbeat_seconds()
    with terminal_progress(
        quiet=quiet, as_json=as_json, mode=progress_mode, heartbeat_s=heartbeat_s
    ) as progress:
        if evidence_files:
            from attest.pipeline.targets import certify_evidence

            items = [_named_evidence(text) for text in evidence_files]
            result = certify_evidence(spec, items, progress=progress, **common)
        else:
            result = run_certify(
                spec, progress=progress, budget=budget, training_log=training_log,
                started=started, **common,
            )  # fmt: skip
    say_overrun(result.evidence)
    if cert_format == "sigstore-bundle" and result.certificate_path is not None:
        _rewrite_as_bundle(result.certificate_path)
    if ledger is not None and result.certificate_path is not None:
        _record_issued(ledger, remote, result.certificate_path)
    _print_result(result, output, as_json)
    if not result.passed:
        ctx.exit(EXIT_NEGATIVE)


def _print_result(result: CertifyResult, output: Path, as_json: bool) -> None:
    """The verdict, the findings and where each output is (text, or one JSON object)."""
    outputs = {
        "certificate": str(result.certificate_path) if result.certificate_path else None,
        "evidence": str(result.evidence_path),
        "findings": str(result.findings_path),
        "report": str(result.report_path) if result.report_path else None,
    }
    if as_json:
        statement = result.statement
        echo_json(
            {
                "verdict": result.verdict,
                "counts": result.findings.counts,
                "policy": result.findings.policy.model_dump(mode="json"),
                "certificate_id": statement.predicate.certificate_id if statement else None,
                "outputs": outputs,
                "failed": [f.model_dump(mode="json") for f in result.findings.failed],
                "targets": [t.model_dump(mode="json") for t in result.findings.targets],
            }
        )
    else:
        for line in findings_summary(result.findings):
            click.echo(line)
        failure = result.evidence.model_failure
        if failure is not None:
            click.echo(
                f"the model raised during {failure.phase}: {failure.error_type}: {failure.message}"
                + (f" (module {failure.module})" if failure.module else "")
            )
        if result.passed:
            click.echo(f"certificate: {result.certificate_path}")
        else:
            click.echo("no certificate written: the policy failed")
            if output.exists():
                click.echo(f"note: {output} is an older certificate; it does not cover this run")
        for target in result.findings.targets:
            needed = "required" if target.required else "not required"
            click.echo(f"target {target.name}: {target.verdict.upper()} ({needed})")
        click.echo(f"evidence:    {result.evidence_path}")
        click.echo(f"findings:    {result.findings_path}")
        if result.report_path:
            click.echo(f"report:      {result.report_path}")
